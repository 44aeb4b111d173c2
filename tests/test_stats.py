"""relrl.evaluation.stats against values computed by hand or published."""
import itertools
import math
import re
import tracemalloc
import warnings
from fractions import Fraction

import numpy as np
import pytest

from relrl.evaluation.stats import (
    _BOOT_CELLS,
    bootstrap_ci,
    discordant,
    holm,
    mcnemar,
    paired_bootstrap_ci,
    paired_permutation_test,
    pass_at_k,
    wilson_interval,
)


def test_mcnemar_study_split_15_4():
    # SFT fold_4 on the 54-question holdout: 15 questions lost, 4 gained (29 -> 18 correct).
    out = mcnemar(b01=4, b10=15)
    # exact: 2 * P(X <= 4), X ~ Bin(19, 1/2) = 2 * (1 + 19 + 171 + 969 + 3876) / 2^19
    assert out["exact_p"] == pytest.approx(2 * 5036 / 2**19, rel=1e-12)
    assert round(out["exact_p"], 3) == 0.019  # the study's reported p
    # corrected chi-square: (|4 - 15| - 1)^2 / 19 = 100 / 19 on 1 df
    assert out["chi2"] == pytest.approx(100 / 19)
    assert out["chi2_p"] == pytest.approx(0.021781, abs=1e-6)
    assert mcnemar(15, 4)["exact_p"] == out["exact_p"]  # symmetric


@pytest.mark.parametrize("b01,b10,exact,chi2", [
    (0, 5, 2 / 32, 16 / 5),             # all discordant one way: 2 * (1/2)^5
    (0, 0, 1.0, 0.0),                   # no discordant pairs: no evidence
    (3, 3, 1.0, 0.0),                   # balanced: correction floored at zero
    (1, 2, 1.0, 0.0),                   # 2 * P(X <= 1 | 3) = 1
    (150, 86, None, 63 ** 2 / 236),     # Agresti's approval-rating table
])
def test_mcnemar_hand_made_tables(b01, b10, exact, chi2):
    out = mcnemar(b01, b10)
    if exact is not None:
        assert out["exact_p"] == pytest.approx(exact)
    assert out["chi2"] == pytest.approx(chi2)
    assert out["chi2_p"] == pytest.approx(math.erfc(math.sqrt(chi2 / 2)))


def test_mcnemar_exact_matches_brute_force_binomial():
    for b01, b10 in [(2, 9), (7, 7), (10, 1), (13, 20)]:
        n = b01 + b10
        pmf = [math.comb(n, i) / 2**n for i in range(n + 1)]
        # two-sided by doubling the smaller tail, capped at 1
        tail = sum(pmf[: min(b01, b10) + 1])
        assert mcnemar(b01, b10)["exact_p"] == pytest.approx(min(1.0, 2 * tail))


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError):
        mcnemar(-1, 3)


def test_discordant_counts():
    base = [True, True, False, False, True]
    ft = [True, False, True, False, False]
    assert discordant(base, ft) == (1, 2)


