"""The whole assignment at a reduced scale: does pretraining put knowledge in the model?

Generates a small world with data/generate.py, then runs every course stage through run.py
with the quick preset below (the course stages themselves keep the course's
hyperparameters): most-common-place baseline, vanilla without pretraining, vanilla
pretrain -> finetune, synthesizer pretrain -> finetune, each evaluated on dev and test
(`--variants` picks the pretrained variants from the registry, variants.py: also rope
and perceiver). Ends with a table, out/quickstart/results.json and a figure beside it,
results.png (loss curves of every training stage, accuracy per variant against the
baseline; src/plots.py).

The world has mention lines: each person is also named, with the birth place, in lines
about something else.  Without them a model this small files each fact under the name's
position rather than the name, and no question can reach it (docs/quick-preset.md).

    ./run.sh quickstart                 # the preset, on a CPU
    ./run.sh quickstart --set pretrain_epochs=300 --out out/try1   # a variation
    ./run.sh quickstart --data DIR --out out/mine   # the preset on your own files
"""

import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "data"))

import generate  # noqa: E402
import plots  # noqa: E402
import run  # noqa: E402
from submission import variants  # noqa: E402

# Measured choices; docs/quick-preset.md says what was tried.
QUICK = dict(
    people=520, n_train=300, n_dev=200, n_test=20, seed=2937, mentions=2,  # the world
    n_layer=2, n_head=4, n_embd=128, block_size=128,  # the model
    pretrain_epochs=150, pretrain_batch=16, pretrain_lr=3e-3, pretrain_dropout=0.0,
    finetune_epochs=30, finetune_batch=32, finetune_lr=6e-4,  # without pretraining
    finetune_pre_epochs=10,  # with pretraining
    finetune_dropout=0.1,
    bottleneck_dim=32,  # the Perceiver's m (2023-24 editions), when --variants includes it
    num_workers=0,  # two cores: a loader process would take one from the model
    train_seed=0,  # run.py --seed: initialisation, batch order, corruption and dropout
    recipe="ours",  # run.py --recipe for every stage: the course's memorises far less here (docs/quick-preset.md)
)


# Ten characters put before a prompt move its name to where a question has it
# ("Where was " is ten characters long) without asking the question.
MOVED = "See also. "


@torch.no_grad()
def recall(params, variant, p, data):
    """Shares of dev people whose biography the pretrained model completes with the birth place.

    The prompt is the biography up to the birth place (when it lies within what pretraining
    sees); this measures what pretraining stored, before finetuning has to find it.  Returns
    (as written, moved): the second puts MOVED before each prompt.  Knowledge filed under
    the name's characters survives the move; knowledge filed under "the characters at
    positions 0, 1, 2, ..." does not, and no finetuning on questions can reach it.
    """
    from submission import dataset as ds
    from submission.checkpoint import load_params
    from submission.helper import build
    from submission.model import GPTConfig
    from submission.decoding import greedy_decode

    with open(os.path.join(data, "wiki.txt"), encoding="utf-8") as f:
        docs = f.read().split("\n")
    vocab = ds.Vocabulary("\n".join(docs))
    options = {k: p[k] for k in variants.VARIANTS[variant].options}
    model = build(variant, GPTConfig(len(vocab.stoi), p["block_size"], n_layer=p["n_layer"], n_head=p["n_head"],
                                     n_embd=p["n_embd"]), **options)
    load_params(model, params)
    with open(os.path.join(data, "birth_dev.tsv"), encoding="utf-8") as f:
        rows = ds.split_rows(f.read(), "birth_dev.tsv")
    prompts, answers = [], []
    for _, question, place in rows:
        name = question[len("Where was "):-len(" born?")]
        doc = next((d for d in docs if d.startswith(name + ". ")), "")
        at = doc.find(place)
        if at > 0 and at + len(place) <= int(p["block_size"] * 7 / 8):
            prompts.append(vocab.encode(doc[:at]))
            answers.append(place)
    if not prompts:  # no dev birth place within what pretraining sees
        return 0.0, 0.0
    shares = []
    for shift in ([], vocab.encode(MOVED)):
        completions = greedy_decode(model, [shift + q for q in prompts], max(len(a) for a in answers))
        shares.append(sum(vocab.decode(c)[:len(a)] == a for c, a in zip(completions, answers)) / len(rows))
    return tuple(shares)


