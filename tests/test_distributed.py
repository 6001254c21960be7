"""torchrun: data-parallel training equals single-process training on the same global batches.

Two gloo processes on the CPU, started by torchrun itself around src/run.py. Finetuning with
dropout 0 is deterministic (no span draws, no dropout), so after a few steps the weights of
the two-process run must equal the one-process run's, float noise aside; the questions'
answers differ in length, so a slice's loss must be weighed by its share of the targets.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from submission import distributed

ROOT = Path(__file__).resolve().parent.parent
RUN_PY = ROOT / "src" / "run.py"
RUN_SH = ROOT / "run.sh"

if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

PLACES = ["Rome", "Ulaanbaatar", "Lima", "Thiruvananthapuram", "Oslo", "Ouagadougou", "Bern", "Baku", "Kyiv"]
NAMES = ["Ann Lee", "Bob Stone", "Cyd Marsh", "Dee Fox", "Eve Grant", "Fay Holt", "Gus Ives", "Hal Jun", "Ivy Kern"]
# 9 rows in batches of 4: 4, 4, 1; the last leaves the second process without a row
ARGS = ["--function", "finetune", "--variant", "vanilla", "--n_layer", "1", "--n_head", "2", "--n_embd", "16",
        "--block_size", "48", "--batch_size", "4", "--num_workers", "0", "--dropout", "0", "--precision", "fp32",
        "--learning_rate", "3e-3", "--quiet"]


def env():
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        e.pop(name, None)
    return e


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("ddp")
    (d / "wiki.txt").write_text("\n".join(f"{n} was born in {p}. Where was {n} born?" for n, p in zip(NAMES, PLACES)),
                                encoding="utf-8")
    (d / "train.tsv").write_text("".join(f"Where was {n} born?\t{p}\n" for n, p in zip(NAMES, PLACES)),
                                 encoding="utf-8")
    return d


def train(data, params, processes, epochs, *extra):
    files = ["--pretrain_corpus_path", str(data / "wiki.txt"), "--finetune_corpus_path", str(data / "train.tsv"),
             "--writing_params_path", str(params), "--max_epochs", str(epochs)]
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
                if processes > 1 else [sys.executable])
    r = subprocess.run(launcher + [str(RUN_PY)] + ARGS + files + list(extra), capture_output=True, text=True,
                       env=env(), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return torch.load(params, map_location="cpu", weights_only=True), r


@pytest.fixture(scope="module")
def runs(data):
    single, _ = train(data, data / "single.params", 1, 3)
    ddp, r = train(data, data / "ddp.params", 2, 3)
    return single, ddp, r


def test_two_processes_equal_one(runs):
    single, ddp, _ = runs
    assert set(ddp) == set(single) and not any(k.startswith("module.") for k in ddp)
    # Float noise in a near-zero gradient becomes a full step of AdamW's sign-like early update:
    # measured about 3e-6 at most; weighing slices equally instead of by targets gives 7e-3.
    for name in single:
        assert float((ddp[name] - single[name]).abs().max()) < 1e-4, name


def test_one_process_writes_the_record_and_prints(runs, data):
    _, _, r = runs
    with open(data / "ddp.params.log.jsonl") as f:
        records = [json.loads(line) for line in f]
    assert [r["event"] for r in records] == ["start", "epoch", "epoch", "epoch", "end"]
    # the schedule counts every global batch's positions: 9 rows x 47 an epoch
    assert [r["tokens"] for r in records if r["event"] == "epoch"] == [9 * 47, 18 * 47, 27 * 47]
    assert r.stdout.count("data has") == 1


def test_resume_continues_the_two_process_run(runs, data):
    _, ddp, _ = runs
    train(data, data / "split.params", 2, 2)
    resumed, r = train(data, data / "split.params", 2, 3, "--resume")
    assert "resuming from" in r.stdout
    for name in ddp:
        assert float((resumed[name] - ddp[name]).abs().max()) < 1e-4, name


def test_two_processes_equal_one_on_device_batches(data):
    """Span corruption made on the device: every process draws the whole global batch from
    the same generator and keeps its slice, so even the random rows are the same."""
    pretrain = ["--function", "pretrain", "--device_batches", "--max_epochs", "2"]
    single, _ = train(data, data / "single.pretrain.params", 1, 2, *pretrain)
    ddp, _ = train(data, data / "ddp.pretrain.params", 2, 2, *pretrain)
    with open(data / "ddp.pretrain.params.log.jsonl") as f:
        assert json.loads(f.readline())["device_batches"] is True
    for name in single:
        assert float((ddp[name] - single[name]).abs().max()) < 1e-4, name


# --- the pieces, in one process ------------------------------------------------------


@pytest.mark.parametrize("shuffle", [False, True])
def test_slices_cover_each_global_batch_once(monkeypatch, shuffle):
    processes, n, batch = 3, 11, 4  # batches of 4, 4, 3
    batches = {}
    for rank in range(processes):
        monkeypatch.setattr(distributed, "world", lambda rank=rank: (rank, processes))
        batches[rank] = list(distributed.ShareSampler(n, batch, shuffle, seed=7))
        assert len(batches[rank]) == len(distributed.ShareSampler(n, batch, shuffle, seed=7)) == 3
    monkeypatch.setattr(distributed, "world", lambda: (0, 1))
    whole = list(distributed.ShareSampler(n, batch, shuffle, seed=7))
    for step, rows in enumerate(whole):
        assert sum((batches[r][step] for r in range(processes)), []) == rows
    flat = sum(whole, [])
    assert sorted(flat) == list(range(n)) and (flat != list(range(n))) == shuffle


def test_a_process_without_a_row_takes_one_with_weight_zero(monkeypatch):
    monkeypatch.setattr(distributed, "world", lambda: (0, 3))
    assert distributed.share(2) == (0, 1, True)  # rows 0..1 go to processes 1 and 2
    assert distributed.share(3) == (0, 1, False)
    assert list(distributed.ShareSampler(6, 4, False, seed=0)) == [[0], [4]]  # the second: row 4, weight 0
    monkeypatch.setattr(distributed, "world", lambda: (2, 3))
    assert distributed.share(2) == (1, 2, False)
    assert list(distributed.ShareSampler(6, 4, False, seed=0)) == [[2, 3], [5]]


def test_run_sh_hands_stages_to_torchrun(data, tmp_path):
    shim = tmp_path / "fake-python"
    shim.write_text('#!/bin/sh\nif [ "$1" = "-c" ]; then exit 0; fi\nfor a in "$@"; do printf \'ARG:%s\\n\' "$a"; done\n')
    shim.chmod(0o755)
    e = dict(env(), PYTHON=str(shim), DATA_DIR=str(data), TORCHRUN="--standalone --nproc_per_node=2")
    r = subprocess.run(["bash", str(RUN_SH), "vanilla_pretrain", "--max_epochs", "1"], capture_output=True,
                       text=True, env=e, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    argv = [line[4:] for line in r.stdout.splitlines() if line.startswith("ARG:")]
    if not argv:
        pytest.skip("run.sh used .venv/bin/python, not the stand-in")
    assert argv[:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(RUN_PY)]
