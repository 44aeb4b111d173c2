"""Statistics for paired model comparisons on the same questions, on scipy.stats.

Conventions: `b01` counts questions the base got wrong (0) and the fine-tuned model got right (1);
`b10` the reverse. All p-values are two-sided. The tests themselves are scipy's (`binomtest` for
the exact McNemar test and Wilson intervals, `chi2`, `bootstrap`); what scipy lacks is here:
Holm's adjustment, unbiased pass@k and mean@k, and an exact sign-flip permutation test for any
number of questions (scipy's `permutation_test` enumerates all 2^n flips or falls back to Monte
Carlo).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

_BOOT_CELLS = 2_000_000  # resampled values held at once: bounds the bootstrap's memory


def mcnemar(b01: int, b10: int) -> dict:
    """McNemar's test on the discordant counts of a paired 2x2 table.

    exact_p: two-sided exact binomial test of b01 against Binomial(b01 + b10, 1/2)
    (scipy.stats.binomtest; for p = 1/2 it is the doubled smaller tail capped at 1, the test
    the study's p=0.019 comes from).
    chi2 / chi2_p: Edwards' continuity-corrected statistic (|b01 - b10| - 1)^2 / (b01 + b10)
    on one degree of freedom; the correction is floored at zero so equal counts give chi2 = 0.
    """
    if b01 < 0 or b10 < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b01}, {b10}")
    n = b01 + b10
    if n == 0:
        return {"b01": b01, "b10": b10, "exact_p": 1.0, "chi2": 0.0, "chi2_p": 1.0}
    exact_p = min(1.0, float(stats.binomtest(b01, n, 0.5).pvalue))
    chi2 = max(abs(b01 - b10) - 1, 0) ** 2 / n
    chi2_p = float(stats.chi2.sf(chi2, 1))
    return {"b01": b01, "b10": b10, "exact_p": exact_p, "chi2": chi2, "chi2_p": chi2_p}


def discordant(base_correct: Sequence[bool], ft_correct: Sequence[bool]) -> tuple[int, int]:
    """(b01, b10) from two paired lists of per-question outcomes."""
    if len(base_correct) != len(ft_correct):
        raise ValueError("paired outcome lists differ in length")
    b01 = sum(1 for a, b in zip(base_correct, ft_correct) if not a and b)
    b10 = sum(1 for a, b in zip(base_correct, ft_correct) if a and not b)
    return b01, b10


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k/n (no continuity correction)."""
    _check_confidence(confidence)
    if n == 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def _bootstrap(values: np.ndarray, n_boot: int, confidence: float, seed: int) -> dict:
    """Percentile bootstrap interval for the mean of `values`, resampling its entries."""
    _check_confidence(confidence)
    if values.size == 1:  # nothing to resample: every resample is the one value
        low = high = float(values[0])
    else:
        ci = stats.bootstrap((values,), np.mean, n_resamples=n_boot, confidence_level=confidence,
                             method="percentile", vectorized=True,
                             batch=max(1, _BOOT_CELLS // values.size),
                             rng=np.random.default_rng(seed)).confidence_interval
        low, high = float(ci.low), float(ci.high)
    return {"low": low, "high": high, "confidence": confidence, "n_boot": n_boot, "seed": seed}


def bootstrap_ci(values: Sequence[float], *, n_boot: int = 10_000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval for a mean over questions (e.g. accuracy with K samples
    per question, where samples of one question are not independent trials)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("need a non-empty list of values")
    out = _bootstrap(x, n_boot, confidence, seed)
    return out["low"], out["high"]


def paired_bootstrap_ci(
    base: Sequence[float],
    ft: Sequence[float],
    *,
    n_boot: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """Percentile bootstrap interval for mean(ft) - mean(base), resampling questions (pairs
    stay together, which is what makes the interval narrower than two independent ones).
    Scores may be 0/1 outcomes or per-question accuracies."""
    a = np.asarray(base, dtype=np.float64)
    b = np.asarray(ft, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("need two non-empty paired score lists of equal length")
    diff = b - a  # resampling the differences resamples the pairs
    return {"delta": float(diff.mean()), **_bootstrap(diff, n_boot, confidence, seed)}


def _check_counts(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k),
    the chance that k samples drawn without replacement contain a correct one."""
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    # product form avoids huge binomials: C(n-c, k) / C(n, k) = prod_{i=n-c+1..n} (1 - k / i)
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_at_k(n: int, c: int, k: int) -> float:
    """Unbiased mean@k from n samples of which c are correct: the expected share of correct
    samples among k drawn without replacement, c / n for every k (each sample is drawn with
    probability k / n). pass@k asks for one correct sample in k, mean@k for the average one."""
    _check_counts(n, c, k)
    return c / n


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (family-wise error control), in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def paired_permutation_test(
    base_counts: Sequence[int],
    base_samples: int | Sequence[int],
    ft_counts: Sequence[int],
    ft_samples: int | Sequence[int],
) -> dict:
    """Exact paired sign-flip permutation test on per-question accuracy differences.

    With K samples per question, question i has accuracies c_i / K for each model. Under the
    null hypothesis the two models are exchangeable on every question, so each difference
    d_i = ft_i - base_i is equally likely to have either sign. The statistic is sum(d_i); its
    null distribution over all 2^n sign flips is computed exactly by dynamic programming on
    integer-scaled differences (no Monte Carlo). With one sample per question this is exactly
    McNemar's exact test. It equals scipy.stats.permutation_test(permutation_type="samples")
    where that can enumerate every flip; beyond about 20 questions scipy samples flips instead.
    """
    n = len(base_counts)
    if n == 0 or len(ft_counts) != n:
        raise ValueError("need two non-empty paired count lists of equal length")
    kb = [base_samples] * n if isinstance(base_samples, int) else list(base_samples)
    kf = [ft_samples] * n if isinstance(ft_samples, int) else list(ft_samples)
    scale = math.lcm(*kb, *kf)
    steps = []
    for cb, nb, cf, nf in zip(base_counts, kb, ft_counts, kf):
        if not (0 <= cb <= nb and 0 <= cf <= nf):
            raise ValueError(f"pass counts out of range: {cb}/{nb}, {cf}/{nf}")
        steps.append(cf * (scale // nf) - cb * (scale // nb))
    return {
        "test": "exact paired sign-flip permutation test on per-question accuracy",
        "mean_diff": sum(steps) / scale / n,
        "p": exact_sign_flip_p(steps),
        "n": n,
    }


def exact_sign_flip_p(steps) -> float:
    """Two-sided p of sum(steps) under independent random signs of integer steps, exact."""
    magnitudes = [abs(s) for s in steps if s]
    if not magnitudes:
        return 1.0
    observed, total = abs(sum(steps)), sum(magnitudes)
    # dist[t] = P(sum of the magnitudes that keep a + sign equals t); S = 2t - total
    dist = np.zeros(total + 1)
    dist[0] = 1.0
    for m in magnitudes:
        shifted = np.zeros_like(dist)
        shifted[m:] = dist[:-m]
        dist = 0.5 * (dist + shifted)
    stat = np.abs(2 * np.arange(total + 1) - total)
    return float(min(1.0, dist[stat >= observed].sum()))
