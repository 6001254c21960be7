"""Figures from run records (src/plots.py), `./run.sh plot`, and the optional matplotlib install."""

import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import plots

ROOT = Path(__file__).resolve().parent.parent
PLOTS_PY = ROOT / "src" / "plots.py"
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
needs_matplotlib = pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="matplotlib is not installed")


def write_record(path, *runs):
    """A <params>.log.jsonl like the trainer's: runs are (function, variant, first_epoch,
    [(epoch, mean_loss, lr), ...], last event or None), appended one after the other."""
    lines = []
    for function, variant, first, epochs, last in runs:
        lines.append({"event": "start", "first_epoch": first, "function": function, "variant": variant})
        lines += [{"event": "epoch", "epoch": e, "mean_loss": loss, "last_loss": loss, "lr": lr,
                   "tokens": 100 * e, "seconds": 0.5} for e, loss, lr in epochs]
        if last:
            lines.append({"event": last})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


def curve(n, start=3.0, lr=6e-4):
    return [(e, start * 0.8 ** e, lr * min(1, e / 3)) for e in range(1, n + 1)]


@pytest.fixture
def records(tmp_path):
    return [("vanilla_pretrain", write_record(tmp_path / "vanilla.pretrain.params.log.jsonl",
                                              ("pretrain", "vanilla", 0, curve(40), "end"))),
            ("vanilla_finetune", write_record(tmp_path / "vanilla.finetune.params.log.jsonl",
                                              ("finetune", "vanilla", 0, curve(10, 1.0), "end"))),
            ("synthesizer_pretrain", write_record(tmp_path / "synthesizer.pretrain.params.log.jsonl",
                                                  ("pretrain", "synthesizer", 0, curve(40, 3.2), "interrupted")))]


ROWS = [{"variant": "vanilla, no pretraining", "dev": 0.02, "test": 0.01, "bar": None},
        {"variant": "vanilla, pretrained", "dev": 0.25, "test": 0.2, "bar": 0.10},
        {"variant": "synthesizer, pretrained", "dev": 0.09, "test": None, "bar": 0.05}]