def stage(name, argv, results, timings):
    print(f"\n=== {name} ===", flush=True)
    t0 = time.time()
    results[name] = run.main(argv)
    if "--writing_params_path" in argv:  # a training stage: where its run record is, for the figure
        results[name]["record"] = argv[argv.index("--writing_params_path") + 1] + ".log.jsonl"
    timings[name] = round(time.time() - t0, 1)
    print(f"--- {name}: {timings[name]} s", flush=True)


def main():
    argp = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    argp.add_argument("--out", default=os.path.join(ROOT, "out", "quickstart"))
    argp.add_argument("--data", default=None, metavar="DIR",
                      help="run on the wiki.txt, birth_places_train.tsv and birth_dev.tsv (and birth_test.tsv, "
                           "if present) in DIR instead of generating a world")
    argp.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="override a preset value")
    argp.add_argument("--variants", nargs="+", choices=list(variants.VARIANTS), default=["vanilla", "synthesizer"],
                      help="the pretrained variants to run (default: %(default)s)")
    argp.add_argument("--precision", default="auto")
    argp.add_argument("--quiet", action="store_true")
    argp.add_argument("--reference_path", action="store_true",
                      help="train with the plain attention and dropout (to compare with the fast path)")
    args = argp.parse_args()
    p = dict(QUICK)
    for kv in args.set:
        key, value = kv.split("=", 1)
        if key not in p:
            argp.error(f"unknown preset key {key!r}; known: {', '.join(p)}")
        p[key] = type(p[key])(value)

    data, out = args.data or os.path.join(args.out, "data"), args.out
    os.makedirs(out, exist_ok=True)
    t_start = time.time()
    if args.data is None:
        generate.generate(data, n_people=p["people"], seed=p["seed"], n_train=p["n_train"], n_dev=p["n_dev"],
                          n_test=p["n_test"], mentions=p["mentions"])
    wiki, train, dev, test = (os.path.join(data, f) for f in
                              ("wiki.txt", "birth_places_train.tsv", "birth_dev.tsv", "birth_test.tsv"))
    splits = [("dev", dev)] + [("test", test)] * os.path.exists(test)
    common = ["--pretrain_corpus_path", wiki, "--n_layer", str(p["n_layer"]), "--n_head", str(p["n_head"]),
              "--n_embd", str(p["n_embd"]), "--block_size", str(p["block_size"]),
              "--num_workers", str(p["num_workers"]), "--precision", args.precision, "--seed", str(p["train_seed"]),
              "--bottleneck_dim", str(p["bottleneck_dim"]), "--recipe", p["recipe"]]
    common += ["--quiet"] * args.quiet + ["--reference_path"] * args.reference_path
    results, timings = {}, {}

    def evaluate(variant, params, tag):
        for split, path in splits:
            stage(f"{variant}_{tag}_eval_{split}",
                  ["--function", "evaluate", "--variant", variant, "--reading_params_path", params,
                   "--eval_corpus_path", path, "--outputs_path", os.path.join(out, f"{variant}.{tag}.{split}.predictions")]
                  + common, results, timings)

    for split, path in splits:
        stage(f"baseline_{split}", ["--function", "baseline", "--finetune_corpus_path", train,
                                    "--eval_corpus_path", path], results, timings)
    if "vanilla" in args.variants:
        nopre = os.path.join(out, "vanilla.model.params")
        stage("vanilla_finetune_without_pretrain",
              ["--function", "finetune", "--variant", "vanilla", "--finetune_corpus_path", train,
               "--writing_params_path", nopre, "--max_epochs", str(p["finetune_epochs"]),
               "--batch_size", str(p["finetune_batch"]), "--learning_rate", str(p["finetune_lr"]),
               "--dropout", str(p["finetune_dropout"])] + common, results, timings)
        evaluate("vanilla", nopre, "nopretrain")
    for variant in args.variants:
        pre, fin = os.path.join(out, f"{variant}.pretrain.params"), os.path.join(out, f"{variant}.finetune.params")
        stage(f"{variant}_pretrain",
              ["--function", "pretrain", "--variant", variant, "--writing_params_path", pre,
               "--max_epochs", str(p["pretrain_epochs"]), "--batch_size", str(p["pretrain_batch"]),
               "--learning_rate", str(p["pretrain_lr"]), "--dropout", str(p["pretrain_dropout"])] + common,
              results, timings)
        stage(f"{variant}_finetune_with_pretrain",
              ["--function", "finetune", "--variant", variant, "--finetune_corpus_path", train,
               "--reading_params_path", pre, "--writing_params_path", fin,
               "--max_epochs", str(p["finetune_pre_epochs"]), "--batch_size", str(p["finetune_batch"]),
               "--learning_rate", str(p["finetune_lr"]), "--dropout", str(p["finetune_dropout"])] + common,
              results, timings)
        evaluate(variant, fin, "pretrain")
        results[f"{variant}_recall"], results[f"{variant}_recall_moved"] = recall(pre, variant, p, data)

    def acc(name):
        r = results.get(name)
        return None if r is None or r.get("accuracy") is None else r["accuracy"]

    rows = [("most common place (baseline)", "baseline", None, [])]
    if "vanilla" in args.variants:
        rows.append(("vanilla, no pretraining", "vanilla_nopretrain", "vanilla_finetune_without_pretrain",
                     ["vanilla_finetune_without_pretrain"]))
    for v in args.variants:
        rows.append((f"{v}, pretrained", f"{v}_pretrain", None, [f"{v}_pretrain", f"{v}_finetune_with_pretrain"]))
    table = []
    for label, key, _, train_stages in rows:
        dev_acc = acc(f"{key}_dev") if key == "baseline" else acc(f"{key}_eval_dev")
        test_acc = acc(f"{key}_test") if key == "baseline" else acc(f"{key}_eval_test")
        seconds = sum(timings.get(s, 0) for s in train_stages) + (
            0 if key == "baseline" else timings.get(f"{key}_eval_dev", 0) + timings.get(f"{key}_eval_test", 0))
        pretrained = key.endswith("_pretrain")
        table.append({"model": label, "dev_accuracy": dev_acc, "test_accuracy": test_acc, "seconds": round(seconds, 1),
                      "pretrained_recall_dev": results.get(key.replace("_pretrain", "_recall")) if pretrained else None,
                      "pretrained_recall_dev_moved":
                          results.get(key.replace("_pretrain", "_recall_moved")) if pretrained else None})
    total = round(time.time() - t_start, 1)
    summary = {"preset": p, "data": args.data, "precision": args.precision, "threads": torch.get_num_threads(),
               "table": table, "stage_seconds": timings, "total_seconds": total,
               "dev_questions": results["baseline_dev"]["total"]}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)

    fmt = lambda a: "-" if a is None else f"{a:.1%}"
    world = (f"data from {data}" if args.data else
             f"{p['people']} people, {p['n_train']}/{p['n_dev']}/{p['n_test']} train/dev/test questions, "
             f"{p['mentions']} mention lines per person")
    print(f"\nQuick preset: {world}; {p['n_layer']} layers x {p['n_embd']} wide; total {total} s")
    print("| model | dev accuracy | test accuracy | pretrained model completes the dev biography "
          f"| ... moved {len(MOVED)} characters right | wall time (s) |")
    print("|---|---|---|---|---|---|")
    for r in table:
        print(f"| {r['model']} | {fmt(r['dev_accuracy'])} | {fmt(r['test_accuracy'])} "
              f"| {fmt(r['pretrained_recall_dev'])} | {fmt(r['pretrained_recall_dev_moved'])} | {r['seconds']} |")
    print(f"\nwritten: {os.path.join(out, 'results.json')}")
    figure = plots.plot_summary(
        [(name, r["record"]) for name, r in results.items() if isinstance(r, dict) and "record" in r],
        [{"variant": r["model"], "dev": r["dev_accuracy"], "test": r["test_accuracy"], "bar": None} for r in table[1:]],
        os.path.join(out, "results.png"), baseline=table[0]["dev_accuracy"], title=f"Quick preset: {world}")
    if figure:
        print(f"written: {figure}")


if __name__ == "__main__":
    main()
