"""Numbers in answers and targets: normalizing LaTeX, Markdown and unicode spellings, finding
every numeric expression, and parsing a ground-truth answer into one or several Numbers.

Forms read: signed decimals, `1.2e-5`, `2.52 \\times 10^{5}`, `2.52×10^5`, `10⁻⁴`, `23,717`,
`1{,}128`, `1 128`, European `0,001`, `14/33`, `\\frac{14}{33}`, `3.1%`, units and LaTeX/Markdown
decoration. A comma followed by exactly three-digit groups is a thousands separator (`2,500` is
2500); any other comma between digits is a decimal comma (`0,001`, `1,5`); a comma followed by a
space separates values (`0.04, 0.20`). `\\infty`, NaN and values that overflow give no value.
`3.1%` is 0.031; a Number keeps the number as written (`raw`, 3.1) and whether it carried `%`.

A target with several values ("31, 521", "R = 0.95; MTTF = 1000") is a tuple of Numbers in order.
Every function here is linear in the input length and never raises on any string.
"""
from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import NamedTuple

_SUPERSCRIPT_RUN = re.compile("[⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻]+")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻", "0123456789+-")
_DROP_SUBSCRIPT_DIGITS = str.maketrans("", "", "₀₁₂₃₄₅₆₇₈₉")
# Plain string substitutions, applied in order (LaTeX spellings before the characters they use).
_REPLACEMENTS = (
    ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("{,}", ","), ("\\%", "%"), ("\\$", "$"),
    ("\\approx", "≈"), ("\\simeq", "≈"), ("≃", "≈"), ("≅", "≈"),
    ("\\times", "×"), ("\\cdot", "×"), ("·", "×"), ("⋅", "×"), ("∙", "×"),
    ("\\infty", "∞"), ("\\left", ""), ("\\right", ""), ("\\!", ""),
    ("\\,", " "), ("\\;", " "), ("\\:", " "), ("\\ ", " "), ("~", " "),
    ("\\(", " "), ("\\)", " "), ("\\[", " "), ("\\]", " "),
    ("\u2212", "-"), ("\u2013", "-"), ("\u00a0", " "), ("\u2009", " "), ("\u202f", " "),
    ("\u2007", " "), ("**", ""), ("`", " "), ("$", " "),
)
_PLAIN_FRAC = re.compile(r"\\frac\s*\{\s*([-+]?[\d.,]+)\s*\}\s*\{\s*([-+]?[\d.,]+)\s*\}")
_WRAPPERS = re.compile(
    r"\\(?:text|mathrm|mathbf|textbf|textit|mathit|textrm|boldsymbol|operatorname|mbox"
    r"|displaystyle|hat|bar|tilde|rm|bf)(?![A-Za-z])"
)
_BRACED_SUBSCRIPT = re.compile(r"_\{[^{}]*\}")
_SUBSCRIPT = re.compile(r"_\w+")

_MANTISSA = (
    r"(?:[1-9]\d{0,2}(?:,\d{3})+(?!\d)(?:\.\d+)?"  # 23,717 and 1,234.5
    r"|[1-9]\d{0,2}(?: \d{3})+(?![\d,])(?:\.\d+)?"  # 1 128
    r"|\d+(?:[.,]\d+)?"  # 12.5, European 0,001
    r"|\.\d+)"
)
# An exponent's optional "(" is written (?:\(\s*)?, not \(?\s*: two whitespace runs that can
# meet ("\s*\(?\s*") share out a long run of spaces every way before failing (quadratic).
NUMBER = re.compile(
    r"(?<![\w.^])(?<!\^[-+(])(?<!\^\([-+])"  # not inside a word, a number or an exponent
    r"(?P<sign>[-+]?)(?P<mant>" + _MANTISSA + r")"
    r"(?:[eE](?P<exp>[-+]?\d+))?"
    r"(?:\s*[×x*]\s*10\s*\^\s*(?:\(\s*)?(?P<p10>[-+]?\d+)\s*\)?)?"
    r"(?:\s*\^\s*(?:\(\s*)?(?P<pow>[-+]?\d+(?:\.\d+)?)\s*\)?)?"
    r"(?:\s*/\s*(?P<den>" + _MANTISSA + r")(?:[eE](?P<dexp>[-+]?\d+))?)?"
    r"(?P<pct>\s*%|\s+percent\b)?"
)
_THOUSANDS = re.compile(r"[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")
_NAN = re.compile(r"\bnan\b", re.IGNORECASE)
_MAX_DIGITS = 400  # more integer digits than this overflows a float anyway


