"""The FAST miniature study end to end: every stage's output exists and the report's numbers are
the ones in the JSON files it was made from."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

# The FAST pipeline has not yet run to the end on a quiet machine (issue 10 is open), so it
# runs only on request until it has: RELRL_DEMO_TEST=1 make test.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    os.environ.get("RELRL_DEMO_TEST") != "1", reason="set RELRL_DEMO_TEST=1 to run the FAST demo")]

SETS = ("train", "heldout", "holdout", "ood")


@pytest.fixture(scope="module")
def fast_demo(tmp_path_factory):
    base = tmp_path_factory.mktemp("demo")
    work, out = base / "work", base / "results"
    proc = subprocess.run([sys.executable, str(ROOT / "demo.py"), "--fast", "--work-dir", str(work),
                           "--results-dir", str(out)], capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return work, out, proc.stdout


def test_every_stage_wrote_its_output(fast_demo):
    work, out, stdout = fast_demo
    for name in ("train", "val", "holdout", "ood"):
        assert (work / "data" / f"{name}.jsonl").stat().st_size > 0
    for name in ("mixed.jsonl", "non_mixed.jsonl", "screening.json"):
        assert (work / "screen" / name).exists()
    assert (work / "sft" / "adapters" / "all" / "adapter_config.json").exists()
    for run in ("exp7", "exp10", "exp7_passrate"):
        stats = json.loads((out / f"grpo_{run}" / "statistics.json").read_text())
        assert stats["useful_steps"] >= 1
        assert (work / run / "best" / "adapter_config.json").exists()
    for name in SETS:
        assert len(list((out / "eval" / name).glob("*.json"))) == 4
        assert (out / "plots" / name / "accuracy.png").stat().st_size > 0
    assert (out / "plots" / "holdout" / "training.png").stat().st_size > 0
    assert "FAST" in (out / "report.md").read_text()
    assert "[demo] report:" in stdout


def test_report_numbers_match_the_json(fast_demo):
    _, out, _ = fast_demo
    report = (out / "report.md").read_text()
    sections = report.split("\n## ")
    for name in SETS:
        table = json.loads((out / f"compare_{name}.json").read_text())
        section = next(s for s in sections if s.startswith(
            (out / f"compare_{name}.md").read_text().split("\n", 1)[0].removeprefix("## ")))
        for row in table["rows"]:
            line = next(l for l in section.splitlines() if l.startswith(f"| {row['model']} |"))
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert cells[1] == f"{row['correct']}/{row['n']}"
            assert cells[2].startswith(f"{100 * row['accuracy']:.1f}%")
    for run in ("exp7", "exp10", "exp7_passrate"):
        stats = json.loads((out / f"grpo_{run}" / "statistics.json").read_text())
        rate = f"{100 * stats['waste_rate']:.1f}%"
        assert re.search(rf"\| {stats['useful_steps']} \| {stats['total_attempts']} \| "
                         rf"{stats['wasted_steps']} \| {re.escape(rate)} \|", report), run
