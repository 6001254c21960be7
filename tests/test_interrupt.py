"""Interrupted and long runs: nothing lost, exact resume, reproducible seeds, progress and records.

Real training processes (`src/run.py`, tiny model, CPU, fp32, num_workers 0) are killed with
SIGKILL while they train, while they write a checkpoint and while they write the params
(a wrapper makes those two writes hang so the kill lands inside them), and stopped with
SIGTERM; the previous params must stay byte-identical and loadable. A run of 2 epochs
resumed to 4 must give the same bytes as 4 epochs straight, as must two runs with one seed.
"""

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from submission import GPTConfig, initialize_vanilla_model
from submission.checkpoint import load_params
from submission.dataset import CharCorruptionDataset
from inprocess import load_cli, run_in_process  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RUN_PY = ROOT / "src" / "run.py"

TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--block_size", "64"]
PLACES = ["Paris", "London", "Lagos", "Rome", "Tokyo", "Berlin"]

# Runs run.py with torch.save made to hang after writing the file named by SLOW_SAVE
# ("ckpt" or "params"), once it has written SLOW_SAVE_MARKER: the kill then lands mid-save.
SLOW_SAVE = """
import os, runpy, sys, time, torch
real_save, which, marker = torch.save, os.environ["SLOW_SAVE"], os.environ["SLOW_SAVE_MARKER"]
def slow_save(obj, f, *args, **kwargs):
    real_save(obj, f, *args, **kwargs)
    name = getattr(f, "name", str(f))
    if (".ckpt." in name) == (which == "ckpt") and name.endswith(".tmp"):
        f.flush()
        with open(marker + ".w", "w") as m:
            m.write(name)
        os.replace(marker + ".w", marker)
        time.sleep(600)
torch.save = slow_save
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

# Runs run.py with the writes of torch.save into the temporary file named by HOLD_SAVE ("ckpt"
# or "params") held at their first call, inside torch.save, until the file HOLD_SAVE_RELEASE
# exists; HOLD_SAVE_MARKER is written once the write is held, so a signal sent then lands
# inside torch.save, every time.
HOLD_SAVE = """
import os, runpy, sys, time, torch
real_save, which = torch.save, os.environ["HOLD_SAVE"]
marker, release = os.environ["HOLD_SAVE_MARKER"], os.environ["HOLD_SAVE_RELEASE"]
class Held:
    def __init__(self, f):
        self.f, self.held = f, False
    def write(self, data):
        if not self.held:
            self.held = True
            with open(marker, "w") as m:
                m.write(self.f.name)
            deadline = time.time() + 120
            while not os.path.exists(release) and time.time() < deadline:
                time.sleep(0.01)
        return self.f.write(data)
    def flush(self):
        self.f.flush()
def held_save(obj, f, *args, **kwargs):
    name = getattr(f, "name", str(f))
    if (".ckpt." in name) == (which == "ckpt") and name.endswith(".tmp"):
        f = Held(f)
    return real_save(obj, f, *args, **kwargs)
torch.save = held_save
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def env():
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    return e


def pretrain_cmd(params, *extra, epochs=4, seed=0, quiet=True):
    return [sys.executable, str(RUN_PY), "--function", "pretrain", "--variant", "vanilla",
            "--pretrain_corpus_path", "wiki.txt", "--writing_params_path", params, *TINY,
            "--max_epochs", str(epochs), "--batch_size", "8", "--num_workers", "0", "--precision", "fp32",
            "--seed", str(seed), *(["--quiet"] if quiet else []), *extra]


def run(cmd, cwd):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env(), timeout=300)


def write_wiki(folder):
    rng = random.Random(0)
    names = [f"{f} {l}" for f in ("Alice", "Bruno", "Chen", "Dara", "Elif", "Farid") for l in ("Smith", "Weber")]
    (folder / "wiki.txt").write_text(
        "\n".join(f"{n} was born in {rng.choice(PLACES)} . Where was {n} born?" for n in names), encoding="utf-8")


def tiny_model(folder):
    text = (folder / "wiki.txt").read_text(encoding="utf-8")
    return initialize_vanilla_model(GPTConfig(CharCorruptionDataset(text, 64).vocab_size, 64,
                                              n_layer=1, n_head=2, n_embd=16))