@pytest.mark.parametrize("k,n,low,high", [
    # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (Wilson score)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_interval_published_values(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=1e-4)
    assert hi == pytest.approx(high, abs=1e-4)


def test_wilson_interval_edges():
    assert wilson_interval(0, 20)[0] == 0.0
    assert wilson_interval(20, 20)[1] == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo90, hi90 = wilson_interval(29, 54, confidence=0.90)
    lo95, hi95 = wilson_interval(29, 54)
    assert lo95 < lo90 < 29 / 54 < hi90 < hi95


def test_pass_at_k_formula():
    assert pass_at_k(4, 2, 2) == pytest.approx(1 - 1 / 6)     # 1 - C(2,2)/C(4,2)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)          # pass@1 is the mean
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 6, 5) == 1.0                         # fewer than k wrong ones
    assert pass_at_k(200, 13, 10) == pytest.approx(1 - math.comb(187, 10) / math.comb(200, 10))


def test_pass_at_k_equals_subset_enumeration():
    samples = [1, 0, 0, 1, 0, 0]
    for k in range(1, len(samples) + 1):
        subsets = list(itertools.combinations(samples, k))
        expected = sum(any(s) for s in subsets) / len(subsets)
        assert pass_at_k(len(samples), sum(samples), k) == pytest.approx(expected)


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([0.019]) == [0.019]
    assert holm([]) == []


def test_paired_permutation_reduces_to_mcnemar_with_one_sample():
    base = [1] * 15 + [0] * 4 + [1] * 10 + [0] * 25
    ft = [0] * 15 + [1] * 4 + [1] * 10 + [0] * 25
    out = paired_permutation_test(base, 1, ft, 1)
    assert out["p"] == pytest.approx(mcnemar(4, 15)["exact_p"], rel=1e-12)
    assert out["mean_diff"] == pytest.approx((18 - 29) / 54)


def test_paired_permutation_equals_enumeration_of_sign_flips():
    base = [1, 2, 0, 3, 4, 1, 2]
    ft = [3, 2, 1, 4, 4, 0, 4]
    d = [(f - b) / 4 for b, f in zip(base, ft)]
    observed = abs(sum(d))
    flips = [abs(sum(s * x for s, x in zip(signs, d))) >= observed - 1e-12
             for signs in itertools.product((1, -1), repeat=len(d))]
    out = paired_permutation_test(base, 4, ft, 4)
    assert out["p"] == pytest.approx(sum(flips) / len(flips))
    # per-question sample counts may differ between the two models
    mixed = paired_permutation_test([1, 0, 2], [2, 2, 4], [1, 1, 1], [1, 1, 1])
    assert 0 < mixed["p"] <= 1


def test_paired_bootstrap_interval_coverage_on_simulated_data():
    rng = np.random.default_rng(1)
    n, trials, covered = 120, 300, 0
    p_base, p_ft = 0.5, 0.6  # true difference 0.1, outcomes correlated through a shared skill
    for t in range(trials):
        skill = rng.random(n)
        base = (skill < p_base).astype(float)
        flip = rng.random(n) < 0.25
        ft = np.where(flip, rng.random(n) < p_ft, skill < p_ft).astype(float)
        true_diff = p_ft - p_base
        ci = paired_bootstrap_ci(base, ft, n_boot=1000, seed=t)
        covered += ci["low"] <= true_diff <= ci["high"]
        assert ci["low"] <= ci["delta"] <= ci["high"]
    # nominal 95%; 300 trials give a binomial sd of about 1.3 points
    assert 0.90 <= covered / trials <= 0.985


def test_bootstrap_is_seeded_and_centred():
    values = [0, 0.25, 0.5, 1.0] * 10
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    lo, hi = bootstrap_ci(values)
    assert lo < np.mean(values) < hi
    ci = paired_bootstrap_ci([1, 1, 1, 1], [1, 1, 1, 1])
    assert (ci["low"], ci["high"], ci["delta"]) == (0.0, 0.0, 0.0)


def test_paired_permutation_equals_scipys_where_scipy_enumerates_every_flip():
    from scipy import stats

    base = [1, 2, 0, 3, 4, 1, 2, 0, 4, 3, 1, 2]
    ft = [3, 2, 1, 4, 4, 0, 4, 2, 4, 4, 3, 2]
    diff = (np.array(ft) - np.array(base)) / 4
    scipy_p = stats.permutation_test((diff,), np.sum, permutation_type="samples",
                                     n_resamples=2 ** len(diff), vectorized=True).pvalue
    assert paired_permutation_test(base, 4, ft, 4)["p"] == pytest.approx(scipy_p, rel=1e-9)


def test_bootstrap_of_one_question_is_that_question():
    assert bootstrap_ci([0.75]) == (0.75, 0.75)
    ci = paired_bootstrap_ci([0.0], [1.0])
    assert (ci["low"], ci["delta"], ci["high"]) == (1.0, 1.0, 1.0)


def test_bad_confidence_is_refused():
    for call in (lambda: wilson_interval(3, 10, confidence=1.0),
                 lambda: bootstrap_ci([0, 1], confidence=0.0)):
        with pytest.raises(ValueError, match="confidence must be in"):
            call()
# -- edges found by mutation testing ------------------------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda: mcnemar(-1, 0), "discordant counts must be >= 0, got -1, 0"),
    (lambda: discordant([True], []), "paired outcome lists differ in length"),
    (lambda: wilson_interval(5, 3), "need 0 <= k <= n, got k=5, n=3"),
    (lambda: bootstrap_ci([]), "need a non-empty list of values"),
    (lambda: bootstrap_ci([[1.0, 2.0]]), "need a non-empty list of values"),
    (lambda: paired_bootstrap_ci([], []),
     "need two non-empty paired score lists of equal length"),
    (lambda: paired_bootstrap_ci([0.0, 1.0], [1.0]),  # would broadcast without the check
     "need two non-empty paired score lists of equal length"),
    (lambda: paired_bootstrap_ci([[0.0, 1.0]], [[1.0, 1.0]]),
     "need two non-empty paired score lists of equal length"),
    (lambda: pass_at_k(3, 4, 1), "need 0 <= c <= n and 1 <= k <= n, got n=3, c=4, k=1"),
    (lambda: pass_at_k(3, 1, 4), "need 0 <= c <= n and 1 <= k <= n, got n=3, c=1, k=4"),
    (lambda: paired_permutation_test([], 1, [], 1),
     "need two non-empty paired count lists of equal length"),
    (lambda: paired_permutation_test([1], 1, [1, 0], 1),
     "need two non-empty paired count lists of equal length"),
    (lambda: paired_permutation_test([2], 1, [0], 1), "pass counts out of range: 2/1, 0/1"),
    (lambda: paired_permutation_test([0], 1, [2], 1), "pass counts out of range: 0/1, 2/1"),
])
def test_bad_input_messages(call, message):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        call()


