"""`./run.sh reproduce`: every variant's course stages, then the table, on a reduced schedule.

The same code path as the full run (run.sh stages, the course's files and names), with tiny
sizes passed to every stage after `--`, on a small world written here.
"""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_SH = ROOT / "run.sh"
sys.path.insert(0, str(ROOT / "src"))

import plots  # noqa: E402
import reproduce  # noqa: E402
from submission import variants  # noqa: E402

TINY = ["--n_layer", "2", "--n_head", "2", "--n_embd", "16", "--block_size", "64",
        "--max_epochs", "1", "--batch_size", "16", "--num_workers", "0", "--quiet"]
PLACES = ["Paris", "London", "Lagos", "Rome", "Tokyo", "Berlin"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("world")
    rng = random.Random(1)
    people = [(f"{f} {l}", rng.choice(PLACES)) for f in ("Ada", "Bo", "Cy", "Di", "Ed", "Flo")
              for l in ("Ames", "Bell", "Cole", "Dunn")]
    (d / "wiki.txt").write_text("\n".join(f"{n} was born in {p} ." for n, p in people), encoding="utf-8")
    (d / "birth_places_train.tsv").write_text("".join(f"Where was {n} born?\t{p}\n" for n, p in people[:14]),
                                              encoding="utf-8")
    (d / "birth_dev.tsv").write_text("".join(f"Where was {n} born?\t{p}\n" for n, p in people[14:19]),
                                     encoding="utf-8")
    (d / "birth_test.tsv").write_text("".join(f"Where was {n} born?\t{p}\n" for n, p in people[19:]),
                                      encoding="utf-8")
    (d / "birth_test_inputs.tsv").write_text("".join(f"Where was {n} born?\n" for n, _ in people[19:]),
                                             encoding="utf-8")
    return d


def reproduce_cmd(world, out, *flags):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=sys.executable, DATA_DIR=str(world))
    return subprocess.run(["bash", str(RUN_SH), "reproduce", "--out", str(out), *flags, "--", *TINY],
                          capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def first(world, tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    r = reproduce_cmd(world, out)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, r


def every_row():
    return [row for v in variants.VARIANTS for row in reproduce.rows_of(v)]


def expected_rows():
    return [label for label, _ in every_row()]


def test_every_stage_runs_and_the_table_says_what_the_files_hold(world, first):
    out, r = first
    results = json.loads((out / "reproduce.json").read_text(encoding="utf-8"))
    assert [row["label"] for row in results["rows"]] == expected_rows()
    dev = (world / "birth_dev.tsv").read_text(encoding="utf-8").split("\n")[:-1]
    for row, (label, row_stages) in zip(results["rows"], every_row()):
        assert [s for s, _, _ in row_stages] == [s for s in variants.get(row["variant"]).stages() if s in row["seconds"]]
        assert list(row["seconds"]) == [s for s, _, _ in row_stages]
        assert row["bar"] == (variants.get(row["variant"]).dev_threshold if label == row["variant"] else None)
        assert all(t > 0 for t in row["seconds"].values())
        for stage, output, kind in row_stages:
            assert (out / output).is_file(), output
        predicted = (out / next(o for _, o, k in row_stages if k == "dev")).read_text(encoding="utf-8").split("\n")
        want = sum(p == line.split("\t")[1] for p, line in zip(predicted, dev)) / len(dev)
        assert row["dev"] == pytest.approx(want)
        assert row["test"] is not None  # birth_test.tsv has the answers
    assert results["baseline"]["total"] == 5 and results["recipe"] == "course"
    table = (out / "reproduce.md").read_text(encoding="utf-8")
    assert table.strip() in r.stdout
    assert len(table.strip().splitlines()) == 2 + len(expected_rows()) + 1  # header, rows, baseline
    record = (out / "vanilla.pretrain.params.log.jsonl").read_text(encoding="utf-8").splitlines()[0]
    start = json.loads(record)
    assert start["recipe"] == "course" and start["config"]["max_epochs"] == 1  # the flags reached the stage
    assert "vanilla, no pretraining" in expected_rows() and len(expected_rows()) == len(variants.VARIANTS) + 1
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert plots.NOTICE in r.stdout and not (out / "reproduce.png").exists()
    else:
        assert (out / "reproduce.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_rerun_skips_what_exists_and_redoes_what_is_missing(world, first):
    out, _ = first
    before = json.loads((out / "reproduce.json").read_text(encoding="utf-8"))
    (out / "vanilla.pretrain.dev.predictions").unlink()
    r = reproduce_cmd(world, out)
    assert r.returncode == 0, r.stderr[-3000:]
    ran = [line for line in r.stdout.splitlines() if line.startswith("[") and "skipped" not in line]
    assert len(ran) == 1 and ran[0].endswith("vanilla_eval_dev_with_pretrain"), ran
    after = json.loads((out / "reproduce.json").read_text(encoding="utf-8"))
    assert [row["dev"] for row in after["rows"]] == [row["dev"] for row in before["rows"]]
    kept = after["rows"][1]["seconds"]
    assert kept["vanilla_pretrain"] == before["rows"][1]["seconds"]["vanilla_pretrain"]  # times kept


def test_missing_data_is_one_line(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, DATA_DIR=str(tmp_path))
    r = subprocess.run(["bash", str(RUN_SH), "reproduce", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"error: {tmp_path / 'wiki.txt'}: not found (DATA_DIR names the data folder)"


def test_estimate_says_how_long_and_runs_nothing(world, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=sys.executable, DATA_DIR=str(world))
    r = subprocess.run(["bash", str(RUN_SH), "reproduce", "--estimate", "--variants", "vanilla",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(line for line in r.stdout.splitlines() if line.startswith("This runs the course's full schedule"))
    assert "for vanilla: about " in line and "estimated from timed steps" in line
    assert list((tmp_path / "o").iterdir()) == []  # nothing trained, nothing written
