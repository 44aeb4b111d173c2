"""What kind of quantity a question asks for: "probability" or "value" (TARGET_KINDS), which the
"complement" tolerance rule (relrl.grading.scoring) needs.

A dataset row's `target_kind` field when it has one, else inferred by `infer_target_kind`:
"probability" when some target value lies strictly in (0, 1) and the question's asked quantity
(the words after its last "determine / find / calculate / compute / estimate / evaluate / obtain
/ give / what / how", up to the first comma, full stop, question mark or condition such as "if",
"given", "when") names first a reliability, availability, unreliability, probability, fraction,
proportion, percentage, chance or importance, or writes R(..), P(..), F(..), Q(..), A(..) or
FV(..), rather than an MTTF, life, time, number, rate, cost, interval or parameter; else "value".
On the study's 54 held-out questions it marks 23 probability (every "determine the reliability /
availability / probability ..." question); "the expected number of failures" (0.5, 0.768), "the
optimal replacement interval" (0.999), "the parameter of the exponential distribution"
(0.010353) and "System Effectiveness" (0.837) stay values. On generated rows it agrees with the
field the generator writes.
"""
from __future__ import annotations

import re

from relrl.grading.numbers import parse_target_values

TARGET_KINDS = ("probability", "value")

# The asked quantity: the words after the last asking verb, up to the first clause break.
_ASK = re.compile(r"\b(?:determine|find|calculate|compute|estimate|evaluate|obtain|what|how)\b"
                  r"|\bgive\b(?!\s+(?:your|the)\s+answer)", re.IGNORECASE)
# (a comma before three digits separates thousands: "R(9,100 h)")
_ASKED_END = re.compile(r"[;:?!]|,(?!\d{3})|\.(?:\s|$)|\b(?:if|given|assuming|when|such that"
                        r"|so that|in order|to achieve|provided)\b", re.IGNORECASE)
_QUANTITY = re.compile(
    r"(?P<probability>\b(?:(?:un)?reliabilit(?:y|ies)|(?:un)?availabilit(?:y|ies)"
    r"|probabilit(?:y|ies)|fraction|proportion|percent(?:age)?|chance|importance)\b"
    r"|(?-i:\b(?:[RPFQA]|FV)\s*\())"  # R(t), P(TOP), F(t), Q(t), A(t), FV(C)
    r"|\b(?:MTT?F|MTBF|MTTR|MRL|life|lifetime|time|number|cost|rate|interval|parameter"
    r"|lambda)\b|λ|\A\s*(?:many|much|long)\b", re.IGNORECASE)  # how many / much / long


def asked_quantity(question: str) -> str:
    """The words naming what a question asks for: after its last asking verb (determine,
    find, calculate, compute, estimate, evaluate, obtain, give, what, how), up to the first
    comma, full stop, question mark or condition ("if", "given", "assuming", "when", ...)."""
    asks = list(_ASK.finditer(question))
    start = asks[-1].end() if asks else 0
    end = _ASKED_END.search(question, start)
    return question[start:end.start() if end else len(question)]


def infer_target_kind(question: str, answer) -> str:
    """"probability" when some target value lies strictly in (0, 1) and the first quantity the
    question asks for is a reliability, availability, unreliability, probability, fraction,
    proportion, percentage, chance or importance, or is written R(..), P(..), F(..), Q(..),
    A(..) or FV(..) (before any MTTF, life, time, number, rate, cost ...); else "value"."""
    truths, _ = parse_target_values("" if answer is None else str(answer))
    if truths is None or not any(0 < t.value < 1 for t in truths):
        return "value"
    first = _QUANTITY.search(asked_quantity(question or ""))
    return "probability" if first is not None and first["probability"] else "value"


def target_kind_of(row: dict) -> str:
    """A dataset row's target kind: its `target_kind` field when present (ValueError unless
    one of TARGET_KINDS), else infer_target_kind on its question and answer."""
    kind = row.get("target_kind")
    if kind is not None:
        if kind not in TARGET_KINDS:
            raise ValueError(f"target_kind must be one of {', '.join(TARGET_KINDS)}, "
                             f"got {kind!r}")
        return kind
    return infer_target_kind(str(row.get("question") or ""), row.get("answer"))
