"""The GRPO health check (relrl.rl.health): the committed training logs never trip it, its
window, warnings and stop on hand-made rounds, a run whose every completion is truncated stops
with its message, a checkpoint and exit status 3, and demo.py and the SLURM job treat that as a
failed stage."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_grpo_trainer import ROWS, bad, script, write_rows
from test_slurm_files import run_job, write_site_env

import demo
from relrl.data.dataset_io import read_text
from relrl.rl.health import KINDS, HealthCheck, Limits, rounds_from_log

ROOT = Path(__file__).resolve().parents[1]
# the study's miniature runs (tiny, screened mixed questions); tiny-tool's GRPO runs train on
# unscreened questions it mostly solves, and are replayed on their own below
TOOL_LOGS = sorted(ROOT.glob("results/tiny-tool/**/train_log.jsonl.gz"))
# the GRPO logs results folders keep (gzipped, as demo.py and tool_grpo.sh copy them)
LOGS = sorted(set(ROOT.glob("results/**/train_log.jsonl.gz")) - set(TOOL_LOGS))


def replay(log: Path) -> tuple[HealthCheck, dict[str, float]]:
    """The committed log replayed through the default check, and the worst window of each share."""
    check, worst = HealthCheck(), dict.fromkeys(KINDS, 0.0)
    for r in rounds_from_log([json.loads(line) for line in read_text(log).splitlines()]):
        check.observe(**r)
        for kind, share in (check.shares() or {}).items():
            worst[kind] = max(worst[kind], share)
    return check, worst


def test_committed_study_logs_replay_to_what_their_runs_recorded_and_none_stops():
    # results/demo, demo-replication and dev-100: 5 x 3 runs; the redone design's seeds: 4 each
    # (plain GRPO, trained on zero-signal groups, among them)
    assert len(LOGS) >= 19
    warned, worst = set(), dict.fromkeys(KINDS, 0.0)
    for log in LOGS:
        check, shares = replay(log)
        recorded = json.loads((log.parent / "statistics.json").read_text()).get("health_warnings", [])
        assert check.stopped is None and check.warnings == recorded, log
        warned |= {log.parent.relative_to(ROOT / "results").as_posix()} if recorded else set()
        worst = {kind: max(worst[kind], shares[kind]) for kind in KINDS}
    # The real warnings: seed 22's and 23's exp7 started from an SFT warm start that had
    # collapsed (7.6% on held-out mixed questions at seed 22), and 81% and 87% of their first
    # groups were all right or all wrong; they warned and trained on. Plain GRPO trains on
    # groups without signal by design, so it may warn of them and of steps without a useful
    # group (science-v3's seed 32 did, at 80-86%), and of nothing else.
    plain = {run for run in warned if run.endswith("/grpo_exp7_plain")}
    assert warned - plain == {f"demo-replication-v2/seed-{s}/grpo_exp7" for s in (22, 23)}
    for run in plain:
        stats = json.loads((ROOT / "results" / run / "statistics.json").read_text())
        assert {w["kind"] for w in stats["health_warnings"]} <= {"zero_signal", "wasted"}, run
    limits = Limits()
    assert worst["truncated"] < 0.3 and all(worst[k] < stop for k, stop in zip(KINDS, limits.stop))
    assert 0.3 < worst["zero_signal"], worst  # real signal: much wasted, but it trains


def test_tiny_tool_runs_warned_of_zero_signal_groups_and_never_stopped():
    """tiny-tool solves most unscreened questions, so 83-85% of its groups were all right or
    all wrong: the check warned, as the runs' statistics record, and none came near a stop."""
    assert {log.parent.name for log in TOOL_LOGS} >= {
        "grpo-seed100", "gspo-seed100", "cispo-seed100", "grpo-seed101"}
    for log in TOOL_LOGS:
        check = HealthCheck()
        for r in rounds_from_log([json.loads(x) for x in read_text(log).splitlines()]):
            check.observe(**r)
        stats = json.loads((log.parent / "statistics.json").read_text())
        assert check.stopped is None and stats["stopped_by"] == "max_useful_steps"
        assert "zero_signal" in {w["kind"] for w in check.warnings}, log
        assert {w["kind"] for w in stats["health_warnings"]} >= {"zero_signal"}, log


