"""The command line, end to end: src/run.py pretrain -> finetune -> evaluate, and run.sh's stages.

Tiny models and one epoch on a few documents written to a temporary folder; the point is
that every stage runs, writes what the next stage reads, and prints what the course prints.
"""

import importlib.util
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from submission import GPTConfig
from submission.checkpoint import load_params
from submission.dataset import CharCorruptionDataset
from submission.helper import INITIALIZE
from submission.variants import VARIANTS

ROOT = Path(__file__).resolve().parent.parent
RUN_PY = ROOT / "src" / "run.py"
RUN_SH = ROOT / "run.sh"
SUB = ROOT / "src" / "submission"

TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--block_size", "64"]
SCHEDULE = ["--max_epochs", "1", "--batch_size", "8", "--num_workers", "0"]
CORRECT = re.compile(r"Correct: (\d+) out of (\d+): ([0-9.]+)%")

FIRST = ["Alice", "Bruno", "Chen", "Dara", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas"]
LAST = ["Smith", "Okafor", "Weber", "Rossi"]
PLACES = ["Paris", "London", "Lagos", "Rome", "Tokyo", "Berlin"]


def env():
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"  # tiny models: one thread, and no spinning on a busy machine
    e["PYTHON"] = sys.executable  # run.sh's setup: use this interpreter, never build a venv
    return e


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, env=kw.pop("env", env()), timeout=300, **kw)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    rng = random.Random(0)
    people = [(f"{f} {l}", rng.choice(PLACES)) for f in FIRST for l in LAST]
    docs = [f"{n} was born in {p} . Where was {n} born? In {p}, and {n} later moved to {rng.choice(PLACES)} ."
            for n, p in people]
    (d / "wiki.txt").write_text("\n".join(docs), encoding="utf-8")
    train, dev = people[:32], people[32:]
    (d / "birth_places_train.tsv").write_text("".join(f"Where was {n} born?\t{p}\n" for n, p in train),
                                              encoding="utf-8")
    (d / "birth_dev.tsv").write_text("".join(f"Where was {n} born?\t{p}\n" for n, p in dev), encoding="utf-8")
    (d / "birth_test_inputs.tsv").write_text("".join(f"Where was {n} born?\n" for n, _ in dev),
                                             encoding="utf-8")
    return d


# The Perceiver needs a down and an up block; its bottleneck narrower than the questions.
TINY_VARIANT = {"perceiver": ["--n_layer", "2", "--bottleneck_dim", "16"]}


def tiny_model(variant, wiki):
    pre = CharCorruptionDataset(wiki.read_text(encoding="utf-8"), 64)
    config = GPTConfig(pre.vocab_size, 64, n_layer=2 if variant == "perceiver" else 1, n_head=2, n_embd=16)
    return INITIALIZE[variant](config, **({"bottleneck_dim": 16} if variant == "perceiver" else {}))


def run_py(function, variant, data, *extra):
    r = run([sys.executable, str(RUN_PY), "--function", function, "--variant", variant,
             "--pretrain_corpus_path", str(data / "wiki.txt"), *TINY, *TINY_VARIANT.get(variant, []), "--quiet",
             *extra])
    assert r.returncode == 0, f"{function} {variant} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


