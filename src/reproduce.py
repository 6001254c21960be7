"""The course's whole results table in one command: every variant's stages, then one table.

Runs the London baseline, then for each variant its course stages in order through
run.sh (pretrain, finetune, evaluate on dev and test; vanilla also without pretraining),
with the course's schedule, and ends with one table: dev and test accuracy (test only
where answers exist), the course's bar, wall time per stage, device and recipe, also
written as reproduce.json and reproduce.md beside the params.

A stage whose output file exists is skipped, and a training stage killed half-way resumes
from its checkpoint, so rerunning the same command continues where it stopped.

    ./run.sh reproduce                          # the shipped data, into src/submission/
    DATA_DIR=../course-data ./run.sh reproduce  # the course's files
    ./run.sh reproduce --recipe ours --out out/ours
    ./run.sh reproduce --estimate               # only say how long it would take here
    ./run.sh reproduce --out out/tiny -- --n_layer 1 --n_embd 16 --max_epochs 1   # flags for every stage
"""

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import plots  # noqa: E402
import run  # noqa: E402
from submission import dataset as ds  # noqa: E402
from submission import variants  # noqa: E402
from submission.helper import COURSE_SCHEDULE  # noqa: E402

RUN_SH = os.path.join(ROOT, "run.sh")


def output_of(stage):
    """The file a course stage writes (run.sh's names), and its kind: train, dev or test."""
    variant, step = stage.split("_", 1)
    split = "dev" if "_dev_" in step else "test"
    if step == "finetune_without_pretrain":
        return f"{variant}.model.params", "train"
    if step.startswith("eval_") and step.endswith("_without_pretrain"):
        return f"{variant}.nopretrain.{split}.predictions", split
    if step == "pretrain":
        return f"{variant}.pretrain.params", "train"
    if step == "finetune_with_pretrain":
        return f"{variant}.finetune.params", "train"
    return f"{variant}.pretrain.{split}.predictions", split


def rows_of(name):
    """Table rows of a variant: (label, [(stage, output file, kind)]), in the order they run."""
    every = [(stage, *output_of(stage)) for stage in variants.get(name).stages()]
    pretrained = every[-4:]
    rows = [(name, pretrained)]
    if len(every) > 4:  # the course's no-pretraining stages come first
        rows.insert(0, (f"{name}, no pretraining", every[:-4]))
    return rows


def accuracy(predictions_path, answers_path):
    """Share of predictions equal to the answers, or None where there are no answers."""
    if not (os.path.exists(predictions_path) and answers_path and os.path.exists(answers_path)):
        return None
    with open(answers_path, encoding="utf-8") as f:
        rows = ds.split_rows(f.read(), answers_path)
    if any(a is None for _, _, a in rows):
        return None
    with open(predictions_path, encoding="utf-8") as f:
        predictions = f.read().split("\n")[:len(rows)]
    return sum(p == a for p, (_, _, a) in zip(predictions, rows)) / len(rows)


def device_name():
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), name)
    except OSError:
        pass
    return f"CPU ({name}, {torch.get_num_threads()} threads)"


def estimate_hours(names, data_dir):
    """Hours for every training stage at the course's schedule, from a few timed steps here.

    Every step is timed as a full pretraining batch, which overestimates finetuning (its
    rows are shorter); evaluation takes minutes and is left out.
    """
    import bench  # the bench's own timed step, so the estimate is what `./run.sh bench` measures
    with open(os.path.join(data_dir, "wiki.txt"), encoding="utf-8") as f:
        wiki = f.read()
    with open(os.path.join(data_dir, "birth_places_train.tsv"), encoding="utf-8") as f:
        n_train = len(ds.split_rows(f.read(), "birth_places_train.tsv"))
    docs = len(wiki.split("\n"))
    precision = run.resolve_precision("auto", "cuda" if torch.cuda.is_available() else "cpu")
    hours = 0.0
    for variant in names:
        seconds = statistics.median(bench.time_training_path("fast", variant, wiki, 128, 3, precision))
        stages = ["pretrain", "finetune_with_pretrain"]
        if variants.get(variant).without_pretrain:
            stages.append("finetune_without_pretrain")
        steps = 0
        for stage in stages:
            epochs, batch = COURSE_SCHEDULE[stage]
            steps += epochs * math.ceil((docs if stage == "pretrain" else n_train) / batch)
        hours += steps * seconds / 3600
    return hours


def run_stage(stage, out_dir, data_dir, extra):
    """One run.sh stage; its wall time in seconds. A killed training stage resumes."""
    env = dict(os.environ, OUT_DIR=out_dir, DATA_DIR=data_dir, PYTHON=sys.executable)
    command = [RUN_SH, stage, *extra]
    t0 = time.time()
    done = subprocess.run(command, env=env)
    if done.returncode != 0:
        raise SystemExit(f"error: ./run.sh {stage} failed (exit {done.returncode}); "
                         f"rerun the same command to continue from there")
    return time.time() - t0


def table(results):
    lines = ["| variant | dev accuracy | test accuracy | course's bar (dev) | wall time per stage | device | recipe |",
             "|---|---|---|---|---|---|---|"]
    pct = lambda a: "-" if a is None else f"{100 * a:.1f}%"  # noqa: E731
    for r in results["rows"]:
        times = ", ".join(f"{s.split('_', 1)[1]} {format_seconds(t)}" if t is not None else
                          f"{s.split('_', 1)[1]} (existed)" for s, t in r["seconds"].items())
        bar = "-" if r["bar"] is None else f">= {100 * r['bar']:g}%"
        lines.append(f"| {r['label']} | {pct(r['dev'])} | {pct(r['test'])} | {bar} | {times} "
                     f"| {results['device']} | {results['recipe']} |")
    b = results["baseline"]
    lines.append(f"| London baseline ('{b['place']}') | {pct(b['accuracy'])} | - | - | - | - | - |")
    return "\n".join(lines)