def log_records(path):
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def ok(r):
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr
    return r


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A: 4 epochs (with progress bars); B: A again; C: A with seed 1; D: 2 epochs, then resumed to 4.

    A copy of D after its first 2 epochs is kept in `nan/` for the non-finite loss test.
    """
    base = tmp_path_factory.mktemp("interrupt")
    folders = {}
    for name in "ABCD":
        folders[name] = base / name
        folders[name].mkdir()
        write_wiki(folders[name])
    first = {"A": pretrain_cmd("p.params", quiet=False), "B": pretrain_cmd("p.params"),
             "C": pretrain_cmd("p.params", seed=1), "D": pretrain_cmd("p.params", epochs=2)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(first, pool.map(lambda n: ok(run(first[n], folders[n])), first)))
    subprocess.run(["cp", "-a", str(folders["D"]), str(base / "nan")], check=True)
    results["D2"] = ok(run(pretrain_cmd("p.params", "--resume"), folders["D"]))
    return {"results": results, "folders": folders, "base": base}


def params_bytes(runs, name):
    return (runs["folders"][name] / "p.params").read_bytes()


def test_same_seed_gives_identical_params(runs):
    assert params_bytes(runs, "A") == params_bytes(runs, "B")


def test_another_seed_gives_other_params(runs):
    a = torch.load(runs["folders"]["A"] / "p.params")
    c = torch.load(runs["folders"]["C"] / "p.params")
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_resume_gives_the_uninterrupted_result(runs):
    d2 = runs["results"]["D2"]
    assert "resuming from p.params.ckpt at epoch 3 of 4" in d2.stdout
    assert params_bytes(runs, "D") == params_bytes(runs, "A")
    starts = [r for r in log_records(runs["folders"]["D"] / "p.params.log.jsonl") if r["event"] == "start"]
    assert [s["first_epoch"] for s in starts] == [0, 2]


def test_schedule_does_not_depend_on_max_epochs(runs):
    """The learning rate follows tokens seen: 2 of 4 epochs and 2 of 2 epochs are the same steps."""
    a = [r for r in log_records(runs["folders"]["A"] / "p.params.log.jsonl") if r["event"] == "epoch"]
    d = [r for r in log_records(runs["base"] / "nan" / "p.params.log.jsonl") if r["event"] == "epoch"]
    assert [(r["lr"], r["tokens"], r["mean_loss"]) for r in a[:2]] == [(r["lr"], r["tokens"], r["mean_loss"])
                                                                        for r in d]


def test_progress_bars_show_totals_eta_loss_and_lr(runs):
    err = runs["results"]["A"].stderr.replace("\r", "\n")
    assert "total: 100%" in err and "8/8 [" in err  # the whole run: 4 epochs of 2 steps
    assert "epoch 1/4:" in err and "epoch 4/4:" in err and "/2 [" in err  # each epoch, with its total
    assert "<" in err  # tqdm's elapsed<remaining (the ETA)
    assert "loss=" in err and "lr=" in err


def test_run_log_records_configuration_data_and_epochs(runs):
    folder = runs["folders"]["A"]
    records = log_records(folder / "p.params.log.jsonl")
    start, *epochs, end = records
    assert start["event"] == "start" and end["event"] == "end"
    for key in ("function", "variant", "git", "seed", "time", "data", "config", "precision", "device"):
        assert key in start, key
    assert start["data"] == {"wiki.txt": hashlib.sha256((folder / "wiki.txt").read_bytes()).hexdigest()[:16]}
    assert start["config"]["max_epochs"] == 4 and start["config"]["batch_size"] == 8
    assert [e["epoch"] for e in epochs] == [1, 2, 3, 4]
    for e in epochs:
        assert e["event"] == "epoch" and e["mean_loss"] > 0 and e["seconds"] >= 0 and e["lr"] > 0
    assert end["final_loss"] > 0 and end["seconds"] >= 0


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(runs):
    folder = runs["base"] / "nan"
    ckpt, params = (folder / "p.params.ckpt").read_bytes(), (folder / "p.params").read_bytes()
    r = run(pretrain_cmd("p.params", "--resume", "--learning_rate", "1e30"), folder)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    warning, message = r.stderr.strip().splitlines()
    assert warning == ("warning: resuming p.params.ckpt with a changed run (learning_rate 0.006 -> 1e+30); "
                       "the result will differ from an uninterrupted run")
    assert message.startswith("error: loss became ") and "(epoch 3)" in message, message
    assert "the last good checkpoint, p.params.ckpt (epoch 2), is kept" in message
    assert "continue with --resume" in message
    assert (folder / "p.params.ckpt").read_bytes() == ckpt
    assert (folder / "p.params").read_bytes() == params
    assert not list(folder.glob("*.tmp"))
    assert log_records(folder / "p.params.log.jsonl")[-1]["event"] == "non-finite loss"


def wait_for(condition, what, timeout=120):
    deadline = time.time() + timeout
    while not condition():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def epochs_logged(folder):
    log = folder / "p.params.log.jsonl"
    if not log.exists():
        return 0
    return sum('"event": "epoch"' in line for line in log.read_text(encoding="utf-8").splitlines())


def kill_mid_save(folder, which, *args):
    """Start a run whose `which` save hangs after writing its temporary file; SIGKILL it there."""
    marker = folder / f"saving-{which}"
    e = {**env(), "SLOW_SAVE": which, "SLOW_SAVE_MARKER": str(marker)}
    p = subprocess.Popen([sys.executable, "-c", SLOW_SAVE, *pretrain_cmd("p.params", *args)[1:]], cwd=folder,
                         env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: marker.exists() or p.poll() is not None, f"the {which} save")
        assert p.poll() is None, p.stderr.read()
        tmp = folder / marker.read_text()
        assert tmp.exists()
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    marker.unlink()
    return tmp


def files(folder):
    return sorted(p.name for p in folder.iterdir() if p.name != "wiki.txt")


def test_killed_runs_lose_nothing(tmp_path):
    folder = tmp_path
    write_wiki(folder)
    torch.manual_seed(0)
    torch.save(tiny_model(folder).state_dict(), folder / "p.params")  # the previous run's params
    previous = (folder / "p.params").read_bytes()

    # 1. SIGKILL while it trains (a checkpoint is written every epoch, so this also lands near saves)
    p = subprocess.Popen(pretrain_cmd("p.params", epochs=100000), cwd=folder, env=env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: epochs_logged(folder) >= 3, "three epochs")
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert (folder / "p.params").read_bytes() == previous
    assert torch.load(folder / "p.params.ckpt", weights_only=False)["epoch"] >= 1  # a whole checkpoint
    assert all(name in ("p.params", "p.params.ckpt", "p.params.log.jsonl") or name.endswith(".tmp")
               for name in files(folder)), files(folder)

    # 2. SIGKILL in the middle of writing a checkpoint: the previous checkpoint stays whole
    ckpt = (folder / "p.params.ckpt").read_bytes()
    tmp = kill_mid_save(folder, "ckpt", "--resume", "--max_epochs", "100000")
    assert (folder / "p.params.ckpt").read_bytes() == ckpt
    assert tmp.name.startswith("p.params.ckpt.") and tmp.name.endswith(".tmp")  # never taken for params
    assert (folder / "p.params").read_bytes() == previous

    # 3. SIGKILL in the middle of writing the params: the previous params stay whole and load
    epoch = torch.load(folder / "p.params.ckpt", weights_only=False)["epoch"]
    tmp2 = kill_mid_save(folder, "params", "--resume", "--max_epochs", str(epoch + 3))
    assert (folder / "p.params").read_bytes() == previous
    load_params(tiny_model(folder), str(folder / "p.params"))
    assert torch.load(folder / "p.params.ckpt", weights_only=False)["epoch"] == epoch + 2  # it did train
    assert not tmp.exists()  # the checkpoint writes of run 3 removed run 2's leftover
    assert tmp2.exists() and tmp2.name.startswith("p.params.") and tmp2.name.endswith(".tmp")

    # 4. SIGTERM (a scheduler's stop): a clean exit, a record of it, and no temporary file left
    p = subprocess.Popen(pretrain_cmd("p.params", "--resume", epochs=100000), cwd=folder, env=env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        done = epochs_logged(folder)
        wait_for(lambda: epochs_logged(folder) >= done + 2, "two more epochs")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "interrupted; the last written params and checkpoint are intact"
    assert "resuming from p.params.ckpt" in out
    assert log_records(folder / "p.params.log.jsonl")[-1]["event"] == "interrupted"
    assert files(folder) == ["p.params", "p.params.ckpt", "p.params.log.jsonl"]
    assert (folder / "p.params").read_bytes() == previous
    torch.load(folder / "p.params.ckpt", weights_only=False)


# --- resume problems, in this process (no training happens before the error) -------------------

def main_in(folder, argv):
    """run.py's main(argv) in `folder`: (exit code, stdout, stderr)."""
    r = run_in_process(load_cli(), argv, folder)
    return r.returncode, r.stdout, r.stderr