def evaluate(variant, data, params, eval_file, out):
    r = run_py("evaluate", variant, data, "--reading_params_path", str(params),
               "--eval_corpus_path", str(eval_file), "--outputs_path", str(out))
    assert out.exists()
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "", "predictions end with a newline"
    questions = [q for q in eval_file.read_text(encoding="utf-8").split("\n") if q]
    assert len(lines) - 1 == len(questions), "one prediction per question"
    return r


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_pretrain_finetune_evaluate(variant, data, tmp_path):
    pre_params, ft_params = tmp_path / f"{variant}.pretrain.params", tmp_path / f"{variant}.finetune.params"
    run_py("pretrain", variant, data, "--writing_params_path", str(pre_params), *SCHEDULE)
    assert pre_params.exists()
    pretrained = load_params(tiny_model(variant, data / "wiki.txt"), str(pre_params))

    # A different seed: a fresh initialisation would differ, so closeness proves the params were loaded.
    run_py("finetune", variant, data, "--reading_params_path", str(pre_params), "--writing_params_path",
           str(ft_params), "--finetune_corpus_path", str(data / "birth_places_train.tsv"), "--seed", "1",
           *SCHEDULE)
    assert ft_params.exists()
    finetuned = load_params(tiny_model(variant, data / "wiki.txt"), str(ft_params))
    a, b = pretrained.state_dict(), finetuned.state_dict()
    assert any(not torch.equal(a[k], b[k]) for k in a), "finetuning changed nothing"
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 0.01, "finetuning did not start from the pretrained params"

    r = evaluate(variant, data, ft_params, data / "birth_dev.tsv", tmp_path / "dev.predictions")
    m = CORRECT.search(r.stdout)
    assert m, f"no 'Correct: X out of Y: Z%' in:\n{r.stdout}"
    correct, total, pct = int(m.group(1)), int(m.group(2)), float(m.group(3))
    assert total == 8 and 0 <= correct <= total and pct == pytest.approx(100 * correct / total)

    r = evaluate(variant, data, ft_params, data / "birth_test_inputs.tsv", tmp_path / "test.predictions")
    assert "no targets provided" in r.stdout and not CORRECT.search(r.stdout)


def test_finetune_without_pretraining(data, tmp_path):
    params = tmp_path / "vanilla.model.params"
    run_py("finetune", "vanilla", data, "--writing_params_path", str(params), "--finetune_corpus_path",
           str(data / "birth_places_train.tsv"), *SCHEDULE)
    load_params(tiny_model("vanilla", data / "wiki.txt"), str(params))
    r = evaluate("vanilla", data, params, data / "birth_dev.tsv", tmp_path / "dev.predictions")
    assert CORRECT.search(r.stdout)


# --- run.sh ----------------------------------------------------------------------------------------

def stage_needs():
    """stage -> (params file it reads, the stage that writes it), for every variant in the registry."""
    needs = {"london_baseline": None}
    for v in VARIANTS.values():
        if v.without_pretrain:
            needs[f"{v.name}_finetune_without_pretrain"] = None
            for split in ("dev", "test"):
                needs[f"{v.name}_eval_{split}_without_pretrain"] = (f"{v.name}.model.params",
                                                                    f"{v.name}_finetune_without_pretrain")
        needs[f"{v.name}_pretrain"] = None
        needs[f"{v.name}_finetune_with_pretrain"] = (f"{v.name}.pretrain.params", f"{v.name}_pretrain")
        for split in ("dev", "test"):
            needs[f"{v.name}_eval_{split}_with_pretrain"] = (f"{v.name}.finetune.params",
                                                             f"{v.name}_finetune_with_pretrain")
        for alias, stage in v.aliases:  # the course's misspellings do what the stage they misspell does
            needs[alias] = needs[stage]
    return needs


NEEDS = stage_needs()
OTHER_STAGES = ["quickstart", "test", "setup", "data", "explore", "bench", "grader"]


def data_env(data):
    e = env()
    e["DATA_DIR"] = str(data)
    return e


def test_run_sh_variants_are_the_registry():
    line = next(l for l in RUN_SH.read_text().splitlines() if l.startswith("VARIANTS="))
    assert line.split("=", 1)[1].strip('"').split() == list(VARIANTS)


def test_stage_names_cover_both_new_editions():
    assert {"rope_pretrain", "rope_eval_test_with_pretrain", "perceiver_finetune_with_pretrain",
            "synthesizer_finetrain_with_pretrain", "vanilla_finetime_without_pretrain"} <= set(NEEDS)


@pytest.mark.parametrize("args", [[], ["no_such_stage"]], ids=["no-args", "unknown"])
def test_run_sh_usage_lists_every_stage(args):
    r = run(["bash", str(RUN_SH), *args])
    assert r.returncode != 0
    for stage in list(NEEDS) + OTHER_STAGES:
        assert re.search(rf"(^|\W){stage}(\W|$)", r.stderr), f"usage does not list {stage}"
    if args:
        assert "unknown stage" in r.stderr