def png_size(path):
    """(width, height) of a PNG file, checking its signature and header chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


# --- reading records -------------------------------------------------------------------------------


def test_read_record_gives_the_latest_run_and_follows_a_resume(tmp_path):
    path = write_record(tmp_path / "v.params.log.jsonl",
                        ("pretrain", "vanilla", 0, curve(5, 9.0), "end"),  # an earlier run of the same path
                        ("finetune", "synthesizer", 0, curve(4, 2.0), "interrupted"),  # the latest ...
                        ("finetune", "synthesizer", 2, [(3, 0.5, 1e-4), (4, 0.4, 1e-4)], "end"))  # ... resumed
    run = plots.read_record(path)
    assert run["label"] == "v" and run["function"] == "finetune" and run["variant"] == "synthesizer"
    assert run["epochs"] == [1, 2, 3, 4]
    assert run["mean_loss"] == [2.0 * 0.8, 2.0 * 0.8 ** 2, 0.5, 0.4]  # epochs 3 and 4 redone by the resume
    assert run["lr"][-1] == 1e-4 and run["ended"] == "end"


def test_a_run_without_an_end_says_so(tmp_path):
    run = plots.read_record(write_record(tmp_path / "r.log.jsonl", ("pretrain", "vanilla", 0, curve(2), None)))
    assert run["ended"] is None and run["epochs"] == [1, 2]


# --- figures -----------------------------------------------------------------------------------------


@needs_matplotlib
def test_figures_are_pngs_of_a_plausible_size(tmp_path, records, capsys):
    losses = plots.plot_losses(records, tmp_path / "figs" / "losses.png", title="three runs")
    accuracy = plots.plot_accuracy(ROWS, tmp_path / "accuracy.png", baseline=0.05)
    summary = plots.plot_summary(records, ROWS, tmp_path / "summary.png", baseline=0.05)
    (lw, lh), (aw, ah), (sw, sh) = png_size(losses), png_size(accuracy), png_size(summary)
    assert 800 <= lw <= 3000 and 400 <= lh <= 1500  # two panels: pretrain and finetune
    assert 400 <= aw <= 2000 and 400 <= ah <= 1500
    assert sw > lw and sw > aw  # both pictures side by side
    assert all(p.stat().st_size > 20_000 for p in (losses, accuracy, summary))  # something drawn
    assert capsys.readouterr().out == ""


@needs_matplotlib
def test_one_run_draws_one_panel(tmp_path, records):
    one = png_size(plots.plot_losses([records[0][1]], tmp_path / "one.png"))
    two = png_size(plots.plot_losses(records, tmp_path / "two.png"))
    assert one[0] < two[0] and one[1] == two[1]


def test_accuracies_must_be_fractions(tmp_path):
    with pytest.raises(ValueError, match="vanilla: dev 25 is not a fraction"):
        plots.plot_accuracy([{"variant": "vanilla", "dev": 25}], tmp_path / "a.png")
    assert not (tmp_path / "a.png").exists()


def test_without_matplotlib_each_function_prints_the_notice_and_writes_nothing(tmp_path, records,
                                                                               monkeypatch, capsys):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails as if it were not installed
    calls = [lambda out: plots.plot_losses(records, out),
             lambda out: plots.plot_accuracy(ROWS, out, baseline=0.05),
             lambda out: plots.plot_summary(records, ROWS, out, baseline=0.05)]
    for i, call in enumerate(calls):
        out = tmp_path / f"figure{i}.png"
        assert call(out) is None
        assert capsys.readouterr().out == plots.NOTICE + "\n"
        assert not out.exists()
    assert plots.NOTICE == ("notice: matplotlib is not installed; no figure written "
                            "(pip install matplotlib)")


# --- the command -------------------------------------------------------------------------------------


def run(args, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHON=sys.executable)
    env.update(kw.pop("env", {}))
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=120, **kw)


@needs_matplotlib
def test_cli_writes_the_loss_figure(tmp_path, records):
    out = tmp_path / "losses.png"
    r = run([sys.executable, str(PLOTS_PY), *(str(p) for _, p in records), "--out", str(out)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"written: {out}"
    assert png_size(out)[0] >= 800


def test_cli_without_matplotlib_prints_the_notice_and_succeeds(tmp_path, records):
    out = tmp_path / "losses.png"
    code = ("import runpy, sys; sys.modules['matplotlib'] = None; "
            f"sys.argv = ['plots.py', {str(records[0][1])!r}, '--out', {str(out)!r}]; "
            f"runpy.run_path({str(PLOTS_PY)!r}, run_name='__main__')")
    r = run([sys.executable, "-c", code])
    assert r.returncode == 0, r.stderr
    assert r.stdout == plots.NOTICE + "\n" and not out.exists()


BAD_RECORDS = {
    "not JSON": ("{\"event\": \"start\"}\nthis is not json\n", "line 2 is not a run record's JSON object"),
    "no event": ("{\"epoch\": 1}\n", "line 1 is not a run record's JSON object"),
    "a list": ("[1, 2]\n", "line 1 is not a run record's JSON object"),
    "epoch first": ("{\"event\": \"epoch\", \"epoch\": 1, \"mean_loss\": 1.0, \"lr\": 0.1}\n",
                    "line 1 ('epoch') comes before any \"start\" line"),
    "epoch without loss": ("{\"event\": \"start\"}\n{\"event\": \"epoch\", \"epoch\": 1, \"lr\": 0.1}\n",
                           "line 2: an epoch line needs a number for epoch, mean_loss and lr"),
    "empty": ("", "no \"start\" line"),
}


@pytest.mark.parametrize("case", list(BAD_RECORDS) + ["missing", "binary"])
def test_cli_names_a_missing_or_malformed_record_in_one_line(tmp_path, records, case):
    bad = tmp_path / "bad.log.jsonl"
    if case == "binary":
        bad.write_bytes(b"\xff\xfe\x00garbage")
        expected = "not a run record"
    elif case != "missing":
        bad.write_text(BAD_RECORDS[case][0], encoding="utf-8")
        expected = BAD_RECORDS[case][1]
    else:
        expected = "cannot read the run record: No such file or directory"
    out = tmp_path / "losses.png"
    r = run([sys.executable, str(PLOTS_PY), str(records[0][1]), str(bad), "--out", str(out)])
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"error: {bad}: ") and expected in r.stderr, r.stderr
    assert not out.exists()


def test_cli_names_a_figure_it_cannot_write(tmp_path, records):
    if not HAVE_MATPLOTLIB:
        pytest.skip("matplotlib is not installed")
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "losses.png"  # a folder that is a file
    r = run([sys.executable, str(PLOTS_PY), str(records[0][1]), "--out", str(out)])
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"error: {out}: cannot write the figure")


# --- run.sh ---------------------------------------------------------------------------------------------


def test_run_sh_plot_stage(tmp_path, records):
    usage = run(["bash", str(ROOT / "run.sh")])
    assert "  plot RECORD.log.jsonl ... --out FIGURE.png" in usage.stderr
    out = tmp_path / "losses.png"
    r = run(["bash", str(ROOT / "run.sh"), "plot", str(records[1][1]), "--out", str(out)])
    assert r.returncode == 0, r.stderr
    assert out.exists() == HAVE_MATPLOTLIB
    assert (plots.NOTICE in r.stdout) == (not HAVE_MATPLOTLIB)


# A stand-in for .venv/bin/python: it has the required packages, has matplotlib once the
# marker file has-matplotlib exists, and its pip succeeds only when PIP_WORKS is set.
FAKE_PYTHON = """#!/usr/bin/env bash
here="$(cd "$(dirname "$0")/../.." && pwd)"
echo "$*" >> "$here/calls"
case "$*" in
  "-c import matplotlib") [ -e "$here/has-matplotlib" ] ;;
  "-m pip install"*)
    if [ -n "${PIP_WORKS:-}" ]; then touch "$here/has-matplotlib"; else echo "pip: no network" >&2; exit 1; fi ;;
  *) exit 0 ;;
