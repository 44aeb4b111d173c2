"""Forgetting as a difference (study/replication/difference.py) against independent
references: the exact permutation distribution enumerated, the estimate and its standard error
by their formulas, and the bootstrap interval's coverage on simulated data."""
import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest

from study.replication.difference import difference_of_changes


def exact_permutation_p(xa, xb):
    """Two-sided p by enumerating every relabelling within each seed."""
    observed = abs(np.concatenate(xa).mean() - np.concatenate(xb).mean())
    per_seed = []
    for x, y in zip(xa, xb):
        both = np.concatenate([x, y])
        per_seed.append([(both[list(c)], np.delete(both, list(c)))
                         for c in itertools.combinations(range(len(both)), len(x))])
    hits = total = 0
    for choice in itertools.product(*per_seed):
        a = np.concatenate([c[0] for c in choice])
        b = np.concatenate([c[1] for c in choice])
        hits += abs(a.mean() - b.mean()) >= observed - 1e-12
        total += 1
    return hits / total


def test_estimate_p_and_power_match_their_references():
    xa = [np.array([-0.5, -0.25, 0.0, -0.75]), np.array([-1.0, 0.0, -0.5])]
    xb = [np.array([0.0, 0.25, 0.0]), np.array([0.0, 0.5, 0.0, 0.25])]
    out = difference_of_changes(xa, xb, alpha=0.01, power=0.8)
    a, b = np.concatenate(xa), np.concatenate(xb)
    assert out["delta"] == pytest.approx(a.mean() - b.mean())
    assert (out["never_groups"], out["trained_groups"]) == (7, 7)
    assert out["p"] == pytest.approx(exact_permutation_p(xa, xb), abs=0.006)  # Monte Carlo error
    se = math.sqrt(a.var(ddof=1) / 7 + b.var(ddof=1) / 7)
    assert out["mdd"] == pytest.approx((NormalDist().inv_cdf(0.995) + NormalDist().inv_cdf(0.8)) * se)
    assert out["ci_low"] < out["delta"] < out["ci_high"] < 0


def test_no_difference_when_both_strata_change_alike():
    # a loss everywhere (a broken format) is not forgetting
    xa = [np.full(20, -0.6) + np.linspace(-0.1, 0.1, 20)]
    xb = [np.full(20, -0.6) + np.linspace(0.1, -0.1, 20)]
    out = difference_of_changes(xa, xb)
    assert out["delta"] == pytest.approx(0.0, abs=1e-12) and out["p"] > 0.9


def test_the_interval_covers_a_known_difference_about_as_often_as_it_says():
    rng = np.random.default_rng(7)
    covered = 0
    for trial in range(40):
        xa = [rng.normal(-0.05, 0.2, 40), rng.normal(-0.05, 0.2, 35)]
        xb = [rng.normal(0.0, 0.1, 50), rng.normal(0.0, 0.1, 45)]
        out = difference_of_changes(xa, xb, confidence=0.9, seed=trial, n_resamples=2000)
        covered += out["ci_low"] <= -0.05 <= out["ci_high"]
    assert 30 <= covered <= 40  # 36 expected of 40 at 90%
