"""Group-level paired tests, cluster bootstrap and power: values worked out by hand or by
brute-force enumeration."""
import itertools
from fractions import Fraction as F

import numpy as np
import pytest

from relrl.evaluation.clustered_stats import (
    VarianceModel,
    cluster_bootstrap_ci,
    compare_groups,
    estimate_variance_model,
    estimate_variance_model_k,
    group_differences,
    groups_needed,
    min_detectable,
    power,
    sign_flip_test,
)


def rec(qid, group, c, k=4):
    return {"id": qid, "group": group, "pass_count": c, "samples": k}


def test_group_scores_are_means_of_question_accuracies():
    base = [rec("a0", "a", 1), rec("a1", "a", 2), rec("b0", "b", 0), rec("c0", None, 4)]
    ft = [rec("a0", "a", 3), rec("a1", "a", 3), rec("b0", "b", 1), rec("c0", None, 2)]
    diffs = group_differences(base, ft, stratum="seed-2")
    assert [d.group for d in diffs] == ["a", "b", "c0"]  # no group: the question is its own
    assert [d.base for d in diffs] == [F(3, 8), F(0), F(1)]
    assert [d.diff for d in diffs] == [F(3, 8), F(1, 4), F(-1, 2)]
    assert [d.questions for d in diffs] == [2, 1, 1] and diffs[0].stratum == "seed-2"


def test_group_differences_refuse_unpaired_records():
    with pytest.raises(ValueError, match="different questions"):
        group_differences([rec("a", "a", 1)], [rec("b", "b", 1)])


def test_sign_flip_small_cases_by_hand():
    # +-1 +-2 +-3: only all-plus and all-minus reach |sum| >= 6
    assert sign_flip_test([1, 2, 3])["p"] == pytest.approx(2 / 8)
    # scaled by 4: 2, 1, -1 -> sums 4, 2, 2, 0, 0, -2, -2, -4; |sum| >= 2 in 6 of 8
    out = sign_flip_test([F(1, 2), F(1, 4), F(-1, 4)])
    assert out["p"] == pytest.approx(6 / 8) and out["exact"]
    assert out["mean_diff"] == pytest.approx(1 / 6)
    assert sign_flip_test([0, 0])["p"] == 1.0


def test_exact_sign_flip_equals_brute_force_enumeration():
    rng = np.random.default_rng(5)
    diffs = [F(int(a), int(b)) for a, b in zip(rng.integers(-8, 9, 12), rng.choice([4, 8, 12], 12))]
    observed = abs(sum(diffs))
    hits = sum(abs(sum(s * d for s, d in zip(signs, diffs))) >= observed
               for signs in itertools.product((1, -1), repeat=len(diffs)))
    assert sign_flip_test(diffs)["p"] == pytest.approx(hits / 2 ** len(diffs))


def test_monte_carlo_path_agrees_with_the_exact_one():
    rng = np.random.default_rng(1)
    diffs = [F(int(a), 4) for a in rng.integers(-4, 5, 40)]
    diffs[0] += F(3, 4)
    exact = sign_flip_test(diffs)["p"]
    mc = sign_flip_test([float(d) for d in diffs], n_perm=100_000, seed=3)
    assert not mc["exact"] and mc["p"] == pytest.approx(exact, abs=0.01)


def test_cluster_bootstrap_keeps_each_stratum_whole():
    # Stratified: every resample has five groups from each seed, so its mean is exactly 0.5.
    diffs, strata = [0.0] * 5 + [1.0] * 5, ["s2"] * 5 + ["s3"] * 5
    out = cluster_bootstrap_ci(diffs, strata, n_boot=500)
    assert out["low"] == out["high"] == out["mean_diff"] == 0.5
    loose = cluster_bootstrap_ci(diffs, n_boot=2000)
    assert loose["low"] < 0.3 and loose["high"] > 0.7


