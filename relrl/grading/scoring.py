"""Grading one response against its ground truth: the tolerance rules, the reward tiers, grade()
and is_correct_value().

Targets with several values ("31, 521", "R = 0.95; MTTF = 1000") are graded part by part in
order: the answer must give as many values (relrl.grading.extraction.extract_values), each within
the tolerance; the reward band is that of the worst part.

Percentages: `3.1%` is 0.031. When exactly one side (answer or target) carries a `%` sign, the
percent numbers are compared as well, so target `3.1%` accepts `0.031`, `3.1%` and `3.1`;
target `0.031` accepts `3.1%` but not `3.1`.

Scoring: the tolerance rule (`rule`, one of TOLERANCE_RULES) names the error judged against
`tolerance` (default 5%) and the partial-credit bands of RewardTiers. "study", the study's rule
and the default: relative error |a - t| / |t|. "complement": for a target of kind "probability"
(relrl.grading.target_kind) strictly inside (0, 1) the error is |a - t| / min(t, 1 - t), so a
reliability near 1 is judged on its failure probability (0.95 against 0.9355 is 1.5% off
relatively but 22% off on 1 - t); an answer within half the target's last stated digit
("0.9991": 0.00005) counts as exact, so a target is never graded tighter than it was written;
any other target as under "study". Several values and percent readings follow the rule value by
value. A zero target has no relative error; the answer is correct when |a| <= `abs_tolerance`
(default 1e-6).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from relrl.grading.extraction import MAX_TEXT, Extraction, extract_answer, extract_values
from relrl.grading.numbers import FLOOR_SLACK, Number, half_last_digit, parse_target_values
from relrl.grading.target_kind import TARGET_KINDS

TOLERANCE_RULES = ("study", "complement")


@dataclass(frozen=True)
class RewardTiers:
    """The study's reward: (error limit, reward) bands from the tightest, then the rewards for
    a wrong number, no answer, and the penalty for listing many boxed answers. The error is the
    one the tolerance rule judges (relative, or on min(t, 1 - t) under "complement")."""

    bands: tuple[tuple[float, float], ...] = ((0.001, 1.0), (0.01, 0.8), (0.05, 0.4))
    wrong_number: float = 0.01
    no_answer: float = 0.0
    max_boxes: int = 2
    too_many_boxes: float = -0.3


DEFAULT_TIERS = RewardTiers()
_EPS = 1e-12  # 0.1001 against 0.1 is 0.1% off and must stay in that band despite rounding


@dataclass(frozen=True)
class Grade:
    extracted: str | None
    value: float | None
    target: float | None
    rel_error: float | None  # the rule's error; None when there is no value or the target is zero
    correct: bool
    reward: float
    n_boxed: int
    reason: str
    source: str | None = None
    truncated: bool = False  # the caller said the response hit the token limit
    values: tuple[float, ...] | None = None  # the answer's values, for a target with several
    targets: tuple[float, ...] | None = None  # the target's values, when it has several
    tolerance_rule: str = "study"

    def to_dict(self) -> dict:
        """The fields; `values`/`targets` only for a target with several values and
        `truncated` only when set."""
        out = asdict(self)
        if self.targets is None:
            del out["values"], out["targets"]
        if not self.truncated:
            del out["truncated"]
        return out


def _check_rule(rule: str, target_kind: str | None) -> None:
    if rule not in TOLERANCE_RULES:
        raise ValueError(f"tolerance rule must be one of {', '.join(TOLERANCE_RULES)}, "
                         f"got {rule!r}")
    if target_kind is not None and target_kind not in TARGET_KINDS:
        raise ValueError(f"target_kind must be one of {', '.join(TARGET_KINDS)}, "
                         f"got {target_kind!r}")


def _on_complement(truth: Number, rule: str, target_kind: str | None) -> bool:
    """Whether the complement rule judges this target value (a probability strictly in (0, 1))."""
    return rule == "complement" and target_kind == "probability" and 0 < truth.value < 1


def _error(answer: Extraction | Number, target: Number,
           complement: bool) -> tuple[float, float, bool]:
    """(error, judged error, whether it came from reading both sides as percent numbers): the
    percent rule of the module docstring, the smaller reading wins. The error is relative, on
    min(t, 1 - t) under the complement rule, or absolute for a zero target; the judged error
    is the same except 0 within half the target's last stated digit (complement rule only)."""
    if complement:
        scale, floor = min(target.value, 1 - target.value), half_last_digit(target)

    def error(a: float, t: float, unit: float) -> tuple[float, float]:
        diff = abs(a - t)
        if complement:  # unit: 100 when both sides are read as percent numbers
            measured = diff / (scale * unit)
            return (0.0 if diff <= floor * unit * FLOOR_SLACK else measured), measured
        measured = diff / abs(t) if t != 0 else diff
        return measured, measured

    best = error(answer.value, target.value, 1.0)
    if answer.percent != target.percent and answer.raw is not None and target.raw is not None:
        unit = target.raw / target.value if target.value else 1.0
        as_percent = error(answer.raw, target.raw, unit)
        if as_percent < best:
            return as_percent[1], as_percent[0], True
    return best[1], best[0], False


def _percent(x: float) -> str:
    return f"{x * 100:.3g}%"


