"""The pooled report of `demo.py --seeds` in the first replication's design (study.replication,
FIRST): every number recomputed here from small fake per-seed result files, by brute-force
enumeration and plain arithmetic (not relrl.evaluation.clustered_stats)."""
import itertools
import json
import statistics
from statistics import NormalDist

import numpy as np
import pytest

from study.replication import pool, runs, sections
from study.replication.design import FIRST
from study.replication.seed_files import slug

SEEDS = [2, 3]
MODELS = ("SFT warm start", "GRPO exp7 best", "GRPO exp7 final", "GRPO exp10 best")
SETS = ("heldout", "retention", "ood")
WASTE = {2: {"exp7": (30, 100), "exp7_passrate": (20, 90)},
         3: {"exp7": (25, 110), "exp7_passrate": (30, 105)}}


def fake_records(rng, n_groups, shift=0):
    rows = []
    for g in range(n_groups):
        for q in range(int(rng.integers(1, 4))):
            rows.append({"id": f"g{g}-p{q}", "group": f"g{g}", "samples": 4,
                         "pass_count": int(np.clip(rng.integers(0, 5) + shift, 0, 4))})
    return rows


def write_fake_seed(folder, seed):
    """A seed folder as demo.py writes it: pair files per set and model, GRPO statistics."""
    rng = np.random.default_rng(seed)
    for set_name in SETS:
        base = fake_records(np.random.default_rng([seed, len(set_name)]), 5)
        (folder / "eval" / set_name).mkdir(parents=True)
        for k, model in enumerate(MODELS):
            ft = [{**r, "pass_count": int(np.clip(r["pass_count"] + rng.integers(-1, 3 - k % 2), 0, 4))}
                  for r in base]
            (folder / "eval" / set_name / f"{slug(model)}.json").write_text(json.dumps(
                {"kind": "pair_result", "base": {"results": base}, "finetuned": {"results": ft}}))
    for run in ("exp7", "exp7_passrate", "exp10"):
        wasted, total = WASTE.get(seed, {}).get(run, (10, 50))
        (folder / f"grpo_{run}").mkdir()
        (folder / f"grpo_{run}" / "statistics.json").write_text(json.dumps(
            {"wasted_steps": wasted, "total_attempts": total, "best_step": 50 * seed}))


@pytest.fixture
def root(tmp_path):
    for seed in SEEDS:
        write_fake_seed(tmp_path / f"seed-{seed}", seed)
    return tmp_path


def load(root, seed, set_name, model):
    data = json.loads((root / f"seed-{seed}" / "eval" / set_name /
                       f"{slug(model if model != 'base' else 'SFT warm start')}.json").read_text())
    return data["base" if model == "base" else "finetuned"]["results"]


def group_scores(rows):
    by = {}
    for r in rows:
        by.setdefault(r["group"], []).append(r["pass_count"] / r["samples"])
    return [sum(v) / len(v) for v in by.values()]


def diffs(root, seeds, set_name, model, against):
    out = []
    for seed in seeds:
        a = group_scores(load(root, seed, set_name, against))
        b = group_scores(load(root, seed, set_name, model))
        out += [y - x for x, y in zip(a, b)]
    return out


def brute_p(d):
    observed = abs(sum(d))
    signs = np.array(list(itertools.product((1, -1), repeat=len(d))))
    return float(np.mean(np.abs(signs @ np.array(d)) >= observed - 1e-9))


def holm_by_hand(p):
    order = sorted(range(len(p)), key=p.__getitem__)
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def test_every_pooled_number_is_recomputed_from_the_json(root):
    pooled = pool.pooled_results(FIRST, root, SEEDS)
    report = sections.build_report(FIRST, pooled)
    pr = pooled["primary"]
    for seed in SEEDS:
        d = diffs(root, [seed], "heldout", "GRPO exp7 best", "base")
        s = pr["per_seed"][str(seed)]
        assert s["delta"] == pytest.approx(sum(d) / len(d)) and s["groups"] == len(d)
        assert s["p"] == pytest.approx(brute_p(d))
        assert f"| {seed} | {len(d)} |" in report and f"{100 * sum(d) / len(d):+.1f}" in report
    d = diffs(root, SEEDS, "heldout", "GRPO exp7 best", "base")
    assert pr["pooled"]["delta"] == pytest.approx(np.mean(d))
    assert pr["pooled"]["p"] == pytest.approx(brute_p(d))
    base = group_scores(load(root, 2, "heldout", "base")) + group_scores(load(root, 3, "heldout", "base"))
    assert pr["pooled"]["base_accuracy"] == pytest.approx(np.mean(base))
    assert f"({100 * np.mean(d):+.1f} points" in report and f"p = {brute_p(d):.3g}" in report
    assert pr["pooled"]["ci_low"] <= np.mean(d) <= pr["pooled"]["ci_high"]
    met = np.mean(d) >= 0.05 and brute_p(d) < 0.01 and all(
        np.mean(diffs(root, [s], "heldout", "GRPO exp7 best", "base")) > 0 for s in SEEDS)
    assert pr["goal_met"] == met and ("**met**" if met else "**not met**") in report

    raw = [brute_p(diffs(root, SEEDS, *spec)) for spec in FIRST.secondary]
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    for row, p, adjusted, spec in zip(pooled["secondary"], raw, holm_by_hand(raw), FIRST.secondary):
        d = diffs(root, SEEDS, *spec)
        assert row["pooled"]["p"] == pytest.approx(p)
        assert row["pooled"]["p_holm"] == pytest.approx(adjusted)
        assert row["pooled"]["mdd"] == pytest.approx(z * statistics.stdev(d) / len(d) ** 0.5)
        assert (f"| {spec[0]} | {spec[1]} | {spec[2]} | {100 * np.mean(d):+.1f} |") in report
    for model in ("base", *FIRST.retention_models):
        acc = np.mean(group_scores(load(root, 2, "retention", model)) +
                      group_scores(load(root, 3, "retention", model)))
        assert pooled["retention_accuracy"][model]["accuracy"] == pytest.approx(acc)
        assert f"{100 * acc:.1f}%" in report


