"""demo.py's own logic without running the models: a rerun skips finished stages, --stop-after
stops and a rerun carries on, a failing stage stops the demo with its log, and the full
demo's report is spliced into RESULTS.md between the markers, leaving the rest alone."""
import sys

import pytest

import demo
from relrl.demo_report import splice_results_md

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
    monkeypatch.setattr(demo, "ROOT", tmp_path)
    monkeypatch.setattr(demo, "build_report", lambda out, **kw: REPORT)
    (tmp_path / "RESULTS.md").write_text(RESULTS)
    out = tmp_path / "results"
    out.mkdir()
    demo.Demo(fast=fast, seed=0, work=tmp_path / "work", out=out, lanes=1).write_report()
    assert (out / "report.md").read_text() == REPORT
    spliced = "### Miniature study (seed 0)" in (tmp_path / "RESULTS.md").read_text()
    assert spliced is (not fast)