def test_result_fields_and_small_cases():
    assert mcnemar(0, 0) == {"b01": 0, "b10": 0, "exact_p": 1.0, "chi2": 0.0, "chi2_p": 1.0}
    assert set(mcnemar(3, 1)) == {"b01", "b10", "exact_p", "chi2", "chi2_p"}
    assert (mcnemar(3, 1)["b01"], mcnemar(3, 1)["b10"]) == (3, 1)
    assert discordant([True, True, False], [True, True, True]) == (1, 0)
    assert all(wilson_interval(n, n)[1] == 1.0 for n in range(1, 60))
    assert bootstrap_ci([0.5]) == (0.5, 0.5)  # one question is a valid, degenerate sample
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 0.25, 0.75]
    assert bootstrap_ci(values) == bootstrap_ci(values, seed=0) == bootstrap_ci(values)
    assert pass_at_k(4, 4, 2) == 1.0
    assert holm([0.6, 0.7]) == [1.0, 1.0]  # capped at 1


def test_permutation_test_with_different_sample_counts():
    result = paired_permutation_test([1], 2, [2], 3)  # 1/2 -> 2/3 on one question
    assert result["mean_diff"] == pytest.approx(1 / 6)
    assert result["test"] == "exact paired sign-flip permutation test on per-question accuracy"
    assert result["n"] == 1 and result["p"] == 1.0


# -- the bootstrap's parameters, defaults and memory bound (mutation testing) -------------------
def _continuous_scores(seed, n=40):
    # distinct continuous values: every resample mean differs, so any change in the resamples
    # (seed, count) moves the interval
    return np.random.default_rng(seed).random(n)


def _exact_percentile_interval(values, confidence):
    """The percentile interval of the exact bootstrap distribution of the mean, found by
    enumerating all n^n resamples; only for confidences whose two quantiles fall well inside
    an atom of that distribution, where 10_000 resamples give the atom itself."""
    n = len(values)
    means = sorted(sum(r) / n for r in itertools.product(values, repeat=n))
    alpha = (1 - confidence) / 2
    return means[int(alpha * len(means))], means[int((1 - alpha) * len(means))]


def test_bootstrap_interval_is_the_percentile_interval_at_the_given_confidence():
    # [0, 0, 1]: resample means 0, 1/3, 2/3, 1 with chances 8/27, 12/27, 6/27, 1/27
    values = [0.0, 0.0, 1.0]
    assert _exact_percentile_interval(values, 0.8) == (0.0, 2 / 3)
    assert _exact_percentile_interval(values, 0.99) == (0.0, 1.0)
    for confidence in (0.8, 0.99):
        expected = _exact_percentile_interval(values, confidence)
        assert bootstrap_ci(values, confidence=confidence) == expected
        ci = paired_bootstrap_ci([0.0, 0.0, 0.0], values, confidence=confidence)
        assert (ci["low"], ci["high"], ci["confidence"]) == (*expected, confidence)


def test_bootstrap_n_boot_is_the_number_of_resamples():
    # one resample: both percentiles are that resample's mean, one of k/3
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's standard error of one value
        low, high = bootstrap_ci([0.0, 0.0, 1.0], n_boot=1)
    assert low == high and low in (0.0, 1 / 3, 2 / 3, 1.0)