esac
"""


def test_setup_installs_matplotlib_into_the_venv_and_survives_a_failed_install(tmp_path):
    for name in ("run.sh", "requirements.txt", "requirements-optional.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}

    def sh(*args, **extra):
        calls = tmp_path / "calls"
        calls.unlink(missing_ok=True)
        r = subprocess.run(["bash", str(tmp_path / "run.sh"), *args], capture_output=True, text=True,
                           env=dict(env, **extra), timeout=60)
        pips = [c for c in calls.read_text().split("\n") if c.startswith("-m pip")] if calls.exists() else []
        return r, pips

    r, pips = sh("setup")  # an existing .venv without matplotlib, and no network
    assert r.returncode == 0 and f"python: {python}" in r.stdout
    assert pips == [f"-m pip install --quiet -r {tmp_path / 'requirements-optional.txt'}"]
    assert "notice: matplotlib could not be installed; jobs run without figures" in r.stderr
    r, pips = sh("plot", "x.log.jsonl", "--out", "x.png")  # the failure is remembered: no retry per job
    assert r.returncode == 0 and pips == []
    r, pips = sh("setup", PIP_WORKS="1")  # setup tries again
    assert r.returncode == 0 and len(pips) == 1 and "notice" not in r.stderr
    assert (tmp_path / "has-matplotlib").exists()
    r, pips = sh("setup", PIP_WORKS="1")  # present now: nothing to install
    assert r.returncode == 0 and pips == []
