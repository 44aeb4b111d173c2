"""Accuracy by stratum, and whether a model's answers follow the targets at all.

A model that cannot compute can still score on reliability questions by guessing near 1: most
reliabilities are, and screening keeps the questions where such guesses sometimes land. So an
accuracy alone does not say whether a model reads the question. Three views here do:

  by_target_range   accuracy on questions whose target lies in [0.85, 1) and on the rest, with
                    each stratum's share of answers in [0.85, 1) (over all completions)
  by_family         accuracy per problem family
  rank correlation  per family, Spearman's rho between the model's answers and the targets: a
                    model that reads the question's numbers ranks its answers as the targets
                    rank; one that guesses from the family's usual answers gives rho near 0

Records are per-question "model result" records (relrl.evaluation.model_results): `target`, `pass_count`,
`samples`, `family`, and the sampled answers' `value` under `completions` (K > 1) or on the
record itself. Accuracies count every completion, as the model result's own accuracy does.
A question's answer for the rank correlation is the median of its extracted values (the value
itself when K = 1); a target that is not a single number counts in "rest" and is left out of
the correlation.
"""
from __future__ import annotations

import statistics
from typing import Iterable, Sequence

from scipy.stats import spearmanr

from relrl.grading.numbers import parse_target

HIGH_RANGE = (0.85, 1.0)  # [low, high): where reliabilities of a working system sit
MIN_ANSWERED = 5  # fewer answered questions in a family: no rank correlation (None)


def in_high_range(x: float | None) -> bool:
    return x is not None and HIGH_RANGE[0] <= x < HIGH_RANGE[1]


def target_value(record: dict) -> float | None:
    return parse_target(record.get("target"))[0]


def answer_values(record: dict) -> list[float | None]:
    """Every sampled answer's value (None where nothing was extracted)."""
    return [c.get("value") for c in record.get("completions") or [record]]


def _accuracy(records: Sequence[dict]) -> dict:
    correct = sum(int(r["pass_count"]) for r in records)
    total = sum(int(r["samples"]) for r in records)
    return {"questions": len(records), "correct": correct, "total": total,
            "accuracy": correct / total if total else None}


def by_target_range(records: Sequence[dict]) -> dict:
    """{"high": ..., "rest": ...}: accuracy of the questions whose target is in HIGH_RANGE and
    of the others, each with `answers_in_range`, the share of its completions answered there."""
    out = {}
    for name, wanted in (("high", True), ("rest", False)):
        part = [r for r in records if in_high_range(target_value(r)) == wanted]
        answers = [v for r in part for v in answer_values(r)]
        out[name] = {**_accuracy(part), "answers_in_range":
                     sum(in_high_range(v) for v in answers) / len(answers) if answers else None}
    return out


def rank_correlation(pairs: Iterable[tuple[float, float]]) -> dict:
    """Spearman's rho of (answer, target) pairs; None when fewer than MIN_ANSWERED pairs or
    when either side is constant (rho is undefined)."""
    pairs = list(pairs)
    answers, targets = [a for a, _ in pairs], [t for _, t in pairs]
    rho = None
    if len(pairs) >= MIN_ANSWERED and len(set(answers)) > 1 and len(set(targets)) > 1:
        rho = float(spearmanr(answers, targets).statistic)
    return {"answered": len(pairs), "rank_correlation": rho}


def question_pair(record: dict) -> tuple[float, float] | None:
    """(median of the question's extracted answers, its target), or None without either."""
    target = target_value(record)
    values = [v for v in answer_values(record) if v is not None]
    if target is None or not values:
        return None
    return statistics.median(values), target


def by_family(records: Sequence[dict]) -> dict:
    """Per family (records without one are left out): accuracy and the rank correlation of
    its answered questions' answers with their targets."""
    families: dict[str, list[dict]] = {}
    for r in records:
        if r.get("family"):
            families.setdefault(str(r["family"]), []).append(r)
    return {name: {**_accuracy(rows),
                   **rank_correlation(p for p in map(question_pair, rows) if p is not None)}
            for name, rows in sorted(families.items())}


def median_rank_correlation(families: dict) -> float | None:
    """The median over families that have a rank correlation; None when none has."""
    rhos = [f["rank_correlation"] for f in families.values() if f["rank_correlation"] is not None]
    return statistics.median(rhos) if rhos else None


def strata(records: Sequence[dict]) -> dict:
    """Every view above, as the evaluation summary records it."""
    families = by_family(records)
    return {"high_range": list(HIGH_RANGE), "by_target_range": by_target_range(records),
            "by_family": families,
            "families_with_rank_correlation": sum(f["rank_correlation"] is not None
                                                  for f in families.values()),
            "median_rank_correlation": median_rank_correlation(families)}