def test_bootstrap_defaults_are_10000_resamples_seed_0_and_95_percent():
    values = _continuous_scores(3)
    default = bootstrap_ci(values)
    assert default == bootstrap_ci(values, n_boot=10_000, confidence=0.95, seed=0)
    # ... and the data are sensitive enough for another default to show
    assert default != bootstrap_ci(values, n_boot=10_001)
    assert default != bootstrap_ci(values, seed=1)
    base = _continuous_scores(4)
    ci = paired_bootstrap_ci(base, values)
    assert ci == paired_bootstrap_ci(base, values, n_boot=10_000, confidence=0.95, seed=0)
    assert ci != paired_bootstrap_ci(base, values, n_boot=10_001)
    assert ci != paired_bootstrap_ci(base, values, seed=1)
    assert ci["delta"] == float(np.mean(values - base))
    assert (ci["confidence"], ci["n_boot"], ci["seed"]) == (0.95, 10_000, 0)


def test_paired_bootstrap_reports_its_parameters():
    ci = paired_bootstrap_ci([0.0, 1.0, 0.5], [1.0, 1.0, 0.0], n_boot=200, confidence=0.9,
                             seed=7)
    assert set(ci) == {"delta", "low", "high", "confidence", "n_boot", "seed"}
    assert (ci["confidence"], ci["n_boot"], ci["seed"]) == (0.9, 200, 7)
    assert ci["delta"] == pytest.approx(1 / 6)


def test_bootstrap_is_reproducible_from_its_seed_on_continuous_data():
    values, base = _continuous_scores(5), _continuous_scores(6)
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    assert bootstrap_ci(values, seed=3) != bootstrap_ci(values, seed=4)
    assert paired_bootstrap_ci(base, values, seed=3) == paired_bootstrap_ci(base, values, seed=3)
    assert paired_bootstrap_ci(base, values, seed=3) != paired_bootstrap_ci(base, values, seed=4)


def test_bootstrap_averages_any_numeric_input_as_float64():
    # exact per-question accuracies c_i / K as Fractions, and float32 arrays, give the same
    # interval as the same numbers as Python floats (the mean is taken in double precision)
    counts_base, counts_ft = [3, 0, 8, 5, 2, 7, 4, 1, 6, 8], [5, 1, 8, 6, 2, 8, 3, 4, 7, 8]
    base = [Fraction(c, 8) for c in counts_base]
    ft = [Fraction(c, 8) for c in counts_ft]
    base_f, ft_f = [c / 8 for c in counts_base], [c / 8 for c in counts_ft]
    assert bootstrap_ci(ft) == bootstrap_ci(ft_f)
    assert paired_bootstrap_ci(base, ft) == paired_bootstrap_ci(base_f, ft_f)
    assert paired_bootstrap_ci(base, ft_f) == paired_bootstrap_ci(base_f, ft_f)
    assert paired_bootstrap_ci(base_f, ft) == paired_bootstrap_ci(base_f, ft_f)
    single = _continuous_scores(7).astype(np.float32)
    assert bootstrap_ci(single) == bootstrap_ci(single.astype(np.float64))


@pytest.mark.parametrize("size, n_boot", [(1_000, 10_000), (1_900_000, 4)])
def test_bootstrap_memory_is_bounded_by_boot_cells(size, n_boot):
    # resamples are drawn in batches of max(1, _BOOT_CELLS // n) rows, so the bootstrap holds
    # about three float64/int64 arrays of at most max(_BOOT_CELLS, n) cells (this batch's
    # indices and values, the previous batch's values); unbatched, the first case holds 5x
    # that, and two rows a batch in the second (n > _BOOT_CELLS / 2) hold 2x
    values = _continuous_scores(8, size)
    limit = 4 * 8 * max(_BOOT_CELLS, size)
    tracemalloc.start()
    try:
        bootstrap_ci(values, n_boot=n_boot)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit


def test_sign_flip_p_is_exactly_one_without_evidence():
    # no question changed: p = 1
    assert paired_permutation_test([1, 0, 2], 2, [1, 0, 2], 2)["p"] == 1.0
    # 39 gained, 39 lost: the observed sum 0 is the least extreme, p = 1; the float
    # distribution sums to 1 + 2^-52 here, so the cap at 1 is what makes it exact
    out = paired_permutation_test([1] * 39 + [0] * 39, 1, [0] * 39 + [1] * 39, 1)
    assert out["p"] == 1.0 and out["mean_diff"] == 0.0


def test_pass_at_k_is_one_when_fewer_than_k_samples_are_wrong_even_for_large_n():
    # C(n - c, k) = 0; the product form would overflow to inf * 0 = nan here
    assert pass_at_k(2000, 2000, 1500) == 1.0
    assert pass_at_k(2000, 1990, 1500) == 1.0
