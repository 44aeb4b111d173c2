"""Group-level numbers pooled over seeds: paired comparisons tested over paraphrase groups
(relrl.evaluation.clustered_stats), each seed's groups separate clusters and the seed the
bootstrap stratum, and accuracies as the mean over groups of each group's mean."""
from __future__ import annotations

from pathlib import Path

from relrl.evaluation.clustered_stats import compare_groups, group_differences, min_detectable
from relrl.evaluation.strata import in_high_range, target_value
from study.replication.seed_files import records

N_BOOT = 10_000


def comparison(dirs: dict[int, Path], set_name: str, model: str, against: str, keep=None,
               alpha: float = 0.05, power: float = 0.8) -> dict:
    """Per seed and pooled group-level comparison of `model` against `against`, on the
    questions `keep(record)` accepts when given (a stratum of the set); the pooled one with
    the smallest change a two-sided level-`alpha` test would detect with `power`."""
    per_seed, pooled = {}, []
    for seed, folder in dirs.items():
        diffs = group_differences(records(folder, set_name, against, keep),
                                  records(folder, set_name, model, keep), stratum=str(seed))
        per_seed[str(seed)] = compare_groups(diffs, n_boot=N_BOOT, seed=seed)
        pooled += diffs
    out = compare_groups(pooled, n_boot=N_BOOT, seed=0)
    sd = _sd([float(d.diff) for d in pooled])
    out["mdd"] = min_detectable(sd, len(pooled), alpha, power) if sd > 0 else 0.0
    return {"set": set_name, "model": model, "against": against, "per_seed": per_seed,
            "pooled": out}


def _sd(x: list[float]) -> float:
    n = len(x)
    if n < 2:
        return 0.0
    mean = sum(x) / n
    return (sum((v - mean) ** 2 for v in x) / (n - 1)) ** 0.5


def group_means(recs: list[dict], scores: list[float]) -> list[float]:
    """Each paraphrase group's mean score (a record without a group is its own)."""
    by: dict[str, list[float]] = {}
    for r, score in zip(recs, scores):
        by.setdefault(str(r.get("group") or r["id"]), []).append(score)
    return [sum(v) / len(v) for v in by.values()]


def accuracy(dirs: dict[int, Path], set_name: str, model: str) -> dict:
    """Group-level accuracy (mean over groups of the group's mean accuracy), pooled."""
    scores = []
    for folder in dirs.values():
        recs = records(folder, set_name, model)
        scores += group_means(recs, [r["pass_count"] / r["samples"] for r in recs])
    return {"groups": len(scores), "accuracy": sum(scores) / len(scores)}


def strata(topics: set[str] | None, never: set[str] | None = None) -> dict:
    """Record filters by name: the target-range halves; with SFT topics, the topic halves;
    with the never-trained families, those families (never_trained), the families GRPO
    trained on (grpo_trained), of those the SFT topics' (sft_trained), and every family SFT
    did not train on (sft_untrained: the other trained families and the never-trained)."""
    out = {"high_range": lambda r: in_high_range(target_value(r)),
           "rest_range": lambda r: not in_high_range(target_value(r))}
    if topics:
        out["sft_topics"] = lambda r: r.get("topic") in topics
        out["other_topics"] = lambda r: r.get("topic") not in topics
    if never:
        out["never_trained"] = lambda r: r.get("family") in never
        out["grpo_trained"] = lambda r: r.get("family") not in never
        if topics:
            out["sft_trained"] = lambda r: r.get("topic") in topics and r.get("family") not in never
            out["sft_untrained"] = lambda r: not out["sft_trained"](r)
    return out