def format_seconds(t):
    return f"{t:.0f} s" if t < 120 else f"{t / 60:.1f} min" if t < 7200 else f"{t / 3600:.1f} h"


def main(argv=None):
    argp = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    argp.add_argument("--out", default=os.path.join(HERE, "submission"),
                      help="folder for params, predictions and the table (default: src/submission, "
                           "where the grader's hidden tests look)")
    argp.add_argument("--variants", nargs="+", choices=list(variants.VARIANTS), default=list(variants.VARIANTS))
    argp.add_argument("--recipe", choices=list(run.RECIPES), default="course")
    argp.add_argument("--estimate", action="store_true", help="print the time estimate and stop")
    argp.add_argument("stage_flags", nargs=argparse.REMAINDER,
                      help="after --: flags passed to every stage (reduced schedules, --quiet, ...)")
    args = argp.parse_args(argv)
    extra = [f for f in args.stage_flags if f != "--"] + ["--recipe", args.recipe]
    data_dir = os.path.abspath(os.environ.get("DATA_DIR") or os.path.join(ROOT, "data"))
    out_dir = os.path.abspath(args.out)
    for name in ("wiki.txt", "birth_places_train.tsv", "birth_dev.tsv", "birth_test_inputs.tsv"):
        if not os.path.isfile(os.path.join(data_dir, name)):
            raise SystemExit(f"error: {os.path.join(data_dir, name)}: not found (DATA_DIR names the data folder)")
    os.makedirs(out_dir, exist_ok=True)

    reduced = any(f.startswith(("--max_epochs", "--n_layer", "--n_embd", "--n_head")) for f in extra)
    if not reduced:
        hours = estimate_hours(args.variants, data_dir)
        took = f"{hours:.1f} hours" if hours >= 1 else f"{hours * 60:.0f} minutes"
        print(f"This runs the course's full schedule for {', '.join(args.variants)}: about {took} of "
              f"training on this machine ({device_name()}), estimated from timed steps. Stop it at any time; "
              f"the same command continues where it stopped.", flush=True)
        if args.estimate:
            return None
    state_path = os.path.join(out_dir, "reproduce.json")
    previous = {}
    if os.path.exists(state_path):
        with open(state_path, encoding="utf-8") as f:
            previous = {r["label"]: r["seconds"] for r in json.load(f).get("rows", [])}

    baseline = run.most_common_baseline(argparse.Namespace(
        finetune_corpus_path=os.path.join(data_dir, "birth_places_train.tsv"),
        eval_corpus_path=os.path.join(data_dir, "birth_dev.tsv")))
    test_answers = os.path.join(data_dir, "birth_test.tsv")  # the shipped data has them; the course's not
    results = {"device": device_name(), "recipe": args.recipe, "data": data_dir,
               "data_name": os.path.basename(data_dir), "stage_flags": extra,
               "git": run.git_revision(), "baseline": baseline, "rows": []}
    todo = [(label, s) for v in args.variants for label, s in rows_of(v)]
    count = sum(len(s) for _, s in todo)
    n = 0
    for label, row_stages in todo:
        seconds = {}
        for stage, output, kind in row_stages:
            n += 1
            path = os.path.join(out_dir, output)
            if os.path.exists(path):
                print(f"[{n}/{count}] {stage}: {output} exists, skipped", flush=True)
                seconds[stage] = previous.get(label, {}).get(stage)
                continue
            print(f"[{n}/{count}] {stage}", flush=True)
            flags = list(extra)
            if kind == "train" and os.path.exists(path + ".ckpt"):
                flags.append("--resume")
            seconds[stage] = run_stage(stage, out_dir, data_dir, flags)
        variant = variants.get(label.split(",")[0])
        predictions = {kind: os.path.join(out_dir, output) for _, output, kind in row_stages if kind != "train"}
        results["rows"].append({
            "label": label, "variant": variant.name,
            "dev": accuracy(predictions["dev"], os.path.join(data_dir, "birth_dev.tsv")),
            "test": accuracy(predictions["test"], test_answers),
            "bar": variant.dev_threshold if label == variant.name else None,
            "records": [os.path.join(out_dir, output + ".log.jsonl") for _, output, kind in row_stages
                        if kind == "train"],
            "seconds": seconds})
        with open(state_path, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    text = table(results)
    with open(os.path.join(out_dir, "reproduce.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    print()
    print(text)
    print(f"\n(written to {state_path} and reproduce.md beside it)")
    figure(results, out_dir)
    return results


def figure(results, out_dir):
    """reproduce.png: every training stage's loss curve beside the accuracy table."""
    records = [(os.path.basename(path)[:-len(".params.log.jsonl")], path)
               for r in results["rows"] for path in r["records"] if os.path.exists(path)]
    if not records:  # every stage existed before and its record was removed
        return None
    rows = [{"variant": r["label"], "dev": r["dev"], "test": r["test"], "bar": r["bar"]} for r in results["rows"]]
    try:
        path = plots.plot_summary(records, rows, os.path.join(out_dir, "reproduce.png"),
                                  baseline=results["baseline"]["accuracy"],
                                  title=f"The course's table on {results['data_name']}/, recipe {results['recipe']}")
    except plots.PlotError as e:
        print(f"notice: no figure: {e}")
        return None
    if path:
        print(f"figure: {path}")
    return path


if __name__ == "__main__":
    main()
