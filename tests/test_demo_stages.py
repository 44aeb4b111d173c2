"""demo.py's own logic without running the models: a rerun skips finished stages, --stop-after
stops and a rerun carries on, a failing stage stops the demo with its log, and the full
demo's report is spliced into RESULTS.md between the markers, leaving the rest alone."""

import pytest

import demo
from study.demo_report import splice_results_md
from study.demo_stages import pipeline as demo_pipeline
from study.demo_stages import report as report_stage

START, END = demo.RESULTS_START, demo.RESULTS_END


@pytest.fixture
def stub_stages(monkeypatch, tmp_path):
    """Every stage replaced by a one-line script that writes <stage>.done, run through
    Demo.run with that file as its `done` marker, as the real stages are."""
    ran = []

    def stage(name):
        def run_stage(self):
            done = self.work / f"{name}.done"
            self.run(name, ["-c", f"open({str(done)!r}, 'w').write('x')"], done=done)
            ran.append((name, done.read_text()))
        return run_stage

    for name in demo.STAGES:
        monkeypatch.setattr(demo.Demo, name, stage(name))
    dirs = ["--work-dir", str(tmp_path / "work"), "--results-dir", str(tmp_path / "results")]
    return ran, dirs, tmp_path / "work"


def test_stop_after_stops_there_and_a_rerun_carries_on_without_redoing(stub_stages, capsys):
    ran, dirs, work = stub_stages
    assert demo.main([*dirs, "--stop-after", "screen"]) == 0
    assert [name for name, _ in ran] == ["data", "tiny", "screen"]
    assert sorted(p.name for p in work.glob("*.done")) == ["data.done", "screen.done", "tiny.done"]
    capsys.readouterr()
    for done in work.glob("*.done"):
        done.write_text("first run")  # a rerun that redid a stage would overwrite this
    ran.clear()
    assert demo.main(dirs) == 0
    printed = capsys.readouterr().out
    assert [name for name, _ in ran] == list(demo.STAGES)
    assert dict(ran) == {"data": "first run", "tiny": "first run", "screen": "first run",
                         "train": "x", "evaluate": "x", "report": "x"}
    for name in ("data", "tiny", "screen"):
        assert f"[demo] {name}: done already" in printed
    timed = [line.split()[0] for line in printed.splitlines() if line.endswith(" s")
             and line.startswith("  ")]
    assert timed == ["train", "evaluate", "report"]  # only the stages that ran


def test_a_resumed_demo_keeps_the_times_of_the_stages_run_before(stub_stages, tmp_path):
    from study import stage_times
    _, dirs, _ = stub_stages
    demo.main([*dirs, "--stop-after", "screen"])
    demo.main(dirs)
    records = stage_times.read(tmp_path / "results" / stage_times.FILE_NAME)
    assert [r["stage"] for r in records] == list(demo.STAGES)  # each once: done ones not redone
    assert {r["status"] for r in records} == {0}
    assert {r["code"] for r in records} == {stage_times.code_version(demo.ROOT)}
    assert all(r["end"] >= r["start"] for r in records)


def test_a_failing_stage_stops_the_demo_and_shows_its_log(tmp_path):
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    (tmp_path / "logs").mkdir()
    with pytest.raises(SystemExit, match=r"(?s)broken failed \(exit 3\).*it went wrong"):
        d.run("broken", ["-c", "import sys; print('it went wrong'); sys.exit(3)"])
    assert "it went wrong" in (tmp_path / "logs" / "broken.log").read_text()


RESULTS = f"""# Results

Hand-written introduction.

{START}
old generated text
{END}

## Hand-written discussion
Keep me.
"""

REPORT = """# Miniature study (seed 0)

Accuracy 0.40 -> 0.51.

## Held-out
![curve](plots/holdout/curve.png)
"""


