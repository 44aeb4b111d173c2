"""evaluation/power_analysis.py on a fake demo run: its numbers recomputed by hand."""
import json
import math
import statistics
from pathlib import Path
from statistics import NormalDist

import pytest

from evaluation import power_analysis

FAST_RECIPE = Path(__file__).parents[1] / "recipes" / "demo" / "fast.yaml"

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


def test_k_sample_records_measure_the_noise_split(tmp_path):
    # two samples a question, one question a group: each question's paired differences are
    # (f_k - b_k) for k = 0, 1; w is their mean within-question variance, and the rest of the
    # question means' variance is the part more samples do not shrink
    samples = [((0, 1), (1, 1)), ((0, 0), (1, 0)), ((1, 1), (1, 1)), ((0, 1), (0, 1)),
               ((1, 0), (0, 0)), ((0, 0), (1, 1))]  # (base samples, ft samples)
    for folder in ("heldout", "retention"):
        (tmp_path / "eval" / folder).mkdir(parents=True)
        base = [{"id": f"q{i}", "group": f"g{i}", "base_score": 2,
                 "completions": [{"correct": bool(y)} for y in b]} for i, (b, _) in enumerate(samples)]
        ft = [{**r, "completions": [{"correct": bool(y)} for y in f]}
              for r, (_, f) in zip(base, samples)]
        for name in ("grpo_exp7_best", "sft_warm_start", "grpo_exp10_best"):
            (tmp_path / "eval" / folder / f"{name}.json").write_text(json.dumps(
                {"kind": "pair_result", "base": {"results": base}, "finetuned": {"results": ft}}))
    out = tmp_path / "power.json"
    assert power_analysis.main(["--results", str(tmp_path), "--json", str(out)]) == 0
    numbers = json.loads(out.read_text())
    d = [[fk - bk for bk, fk in zip(b, f)] for b, f in samples]
    w = statistics.mean(statistics.variance(x) for x in d)
    between = statistics.variance([statistics.mean(x) for x in d]) - w / 2
    primary = numbers["primary"]
    assert primary["split"] == "measured from K samples"
    assert primary["variance_model"]["w"] == pytest.approx(w)
    assert primary["between_share"] == pytest.approx(between / (between + w))
    assert primary["rows"][2]["sd_group_diff"] == pytest.approx(math.sqrt(between + w / 4))  # K=4
    # the retention set is used as it is: its 6 groups, no 4/4 share added
    assert numbers["retention"]["source"] == "retention set"
    assert numbers["retention"]["models"]["sft_warm_start"]["groups_per_seed"] == 6


def test_missing_results_are_a_usage_error(tmp_path):
    from relrl.runtime.cli import UsageError

    with pytest.raises(UsageError, match="--results"):
        power_analysis.main(["--results", str(tmp_path)])


def test_master_rows_scale_by_the_runs_own_master_set(tmp_path):
    # 10 groups a seed from this run; its pipeline.yaml says 500 master rows, so 1,500 rows give
    # 30 groups (not 10 * 1500 / 1560, the scaling of runs without a pipeline.yaml)
    write_run(tmp_path)
    recipe = FAST_RECIPE.read_text()
    (tmp_path / "pipeline.yaml").write_text(
        "\n".join("n_master: 500" if line.startswith("n_master:") else line
                  for line in recipe.splitlines()) + "\n")
    out = tmp_path / "power.json"
    assert power_analysis.main(["--results", str(tmp_path), "--master-rows", "1500",
                                "--json", str(out)]) == 0
    assert json.loads(out.read_text())["primary"]["groups_per_seed"] == 30
    (tmp_path / "pipeline.yaml").unlink()
    assert power_analysis.main(["--results", str(tmp_path), "--master-rows", "1560",
                                "--json", str(out)]) == 0
    assert json.loads(out.read_text())["primary"]["groups_per_seed"] == 10
