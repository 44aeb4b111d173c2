import os
from pathlib import Path

import pytest

# One thread per process: the tests start many small model processes on a 2-core machine, where
# torch's default thread count oversubscribes the cores and slows tiny models by an order of
# magnitude. No test may reach a model hub.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
SEED_DATA = ROOT.parent / "shared" / "seed-data"



def pytest_collection_modifyitems(items):
    """Files with a slow test first, each file's tests kept together and in order: under
    `make test` (pytest-xdist, whole files per worker) the longest files start at once and
    overlap the short ones instead of forming the run's tail."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(autouse=True, scope="session")
def grading_caches_start_empty():
    """The grader caches parsed targets. mutmut runs each mutant's tests in a process forked
    from one that has graded already, so a cached target would skip the mutated code."""
    from relrl.grading import numbers

    numbers._parse_target_text.cache_clear()
    numbers._parse_target_values.cache_clear()