def test_resume_refuses_a_checkpoint_of_another_model(runs, tmp_path):
    write_wiki(tmp_path)
    (tmp_path / "p.params.ckpt").write_bytes((runs["base"] / "nan" / "p.params.ckpt").read_bytes())
    argv = pretrain_cmd("p.params", "--resume")[2:]
    code, _, err = main_in(tmp_path, [*argv, "--variant", "synthesizer"])
    assert code == 1 and err.startswith("error: cannot resume: p.params.ckpt: params do not fit"), err
    assert "it is a vanilla model, this run builds synthesizer" in err and "delete the checkpoint" in err
    code, _, err = main_in(tmp_path, [*argv, "--n_embd", "32"])
    assert code == 1 and "embedding width 16 vs 32 here" in err, err
    assert files(tmp_path) == ["p.params.ckpt"]


def test_resume_refuses_a_damaged_checkpoint(runs, tmp_path):
    write_wiki(tmp_path)
    whole = (runs["base"] / "nan" / "p.params.ckpt").read_bytes()
    (tmp_path / "p.params.ckpt").write_bytes(whole[:len(whole) // 2])
    code, _, err = main_in(tmp_path, pretrain_cmd("p.params", "--resume")[2:])
    assert code == 1, err
    assert err.startswith("error: p.params.ckpt: cannot resume: not a readable training checkpoint, "
                          "truncated or corrupt"), err
    assert err.strip().endswith("delete it to start over")


def test_resume_without_a_checkpoint_starts_over(tmp_path):
    write_wiki(tmp_path)
    code, _, err = main_in(tmp_path, pretrain_cmd("p.params", "--resume", epochs=1)[2:])
    assert code == 0, err
    assert "warning: no checkpoint at p.params.ckpt; starting from the beginning" in err
    assert (tmp_path / "p.params").exists()


@pytest.mark.parametrize("which", ["ckpt", "params"])
def test_sigterm_inside_a_save_waits_for_it(tmp_path, which):
    """SIGTERM while torch.save is writing: the write completes, then the run stops with 143,
    the one-line message, a whole file in place and no temporary file left."""
    folder = tmp_path
    write_wiki(folder)
    marker, release = folder / "held", folder / "release"
    e = {**env(), "HOLD_SAVE": which, "HOLD_SAVE_MARKER": str(marker), "HOLD_SAVE_RELEASE": str(release)}
    p = subprocess.Popen([sys.executable, "-c", HOLD_SAVE, *pretrain_cmd("p.params", epochs=2)[1:]], cwd=folder,
                         env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: marker.exists() or p.poll() is not None, f"the {which} save")
        assert p.poll() is None, p.communicate()[1]
        p.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # let the handler run inside the held write (a fixed run waits either way)
        release.touch()
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "interrupted; the last written params and checkpoint are intact"
    name = "p.params.ckpt" if which == "ckpt" else "p.params"
    assert not list(folder.glob("*.tmp")), files(folder)
    saved = torch.load(folder / name, weights_only=False)  # whole: the write finished before the stop
    assert (saved["epoch"] == 0) if which == "ckpt" else ("tok_emb.weight" in saved)
    # a stop inside the params write comes after training ended
    assert log_records(folder / "p.params.log.jsonl")[-1]["event"] == ("interrupted" if which == "ckpt" else "end")