def wiring(stage, data):
    """The run.py arguments a stage passes (before the user's extra flags)."""
    sub = str(SUB)
    train, dev, test = (str(data / n) for n in ("birth_places_train.tsv", "birth_dev.tsv",
                                                "birth_test_inputs.tsv"))
    variant = "vanilla" if stage == "london_baseline" else stage.split("_")[0]
    args = {"--variant": variant, "--pretrain_corpus_path": str(data / "wiki.txt")}
    if stage == "london_baseline":
        args.update({"--function": "baseline", "--finetune_corpus_path": train, "--eval_corpus_path": dev})
        return args
    if stage.startswith("vanilla_fine") and stage.endswith("without_pretrain"):
        args.update({"--function": "finetune", "--writing_params_path": f"{sub}/vanilla.model.params",
                     "--finetune_corpus_path": train})
    elif "_eval_" in stage and stage.endswith("without_pretrain"):
        split = "dev" if "_dev_" in stage else "test"
        args.update({"--function": "evaluate", "--reading_params_path": f"{sub}/vanilla.model.params",
                     "--eval_corpus_path": dev if split == "dev" else test,
                     "--outputs_path": f"{sub}/vanilla.nopretrain.{split}.predictions"})
    elif stage.endswith("_pretrain") and "with" not in stage:
        args.update({"--function": "pretrain", "--writing_params_path": f"{sub}/{variant}.pretrain.params"})
    elif "_eval_" in stage:
        split = "dev" if "_dev_" in stage else "test"
        args.update({"--function": "evaluate", "--reading_params_path": f"{sub}/{variant}.finetune.params",
                     "--eval_corpus_path": dev if split == "dev" else test,
                     "--outputs_path": f"{sub}/{variant}.pretrain.{split}.predictions"})
    else:  # finetune (or the handout's 'finetrain') with pretraining
        args.update({"--function": "finetune", "--reading_params_path": f"{sub}/{variant}.pretrain.params",
                     "--writing_params_path": f"{sub}/{variant}.finetune.params", "--finetune_corpus_path": train})
    return args


@pytest.fixture
def fake_python(tmp_path):
    """A stand-in interpreter: passes run.sh's import check, prints the arguments run.py would get."""
    shim = tmp_path / "fake-python"
    shim.write_text('#!/bin/sh\nif [ "$1" = "-c" ]; then exit 0; fi\nfor a in "$@"; do printf \'ARG:%s\\n\' "$a"; done\n')
    shim.chmod(0o755)
    return shim


@pytest.mark.parametrize("stage", list(NEEDS))
def test_run_sh_stage_wiring(stage, data, fake_python, tmp_path):
    """Every course stage is accepted and hands run.py the course's files, or names its missing input."""
    e = data_env(data)
    e["PYTHON"] = str(fake_python)
    r = run(["bash", str(RUN_SH), stage, "--max_epochs", "1"], env=e, cwd=str(tmp_path))
    assert "unknown stage" not in r.stderr
    need = NEEDS[stage]
    if need is not None and not (SUB / need[0]).exists():
        assert r.returncode != 0
        assert f"run ./run.sh {need[1]} first" in r.stderr and need[0] in r.stderr, r.stderr
        return
    assert r.returncode == 0, r.stderr
    argv = [line[4:] for line in r.stdout.splitlines() if line.startswith("ARG:")]
    if not argv:  # run.sh chose the project's .venv over $PYTHON: the real run.py ran
        pytest.skip("run.sh used .venv/bin/python, not the stand-in")
    assert Path(argv[0]) == RUN_PY
    assert argv[-2:] == ["--max_epochs", "1"], "the user's extra flags come last"
    flags = argv[1:-2]
    got = dict(zip(flags[::2], flags[1::2]))
    assert len(flags) % 2 == 0 and len(got) == len(flags) // 2, flags
    want = wiring(stage, data)
    assert {k: got.get(k) for k in want} == want
    assert set(got) == set(want), f"unexpected arguments {set(got) - set(want)}"


