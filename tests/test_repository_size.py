"""The tracked files stay under 55 MB (the built-in models ship with the code, so results and
plots must stay compact: docs/testing.md, "The same bits on every CPU")."""
import subprocess

import pytest
from conftest import ROOT

LIMIT = 55_000_000  # bytes


def test_the_tracked_files_stay_under_the_cap():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    paths = [p for p in listed.stdout.decode().split("\0") if p]
    total = sum((ROOT / p).stat().st_size for p in paths if (ROOT / p).is_file())
    assert total < LIMIT, f"tracked files {total / 1e6:.2f} MB, over {LIMIT / 1e6:.0f} MB"
