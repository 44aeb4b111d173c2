"""The third design's pooled report (study.replication's THIRD, issue 46) on small fake seed
folders whose every change is chosen: forgetting as a difference between never-trained and
trained families, transfer, the goals, and the choice of the design from the seeds' settings."""
import json
from dataclasses import replace
from itertools import product

import pytest

import demo
from relrl.evaluation import guess_baselines as gb
from study import pipeline_config
from study.replication import design as designs
from study.replication import pool, sections
from study.replication.design import EXP10, PLAIN, THIRD
from study.replication.seed_files import slug

SEEDS = [100, 101]
SFT_FAMILY, GRPO_FAMILY, NEVER_FAMILY = "series_parallel", "weibull_mttf", "duane_mtbf"
TOPIC = {SFT_FAMILY: "system_reliability", GRPO_FAMILY: "distributions", NEVER_FAMILY: "growth"}
MODELS = THIRD.models[1:]
GRADING = {"tolerance": 0.05, "tolerance_rule": "complement"}
TARGET = {SFT_FAMILY: "0.95", GRPO_FAMILY: "12.5", NEVER_FAMILY: "40.0"}  # one in [0.85, 1)


def passes(set_name, model, family):
    """Right answers of 4. Retention: SFT loses the never-trained family only, everything else
    keeps all; ood and reworded: GRPO arms 3 against the base's 1; heldout: exp7 3, others 1."""
    if set_name == "retention":
        return 0 if (model == "SFT warm start" and family == NEVER_FAMILY) else 4
    if set_name in ("ood", "reworded"):
        return 3 if model.startswith("GRPO") and model != "base" else 1
    return 3 if model in ("GRPO exp7 best", "GRPO exp7 final", PLAIN) else 1


FAMILIES = {"retention": (SFT_FAMILY, GRPO_FAMILY, NEVER_FAMILY), "heldout": (SFT_FAMILY, GRPO_FAMILY),
            "ood": (NEVER_FAMILY,), "reworded": (GRPO_FAMILY, NEVER_FAMILY)}


def records(seed, set_name, model):
    # eight groups of each family, one question a group
    return [{"id": f"s{seed}-{set_name}-{family}-{i}", "group": f"s{seed}-{family}-{i}",
             "target": TARGET[family], "family": family, "topic": TOPIC[family],
             "question": "Which?", "target_kind": "value", "samples": 4,
             "pass_count": passes(set_name, model, family),
             "completions": completions(TARGET[family], passes(set_name, model, family))}
            for family, i in product(FAMILIES[set_name], range(8))]


def completions(target, right):
    """Four samples without a calculator call, `right` of them giving the target."""
    return [{"correct": i < right, "value": float(target) if i < right else 0.0,
             "transcript": "no call"} for i in range(4)]


SETTINGS = replace(demo.recipe("fast"), model="tiny-tool", tools="calculator",
                   families="tiny-tool", ood_topics=None, ood_families=NEVER_FAMILY,
                   sft_topics="system_reliability", plain_grpo=True, retention_min_score=2,
                   retention_disjoint=True)


def write_seed(folder, seed):
    block = gb.score_fitted([], gb.Fitted(0.95, 0.6))
    pipeline_config.write(folder / "pipeline.yaml", SETTINGS)
    for set_name in FAMILIES:
        (folder / "eval" / set_name).mkdir(parents=True)
        for model in MODELS:
            (folder / "eval" / set_name / f"{slug(model)}.json").write_text(json.dumps(
                {"kind": "pair_result", "base": {"results": records(seed, set_name, "base"), **GRADING},
                 "finetuned": {"results": records(seed, set_name, model), **GRADING},
                 "guess_baselines": block}))
    for run in THIRD.grpo_runs:
        (folder / f"grpo_{run}").mkdir()
        (folder / f"grpo_{run}" / "statistics.json").write_text(json.dumps(
            {"wasted_steps": 10, "total_attempts": 50, "best_step": 25}))


@pytest.fixture
def pooled(tmp_path):
    for seed in SEEDS:
        write_seed(tmp_path / f"seed-{seed}", seed)
    assert designs.for_seeds(tmp_path, SEEDS) is THIRD
    return pool.pooled_results(THIRD, tmp_path, SEEDS)


