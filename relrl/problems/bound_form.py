"""A family's expression in bound form: every number of the question copied, in the question's
order, into a name, then the formula written with the names.

    question: "... survives 23,000 km ... characteristic life 36,000 km and slope 2.8."
    expression: exp(-(23000/36000)^2.8)
    bound form: x1 = 23000; x2 = 36000; x3 = 2.8; exp(-(x1/x2)^x3)

The calculator evaluates both to the same value. The learnability runs
(results/tool-learnability) found that a miniature learns a family's formula but not to copy the
question's numbers into the formula's order; in bound form copying follows the question's own
order, and the formula over names is one template per family and phrasing. What `tiny-tool`,
trained on this form, makes of it: results/tiny-tool/.
"""
from __future__ import annotations

import re

# A number as questions write it (relrl.problems.base.txt, pct): "23,000", "0.036", "7.2 × 10^-6".
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?(?:\s*×\s*10\^-?\d+)?")
# ... and as an expression writes it: not inside a name (log10, chi2_ppf), "1e-5" whole.
EXPRESSION_NUMBER = re.compile(r"(?<![A-Za-z_\d.])\d+(?:\.\d+)?(?:e[-+]?\d+|\s*×\s*10\^-?\d+)?")


def number_value(text: str) -> float:
    mantissa, _, exponent = text.replace(",", "").partition("×")
    value = float(mantissa)
    return float(f"{value}e{int(exponent.strip()[3:])}") if exponent else value


def question_numbers(question: str) -> list[str]:
    """The numbers of a question in order, each as the calculator reads it (commas dropped)."""
    return [re.sub(r"\s+", " ", m.group().replace(",", "")) for m in NUMBER.finditer(question)]


def bound_expression(question: str, expression: str) -> str:
    """`expression` with each number that the question states replaced by its name (x1, x2, ...
    in the question's order; the first of equal numbers), after the bindings of every number of
    the question. Numbers the question does not state (the formula's constants) stay."""
    given = question_numbers(question)
    names: dict[float, str] = {}
    for k, text in enumerate(given, 1):
        names.setdefault(number_value(text), f"x{k}")

    def name_of(match: re.Match) -> str:
        return names.get(number_value(match.group()), match.group())

    formula = EXPRESSION_NUMBER.sub(name_of, expression)
    bindings = "; ".join(f"x{k} = {text}" for k, text in enumerate(given, 1))
    return f"{bindings}; {formula}" if bindings else formula