def test_cluster_bootstrap_spread_matches_the_standard_error():
    x = np.random.default_rng(0).normal(0.05, 0.4, 300)
    out = cluster_bootstrap_ci(x, n_boot=20_000, seed=1)
    se = x.std(ddof=0) / np.sqrt(x.size)
    assert out["high"] - out["low"] == pytest.approx(2 * 1.95996 * se, rel=0.05)


def test_compare_groups_reports_the_group_level_numbers():
    base = [rec("a0", "a", 1), rec("a1", "a", 1), rec("b0", "b", 0), rec("c0", "c", 2)]
    ft = [rec("a0", "a", 3), rec("a1", "a", 3), rec("b0", "b", 2), rec("c0", "c", 3)]
    out = compare_groups(group_differences(base, ft), n_boot=200)
    # D = 1/2, 1/2, 1/4 -> scaled 2, 2, 1: |sum| >= 5 only for all-plus and all-minus
    assert out["delta"] == pytest.approx(5 / 12) and out["p"] == pytest.approx(2 / 8)
    assert out["groups"] == 3 and out["questions"] == 4
    assert out["base_accuracy"] == pytest.approx((1 / 4 + 0 + 1 / 2) / 3)


def test_power_formulas_by_hand():
    # ((1.959964 + 0.841621) * 0.5 / 0.05)^2 = 784.9
    assert groups_needed(0.5, 0.05) == 785
    assert groups_needed(0.5, 0.05, alpha=0.01) == 1168  # (2.575829 + 0.841621)^2 * 100 = 1167.9
    assert min_detectable(1.0, 100) == pytest.approx(0.28016, abs=1e-5)
    assert power(1.0, 100, 0.28016) == pytest.approx(0.8, abs=1e-4)
    assert power(1.0, 100, 0.0) == pytest.approx(0.05)


def test_variance_components_by_hand():
    # d = [1, 1], [0, 0], [-1, -1]: V_q = 4/5, group means 1, 0, -1 with V_g = 1, m = 2:
    # tau2 = (2 * 1 - 0.8) / 1 = 1.2, clipped to V_q - w = 0.6
    vm = estimate_variance_model([("a", 1), ("a", 1), ("b", 0), ("b", 0), ("c", -1), ("c", -1)], 0.2)
    assert (vm.tau2, vm.omega2) == pytest.approx((0.6, 0.0))
    # d = [1, -1], [1, -1], [0, 0]: group means all 0, so the spread is within groups
    vm = estimate_variance_model([("a", 1), ("a", -1), ("b", 1), ("b", -1), ("c", 0), ("c", 0)], 0.2)
    assert (vm.tau2, vm.omega2) == pytest.approx((0.0, 0.6))
    assert VarianceModel(0.01, 0.04, 0.4).var(2, 4) == pytest.approx(0.01 + 0.02 + 0.05)


def test_variance_components_from_k_samples_by_hand():
    # per-sample paired differences, K = 2: question means 0, 0, 1, 1 (V_q = 1/3); within-
    # question variances 2, 0, 0, 0 (w = 0.5, noise of a mean w / K = 0.25); groups a = {0, 0},
    # b = {1, 1}: V_g = 0.5, m = 2, tau2 = (2 * 0.5 - 1/3) / 1 clipped to V_q - 0.25 = 1/12
    vm = estimate_variance_model_k([("a", [1, -1]), ("a", [0, 0]), ("b", [1, 1]), ("b", [1, 1])])
    assert (vm.w, vm.tau2, vm.omega2) == pytest.approx((0.5, 1 / 12, 0.0))
    # the same question values, noise-free: all of V_q is real, split by the groups
    vm = estimate_variance_model_k([("a", [0, 0]), ("a", [0, 0]), ("b", [1, 1]), ("b", [1, 1])])
    assert (vm.w, vm.tau2, vm.omega2) == pytest.approx((0.0, 1 / 3, 0.0))
    with pytest.raises(ValueError, match="same K >= 2"):
        estimate_variance_model_k([("a", [1, 0]), ("b", [1, 0, 0])])
    with pytest.raises(ValueError, match="same K >= 2"):
        estimate_variance_model_k([("a", [1]), ("b", [0])])