class Number(NamedTuple):
    """One numeric expression found in a text. `value` is None when it overflows."""

    text: str
    value: float | None
    raw: float | None  # the number as written: 3.1 for "3.1%"
    percent: bool
    start: int
    end: int
    reason: str = ""


def normalize(text: str) -> str:
    """Turn LaTeX, Markdown and unicode spellings of numbers into plain text."""
    text = _SUPERSCRIPT_RUN.sub(lambda m: "^(" + m.group().translate(_SUPERSCRIPTS) + ")", text)
    text = text.translate(_DROP_SUBSCRIPT_DIGITS)
    for old, new in _REPLACEMENTS:
        if old in text:
            text = text.replace(old, new)
    if "\\" in text or "{" in text or "_" in text:
        text = _PLAIN_FRAC.sub(r" \1/\2 ", text)
        text = _WRAPPERS.sub(" ", text)
        text = _BRACED_SUBSCRIPT.sub("", text)
        text = text.replace("{", "").replace("}", "")
        text = _SUBSCRIPT.sub("", text)  # variable names such as L_10 or R_sys carry no value
    return text


def _decimal(text: str) -> str:
    """A mantissa as Python float syntax: thousands separators dropped, decimal comma to point."""
    if "," in text:
        text = text.replace(",", "") if _THOUSANDS.fullmatch(text) else text.replace(",", ".")
    return text.replace(" ", "")


def _small_int(text: str | None) -> int | None:
    """An exponent; absurdly long ones are clamped (they overflow or underflow anyway)."""
    if text is None:
        return None
    digits = text.lstrip("+-")
    if len(digits) > 6:
        return -10**6 if text.startswith("-") else 10**6
    return int(text)


def _evaluate(m: re.Match) -> tuple[float | None, str]:
    mant = m["mant"]
    if m.end("mant") == m.end() - len(m["pct"] or "") and mant.isdigit() and len(mant) < 300:
        return float(m["sign"] + mant), ""  # the common case: a plain integer
    mant = _decimal(mant)
    if len(mant.split(".")[0].lstrip("0")) > _MAX_DIGITS:
        return None, "overflow"
    exponent = (_small_int(m["exp"]) or 0) + (_small_int(m["p10"]) or 0)
    if abs(exponent) > 10_000:
        value = math.inf if exponent > 0 else 0.0
    else:
        value = float(f"{mant}e{exponent}")
    if m["pow"] is not None:
        try:
            value = value ** float(m["pow"])
        except (OverflowError, ZeroDivisionError):
            return None, "overflow"
    if m["den"] is not None:
        den_exponent = min(max(_small_int(m["dexp"]) or 0, -10_000), 10_000)
        den = _decimal(m["den"])
        den = float(f"{den}e{den_exponent}") if len(den) <= _MAX_DIGITS else math.inf
        if den == 0:
            return None, "division by zero"
        value = value / den
    if m["sign"] == "-":  # after the power: -2^2 is -4, -10^{-4} is -0.0001
        value = -value
    if not math.isfinite(value):
        return None, "overflow"
    if value == 0 and mant.strip("0."):  # a non-zero number too small for a float
        return None, "underflow"
    return value, ""


def number_of(m: re.Match) -> Number:
    """The Number a match of NUMBER spells (percent as a fraction, no value on overflow)."""
    raw, reason = _evaluate(m)
    percent = m["pct"] is not None
    value = raw / 100 if percent and raw is not None else raw
    return Number(m.group(), value, raw, percent, m.start(), m.end(), reason)


def find_numbers(text: str) -> list[Number]:
    """Every numeric expression in an already normalized text, in order."""
    return [number_of(m) for m in NUMBER.finditer(text)]


def no_number_reason(text: str) -> str:
    """Why a text without a usable number has none: infinite, NaN, or no number at all."""
    if "∞" in text:
        return "infinite value"
    if _NAN.search(text):
        return "not a number (NaN)"
    return "no number"


def first_number(normalized: str) -> Number | None:
    """The first Number of an already normalized text, or None."""
    match = NUMBER.search(normalized)
    return number_of(match) if match else None


