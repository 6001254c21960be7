"""Shared test setup: `import submission` (and the grader) resolve to src/; a one-thread fixture."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models: one thread is fastest, and far faster than OpenMP spinning on a busy machine.
    A module asks for it with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