def test_rounds_from_a_log_take_the_counters_differences():
    waste = lambda c, w, s: {"all_correct": c, "all_wrong": w, "same_partial": s}  # noqa: E731
    records = [{"step": 1, "total_attempts": 5, "waste": waste(0, 2, 1), "rewards": [0] * 4,
                "truncated": 1},
               {"step": 2, "total_attempts": 5, "waste": waste(0, 2, 1), "rewards": [0] * 4,
                "truncated": 2},
               {"step": 3, "total_attempts": 9, "waste": waste(1, 4, 1), "rewards": [0] * 4,
                "truncated": 0}]
    assert rounds_from_log(records) == [
        {"groups": 5, "zero_signal": 2, "wasted": 3, "completions": 8, "truncated": 3, "step": 2},
        {"groups": 4, "zero_signal": 3, "wasted": 3, "completions": 4, "truncated": 0, "step": 3}]


def test_warnings_once_per_spell_and_a_stop_past_the_limit():
    check = HealthCheck(Limits(window=8, warn=(0.5, 0.5, 0.9), stop=(1.0, 1.0, 1.0)))
    healthy = dict(groups=4, zero_signal=0, wasted=0, completions=16, truncated=0)
    sick = dict(groups=4, zero_signal=4, wasted=4, completions=16, truncated=2)
    assert check.observe(**sick, step=1) == []  # half a window: nothing judged yet
    assert check.shares() is None
    lines = check.observe(**sick, step=2)  # 8 of 8 zero-signal: past the stop limit
    assert check.stopped == "zero_signal" and len(lines) == 2  # and a warning on the waste
    assert lines[0] == ("health stopping the run at useful step 2: in the last 8 groups "
                        "generated, 100% of groups were all right or all wrong (warn at 50%, "
                        "stop at 100%); the questions are too hard or too easy for the policy: "
                        "screen the dataset by base pass rate, try --pass-rate-sampler, or lower "
                        "--learning-rate if it collapsed (--health-stop-zero-signal moves this "
                        "limit; --no-health-check turns the check off)")
    assert lines[1].startswith("health warning at useful step 2: in the last 8 groups "
                               "generated, 100% of groups gave no useful step (warn at 90%")
    assert "--health-warn-wasted" in lines[1]
    assert [w["kind"] for w in check.warnings] == ["wasted"]

    check = HealthCheck(Limits(window=8, warn=(0.2, 0.5, 0.9), stop=(0.9, 1.0, 1.0)))
    check.observe(**healthy)
    lines = check.observe(**sick, step=5)  # 4 of 8 zero-signal, 2 of 32 truncated
    assert len(lines) == 1 and "useful step 5: in the last 8 groups generated, 50% of groups " \
        "were all right or all wrong" in lines[0]
    assert check.shares() == {"truncated": 2 / 32, "zero_signal": 0.5, "wasted": 0.5}
    mostly = dict(groups=4, zero_signal=3, wasted=3, completions=16, truncated=0)
    assert check.observe(**mostly, step=6) == []  # 7 of 8, still above the warning: no line
    assert check.shares() == {"truncated": 2 / 32, "zero_signal": 7 / 8, "wasted": 7 / 8}
    assert check.stopped is None
    check = HealthCheck(Limits(window=8, warn=(0.9, 0.5, 0.9), stop=(1.0, 1.0, 1.0)))
    check.observe(**healthy), check.observe(**sick)  # warned
    check.observe(**healthy), check.observe(**healthy)  # back below: the warning re-arms
    assert check.observe(**healthy) == [] and len(check.observe(**sick)) == 1
    assert [w["kind"] for w in check.warnings] == ["zero_signal", "zero_signal"]
    state = json.loads(json.dumps(check.state_dict()))
    again = HealthCheck(check.limits)
    again.load_state_dict(state)
    assert again.state_dict() == check.state_dict()


SHORT = ["--model", "tiny-random", "--reward", "digit-share", "--max-useful-steps", "2",
         "--grad-accum", "2", "--max-total-steps", "60", "--sampling-mode", "step",
         "--rollout-engine", "hf"]