def after_relation(text: str) -> str:
    """The part after the last `=` or `≈` (already normalized text), or all of it."""
    cut = max(text.rfind("="), text.rfind("≈"))
    return text[cut + 1:] if cut >= 0 else text


def same_value(a: Number, b: Number) -> bool:
    """Whether two Numbers have the same value (a restatement, not a second value)."""
    return a.value is not None and b.value is not None and math.isclose(a.value, b.value,
                                                                          rel_tol=1e-9)


@lru_cache(maxsize=4096)  # a GRPO group grades G responses against the same target
def _parse_target_text(text: str) -> tuple[Number | None, str]:
    text = normalize(text).strip()
    if not text:
        return None, "empty answer"
    tail = after_relation(text)
    numbers = find_numbers(tail)
    if not numbers:
        return None, no_number_reason(tail)
    first = numbers[0]
    if first.value is None:
        return None, first.reason
    others = [n for n in numbers[1:] if not same_value(n, first)]
    if others:
        listed = ", ".join(n.text.strip() for n in numbers[:4])
        return None, f"several values ({listed}): not a single number"
    return first, ""


def parse_target_number(text) -> tuple[Number | None, str]:
    """Ground truth as a Number, or (None, why not): the same rules as answers, but an answer
    holding several different values is not a single number."""
    return _parse_target_text("" if text is None else str(text))


def parse_target(text: str) -> tuple[float | None, str]:
    """(value, reason): reason is "" when the ground truth is one number."""
    number, reason = parse_target_number(text)
    return (number.value if number else None), reason


# Tried only where a whitespace run starts ((?<!\s)), which it takes whole (\s++): tried at
# every space of a run, it rescans the rest of the run each time (quadratic in the run).
_AND = re.compile(r"(?<!\s)\s++(?:and|&)\s+", re.IGNORECASE)


_SEPARATOR_OR_BRACKET = re.compile(r"[()\[\]{};]|,(?=\s)")


def split_values(text: str, words: bool = False) -> list[str]:
    """The parts of a list of values: split at ", " and ";" outside brackets (and, with
    `words`, at " and " / " & "); "23,717" and "1{,}128" hold no separator."""
    parts, depth, start = [], 0, 0
    if "," in text or ";" in text:
        for m in _SEPARATOR_OR_BRACKET.finditer(text):  # visits only brackets and separators
            c = m.group()
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(0, depth - 1)
            elif depth == 0:
                parts.append(text[start:m.start()])
                start = m.end()
    parts.append(text[start:])
    if words:
        parts = [piece for part in parts for piece in _AND.split(part)]
    return [part for part in parts if part.strip()]


@lru_cache(maxsize=4096)
def _parse_target_values(text: str) -> tuple[tuple[Number, ...] | None, str]:
    parts = split_values(text)
    if len(parts) >= 2:
        numbers = [_parse_target_text(part)[0] for part in parts]
        if all(n is not None for n in numbers) and any(not same_value(n, numbers[0]) for n in numbers[1:]):
            return tuple(numbers), ""
    single, reason = _parse_target_text(text)
    return ((single,), "") if single is not None else (None, reason)


def parse_target_values(text) -> tuple[tuple[Number, ...] | None, str]:
    """Ground truth as one or more Numbers in order (several for "31, 521" or "R = 0.95;
    MTTF = 1000": parts separated by ", " or ";", each one number), or (None, why not). A range
    ("0.9-0.95", "between 3 and 5") is not a list of values."""
    return _parse_target_values("" if text is None else str(text))


# 0.99905 against "0.9991" is exactly half a digit off, give or take a ulp
FLOOR_SLACK = 1 + 1e-9


def half_last_digit(number: Number) -> float:
    """Half a unit of the last digit a number was written with, in its value's units: 0.00005
    for "0.9991", 5e-8 for "5.70e-5", 0.0005 for "3.1%". A quotient or a power ("14/33",
    "2^-3") states no digit: 0."""
    m = NUMBER.fullmatch(number.text)
    if m is None or m["den"] is not None or m["pow"] is not None:
        return 0.0
    mantissa = _decimal(m["mant"])
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = (_small_int(m["exp"]) or 0) + (_small_int(m["p10"]) or 0) - decimals
    if abs(exponent) > 300:
        return 0.0
    half = 0.5 * 10.0 ** exponent
    return half / 100 if number.percent else half