def _score(answer: Extraction | Number, truth: Number, tolerance: float, tiers: RewardTiers,
           abs_tolerance: float, complement: bool) -> tuple[float | None, bool, float, str, bool]:
    """(error, None for a zero target; correct; reward; reason; whether read as percent
    numbers) of one answer value against one target value."""
    error, judged, percent_reading = _error(answer, truth, complement)
    if truth.value == 0:
        correct = error <= abs_tolerance
        reward = tiers.bands[0][1] if correct else tiers.wrong_number
        return None, correct, reward, f"zero target, absolute error {error:.3g}", percent_reading
    correct = judged <= tolerance + _EPS
    reward = next((r for limit, r in tiers.bands if judged <= limit + _EPS), tiers.wrong_number)
    within = next((limit for limit, _ in tiers.bands if judged <= limit + _EPS), None)
    of = " of min(t, 1 - t)" if complement else ""
    if judged < error:
        reason = "within half the target's last digit"
    elif within is not None:
        reason = f"within {_percent(within)}{of}"
    else:
        reason = f"off by {_percent(error)}{of}"
    return error, correct, reward, reason, percent_reading


def grade(response: str, target, *, tolerance: float = 0.05, rule: str = "study",
          target_kind: str | None = None, allow_plain: bool = False,
          tiers: RewardTiers = DEFAULT_TIERS, abs_tolerance: float = 1e-6,
          truncated: bool = False) -> Grade:
    """Grade one response against one ground-truth answer (string or number), or against
    each value in order of a target with several ("31, 521").

    rule: "study" (relative error) or "complement" (see Scoring in the module docstring);
    target_kind: "probability" or "value"; None is "value" (pass target_kind_of(row) when
    the target comes from a dataset row).

    truncated: the response stopped at the token limit (a Completion's `.truncated`, an API's
    finish_reason "length"). It changes only plain answers (allow_plain): no last-number
    fallback and no half-written last line. A boxed answer, the GRPO reward, is unaffected."""
    _check_rule(rule, target_kind)
    truths, target_reason = parse_target_values("" if target is None else str(target))
    if truths is not None and len(truths) > 1:
        return _grade_parts(response, truths, tolerance, rule, target_kind, allow_plain, tiers,
                            abs_tolerance, truncated)
    truth = truths[0] if truths else None
    answer = extract_answer(response, allow_plain, truncated=truncated)
    too_many = answer.n_boxed > tiers.max_boxes
    notes = [f"{answer.n_boxed} boxed answers (more than {tiers.max_boxes})"] if too_many else []

    def result(rel_error, correct, reward, reason):
        reason = "; ".join([reason, *notes])
        reward = tiers.too_many_boxes if too_many else reward
        return Grade(answer.text, answer.value, truth.value if truth else None, rel_error,
                     correct, float(reward), answer.n_boxed, reason, answer.source,
                     bool(truncated), tolerance_rule=rule)

    if truth is None:
        return result(None, False, tiers.no_answer, f"target: {target_reason}")
    if answer.value is None:
        return result(None, False, tiers.no_answer, answer.reason)
    error, correct, reward, reason, percent_reading = _score(
        answer, truth, tolerance, tiers, abs_tolerance, _on_complement(truth, rule, target_kind))
    if percent_reading:
        notes.insert(0, "compared as percent numbers")
    return result(error, correct, reward, reason)


def _grade_parts(response, truths: tuple[Number, ...], tolerance: float, rule: str,
                 target_kind: str | None, allow_plain: bool, tiers: RewardTiers,
                 abs_tolerance: float, truncated: bool) -> Grade:
    """A target with several values: every part in order, the reward of the worst part."""
    count, targets = len(truths), tuple(t.value for t in truths)
    values, source, n_boxed, why = extract_values(response, count, allow_plain,
                                                  truncated=truncated)
    max_boxes = max(tiers.max_boxes, count)  # one box per asked value is not a list of guesses
    notes = [f"{n_boxed} boxed answers (more than {max_boxes})"] if n_boxed > max_boxes else []
    if values is None:
        answer = extract_answer(response, allow_plain, truncated=truncated)
        listed = ", ".join(t.text.strip() for t in truths)
        reason = "; ".join([f"target has several values ({listed}): {why}", *notes])
        reward = tiers.too_many_boxes if notes else tiers.no_answer
        return Grade(answer.text, answer.value, targets[0], None, False, float(reward), n_boxed,
                     reason, answer.source, bool(truncated), None, targets, rule)
    scores = [_score(v, t, tolerance, tiers, abs_tolerance, _on_complement(t, rule, target_kind))
              for v, t in zip(values, truths)]
    if any(s[4] for s in scores):
        notes.insert(0, "compared as percent numbers")
    errors = [s[0] for s in scores if s[0] is not None]
    reason = "; ".join([f"{count} values: " + ", ".join(s[3] for s in scores), *notes])
    reward = tiers.too_many_boxes if n_boxed > max_boxes else min(s[2] for s in scores)
    extracted = ", ".join(v.text.strip() for v in values)[:MAX_TEXT]
    return Grade(extracted, values[0].value, targets[0], max(errors) if errors else None,
                 all(s[1] for s in scores), float(reward), n_boxed, reason, source,
                 bool(truncated), tuple(v.value for v in values), targets, rule)


def is_correct_value(value: float, target, *, tolerance: float = 0.05, rule: str = "study",
                     target_kind: str | None = None, abs_tolerance: float = 1e-6) -> bool:
    """Whether an already extracted number is within the tolerance of a single-value target
    (string or number), by the same rule as `grade`: for guess baselines and stored answers.
    A target with several values, or none, is never met by one number."""
    _check_rule(rule, target_kind)
    truths, _ = parse_target_values("" if target is None else str(target))
    if truths is None or len(truths) != 1 or value is None or not math.isfinite(float(value)):
        return False
    answer = Number(repr(float(value)), float(value), float(value), False, 0, 0)
    truth = truths[0]
    return _score(answer, truth, tolerance, DEFAULT_TIERS, abs_tolerance,
                  _on_complement(truth, rule, target_kind))[1]
