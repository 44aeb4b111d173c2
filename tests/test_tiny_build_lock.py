"""`python -m relrl.models.tiny_build` started while another process builds `tiny` waits for it and
reuses its model instead of building a second time."""
import fcntl
import json
import sys
import threading
import time

import pytest

from relrl.models import tiny_build

REPORT = {"by_family": {"series_reliability": 0.5}, "overall": 0.5, "questions": 2,
          "samples_per_question": 4, "tolerance_rule": "study", "share_all_wrong": 0.0,
          "share_mixed": 1.0, "share_all_right": 0.0, "truncated": 0.0}


def test_a_build_finished_while_waiting_for_the_lock_is_reused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RELRL_CACHE", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["tiny_build"])
    folder = tiny_build.tiny_dir()
    built = []
    monkeypatch.setattr(tiny_build, "build_tiny", lambda *a, **k: built.append(a))
    lock = open(tmp_path / f".{folder.name}.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # the other builder holds the lock
    waiting = threading.Thread(target=lambda: pytest.raises(SystemExit, tiny_build.main))
    waiting.start()
    time.sleep(1.0)  # main() has seen no model and is waiting for the lock
    folder.mkdir(parents=True)
    (folder / "accuracy.json").write_text(json.dumps(REPORT))
    fcntl.flock(lock, fcntl.LOCK_UN)
    lock.close()
    waiting.join(timeout=60)
    assert not waiting.is_alive()
    assert built == []
    assert f"cached at {folder}" in capsys.readouterr().out
