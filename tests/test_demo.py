"""The FAST miniature study end to end: every stage's output exists and the report's numbers are
the ones in the JSON files it was made from."""
import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT

from relrl.evaluation.results_io import read_result

# The whole FAST demo runs in the first test's setup: pytest-timeout's limit (pytest.ini, 900 s)
# must cover it on a loaded machine, as the subprocess timeout below does.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

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


def test_findings_state_the_targets_from_the_json(fast_demo):
    _, out, _ = fast_demo
    report = (out / "report.md").read_text()
    held = json.loads((out / "compare_heldout.json").read_text())
    base = next(r for r in held["rows"] if r["model"] == "base")
    exp7 = next(r for r in held["rows"] if r["model"] == "GRPO exp7 best")
    met = exp7["delta"] >= 0.05 and exp7["p"] < 0.05
    line = next(l for l in report.splitlines() if l.startswith("- **Target 1"))
    assert ("met" if met else "missed") in line.split(":")[0]
    assert f"{100 * base['accuracy']:.1f}% -> {100 * exp7['accuracy']:.1f}%" in line
    assert f"p = {exp7['p']:.3g}" in line
    for claim in ("Target 2", "SFT alone", "Warm start", "Peak before the last step"):
        assert f"- **{claim}" in report


def test_heldout_results_are_the_holdout_results_on_the_mixed_questions(fast_demo, tmp_path):
    """The demo takes the held-out mixed-style results from the holdout run instead of sampling
    them again; a separate run on that subset must give the same completions and the same test."""
    work, out, _ = fast_demo
    direct = tmp_path / "direct.json"
    proc = subprocess.run([sys.executable, str(ROOT / "evaluation" / "evaluate_single.py"),
                           "--model", "tiny", "--dataset", str(work / "screen_holdout" / "mixed.jsonl"),
                           "--adapter", str(work / "sft" / "adapters" / "all"), "--label",
                           "SFT warm start", "--base-label", "base", "--seed", "0",
                           "--max-new-tokens", "160", "--output", str(direct)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    derived = read_result(out / "eval" / "heldout" / "sft_warm_start.json")
    direct = read_result(direct)
    keys = ("id", "response", "correct", "base_score")
    for side in ("base", "finetuned"):
        assert [{k: r[k] for k in keys} for r in derived[side]["results"]] == \
            [{k: r[k] for k in keys} for r in direct[side]["results"]]
    assert derived["fingerprint"] == direct["fingerprint"]
    assert (derived["mcnemar_b01"], derived["mcnemar_b10"], derived["mcnemar_p"]) == \
        (direct["mcnemar_b01"], direct["mcnemar_b10"], direct["mcnemar_p"])
