"""The redone replication's pooled report (study.replication's REDONE design): its additions
recomputed by hand from small fake seed folders whose every difference is chosen, so each
number and verdict below follows from plain arithmetic and a count of sign patterns."""
import json
from dataclasses import replace

import pytest

import demo
from relrl.evaluation import guess_baselines as gb
from study import pipeline_config
from study.replication import pool, sections
from study.replication.claims import verdict
from study.replication.design import PLAIN, REDONE
from study.replication.seed_files import slug

SEEDS = [100, 101]
# one question a group: (target, topic); two groups of each topic, two targets in [0.85, 1)
QUESTIONS = [("0.95", "distributions"), ("0.9", "basic"), ("0.5", "distributions"),
             ("0.3", "basic")]
# right answers of 4 per model, on each set: base 1 on heldout and 4 on retention
PASSES = {
    "heldout": {"base": 1, "SFT warm start": 1, "GRPO exp7 best": 3, "GRPO exp7 final": 2,
                "GRPO exp10 best": 1, PLAIN: 3},
    "retention": {"base": 4, "SFT warm start": {"distributions": 4, "basic": 0},
                  "GRPO exp7 best": 4, "GRPO exp7 final": 4, "GRPO exp10 best": 4, PLAIN: 4},
    "ood": {"base": 0, "SFT warm start": 0, "GRPO exp7 best": 1, "GRPO exp7 final": 0,
            "GRPO exp10 best": 0, PLAIN: 0},
}
STATS = {"exp7": (30, 100), "exp7_passrate": (20, 90), "exp10": (25, 95), "exp7_plain": (40, 100)}


def passes(set_name, model, topic):
    value = PASSES[set_name][model]
    return value[topic] if isinstance(value, dict) else value


def records(seed, set_name, model):
    return [{"id": f"s{seed}-g{i}", "group": f"s{seed}-g{i}", "target": target, "topic": topic,
             "question": "Which value?", "target_kind": "value", "samples": 4,
             "pass_count": passes(set_name, model, topic)}
            for i, (target, topic) in enumerate(QUESTIONS)]


SETTINGS = replace(demo.recipe("fast"), sft_topics="distributions", plain_grpo=True)


def write_seed(folder, seed):
    """A seed folder as demo.py writes it, with the redone design's arms."""
    block = gb.score_fitted([], gb.Fitted(0.95, 0.6))
    pipeline_config.write(folder / "pipeline.yaml", SETTINGS)
    for set_name in PASSES:
        (folder / "eval" / set_name).mkdir(parents=True)
        for model in REDONE.models[1:]:
            (folder / "eval" / set_name / f"{slug(model)}.json").write_text(json.dumps(
                {"kind": "pair_result", "base": {"results": records(seed, set_name, "base")},
                 "finetuned": {"results": records(seed, set_name, model)},
                 "guess_baselines": block}))
    for run, (wasted, total) in STATS.items():
        (folder / f"grpo_{run}").mkdir()
        (folder / f"grpo_{run}" / "statistics.json").write_text(json.dumps(
            {"wasted_steps": wasted, "total_attempts": total, "best_step": 25}))


@pytest.fixture
def root(tmp_path):
    for seed in SEEDS:
        write_seed(tmp_path / f"seed-{seed}", seed)
    return tmp_path


