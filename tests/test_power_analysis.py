"""evaluation/power_analysis.py on a fake demo run: its numbers recomputed by hand."""
import json
import math
import statistics
import sys
from pathlib import Path
from statistics import NormalDist

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluation"))
import power_analysis  # noqa: E402

# one question per group, so the group structure adds nothing: Var(D_g) = V_q (1 - s + s / K)...
# with the share s that does not shrink put at 0: V_q / K
OUTCOMES = [(0, 1), (0, 1), (1, 0), (0, 0), (1, 1), (0, 1), (0, 1), (1, 0), (0, 0), (0, 1)]


def write_run(root):
    folder = root / "eval" / "heldout"
    folder.mkdir(parents=True)
    base = [{"id": f"q{i}", "group": f"g{i}", "correct": bool(b), "base_score": 2 + i % 2,
             "base_samples": 4} for i, (b, _) in enumerate(OUTCOMES)]
    ft = [{**r, "correct": bool(f)} for r, (_, f) in zip(base, OUTCOMES)]
    for name in ("grpo_exp7_best", "sft_warm_start", "grpo_exp10_best"):
        (folder / f"{name}.json").write_text(json.dumps(
            {"kind": "pair_result", "base": {"results": base}, "finetuned": {"results": ft}}))


def test_power_numbers_follow_the_formula(tmp_path):
    write_run(tmp_path)
    out = tmp_path / "power.json"
    assert power_analysis.main(["--results", str(tmp_path), "--between-share", "0",
                                "--json", str(out)]) == 0
    numbers = json.loads(out.read_text())
    v_q = statistics.variance([f - b for b, f in OUTCOMES])
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    for row in numbers["primary"]["rows"]:
        sd = math.sqrt(v_q / row["K"])
        assert row["sd_group_diff"] == pytest.approx(sd)
        assert row["groups_needed_alpha_0.05"] == math.ceil((z * sd / 0.05) ** 2)
        assert row["mde_3_seeds_alpha_0.05"] == pytest.approx(z * sd / math.sqrt(30))
    # retention: every question screened >= 2/4, and 30% more groups screened 4/4 assumed
    ret = numbers["retention"]["models"]["sft_warm_start"]
    assert ret["groups_per_seed"] == round(10 / 0.7)
    assert ret["rows"][0]["mdd_1_seed"] == pytest.approx(z * math.sqrt(v_q) / math.sqrt(14))


def test_missing_results_are_a_usage_error(tmp_path):
    from relrl.cli import UsageError

    with pytest.raises(UsageError, match="--results"):
        power_analysis.main(["--results", str(tmp_path)])
