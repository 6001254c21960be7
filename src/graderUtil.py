"""The grading harness: a registry of tests, a runner with a time limit, and the report.

grader.py holds the assignment's tests and nothing else; this file knows nothing about the
assignment. A test is a function that returns nothing (or one line of information), raises
AssertionError (through `check`) when the code under test is wrong, and raises Skip when
what it grades does not exist yet. Test ids follow the course: `<part>-<n>-basic` for checks
of the specification on small inline data, `<part>-<n>-hidden` for checks of the deliverables.

The same runner serves the command line (`Grader.main`) and pytest (tests/test_grader.py
runs every basic test through `Grader.run`), so a test means the same thing in both.
"""

import contextlib
import io
import os
import random
import signal
import sys
import time
import traceback

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Skip(Exception):
    """The test cannot run yet; the message says what to run first."""


def check(condition, message):
    """An assertion that stays on under `python -O` and says what was expected."""
    if not condition:
        raise AssertionError(message)


class Test:
    def __init__(self, test_id, points, description, func):
        self.id, self.points, self.description, self.func = test_id, points, description, func

    @property
    def part(self):
        return self.id.split("-")[0]

    @property
    def basic(self):
        return self.id.endswith("-basic")


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


class Grader:
    """Tests in the order they are registered, each run alone with fixed seeds and a time limit."""

    def __init__(self, usage, time_limit_s=60):
        self.usage = usage.strip()
        self.time_limit_s = time_limit_s
        self.tests = []

    def test(self, test_id, points, description):
        """Decorator: register the function as the test `test_id`, worth `points`."""
        def register(func):
            if any(t.id == test_id for t in self.tests):
                raise ValueError(f"test id {test_id} registered twice")
            self.tests.append(Test(test_id, points, description, func))
            return func
        return register

    def run(self, t):
        """(status, details): status PASS, FAIL or SKIP; details a list of lines.

        Output of the code under test is captured and shown (its last lines) only on failure.
        The time limit uses SIGALRM, so it applies where that exists and in the main thread.
        """
        random.seed(0)
        np.random.seed(0)
        torch.manual_seed(0)
        captured = io.StringIO()
        use_alarm = hasattr(signal, "SIGALRM")
        if use_alarm:
            previous = signal.signal(signal.SIGALRM, _alarm)
            signal.alarm(self.time_limit_s)
        try:
            with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                info = t.func()
            return "PASS", [info] if info else []
        except Skip as e:
            return "SKIP", [str(e)]
        except _Timeout:
            return "FAIL", [f"took longer than {self.time_limit_s} s"]
        except AssertionError as e:
            details = [str(e) or _where(e)]
        except Exception as e:  # noqa: BLE001 - a crash in the code under test is a failure
            details = [f"{type(e).__name__}: {e}".splitlines()[0][:300], _where(e)]
        finally:
            if use_alarm:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, previous)
        output = captured.getvalue().strip().splitlines()
        if output:
            details.append("output: " + " | ".join(output[-5:])[:400])
        return "FAIL", details

    def select(self, wanted):
        """The tests named by id or by part (`1e`); raises KeyError naming the unknown ones."""
        wanted = set(wanted)
        selected = [t for t in self.tests if t.id in wanted or t.part in wanted]
        unknown = wanted - {t.id for t in selected} - {t.part for t in selected}
        if unknown:
            raise KeyError(", ".join(sorted(unknown)))
        return selected

    def main(self, argv):
        """The command line: one line per test, then the points, then the counts. Returns the exit code."""
        if argv and argv[0] in ("-h", "--help"):
            print(self.usage)
            return 0
        if argv and argv[0] == "--list":
            for t in self.tests:
                print(f"{t.id:<13} {t.points:>2}  {t.description}")
            return 0
        try:
            selected = self.select(argv) if argv else self.tests
        except KeyError as e:
            print(f"unknown test id(s): {e.args[0]}; `python grader.py --list` shows them", file=sys.stderr)
            return 2
        torch.set_num_threads(1)  # tiny models: one thread is fastest, and immune to a busy machine
        counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        earned = skipped_points = 0
        started = time.time()
        for t in selected:
            t0 = time.time()
            status, details = self.run(t)
            counts[status] += 1
            got = t.points if status == "PASS" else 0
            earned += got
            if status == "SKIP":
                skipped_points += t.points
            print(f"{status}  {t.id:<12} {got:>2}/{t.points:<2} {t.description}  ({time.time() - t0:.1f}s)")
            for line in details:
                print(f"      {line}")
            sys.stdout.flush()
        total = sum(t.points for t in selected)
        print(f"Points: {earned}/{total}" + (f" ({skipped_points} in skipped tests)" if skipped_points else "")
              + f" in {time.time() - started:.1f}s")
        print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
        return 1 if counts["FAIL"] else 0


def _where(e):
    """`at FILE:LINE: code` of the innermost frame, for a failure without a message."""
    frames = traceback.extract_tb(e.__traceback__)
    frame = frames[-1] if frames else None
    return f"at {os.path.relpath(frame.filename, ROOT)}:{frame.lineno}: {frame.line}" if frame else ""