def test_forgetting_is_the_never_trained_change_minus_the_trained(pooled):
    claims = {c["claim"]: c for c in pooled["claims"]}
    sft = claims["SFT alone makes the model forget what it knew"]["pooled"]
    # SFT did not train on the GRPO family (change 0) nor the never-trained one (-1): -50
    # points there, 0 on its own: a difference of -50 points. Permutation p: as extreme only
    # when relabelling puts no -1 group among the "trained" 8 of a seed's 24, at both seeds
    # (C(16,8) / C(24,8))^2 = 3.1e-4, or 6 or more of the 16 -1 groups there (rarer still)
    assert (sft["never_change"], sft["trained_change"], sft["delta"]) == (-0.5, 0.0, -0.5)
    assert (sft["never_groups"], sft["trained_groups"]) == (32, 16)
    assert sft["p"] < 0.002 and sft["confidence"] == 0.99
    assert claims["SFT alone makes the model forget what it knew"]["verdict"] == "reproduced"
    grpo = claims["GRPO keeps what the model knew"]
    # exp10 trained on the SFT and GRPO families (16 groups), changed nothing anywhere
    assert grpo["pooled"]["trained_groups"] == 32 and grpo["pooled"]["delta"] == 0
    assert grpo["verdict"] == "reproduced"
    assert pooled["forgetting"]["never_trained"]["SFT warm start"]["delta"] == -1.0
    assert pooled["forgetting"]["sft_trained"]["SFT warm start"]["delta"] == 0


def test_transfer_and_the_goals(pooled):
    ood = pooled["transfer"]["ood"][EXP10]
    assert ood["delta"] == pytest.approx(0.5) and ood["half_width"] == 0
    assert set(pooled["transfer"]) == {"ood", "reworded (grpo trained)", "reworded (never trained)"}
    assert pooled["transfer"]["reworded (never trained)"][EXP10]["groups"] == 16
    goals = pooled["third_goals"]
    assert goals["transfer"]["met"]
    # SFT's difference is decided, but its untrained groups differ (0 and -1, sd 0.51 over 32):
    # se = sqrt((8 / 31) / 32) = 0.0898, so a test at 0.01 detects (2.576 + 0.842) se = 30.7
    # points with 80% power: not the 5 asked. GRPO's groups all changed by 0.
    forgetting = goals["forgetting"]
    sft = forgetting["SFT alone makes the model forget what it knew"]
    assert sft["mdd"] == pytest.approx(0.3069, abs=1e-4) and not sft["met"]
    assert forgetting["GRPO keeps what the model knew"]["met"]
    # the constant guess (0.95) hits the held-out 0.95 targets, half the groups, where exp10
    # stands at 25%: its margin there, -25 points, is the lowest, and the goal is not met
    assert pooled["guess_baselines"]["heldout"]["accuracy"]["constant"] == pytest.approx(0.5)
    assert goals["guess_margin"]["lowest_grpo_margin"] == pytest.approx(-0.25)
    assert not goals["guess_margin"]["met"]
    claims = {c["claim"]: c for c in pooled["claims"]}
    assert claims["GRPO gains on families it never trained on"]["verdict"] == "reproduced"
    # on the held-out set the base (25%) is below the constant guess (50%): no claim against
    # the base is testable there, the positive control included; on the reworded set the
    # base stands 25 points above the guesses (which never hit 12.5 or 40): testable
    control = claims["The SFT warm start improves its own topics (the positive control)"]
    assert control["verdict"] == "not testable here" and "pooled" not in control
    assert control["why"] == ("the base stands -25.0 points from the best guess on heldout, "
                              "under the 10 a claim needs")
    assert claims["GRPO's gain holds in wordings the model never saw"]["verdict"] == "reproduced"
    # exp7 against exp10 is not against the base: tested whatever the base's margin
    assert claims["The SFT warm start makes GRPO gain more"]["verdict"] == "reproduced"


def test_the_report_states_the_goals_and_the_difference_claims(pooled):
    report = sections.build_report(THIRD, pooled)
    assert report.startswith("# Miniature study, third design (seeds 100, 101)")
    assert "## The third design's goals" in report
    assert "| SFT alone makes the model forget what it knew | retention (sft untrained minus " \
           "sft trained) | SFT warm start vs base | -50.0 |" in report
    assert "(alone, at 0.01; 99% CI) | reproduced |" in report
    assert f"| ood | {EXP10} | 16 | 25.0% | 75.0% | +50.0 | [+50.0, +50.0] | 0.0 |" in report
    # the mechanism tables: mean@k and majority over the 4 samples, no calculator call here
    assert "## Mechanism on heldout questions (pooled over seeds; k = 4)" in report
    heldout = pooled["mechanism"]["heldout"]["models"]
    assert heldout["GRPO exp7 best"]["all"]["mean@k"] == pytest.approx(0.75)
    assert heldout["GRPO exp7 best"]["all"]["majority"] == 1.0  # 3 right of 4 agree
    assert heldout["base"]["all"]["majority"] == 0.0  # 3 wrong (0.0) of 4 agree
