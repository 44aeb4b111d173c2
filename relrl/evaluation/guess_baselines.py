"""Guess baselines: what answering without working the problem scores on an evaluated set.

Three guesses, each graded with the evaluation's own rule (relrl.grading.scoring.is_correct_value with
the same tolerance, tolerance rule and each row's target kind):

- constant: one answer given to every question. Fitted on the TRAINING rows only, never on the
  rows it is scored on: among the candidates (every training target and the grid below) the one
  correct on the most training rows; of equals, the one that is itself the most frequent
  training target, then the smallest.
- family_mode: per problem family, the answer most often graded correct on that family's
  training rows (the constant's fit on the family alone: with real-valued targets the literal
  most frequent target is almost always a tie of ones). A family without training rows, or
  whose best candidate is correct on none of them, and a row without a `family`, get the
  constant.
- copy: the last number written in the question (percent as a fraction: "95%" -> 0.95); a
  question without a number gets no answer and counts as wrong. Nothing is fitted.

A model's margin is its accuracy minus the best guess's accuracy on the same rows.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from relrl.data.dataset_io import questions_fingerprint
from relrl.grading.numbers import find_numbers, normalize, parse_target
from relrl.grading.scoring import is_correct_value
from relrl.grading.target_kind import target_kind_of

GUESSES = ("constant", "family_mode", "copy")
COPY_RULE = "the last number in the question"
# Round answers a guesser would try besides the training targets: hundredths and the
# reliabilities near 1, then 1-2-5 steps over the magnitudes of counts, hours and rates.
GRID = tuple(sorted({round(0.01 * i, 2) for i in range(1, 100)} | {0.995, 0.999} |
                    {m * 10.0 ** e for e in range(-4, 7) for m in (1, 2, 5)}))


@dataclass(frozen=True)
class Fitted:
    """The guesses' answers, as fitted on training rows (or read back from a recorded block)."""

    constant: float | None  # None: no training target is a single number
    train_accuracy: float  # the constant's accuracy on the training rows
    family_answers: dict[str, float] = field(default_factory=dict)


def _target(row: dict):
    """Dataset rows hold the target as `answer`, evaluation records as `target`."""
    return row["answer"] if "answer" in row else row["target"]


def _kind(row: dict) -> str:
    return target_kind_of({**row, "answer": _target(row)})


def _tallies(rows: Iterable[dict]) -> Counter:
    """(target text, target kind) -> number of rows: paraphrases share a target, so each
    distinct one is graded once per candidate."""
    return Counter((str(_target(row)), _kind(row)) for row in rows)


def candidates(rows: Iterable[dict]) -> list[float]:
    """Every training target that is one number, and the grid, in increasing order."""
    values = {parse_target(str(_target(row)))[0] for row in rows}
    return sorted({v for v in values if v is not None} | set(GRID))


def fit_constant(train_rows: Sequence[dict], *, tolerance: float = 0.05,
                 rule: str = "study") -> tuple[float | None, float]:
    """(answer, training accuracy) of the single answer correct on most training rows."""
    tallies = _tallies(train_rows)
    exact = Counter(parse_target(target)[0] for target, _ in tallies.elements())
    best, best_key = None, (0, 0)
    for value in candidates(train_rows):
        hits = sum(n for (target, kind), n in tallies.items()
                   if is_correct_value(value, target, tolerance=tolerance, rule=rule,
                                       target_kind=kind))
        key = (hits, exact[value])  # of equals, the most frequent target, then the smallest
        if key > best_key:
            best, best_key = value, key
    if best is None:
        return None, 0.0
    return best, best_key[0] / len(train_rows)


def fit_family_modes(train_rows: Sequence[dict], *, tolerance: float = 0.05,
                     rule: str = "study") -> dict[str, float]:
    """family -> its fitted answer, for the families whose best answer is right at least once."""
    by_family: dict[str, list[dict]] = {}
    for row in train_rows:
        if row.get("family"):
            by_family.setdefault(str(row["family"]), []).append(row)
    answers = {}
    for family, rows in sorted(by_family.items()):
        value, _ = fit_constant(rows, tolerance=tolerance, rule=rule)
        if value is not None:
            answers[family] = value
    return answers


def copy_answer(question: str) -> float | None:
    """The last number in the question that has a value, or None."""
    values = [n.value for n in find_numbers(normalize(question)) if n.value is not None]
    return values[-1] if values else None


def fit_guesses(train_rows: Sequence[dict], *, tolerance: float = 0.05,
                rule: str = "study") -> Fitted:
    constant, accuracy = fit_constant(train_rows, tolerance=tolerance, rule=rule)
    return Fitted(constant, accuracy, fit_family_modes(train_rows, tolerance=tolerance, rule=rule))


