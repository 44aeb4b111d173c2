"""Statistics for paired model comparisons on the same questions.

Conventions: `b01` counts questions the base got wrong (0) and the fine-tuned model got right (1);
`b10` the reverse. All p-values are two-sided. Only numpy is needed (no scipy), so these
functions are cheap to import in every script.
"""
from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist
from typing import Sequence

import numpy as np


def mcnemar(b01: int, b10: int) -> dict:
    """McNemar's test on the discordant counts of a paired 2x2 table.

    exact_p: two-sided exact binomial test of b01 against Binomial(b01 + b10, 1/2), doubled
    one tail capped at 1 (the test the study's p=0.019 comes from).
    chi2 / chi2_p: Edwards' continuity-corrected statistic (|b01 - b10| - 1)^2 / (b01 + b10)
    on one degree of freedom; the correction is floored at zero so equal counts give chi2 = 0.
    """
    if b01 < 0 or b10 < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b01}, {b10}")
    n = b01 + b10
    if n == 0:
        return {"b01": b01, "b10": b10, "exact_p": 1.0, "chi2": 0.0, "chi2_p": 1.0}
    tail = sum(math.comb(n, i) for i in range(min(b01, b10) + 1))
    exact_p = float(min(Fraction(1), Fraction(2 * tail, 2**n)))
    chi2 = max(abs(b01 - b10) - 1, 0) ** 2 / n
    # survival function of chi-square with 1 df: P(Z^2 > x) = erfc(sqrt(x / 2))
    chi2_p = math.erfc(math.sqrt(chi2 / 2))
    return {"b01": b01, "b10": b10, "exact_p": exact_p, "chi2": chi2, "chi2_p": chi2_p}


def discordant(base_correct: Sequence[bool], ft_correct: Sequence[bool]) -> tuple[int, int]:
    """(b01, b10) from two paired lists of per-question outcomes."""
    if len(base_correct) != len(ft_correct):
        raise ValueError("paired outcome lists differ in length")
    b01 = sum(1 for a, b in zip(base_correct, ft_correct) if not a and b)
    b10 = sum(1 for a, b in zip(base_correct, ft_correct) if a and not b)
    return b01, b10


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k/n (no continuity correction)."""
    if n == 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    z = _z(confidence)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if k == 0 else max(0.0, centre - half)  # exact ends, not rounding noise
    high = 1.0 if k == n else min(1.0, centre + half)
    return low, high


def _bootstrap(values: np.ndarray, n_boot: int, confidence: float, seed: int) -> dict:
    """Percentile bootstrap interval for the mean of `values`, resampling its entries."""
    _z(confidence)
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    chunk = max(1, 2_000_000 // values.size)  # bound memory of the index matrix
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, values.size, size=(stop - start, values.size))
        means[start:stop] = values[idx].mean(axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return {"low": float(low), "high": float(high), "confidence": confidence,
            "n_boot": n_boot, "seed": seed}


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
    diff = b - a
    return {"delta": float(diff.mean()), **_bootstrap(diff, n_boot, confidence, seed)}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k),
    the chance that k samples drawn without replacement contain a correct one."""
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    # product form avoids huge binomials: C(n-c, k) / C(n, k) = prod_{i=n-c+1..n} (1 - k / i)
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


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
    McNemar's exact test.
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
    observed = sum(steps)
    magnitudes = [abs(s) for s in steps if s]
    total = sum(magnitudes)
    # dist[t] = P(sum of the magnitudes that keep a + sign equals t); S = 2t - total
    dist = np.zeros(total + 1)
    dist[0] = 1.0
    for m in magnitudes:
        shifted = np.zeros_like(dist)
        shifted[m:] = dist[:-m]
        dist = 0.5 * (dist + shifted)
    stat = np.abs(2 * np.arange(total + 1) - total)
    p = float(dist[stat >= abs(observed)].sum()) if magnitudes else 1.0
    return {
        "test": "exact paired sign-flip permutation test on per-question accuracy",
        "mean_diff": observed / scale / n,
        "p": min(1.0, p),
        "n": n,
    }