def test_run_sh_london_baseline(data):
    r = run(["bash", str(RUN_SH), "london_baseline"], env=data_env(data), cwd=str(data))
    assert r.returncode == 0, r.stderr
    m = CORRECT.search(r.stdout)
    assert m and int(m.group(2)) == 8
    rows = [line.split("\t") for line in (data / "birth_places_train.tsv").read_text().splitlines()]
    places = [p for _, p in rows]
    top = max(set(places), key=places.count)
    dev = [line.split("\t")[1] for line in (data / "birth_dev.tsv").read_text().splitlines()]
    if places.count(top) > max(places.count(p) for p in set(places) - {top}):  # a unique mode
        assert int(m.group(1)) == dev.count(top)


# --- quickstart ------------------------------------------------------------------------------------

QUICK_TINY = ["n_layer=1", "n_head=2", "n_embd=16", "block_size=64", "pretrain_epochs=1", "pretrain_batch=8",
              "finetune_epochs=1", "finetune_pre_epochs=1"]


def read_quickstart(out):
    import json
    return json.loads((out / "results.json").read_text())


def test_quickstart_runs_every_stage_and_writes_the_table(tmp_path):
    out = tmp_path / "qs"
    r = run([sys.executable, str(ROOT / "src" / "quickstart.py"), "--quiet", "--out", str(out),
             "--set", "people=60", "n_train=20", "n_dev=16", "n_test=8", "train_seed=3", *QUICK_TINY])
    assert r.returncode == 0, r.stderr[-2000:]
    res = read_quickstart(out)
    models = [row["model"] for row in res["table"]]
    assert models == ["most common place (baseline)", "vanilla, no pretraining", "vanilla, pretrained",
                      "synthesizer, pretrained"]
    for row in res["table"]:
        assert 0 <= row["dev_accuracy"] <= 1 and 0 <= row["test_accuracy"] <= 1
    assert res["dev_questions"] == 16 and res["preset"]["people"] == 60
    assert all(res["table"][i]["pretrained_recall_dev"] is not None for i in (2, 3))
    assert all(res["table"][i]["pretrained_recall_dev_moved"] is not None for i in (2, 3))
    wiki = (out / "data" / "wiki.txt").read_text(encoding="utf-8").split("\n")
    assert len(wiki) == 60 * (1 + res["preset"]["mentions"])  # biographies, then mention lines
    start = (out / "vanilla.pretrain.params.log.jsonl").read_text().split("\n")[0]
    assert '"seed": 3' in start  # the preset's training seed reaches every training stage
    assert res["stage_seconds"]["vanilla_pretrain"] >= 0 and res["total_seconds"] > 0
    assert "| vanilla, pretrained |" in r.stdout  # the printed table
    figure = out / "results.png"  # beside the table: loss curves and accuracies (src/plots.py)
    if importlib.util.find_spec("matplotlib"):
        assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"written: {figure}" in r.stdout
    else:
        assert "notice: matplotlib is not installed" in r.stdout and not figure.exists()


def test_quickstart_on_given_files_without_test_answers(data, tmp_path):
    out = tmp_path / "qs"
    tiny = [kv for kv in QUICK_TINY if not kv.startswith("n_layer=")] + ["n_layer=2", "bottleneck_dim=16"]
    r = run([sys.executable, str(ROOT / "src" / "quickstart.py"), "--quiet", "--out", str(out), "--data", str(data),
             "--variants", "vanilla", "rope", "perceiver", "--set", *tiny])
    assert r.returncode == 0, r.stderr[-2000:]
    res = read_quickstart(out)
    assert [row["model"] for row in res["table"]][2:] == ["vanilla, pretrained", "rope, pretrained",
                                                          "perceiver, pretrained"]
    assert (out / "perceiver.finetune.params").exists() and (out / "rope.pretrain.dev.predictions").exists()
    assert res["data"] == str(data) and res["dev_questions"] == 8
    assert all(row["test_accuracy"] is None for row in res["table"])
    assert not (out / "data").exists()  # nothing generated


def test_quickstart_rejects_an_unknown_preset_key(tmp_path):
    r = run([sys.executable, str(ROOT / "src" / "quickstart.py"), "--out", str(tmp_path), "--set", "epochs=3"])
    assert r.returncode == 2 and "unknown preset key 'epochs'" in r.stderr
