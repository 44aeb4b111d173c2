"""Stage times survive a resume: every attempt of a demo stage (finished, failed or
interrupted) is kept in the results folder with the commit that ran it, the seed report and
the pooled report read them from there, and busy time counts side-by-side stages once."""
import subprocess
import sys

import pytest

import demo
from study import stage_times
from study.demo_report import stage_table


def rec(stage, start, end, status=0, code="abc"):
    return {"stage": stage, "start": start, "end": end, "status": status, "code": code}


def test_busy_time_is_the_union_of_attempts_so_overlaps_and_gaps_count_right():
    records = [rec("a", 0, 10), rec("b", 5, 20), rec("c", 100, 130), rec("d", 110, 120)]
    assert stage_times.busy_seconds(records) == 20 + 30
    assert stage_times.busy_seconds([]) == 0


def test_per_stage_sums_attempts_and_keeps_every_commit_in_order():
    rows = stage_times.per_stage([rec("train", 0, 100, "interrupted", "abc"),
                                  rec("eval", 100, 110), rec("train", 200, 260, 0, "def")])
    assert rows == [{"stage": "train", "attempts": 2, "seconds": 160, "codes": ["abc", "def"],
                     "status": 0},
                    {"stage": "eval", "attempts": 1, "seconds": 10, "codes": ["abc"],
                     "status": 0}]
    table = stage_table([rec("train", 0, 100, "interrupted"), rec("train", 200, 260, 0, "def")])
    assert "Busy wall-clock time: 3 minutes" in table[2]
    assert table[-1] == "| train | 2 | 160 | 0 | abc, def |"


def test_code_version_names_the_commit_and_marks_changed_tracked_files(tmp_path):
    assert stage_times.code_version(tmp_path).startswith("unknown")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=tmp_path, check=True)
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=tmp_path,
                          capture_output=True, text=True).stdout.strip()
    (tmp_path / "untracked.txt").write_text("ignored\n")
    assert stage_times.code_version(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert stage_times.code_version(tmp_path) == head + "+changes"


def test_a_failed_attempt_is_recorded_with_its_exit_status(tmp_path):
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    (tmp_path / "logs").mkdir()
    with pytest.raises(SystemExit, match=r"screen failed \(exit 3\)"):
        d.run("screen", ["-c", "import sys; sys.exit(3)"])
    [record] = stage_times.read(tmp_path / "out" / stage_times.FILE_NAME)
    assert record["stage"] == "screen" and record["status"] == 3


def test_ctrl_c_during_a_stage_stops_its_script_and_records_the_attempt(tmp_path, monkeypatch):
    started = []

    class InterruptedWait(subprocess.Popen):
        def wait(self, timeout=None):
            if not started and self.args[0] == sys.executable:  # the stage's: Ctrl-C lands
                started.append(self)
                raise KeyboardInterrupt
            return super().wait(timeout)

    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    monkeypatch.setattr(subprocess, "Popen", InterruptedWait)  # the stage runner's
    (tmp_path / "logs").mkdir()
    with pytest.raises(KeyboardInterrupt):
        d.run("train", ["-c", "import time; time.sleep(120)"])
    assert started[0].returncode is not None and d.children == []  # terminated, not orphaned
    [record] = stage_times.read(tmp_path / "out" / stage_times.FILE_NAME)
    assert record["stage"] == "train" and record["status"] == "interrupted"
