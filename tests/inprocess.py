"""src/run.py's main() called inside the test process: errors that need no training are
checked in milliseconds instead of a Python start-up each."""

import contextlib
import importlib.util
import io
import os
import traceback
from pathlib import Path
from types import SimpleNamespace

RUN_PY = Path(__file__).resolve().parent.parent / "src" / "run.py"


def load_cli():
    """A fresh copy of run.py as a module (its module-level state starts clean)."""
    spec = importlib.util.spec_from_file_location("run_cli", RUN_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_in_process(cli, argv, folder):
    """cli.main(argv) in `folder`, as a CompletedProcess-like result; a traceback a user would
    see gives returncode "exception"."""
    out, err, code = io.StringIO(), io.StringIO(), 0
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except Exception:  # noqa: BLE001 - what a user would see as a traceback
                code = "exception"
                err.write(traceback.format_exc())
    finally:
        os.chdir(cwd)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())
