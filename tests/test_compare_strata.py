"""compare_results.py's strata table: accuracy by target range and the median per-family rank
correlation, recomputed here from hand-made result files."""
import json

import pytest
from eval_helpers import run_script


def result(label, answers):
    """A one-sample model result on ten questions of family "f": targets 0.1 ... 0.5 and five
    in [0.85, 1); `answers` the model's values, right when within 1e-9."""
    targets = [0.1, 0.2, 0.3, 0.4, 0.5, 0.9, 0.91, 0.92, 0.93, 0.94]
    records = [{"id": f"q{i}", "target": str(t), "family": "f", "value": a,
                "correct": a is not None and abs(a - t) < 1e-9, "truncated": False,
                "pass_count": int(a is not None and abs(a - t) < 1e-9), "samples": 1}
               for i, (t, a) in enumerate(zip(targets, answers))]
    return {"kind": "model_result", "model": label, "fingerprint": "fp", "samples": 1,
            "n": len(records), "correct": sum(r["pass_count"] for r in records),
            "results": records}


def test_strata_section_and_json(tmp_path, capsys):
    reader = result("reader", [0.1, 0.2, 0.3, 0.4, 0.5, 0.9, 0.91, 0.92, 0.93, 0.94])
    guesser = result("guesser", [0.95] * 9 + [None])
    for r in (reader, guesser):
        (tmp_path / f"{r['model']}.json").write_text(json.dumps(r))
    code, out, _ = run_script("compare_results", [
        tmp_path / "reader.json", tmp_path / "guesser.json", "--base", "reader",
        "--output-json", tmp_path / "table.json"], capsys)
    assert code == 0
    lines = out.splitlines()
    head = lines.index("### Accuracy by target range, and whether answers follow the targets")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[head + 4:head + 6]]
    assert rows[0] == ["reader", "100.0% (5/5)", "100.0% (5/5)", "0.00", "+1.000 (1)"]
    # the guesser: never right, every answer to the other targets in [0.85, 1), and its
    # constant answers rank nothing (no correlation in its one family)
    assert rows[1] == ["guesser", "0.0% (0/5)", "0.0% (0/5)", "1.00", "- (0)"]
    saved = json.loads((tmp_path / "table.json").read_text())["strata"]
    assert saved["guesser"]["by_family"]["f"]["answered"] == 9
    assert saved["reader"]["median_rank_correlation"] == pytest.approx(1.0)