def test_the_redone_designs_numbers_and_verdicts(root):
    pooled = pool.pooled_results(REDONE, root, SEEDS)
    report = sections.build_report(REDONE, pooled)
    # primary: every group +2/4; 8 groups all positive -> 2 of 2^8 sign patterns as extreme
    p = pooled["primary"]
    assert p["pooled"]["delta"] == pytest.approx(0.5) and p["pooled"]["p"] == pytest.approx(2 / 256)
    assert p["goal_met"] and p["verdict"] == "reproduced"
    # the constant 0.95 is right (study rule, 5%) on the 0.95 target only: 1 group of 4
    assert pooled["guess_baselines"]["heldout"]["accuracy"]["constant"] == pytest.approx(0.25)
    assert p["guess_margin"] == pytest.approx(0.75 - 0.25) and p["v2_goal_met"]
    assert "above the best guess baseline on the held-out mixed-style questions (its margin: " \
           "+50.0 points): **met**" in report
    exp7 = pooled["by_target_range"]["GRPO exp7 best"]
    high, rest = exp7["high_range"], exp7["rest_range"]
    assert high["groups"] == rest["groups"] == 4 and high["p"] == pytest.approx(2 / 16)
    assert "| GRPO exp7 best | in [0.85, 1) | 4 | 25.0% | 75.0% | +50.0 |" in report
    final = pooled["by_target_range"]["GRPO exp7 final"]["rest_range"]
    assert final["delta"] == pytest.approx(0.25) and set(pooled["by_target_range"]) == set(REDONE.models[1:])
    # SFT forgets on the topics it did not train on, all of it, and nowhere else
    other, own = pooled["forgetting"]["other_topics"], pooled["forgetting"]["sft_topics"]
    assert other["SFT warm start"]["delta"] == pytest.approx(-1.0)
    assert own["SFT warm start"]["delta"] == 0 and other["GRPO exp7 best"]["delta"] == 0
    assert "| other topics | SFT warm start | 4 | 100.0% | 0.0% | -100.0 |" in report
    # plain GRPO trained on its 80 groups without signal of 200; exp7 on none of its 60
    assert pooled["plain_zero_signal"] == {
        "exp7_plain": {"generated": 200, "without_signal": 80, "trained_without_signal": 80},
        "exp7": {"generated": 200, "without_signal": 60, "trained_without_signal": 0}}
    assert "trained on 80 groups without signal of 200 (40.0%)" in report
    claims = {c["claim"]: c for c in pooled["claims"]}
    forget = claims["SFT alone makes the model forget what it knew"]
    # 4 groups at -1: p = 2/16 raw; Holm over 4 claims: the smallest raw p (2/256, warm
    # start) x4, then 2/16 x3 -> 0.375: not significant, and the interval reaches -100 points
    assert forget["pooled"]["p"] == pytest.approx(2 / 16)
    assert forget["pooled"]["p_holm"] == pytest.approx(3 * 2 / 16)
    assert forget["verdict"] == "not settled"
    keep = claims["GRPO after SFT keeps what the model knew"]
    assert keep["pooled"]["ci_low"] == 0 and keep["verdict"] == "reproduced"
    warm = claims["The SFT warm start makes GRPO gain more"]
    assert warm["pooled"]["p_holm"] == pytest.approx(4 * 2 / 256) and warm["verdict"] == "reproduced"
    plain = claims["Dynamic sampling makes GRPO gain more for the same sampling"]
    assert plain["pooled"]["delta"] == 0 and plain["verdict"] == "refuted"  # rules out +5 points
    assert "| Dynamic sampling makes GRPO gain more for the same sampling | heldout (all) | " \
           f"GRPO exp7 best vs {PLAIN} | +0.0 | [+0.0, +0.0] | 1 | refuted |" in report
    assert report.startswith("# Miniature study, redone (seeds 100, 101)")
    assert any(r["model"] == PLAIN for r in pooled["secondary"])
    assert set(pooled["best_steps"]) == set(REDONE.grpo_runs)


@pytest.mark.parametrize("c, direction, expected", [
    ({"p_holm": 0.01, "delta": 0.08, "ci_low": 0.02, "ci_high": 0.14}, +1, "reproduced"),
    ({"p_holm": 0.01, "delta": -0.08, "ci_low": -0.14, "ci_high": -0.02}, +1, "refuted"),
    ({"p_holm": 0.30, "delta": 0.01, "ci_low": -0.02, "ci_high": 0.04}, +1, "refuted"),
    ({"p_holm": 0.30, "delta": 0.02, "ci_low": -0.02, "ci_high": 0.06}, +1, "not settled"),
    ({"p_holm": 0.30, "delta": -0.02, "ci_low": -0.06, "ci_high": 0.02}, -1, "not settled"),
    ({"p_holm": 0.30, "delta": -0.01, "ci_low": -0.04, "ci_high": 0.02}, -1, "refuted"),
    ({"p_holm": 0.01, "delta": -0.03, "ci_low": -0.045, "ci_high": -0.01}, 0, "refuted"),
    ({"p_holm": 0.30, "delta": -0.01, "ci_low": -0.04, "ci_high": 0.02}, 0, "reproduced"),
    ({"p_holm": 0.30, "delta": -0.02, "ci_low": -0.07, "ci_high": 0.03}, 0, "not settled"),
])
def test_the_verdict_rule(c, direction, expected):
    assert verdict(c, direction, 0.05, 0.05) == expected


def test_seeds_that_disagree_on_the_sft_topics_are_refused(root):
    pipeline_config.write(root / "seed-101" / "pipeline.yaml",
                          replace(demo.recipe("fast"), sft_topics="basic"))
    with pytest.raises(ValueError, match="different sft_topics"):
        pool.pooled_results(REDONE, root, SEEDS)


def test_without_sft_topics_the_forgetting_claim_is_not_testable(root):
    for seed in SEEDS:
        pipeline_config.write(root / f"seed-{seed}" / "pipeline.yaml", demo.recipe("fast"))
    pooled = pool.pooled_results(REDONE, root, SEEDS)
    assert pooled["forgetting"] == {}
    forget = pooled["claims"][0]
    assert forget["verdict"] == "not testable here" and "sft_topics not set" in forget["why"]
    assert "Retention by topic" not in sections.build_report(REDONE, pooled)


def test_demo_seeds_with_plain_grpo_pool_into_the_redone_report(tmp_path, monkeypatch):
    def stage(name):
        def run(self):
            if name == "report":
                write_seed(self.out, self.seed)
        return run

    for name in demo.STAGES:
        monkeypatch.setattr(demo.Demo, name, stage(name))
    recipe = tmp_path / "v2.yaml"
    pipeline_config.write(recipe, SETTINGS)
    out = tmp_path / "results"
    assert demo.main(["--seeds", "100,101", "--recipe", str(recipe), "--results-dir", str(out),
                      "--work-dir", str(tmp_path / "runs")]) == 0
    pooled = json.loads((out / "pooled.json").read_text())
    assert [c["verdict"] for c in pooled["claims"]] == [
        "not settled", "reproduced", "reproduced", "refuted"]
    assert (out / "report.md").read_text().startswith("# Miniature study, redone (seeds 100, 101)")
