"""Forgetting as a difference (issue 46, item 2): an arm's change on never-trained families
minus its change on the families it trained on, both measured on the retention set.

A change that hits every family alike (a broken output format, the redone replication's prose
SFT) cancels in the difference; forgetting, a loss where the arm did not train beside none
where it did, does not. Both strata are questions the base answers right (the retention set),
so a gain on the trained families cannot grow much and fake a negative difference.

The two strata hold different paraphrase groups, so the difference is between two means of
independent group changes: its interval resamples groups within each (seed, stratum), and its
p permutes the stratum labels within each seed (under "no difference" a group's change does
not depend on whether its family was trained). Power: the normal approximation with each
stratum's own variance."""
from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Callable

import numpy as np

from relrl.evaluation.clustered_stats import group_differences
from study.replication.seed_files import records

N_RESAMPLES = 10_000

Keep = Callable[[dict], bool]


def stratum_changes(dirs: dict[int, Path], set_name: str, model: str, against: str,
                    keep: Keep) -> dict[int, np.ndarray]:
    """Each seed's group changes (model minus `against`) on the records `keep` accepts."""
    out = {}
    for seed, folder in dirs.items():
        diffs = group_differences(records(folder, set_name, against, keep),
                                  records(folder, set_name, model, keep))
        out[seed] = np.array([float(d.diff) for d in diffs])
    return out


def _estimate(never: list[np.ndarray], trained: list[np.ndarray]) -> float:
    return float(np.concatenate(never).mean() - np.concatenate(trained).mean())


def _resampled(xa: list[np.ndarray], xb: list[np.ndarray], rng: np.random.Generator,
               n: int) -> tuple[np.ndarray, np.ndarray]:
    """n bootstrap estimates (groups drawn with replacement within each seed and stratum) and
    n permutation estimates (stratum labels shuffled within each seed), as arrays."""
    sum_boot_a = sum_boot_b = sum_perm_a = sum_perm_b = 0.0
    for x, y in zip(xa, xb):
        sum_boot_a = sum_boot_a + x[rng.integers(0, len(x), (n, len(x)))].sum(axis=1)
        sum_boot_b = sum_boot_b + y[rng.integers(0, len(y), (n, len(y)))].sum(axis=1)
        shuffled = rng.permuted(np.tile(np.concatenate([x, y]), (n, 1)), axis=1)
        sum_perm_a = sum_perm_a + shuffled[:, :len(x)].sum(axis=1)
        sum_perm_b = sum_perm_b + shuffled[:, len(x):].sum(axis=1)
    na, nb = sum(map(len, xa)), sum(map(len, xb))
    return sum_boot_a / na - sum_boot_b / nb, sum_perm_a / na - sum_perm_b / nb


def difference(dirs: dict[int, Path], set_name: str, model: str, against: str, never: Keep,
               trained: Keep, **test) -> dict:
    """The change of `model` against `against` on the `never` stratum minus that on the
    `trained` one, pooled over seeds (difference_of_changes), on the seeds with groups in both."""
    a = stratum_changes(dirs, set_name, model, against, never)
    b = stratum_changes(dirs, set_name, model, against, trained)
    seeds = [s for s in dirs if len(a[s]) and len(b[s])]
    if not seeds:
        raise ValueError(f"{set_name}: no seed has groups in both strata")
    return {"model": model, "against": against, "set": set_name,
            **difference_of_changes([a[s] for s in seeds], [b[s] for s in seeds], **test),
            "seeds": seeds}


def difference_of_changes(xa: list[np.ndarray], xb: list[np.ndarray], *, alpha: float = 0.01,
                          power: float = 0.8, confidence: float = 0.95, seed: int = 0,
                          n_resamples: int = N_RESAMPLES) -> dict:
    """mean(xa) - mean(xb) over the groups of every seed (xa[i], xb[i]: seed i's group changes
    in the two strata), with a bootstrap interval at `confidence`, a two-sided permutation p
    and the smallest difference a level-`alpha` test detects with `power`."""
    estimate = _estimate(xa, xb)
    boot, permuted = _resampled(xa, xb, np.random.default_rng(seed), n_resamples)
    # a tolerance, so that ties with the observed value count as extreme (float sums)
    extreme = int((np.abs(permuted) >= abs(estimate) - 1e-12).sum())
    tail = (1 - confidence) / 2
    pooled_a, pooled_b = np.concatenate(xa), np.concatenate(xb)
    se = math.sqrt(_var(pooled_a) / len(pooled_a) + _var(pooled_b) / len(pooled_b))
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return {"never_change": float(pooled_a.mean()), "never_groups": len(pooled_a),
            "trained_change": float(pooled_b.mean()), "trained_groups": len(pooled_b),
            "delta": estimate, "ci_low": float(np.quantile(boot, tail)),
            "ci_high": float(np.quantile(boot, 1 - tail)), "confidence": confidence,
            "p": (extreme + 1) / (n_resamples + 1), "test": "stratum-label permutation",
            "se": se, "mdd": z * se, "alpha": alpha, "power": power}


def _var(x: np.ndarray) -> float:
    return float(x.var(ddof=1)) if len(x) > 1 else 0.0