def test_results_md_splice_replaces_only_the_generated_section_and_is_idempotent(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text(RESULTS)
    splice_results_md(path, REPORT, START, END)
    text = path.read_text()
    before, rest = text.split(START)
    generated, after = rest.split(END)
    assert before == RESULTS.split(START)[0] and after == RESULTS.split(END)[1]
    assert "old generated text" not in generated
    # two heading levels down, plot links made relative to the repository root
    assert "### Miniature study (seed 0)" in generated and "#### Held-out" in generated
    assert "](results/demo/plots/holdout/curve.png)" in generated
    assert "Accuracy 0.40 -> 0.51." in generated
    splice_results_md(path, REPORT, START, END)
    assert path.read_text() == text  # a rerun of the demo changes nothing


def test_a_results_md_without_markers_is_left_untouched(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("# Results\nno markers\n")
    with pytest.raises(ValueError):
        splice_results_md(path, REPORT, START, END)
    assert path.read_text() == "# Results\nno markers\n"


@pytest.mark.parametrize("fast", [False, True])
def test_only_the_full_demo_writes_its_report_into_results_md(tmp_path, monkeypatch, fast):
    monkeypatch.setattr(report_stage, "ROOT", tmp_path)  # RESULTS.md under tmp_path
    monkeypatch.setattr(report_stage, "build_report", lambda out, **kw: REPORT)
    (tmp_path / "RESULTS.md").write_text(RESULTS)
    out = tmp_path / "results"
    out.mkdir()
    demo.Demo(fast=fast, seed=0, work=tmp_path / "work", out=out, lanes=1).write_report()
    assert (out / "report.md").read_text() == REPORT
    spliced = "### Miniature study (seed 0)" in (tmp_path / "RESULTS.md").read_text()
    assert spliced is (not fast)


def test_a_training_run_that_a_signal_stopped_is_not_done(tmp_path):
    stats = tmp_path / "statistics.json"
    assert not demo.finished(None) and not demo.finished(stats)
    stats.write_text('{"stopped_by": "SIGTERM"}')
    assert not demo.finished(stats)
    stats.write_text('{"stopped_by": "max_useful_steps"}')
    assert demo.finished(stats)
    (tmp_path / "adapter").mkdir()
    assert demo.finished(tmp_path / "adapter")


@pytest.mark.parametrize("status, stats", [
    (75, {"stopped_by": "SIGTERM"}),  # the trainers' "stopped, resume later"
    (75, {}),                         # the status alone says it
    (0, {"stopped_by": "SIGUSR1"}),   # as trainers stopped before they exited 75
])
def test_a_script_a_signal_stopped_is_resumed_later_not_failed_nor_done(tmp_path, status, stats):
    from study import stage_times
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    (tmp_path / "logs").mkdir()
    done = tmp_path / "statistics.json"
    script = f"import json, sys; open({str(done)!r}, 'w').write(json.dumps({stats!r})); sys.exit({status})"
    with pytest.raises(SystemExit) as stop:
        d.run("grpo_exp7", ["-c", script], done=done)
    assert str(stop.value) == (f"[demo] grpo_exp7 stopped before finishing (exit {status}); run "
                               "the same command again to resume it")
    [record] = stage_times.read(tmp_path / "out" / stage_times.FILE_NAME)
    assert record["status"] == "stopped" and d.ledger.get("grpo_exp7")["finished"] is False
    assert demo_pipeline.STOPPED_EXIT == 75  # the trainers' (relrl.runtime.stop)


def test_a_training_run_its_health_check_stopped_fails_with_exit_3(tmp_path):
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    (tmp_path / "logs").mkdir()
    done = tmp_path / "statistics.json"
    script = (f"import sys; open({str(done)!r}, 'w').write('{{\"stopped_by\": \"unhealthy:0.9\"}}'); "
              "print('unhealthy'); sys.exit(3)")
    with pytest.raises(SystemExit, match=r"(?s)grpo_exp7 failed \(exit 3\).*unhealthy"):
        d.run("grpo_exp7", ["-c", script], done=done)
    assert not demo.finished(done) and d.ledger.get("grpo_exp7")["finished"] is False


# Stands in for a training script: on SIGTERM it "checkpoints" and exits 0 without finishing.
TRAINER = """
import pathlib, signal, sys, time
folder = pathlib.Path(sys.argv[1])
def stop(*_):
    (folder / "checkpoint").write_text("saved")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
(folder / "ready").write_text("x")
time.sleep(120)
"""


def test_sigterm_reaches_the_running_script_and_the_demo_stops_without_starting_more(tmp_path):
    import signal
    import threading
    import time

    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    (tmp_path / "logs").mkdir()
    raised = []

    def stage():
        try:
            d.run("grpo_exp7", ["-c", TRAINER, str(tmp_path)], done=tmp_path / "statistics.json")
        except SystemExit as exc:
            raised.append(str(exc))

    worker = threading.Thread(target=stage)
    worker.start()
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    d.stop(signal.SIGTERM)
    worker.join(60)
    assert raised == ["[demo] grpo_exp7 stopped before finishing (SIGTERM); run the same "
                      "command again to resume it"]
    assert (tmp_path / "checkpoint").read_text() == "saved"
    from study import stage_times
    [record] = stage_times.read(tmp_path / "out" / stage_times.FILE_NAME)
    assert record["stage"] == "grpo_exp7" and record["status"] == "stopped"
    with pytest.raises(SystemExit, match="stopped by SIGTERM before evaluate"):
        d.run("evaluate", ["-c", "open('never', 'w')"])
    assert not (demo.ROOT / "never").exists()


def test_ctrl_c_ends_the_demo_with_a_resume_hint_and_restores_the_signal_handlers(tmp_path,
                                                                                monkeypatch):
    import signal
    before = signal.getsignal(signal.SIGTERM)

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(demo.Demo, "data", interrupted)
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    with pytest.raises(SystemExit, match="interrupted: run the same command again to resume"):
        demo.run_stages(d, None)
    assert d.stop_signal == "SIGINT" and signal.getsignal(signal.SIGTERM) is before


def test_the_demo_writes_results_in_the_compact_layout_results_keeps(tmp_path, monkeypatch):
    """The scripts write record lists inline by default (the study's JSON); the demo's results
    and its screening (the redone replication commits its work folder) ask for --records gzip."""
    seen = []
    monkeypatch.setattr(demo.Demo, "run", lambda self, stage, args, done=None, work=None, processes=1:
                        seen.append([str(a) for a in args]))
    monkeypatch.setattr(demo.Demo, "run_side_by_side", lambda self, jobs, lanes=None:
                        [self.run(*job) for job in jobs])
    monkeypatch.setattr(demo.Demo, "models", lambda self: {"SFT": tmp_path / "sft",
                                                           "GRPO": tmp_path / "grpo"})
    monkeypatch.setattr(demo.Demo, "heldout_from_holdout", lambda self: None)
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=2)
    d.screen()
    d.evaluate()
    scripts = [c[0] for c in seen]
    assert {"evaluation/screen_v4.py", "evaluation/evaluate_single.py",
            "evaluation/evaluate_finetuned_only.py"} == set(scripts)
    assert all(c[c.index("--records") + 1] == "gzip" for c in seen)