def guess_answers(row: dict, fitted: Fitted) -> dict[str, float | None]:
    """Each guess's answer to one row."""
    return {"constant": fitted.constant,
            "family_mode": fitted.family_answers.get(str(row.get("family") or ""), fitted.constant),
            "copy": copy_answer(row["question"])}


def guess_outcomes(rows: Sequence[dict], fitted: Fitted, *, tolerance: float = 0.05,
                   rule: str = "study") -> dict[str, list[bool]]:
    """Per guess, whether it is correct on each row, in row order."""
    out: dict[str, list[bool]] = {name: [] for name in GUESSES}
    for row in rows:
        target, kind = _target(row), _kind(row)
        for name, value in guess_answers(row, fitted).items():
            out[name].append(value is not None and is_correct_value(
                value, target, tolerance=tolerance, rule=rule, target_kind=kind))
    return out


def score_fitted(rows: Sequence[dict], fitted: Fitted, *, tolerance: float = 0.05,
                 rule: str = "study") -> dict:
    """The baselines block for `rows`: each guess's answers, correct count and accuracy, and
    which guess scores best."""
    n = len(rows)
    outcomes = guess_outcomes(rows, fitted, tolerance=tolerance, rule=rule)
    block: dict = {"kind": "guess_baselines", "tolerance": tolerance, "tolerance_rule": rule,
                   "n": n,
                   "constant": {"answer": fitted.constant, "train_accuracy": fitted.train_accuracy},
                   "family_mode": {"answers": dict(fitted.family_answers),
                                   "fallback": fitted.constant},
                   "copy": {"rule": COPY_RULE}}
    for name in GUESSES:
        correct = sum(outcomes[name])
        block[name].update(correct=correct, accuracy=correct / n if n else 0.0)
    best = max(GUESSES, key=lambda name: block[name]["accuracy"])  # first of equals
    block["best"] = {"guess": best, "accuracy": block[best]["accuracy"]}
    return block


def score_baselines(rows: Sequence[dict], train_rows: Sequence[dict], *,
                    tolerance: float = 0.05, rule: str = "study") -> dict:
    """Fit the guesses on `train_rows`, score them on `rows` (dataset rows or evaluation
    records): the block an evaluation records beside its accuracy."""
    fitted = fit_guesses(train_rows, tolerance=tolerance, rule=rule)
    block = score_fitted(rows, fitted, tolerance=tolerance, rule=rule)
    block["train"] = {"rows": len(train_rows), "fingerprint": questions_fingerprint(train_rows)}
    return block


def fitted_from_block(block: dict) -> Fitted:
    """The fitted answers a recorded block holds, to score them on other rows (a subset)."""
    return Fitted(block["constant"]["answer"], block["constant"]["train_accuracy"],
                  dict(block["family_mode"]["answers"]))


def rescore(block: dict, rows: Sequence[dict]) -> dict:
    """A recorded block's guesses scored on other rows with its own rule and tolerance."""
    out = score_fitted(rows, fitted_from_block(block), tolerance=block["tolerance"],
                       rule=block["tolerance_rule"])
    return {**out, **({"train": block["train"]} if "train" in block else {})}


def margin(model_accuracy: float, block: dict) -> float:
    """The model's accuracy minus the best guess's, on the same rows (a fraction)."""
    return model_accuracy - block["best"]["accuracy"]


def with_baselines(result: dict, block: dict) -> dict:
    """A model or pair result with the block and each model's margin over the best guess."""
    models = [result["base"], result["finetuned"]] if result.get("kind") == "pair_result" \
        else [result]
    margins = {m["model"]: margin(m["accuracy"], block) for m in models}
    return {**result, "guess_baselines": {**block, "margins": margins}}


def describe(block: dict) -> str:
    """One line: the best guess, and each model's margin over it when the block has them."""
    best = block["best"]["guess"]
    answer = {"constant": f" {block['constant']['answer']:g}" if block["constant"]["answer"]
              is not None else "", "family_mode": " per family", "copy": f" ({COPY_RULE})"}[best]
    line = (f"best guess: {best}{answer}, {block[best]['correct']}/{block['n']} correct "
            f"({100 * block['best']['accuracy']:.1f}%, {block['tolerance_rule']} rule)")
    margins = ", ".join(f"{m} {100 * d:+.1f}" for m, d in block.get("margins", {}).items())
    return line + (f"; margin over it in points: {margins}" if margins else "")
