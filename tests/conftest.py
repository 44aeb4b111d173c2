import os
from pathlib import Path

import pytest
from hypothesis import settings

# One thread per process: the tests start many small model processes on a 2-core machine, where
# torch's default thread count oversubscribes the cores and slows tiny models by an order of
# magnitude. No test may reach a model hub.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Hypothesis profiles, shared by every property test (marked `fuzz`): `default` under `make test`,
# `fuzz` (many more examples) when HYPOTHESIS_PROFILE=fuzz, as `make fuzz` sets it. Tests scale
# their example counts from settings.default.max_examples; no deadline, as the machine is shared.
settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile("fuzz", max_examples=2000, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

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