def test_waste_and_best_steps_come_from_the_statistics_files(root):
    pooled = pool.pooled_results(FIRST, root, SEEDS)
    w = pooled["waste"]
    assert w["runs"]["exp7"]["waste_rate"] == pytest.approx(55 / 210)
    assert w["runs"]["exp7_passrate"]["waste_rate"] == pytest.approx(50 / 195)
    assert w["ratio"] == pytest.approx((50 / 195) / (55 / 210))
    assert w["plain_loop_zero_gradient_share"] == pytest.approx(55 / 210)
    report = sections.build_report(FIRST, pooled)
    assert "30.0% (30/100)" in report and "26.2% (55/210)" in report
    assert f"{(50 / 195) / (55 / 210):.2f} (target <= 0.7)" in report
    assert pooled["best_steps"]["exp10"] == {"2": {"step": 100, "stability": None},
                                             "3": {"step": 150, "stability": None}}
    assert "| exp10 | 100 | 150 |" in report


def history(*steps):
    return [{"step": s, "group_passes": passes} for s, passes in steps]


def test_best_step_stability_resamples_validation_groups():
    # step 50 wins group a by 2, step 100 wins group b by 1: resampling the two groups, 50 is
    # chosen unless both draws are b, so in 3 of 4 resamples
    h = history((50, {"a": [1, 1], "b": [0]}), (100, {"a": [0, 0], "b": [1]}))
    assert runs.best_step_stability(h, 50) == pytest.approx(0.75, abs=0.04)
    assert runs.best_step_stability(h, 100) == pytest.approx(0.25, abs=0.04)
    # a step that wins or ties every group is always chosen; of equals, the earliest
    h = history((50, {"a": [1], "b": [0]}), (100, {"a": [2], "b": [1]}), (150, {"a": [2], "b": [1]}))
    assert runs.best_step_stability(h, 100) == 1.0 and runs.best_step_stability(h, 150) == 0.0
    assert runs.best_step_stability([{"step": 50, "accuracy": 0.5}], 50) is None  # older runs


def test_best_step_stability_reaches_the_report(root):
    stats_file = root / "seed-2" / "grpo_exp7" / "statistics.json"
    stats = json.loads(stats_file.read_text())
    stats["val_history"] = history((50, {"a": [1], "b": [0]}), (100, {"a": [2], "b": [1]}))
    stats_file.write_text(json.dumps({**stats, "best_step": 100}))
    pooled = pool.pooled_results(FIRST, root, SEEDS)
    assert pooled["best_steps"]["exp7"]["2"] == {"step": 100, "stability": 1.0}
    assert "| exp7 | 100 (100.0%) | 150 |" in sections.build_report(FIRST, pooled)


def test_run_time_per_seed_comes_from_the_recorded_stage_attempts(root):
    from study import stage_times
    for seed, rows in ((2, [("screen", 0, 600, "interrupted", "aaa"), ("screen", 900, 1500, 0, "bbb"),
                            ("train", 1500, 3300, 0, "bbb"), ("evaluate", 3000, 3600, 0, "bbb")]),
                       (3, [])):
        for stage, start, end, status, code in rows:
            stage_times.record(root / f"seed-{seed}" / stage_times.FILE_NAME, stage, start, end,
                               status, code)
    pooled = pool.pooled_results(FIRST, root, SEEDS)
    assert pooled["run_time"] == {
        "2": {"minutes": (600 + 600 + 2100) / 60, "unfinished_attempts": 1, "codes": ["aaa", "bbb"]},
        "3": {"minutes": 0, "unfinished_attempts": 0, "codes": []}}
    report = sections.build_report(FIRST, pooled)
    # a seed with no attempts on record (run before stage times were kept): not 0 minutes
    assert "| 2 | 55 | 1 | aaa, bbb |" in report and "| 3 | not recorded | 0 | - |" in report
