"""pass@k and mean@k against brute-force enumeration of k-subsets, and their intervals over
paraphrase groups on hand-made cases."""
import itertools
from fractions import Fraction

import pytest

from relrl.evaluation.clustered_stats import at_k_interval
from relrl.evaluation.stats import bootstrap_ci, mean_at_k, pass_at_k

SMALL = [(n, c, k) for n in range(1, 8) for c in range(n + 1) for k in range(1, n + 1)]


def subsets(n, c, k):
    """Every k-subset of n samples whose first c are correct, as its number of correct ones."""
    return [sum(i < c for i in chosen) for chosen in itertools.combinations(range(n), k)]


@pytest.mark.parametrize("n, c, k", SMALL)
def test_pass_at_k_is_the_share_of_k_subsets_holding_a_correct_sample(n, c, k):
    hits = subsets(n, c, k)
    assert pass_at_k(n, c, k) == pytest.approx(float(Fraction(sum(h > 0 for h in hits), len(hits))))


@pytest.mark.parametrize("n, c, k", SMALL)
def test_mean_at_k_is_the_mean_share_correct_over_k_subsets(n, c, k):
    hits = subsets(n, c, k)
    assert mean_at_k(n, c, k) == pytest.approx(float(Fraction(sum(hits), k * len(hits))))


def test_a_worked_case_and_the_range_checks():
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3, 2) / C(4, 2) = 1 - 3/6
    assert mean_at_k(4, 1, 2) == 0.25
    for bad in ((4, 5, 1), (4, 1, 5), (4, 1, 0)):
        with pytest.raises(ValueError, match="need 0 <= c <= n and 1 <= k <= n"):
            mean_at_k(*bad)


def rec(qid, group, c, n=4):
    return {"id": qid, "group": group, "pass_count": c, "samples": n}


def test_the_interval_resamples_groups_not_questions():
    # group a: three paraphrases always right; group b: three always wrong. Resampling the two
    # groups gives 1, 1/2 or 0 with chances 1/4, 1/2, 1/4: the 95% interval is [0, 1]. Over
    # the six questions as if independent it would be far narrower.
    records = [rec(f"a{i}", "a", 4) for i in range(3)] + [rec(f"b{i}", "b", 0) for i in range(3)]
    out = at_k_interval(records, 2)
    assert (out["value"], out["low"], out["high"]) == (0.5, 0.0, 1.0)
    assert (out["metric"], out["groups"], out["questions"]) == ("pass@2", 2, 6)
    low, high = bootstrap_ci([1.0] * 3 + [0.0] * 3)
    assert low > 0.0 and high < 1.0


def test_the_estimate_is_the_mean_over_questions_and_groups_weigh_by_their_size():
    # group a: one question, pass@2 = 1 - C(3,2)/C(4,2) = 0.5, mean@2 = 1/4; group b: three
    # questions with none right. Question mean: pass@2 = 0.5 / 4, mean@2 = 0.25 / 4. Resamples:
    # aa, ab or ba, bb with chances 1/4, 1/2, 1/4, so the middle 40% is the sample itself.
    records = [rec("a0", "a", 1)] + [rec(f"b{i}", "b", 0) for i in range(3)]
    passed = at_k_interval(records, 2, confidence=0.4)
    assert passed["value"] == pytest.approx(0.125)
    assert (passed["low"], passed["high"]) == pytest.approx((0.125, 0.125))
    mean = at_k_interval(records, 2, "mean", confidence=0.4)
    assert (mean["metric"], mean["value"]) == ("mean@2", pytest.approx(0.0625))
    assert (mean["low"], mean["high"]) == pytest.approx((0.0625, 0.0625))
    wide = at_k_interval(records, 2)
    assert (wide["low"], wide["high"]) == pytest.approx((0.0, 0.5))  # bb and aa


def test_questions_without_a_group_are_their_own_and_bad_input_is_refused():
    out = at_k_interval([rec("q0", None, 4), rec("q1", "", 0)], 1)
    assert out["groups"] == 2 and out["value"] == 0.5
    with pytest.raises(ValueError, match="metric must be 'pass' or 'mean', got 'best'"):
        at_k_interval([rec("q0", "a", 1)], 1, "best")
    with pytest.raises(ValueError, match="need 0 <= c <= n and 1 <= k <= n"):
        at_k_interval([rec("q0", "a", 1)], 5)  # k above the samples drawn
    with pytest.raises(ValueError, match="no records"):
        at_k_interval([], 1)
