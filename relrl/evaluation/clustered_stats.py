"""Paired comparisons at the level of problem groups (clusters), and their power.

Paraphrases of one problem share a group and an answer, so their outcomes are not independent:
a test over questions overstates the evidence. Here the unit is the group. Each model's group
score is the mean over the group's questions of the per-question accuracy pass_count / samples
(K samples per question); the paired difference D_g = ft_g - base_g is what the tests use.
Groups from several seeds (separate data and training runs) pool as separate clusters, with the
seed kept as a stratum for the bootstrap.

  group_differences    D_g per group (and its stratum) from two paired lists of records
  sign_flip_test       exact two-sided paired sign-flip permutation test on sum(D_g)
  cluster_bootstrap_ci percentile interval for mean(D_g), resampling groups within strata
  at_k_interval        pass@k or mean@k over questions, with that interval over groups
                       (within strata, for seeds pooled)
  VarianceModel        Var(D_g) from variance components, for K samples and m questions/group
  estimate_variance_model[_k]   its components from one-sample (split assumed) or K-sample data
  power, groups_needed, min_detectable   normal-approximation power of the paired test
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Sequence

import numpy as np

from relrl.evaluation.stats import exact_sign_flip_p, mean_at_k, pass_at_k

EXACT_LIMIT = 5_000_000  # largest integer-scaled sum the exact test's table may span


@dataclass(frozen=True)
class GroupDiff:
    group: str
    stratum: str
    base: Fraction  # group accuracy of the base, exact (a mean of pass_count / samples)
    ft: Fraction
    questions: int

    @property
    def diff(self) -> Fraction:
        return self.ft - self.base


def _accuracy(record: dict) -> Fraction:
    return Fraction(int(record["pass_count"]), int(record["samples"]))


def _group_of(record: dict) -> str:
    return str(record.get("group") or record["id"])  # no group: the question is its own cluster


def group_differences(base: Sequence[dict], ft: Sequence[dict], stratum: str = "") -> list[GroupDiff]:
    """One GroupDiff per group, in order of first appearance; both record lists must hold the
    same question ids in the same order (a paired comparison)."""
    if [str(r["id"]) for r in base] != [str(r["id"]) for r in ft]:
        raise ValueError("base and fine-tuned records are for different questions")
    if not base:
        raise ValueError("no records")
    groups: dict[str, list[tuple[Fraction, Fraction]]] = {}
    for b, f in zip(base, ft):
        groups.setdefault(_group_of(b), []).append((_accuracy(b), _accuracy(f)))
    return [GroupDiff(g, stratum, sum((b for b, _ in pairs), Fraction(0)) / len(pairs),
                      sum((f for _, f in pairs), Fraction(0)) / len(pairs), len(pairs))
            for g, pairs in groups.items()]


def sign_flip_test(diffs: Sequence[Fraction | float | int], *, n_perm: int = 200_000,
                   seed: int = 0) -> dict:
    """Two-sided paired sign-flip test of sum(D_g) = 0. Under the null the two models are
    exchangeable within each group, so each D_g keeps or flips its sign with probability 1/2.
    Rational D_g (group means of counts) are scaled to integers and the null distribution of
    the sum is computed exactly by dynamic programming; otherwise (or when the table would be
    too large) it is estimated from n_perm random sign patterns (p counted with the observed
    pattern included, so it is never 0)."""
    if len(diffs) == 0:
        raise ValueError("need at least one group")
    n = len(diffs)
    fractions = [Fraction(d) for d in diffs] if all(
        isinstance(d, (Fraction, int)) for d in diffs) else None
    mean = float(sum(Fraction(d) for d in diffs) / n) if fractions else float(np.mean(diffs))
    if fractions is not None:
        scale = math.lcm(*(d.denominator for d in fractions))
        steps = [int(d * scale) for d in fractions]
        total = sum(abs(s) for s in steps)
        if total <= EXACT_LIMIT:
            return {"test": "exact paired sign-flip permutation test over groups",
                    "mean_diff": mean, "p": exact_sign_flip_p(steps), "groups": n,
                    "exact": True}
    x = np.asarray([float(d) for d in diffs])
    rng = np.random.default_rng(seed)
    observed = abs(x.sum())
    hits, done = 0, 0
    chunk = max(1, 4_000_000 // n)
    while done < n_perm:
        size = min(chunk, n_perm - done)
        signs = rng.integers(0, 2, size=(size, n)) * 2 - 1
        hits += int((np.abs(signs @ x) >= observed - 1e-12 * max(1.0, observed)).sum())
        done += size
    return {"test": "Monte Carlo paired sign-flip permutation test over groups",
            "mean_diff": mean, "p": (hits + 1) / (n_perm + 1), "groups": n, "exact": False,
            "n_perm": n_perm, "seed": seed}


def cluster_bootstrap_ci(diffs: Sequence[float], strata: Sequence[str] | None = None, *,
                         n_boot: int = 10_000, confidence: float = 0.95, seed: int = 0,
                         weights: Sequence[float] | None = None) -> dict:
    """Percentile interval for mean(D_g), resampling whole groups with replacement; with
    `strata` (the seed of each group) each stratum is resampled to its own size, so every
    resample keeps the design's share of groups per seed. With `weights` (each group's number
    of questions) the mean is sum(w_g D_g) / sum(w_g) in the estimate and in every resample: a
    mean over questions whose groups are resampled whole."""
    x = np.asarray([float(d) for d in diffs])
    if x.ndim != 1 or x.size == 0:
        raise ValueError("need a non-empty list of group differences")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    labels = list(strata) if strata is not None else [""] * x.size
    if len(labels) != x.size:
        raise ValueError("strata and differences differ in length")
    w = np.ones(x.size) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != x.shape or not (w > 0).all():
        raise ValueError("need one positive weight per group")
    rng = np.random.default_rng(seed)
    sums, totals = np.zeros(n_boot), np.zeros(n_boot)
    for label in dict.fromkeys(labels):
        rows = [i for i, s in enumerate(labels) if s == label]
        part, part_w = x[rows] * w[rows], w[rows]
        idx = rng.integers(0, part.size, size=(n_boot, part.size))
        sums += part[idx].sum(axis=1)
        totals += part_w[idx].sum(axis=1)
    means = sums / totals
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    estimate = float(x.mean()) if weights is None else float((x * w).sum() / w.sum())
    return {"mean_diff": estimate, "low": float(low), "high": float(high),
            "confidence": confidence, "n_boot": n_boot, "seed": seed, "groups": int(x.size)}


def at_k_interval(records: Sequence[dict], k: int, metric: str = "pass", *,
                  n_boot: int = 10_000, confidence: float = 0.95, seed: int = 0,
                  strata: Sequence[str] | None = None) -> dict:
    """pass@k or mean@k (relrl.evaluation.stats) of one model: the mean over questions of each question's
    unbiased estimate from its `samples` and `pass_count`, as the evaluation JSON reports it,
    with a percentile interval from resampling paraphrase groups whole (each group weighted by
    its number of questions), since paraphrases of one problem do not fail independently.
    With `strata` (one label per record: the seed of records pooled over seeds) a group is
    the pair (stratum, group) and groups are resampled within their stratum."""
    estimators = {"pass": pass_at_k, "mean": mean_at_k}
    if metric not in estimators:
        raise ValueError(f"metric must be 'pass' or 'mean', got {metric!r}")
    if not records:
        raise ValueError("no records")
    labels = [""] * len(records) if strata is None else [str(s) for s in strata]
    if len(labels) != len(records):
        raise ValueError("strata and records differ in length")
    by_group: dict[tuple[str, str], list[float]] = {}
    for r, label in zip(records, labels):
        value = estimators[metric](int(r["samples"]), int(r["pass_count"]), k)
        by_group.setdefault((label, _group_of(r)), []).append(value)
    sizes = [len(values) for values in by_group.values()]
    ci = cluster_bootstrap_ci([sum(values) / len(values) for values in by_group.values()],
                              [label for label, _ in by_group], n_boot=n_boot,
                              confidence=confidence, seed=seed, weights=sizes)
    return {"metric": f"{metric}@{k}", "value": ci["mean_diff"], "low": ci["low"],
            "high": ci["high"], "confidence": confidence, "n_boot": n_boot, "seed": seed,
            "groups": len(sizes), "questions": len(records)}


def compare_groups(diffs: Sequence[GroupDiff], *, n_boot: int = 10_000, seed: int = 0) -> dict:
    """The group-level comparison: estimate, exact test, stratified cluster bootstrap."""
    test = sign_flip_test([d.diff for d in diffs])
    ci = cluster_bootstrap_ci([float(d.diff) for d in diffs], [d.stratum for d in diffs],
                              n_boot=n_boot, seed=seed)
    return {"groups": len(diffs), "questions": sum(d.questions for d in diffs),
            "base_accuracy": float(sum(d.base for d in diffs) / len(diffs)),
            "ft_accuracy": float(sum(d.ft for d in diffs) / len(diffs)),
            "delta": test["mean_diff"], "p": test["p"], "test": test["test"],
            "ci_low": ci["low"], "ci_high": ci["high"], "confidence": ci["confidence"],
            "n_boot": n_boot, "bootstrap_seed": seed}


# ---------------------------------------------------------------------------- power


def _z(q: float) -> float:
    return NormalDist().inv_cdf(q)


def power(sd: float, n_groups: int, effect: float, alpha: float = 0.05) -> float:
    """Power of a two-sided level-alpha test of mean(D_g) = 0 when the true mean is `effect`
    and D_g has standard deviation `sd` (normal approximation to the sign-flip test)."""
    if sd <= 0 or n_groups < 1:
        raise ValueError("need sd > 0 and n_groups >= 1")
    shift = abs(effect) * math.sqrt(n_groups) / sd
    z = _z(1 - alpha / 2)
    return NormalDist().cdf(shift - z) + NormalDist().cdf(-shift - z)


def groups_needed(sd: float, effect: float, alpha: float = 0.05, target: float = 0.8) -> int:
    """Smallest number of groups with power >= target: n = ((z_{1-a/2} + z_target) sd / effect)^2,
    rounded up (the formula ignores the opposite tail, which adds power)."""
    if effect == 0:
        raise ValueError("effect must be non-zero")
    return math.ceil(((_z(1 - alpha / 2) + _z(target)) * sd / abs(effect)) ** 2)


def min_detectable(sd: float, n_groups: int, alpha: float = 0.05, target: float = 0.8) -> float:
    """Smallest true mean difference detected with probability `target` by n_groups groups."""
    return (_z(1 - alpha / 2) + _z(target)) * sd / math.sqrt(n_groups)


@dataclass(frozen=True)
class VarianceModel:
    """Var(D_g) = tau2 + omega2 / m + w / (m K) for a group of m questions with K samples each:
    tau2 the spread of the true difference between groups, omega2 its spread between the
    questions of one group, w the binomial sampling variance of one sample of each model,
    E[p_b(1 - p_b)] + E[p_f(1 - p_f)]."""
    tau2: float
    omega2: float
    w: float

    def var(self, m: float, k: int) -> float:
        return self.tau2 + self.omega2 / m + self.w / (m * k)

    def sd(self, m: float, k: int) -> float:
        return math.sqrt(self.var(m, k))

    def to_dict(self) -> dict:
        return asdict(self)


def _between_components(by: dict[str, list[float]], noise: float) -> tuple[float, float]:
    """tau2 and omega2 from per-question values by group, given the sampling-noise variance
    `noise` of one question's value. Question-level Var = tau2 + omega2 + noise; group means
    have Var = tau2 + (omega2 + noise) / m. With m the harmonic mean group size:
    tau2 = (m V_g - V_q) / (m - 1), clipped to [0, V_q - noise]."""
    if len(by) < 2:
        raise ValueError("need at least two groups")
    values = np.asarray([d for ds in by.values() for d in ds], dtype=float)
    v_q = float(values.var(ddof=1))
    sizes = np.asarray([len(ds) for ds in by.values()], dtype=float)
    v_g = float(np.asarray([np.mean(ds) for ds in by.values()]).var(ddof=1))
    m = float(len(sizes) / np.sum(1 / sizes))
    between = max(v_q - noise, 0.0)  # tau2 + omega2
    tau2 = min(max((m * v_g - v_q) / (m - 1), 0.0), between) if m > 1 else between
    return tau2, between - tau2


def estimate_variance_model(diffs_one_sample: Sequence[tuple[str, int]], w: float) -> VarianceModel:
    """Components from one-sample data: (group, d_q) per question with d_q = y_f - y_b in
    {-1, 0, 1}, and w estimated elsewhere (one sample cannot tell it from the rest)."""
    by: dict[str, list[float]] = {}
    for group, d in diffs_one_sample:
        by.setdefault(group, []).append(d)
    return VarianceModel(*_between_components(by, w), w=w)


def estimate_variance_model_k(diffs: Sequence[tuple[str, Sequence[int]]]) -> VarianceModel:
    """Components measured from K-sample data: (group, [y_f,k - y_b,k for k < K]) per question,
    sample k of the two models paired (they share the question's seed). w is the mean over
    questions of the paired differences' variance across samples (unbiased, K >= 2); the
    question's value is their mean, whose sampling noise is w / K."""
    ks = {len(x) for _, x in diffs}
    if len(ks) != 1 or min(ks) < 2:
        raise ValueError(f"need the same K >= 2 samples for every question, got K in {sorted(ks)}")
    k = ks.pop()
    w = float(np.mean([np.var(x, ddof=1) for _, x in diffs]))
    by: dict[str, list[float]] = {}
    for group, x in diffs:
        by.setdefault(group, []).append(float(np.mean(x)))
    return VarianceModel(*_between_components(by, w / k), w=w)