def test_a_run_whose_every_completion_is_truncated_stops_with_exit_3(tmp_path):
    """One token per completion: the health check stops the run after its window, with one line
    naming the share and --max-new-tokens, a checkpoint, stopped_by and exit status 3; with the
    check off the same run trains to the end."""
    data = write_rows(tmp_path / "train.jsonl", ROWS)
    out = tmp_path / "sick"
    run = script("grpo_exp10_nosft.py", *SHORT, "--max-new-tokens", "1", "--health-window", "8",
                 "--max-useful-steps", "50", "--dataset", data, "--output-dir", out, check=False)
    assert run.returncode == 3, run.stderr[-2000:]
    health = [x for x in run.stderr.splitlines() if x.startswith("health ")]
    # the stop, then one warning each for the other shares past theirs (no group has signal)
    assert health[0].startswith("health stopping the run at useful step")
    assert all(x.startswith("health warning") for x in health[1:]) and len(health) <= 3
    assert "of completions were cut at --max-new-tokens" in health[0]
    assert "raise --max-new-tokens" in health[0] and "--health-stop-truncated" in health[0]
    assert "stopped (unhealthy:truncated)" in run.stdout and "exit status 3" in run.stdout
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["stopped_by"] == "unhealthy:truncated"
    assert 8 <= stats["total_attempts"] < 60 and stats["useful_steps"] < 50
    assert (out / f"checkpoint-{stats['useful_steps']}" / "trainer_state.json").is_file()
    assert demo.health_stopped(out / "statistics.json")
    assert not demo.finished(out / "statistics.json")  # a rerun of the demo does it again

    off = script("grpo_exp10_nosft.py", *SHORT, "--max-new-tokens", "1", "--no-health-check",
                 "--dataset", data, "--output-dir", tmp_path / "off", check=False)
    assert off.returncode == 0, off.stderr[-2000:]
    assert "health " not in off.stderr
    stats = json.loads((tmp_path / "off" / "statistics.json").read_text())
    assert stats["stopped_by"] == "max_useful_steps" and stats["health_warnings"] is None


def test_health_limits_are_checked_naming_the_flag(tmp_path, capsys):
    good = write_rows(tmp_path / "good.jsonl", ROWS)
    common = ["--model", "tiny-random", "--output-dir", tmp_path / "out", "--dataset", good]
    err = bad(capsys, "exp10", *common, "--health-warn-truncated", "0.99")
    assert err.startswith("error: --health-warn-truncated") and "--health-stop-truncated 0.95" in err
    err = bad(capsys, "exp10", *common, "--health-stop-wasted", "1.5")
    assert err.startswith("error: --health-stop-wasted: must be in (0, 1]")
    assert "--health-window" in bad(capsys, "exp10", *common, "--health-window", "0")


def test_demo_and_the_slurm_job_fail_a_stage_that_exits_3(tmp_path):
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    (tmp_path / "logs").mkdir()
    stats = tmp_path / "statistics.json"
    stage = (f"import json, sys; json.dump({{'stopped_by': 'unhealthy:zero_signal'}}, "
             f"open({str(stats)!r}, 'w')); print('health stopping the run'); sys.exit(3)")
    with pytest.raises(SystemExit, match=r"(?s)grpo failed \(exit 3\).*health stopping"):
        d.run("grpo", ["-c", stage], done=stats)
    assert not d.ledger.get("grpo")["finished"] and not demo.finished(stats)

    env = tmp_path / "venv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text('#!/bin/bash\necho "python $*"\nexit 3\n')
    (env / "bin" / "python").chmod(0o755)
    site = write_site_env(tmp_path / "site.env", SITE_PYTHON_ENV=str(env))
    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    job = run_job("grpo", site, EXP="exp10", GRPO_DATASET=str(data))
    assert job.returncode == 3 and "requeueing" not in job.stdout  # afterok stages never start
    assert "training/grpo_exp10_nosft.py" in job.stdout


def test_the_check_follows_a_resume(tmp_path):
    """Its window and warnings are in the checkpoint: a run resumed after a stop stops again
    at once rather than starting a fresh window."""
    data = write_rows(tmp_path / "train.jsonl", ROWS)
    out = tmp_path / "run"
    args = [*SHORT, "--max-new-tokens", "1", "--health-window", "8", "--max-useful-steps", "50",
            "--dataset", data, "--output-dir", out]
    assert script("grpo_exp10_nosft.py", *args, check=False).returncode == 3
    first = json.loads((out / "statistics.json").read_text())["total_attempts"]
    again = subprocess.run([sys.executable, str(ROOT / "training/grpo_exp10_nosft.py"),
                            *map(str, args), "--resume"], capture_output=True, text=True,
                           cwd=ROOT, timeout=600)
    assert again.returncode == 3, again.stderr[-2000:]
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["stopped_by"] == "unhealthy:truncated"
    # one more sampling round (two steps, each of at most --max-resample 10 draws), judged
    # with the restored window rather than a fresh one of 8 groups... and no earlier
    assert first < stats["total_attempts"] <= first + 20
    assert "resumed from" in again.stdout
