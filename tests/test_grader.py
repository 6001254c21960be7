"""The course's specification has one home, src/grader.py: here pytest runs each of its tests.

Every basic test of the grader is a pytest case of its own, run through the grader's own
runner (the same seeds and time limit as `python grader.py`), so the two cannot disagree.
Hidden tests grade the deliverables; without them they must be skipped, each naming the
stage that makes its file. The harness itself (graderUtil.py) is checked on made-up tests.
"""

import subprocess
import sys
from pathlib import Path

import pytest

import grader
import graderUtil
from submission.variants import VARIANTS

ROOT = Path(__file__).resolve().parent.parent
GRADER = grader.grader
BASIC = [t for t in GRADER.tests if t.basic]
HIDDEN = [t for t in GRADER.tests if not t.basic]


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.mark.parametrize("t", BASIC, ids=[t.id for t in BASIC])
def test_grader_basic(t):
    status, details = GRADER.run(t)
    assert status == "PASS", f"{t.id} ({t.description}): {status}\n" + "\n".join(details)


def test_every_part_has_basic_and_hidden_tests():
    parts = {t.part for t in GRADER.tests}
    assert {"1c", "1d", "1e", "1f", "1g", "1h", "1i"} <= parts
    for part in parts - {"1j"}:
        assert any(t.part == part for t in BASIC) and any(t.part == part for t in HIDDEN), part


def known_stages():
    return {stage for v in VARIANTS.values() for stage in v.stages()}


def test_hidden_tests_skip_without_deliverables(tmp_path, monkeypatch):
    """With an empty submission folder every deliverable test is a SKIP that names the stage to
    run; the span-corruption tests on data/wiki.txt need no deliverable, and pass."""
    monkeypatch.setattr(grader, "SUB", str(tmp_path))
    for t in HIDDEN:
        status, details = GRADER.run(t)
        if t.part == "1e":
            assert status == "PASS", f"{t.id}: {status} {details}"
            continue
        assert status == "SKIP", f"{t.id}: {status} {details}"
        message = details[0]
        assert " not found: run ./run.sh " in message, message
        assert message.rsplit(" ", 1)[1] in known_stages(), message


# --- the harness ------------------------------------------------------------------------------------

def made_up_grader():
    g = graderUtil.Grader("usage: made up")

    @g.test("9a-0-basic", 2, "passes")
    def _():
        return "some information"

    @g.test("9a-1-basic", 3, "fails a check")
    def _():
        print("noise from the code under test")
        graderUtil.check(1 + 1 == 3, "arithmetic is broken")

    @g.test("9b-0-basic", 1, "crashes")
    def _():
        return {}["missing"]

    @g.test("9b-0-hidden", 4, "skips")
    def _():
        raise graderUtil.Skip("deliverable.params not found: run ./run.sh something")

    return g


def test_harness_reports_each_status_with_its_details():
    g = made_up_grader()
    results = {t.id: g.run(t) for t in g.tests}
    assert results["9a-0-basic"] == ("PASS", ["some information"])
    status, details = results["9a-1-basic"]
    assert status == "FAIL" and details[0] == "arithmetic is broken"
    assert details[-1] == "output: noise from the code under test"
    status, details = results["9b-0-basic"]
    assert status == "FAIL" and details[0] == "KeyError: 'missing'" and "tests/test_grader.py" in details[1]
    assert results["9b-0-hidden"] == ("SKIP", ["deliverable.params not found: run ./run.sh something"])


def test_harness_main_prints_points_and_counts_and_exit_codes(capsys):
    g = made_up_grader()
    assert g.main([]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("PASS  9a-0-basic    2/2  passes  (")
    assert lines[-2].startswith("Points: 2/10 (4 in skipped tests) in ")
    assert lines[-1] == "1 passed, 2 failed, 1 skipped"
    assert g.main(["9a-0-basic"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 passed, 0 failed, 0 skipped"
    assert g.main(["9b"]) == 1  # a part selects its tests
    assert capsys.readouterr().out.splitlines()[-1] == "0 passed, 1 failed, 1 skipped"
    assert g.main(["9z-0-basic"]) == 2
    assert "unknown test id(s): 9z-0-basic" in capsys.readouterr().err


def test_harness_refuses_a_test_id_twice():
    g = made_up_grader()
    with pytest.raises(ValueError, match="9a-0-basic"):
        g.test("9a-0-basic", 1, "again")(lambda: None)


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGALRM"), reason="the time limit needs SIGALRM")
def test_harness_time_limit_fails_a_test_that_runs_too_long():
    g = graderUtil.Grader("usage", time_limit_s=1)

    @g.test("9c-0-basic", 1, "never ends")
    def _():
        while True:
            pass

    assert g.run(g.tests[0]) == ("FAIL", ["took longer than 1 s"])


def test_grader_command_line_one_test_and_the_list():
    """`cd src && python grader.py ID` prints one line for the test and the counts, exit 0."""
    r = subprocess.run([sys.executable, "grader.py", "1e-0-basic"], cwd=ROOT / "src", capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("PASS  1e-0-basic    2/2  vocabulary: ")
    assert lines[-1] == "1 passed, 0 failed, 0 skipped"
    r = subprocess.run([sys.executable, "grader.py", "--list"], cwd=ROOT / "src", capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and [line.split()[0] for line in r.stdout.splitlines()] == [t.id for t in GRADER.tests]
