"""src/bench.py's GPU table, run on the CPU: the same code with the CPU as its device."""

import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench", ROOT / "src" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_device_table_times_both_paths_and_estimates_the_course_schedule(bench, capsys):
    wiki = "\n".join(f"Person {i} was born in Town {i % 7}, and later lived in City {i % 5}." for i in range(300))
    names = "".join(f"Where was Person {i} born?\tTown {i % 7}\n" for i in range(40))
    row = bench.bench_device("vanilla", wiki, names, batch_size=8, steps=2, warmup=1, device="cpu",
                             finetune_rows=16)
    assert row["pretrain_steps"] == 650 * math.ceil(300 / 128)
    assert row["finetune_steps"] == 10 * math.ceil(40 / 256)
    for path in ("plain", "ours"):
        assert row[f"{path}_tok_s"] == pytest.approx(8 * 127 / (row[f"{path}_ms_step"] / 1e3))
        assert 0 < row[f"{path}_data_share"] < 1
        assert row[f"{path}_pretrain_s"] == pytest.approx(row["pretrain_steps"] * row[f"{path}_ms_step"] / 1e3)
        assert row[f"{path}_schedule_s"] > row[f"{path}_pretrain_s"]
    capsys.readouterr()
    bench.print_device_table([row], 8)
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| variant |") and table[2].startswith("| vanilla |")
