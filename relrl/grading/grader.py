"""Answer grading shared by every reward function and evaluation script.

Extraction: drop `<think>` blocks, take the last complete `\\boxed{...}` and, inside it, the value
after the last `=` / `\\approx` / `≈`. With `allow_plain` (grading outside models, never rewards)
fall back to the last "final answer" section, then to the last number of the last line; a
"final answer" section after a box that no marker precedes (an intermediate result boxed in the
working) wins over that box. In a final-answer line a number restated for comparison ("compared
to the cold-standby value of 0.9712"), a number that starts an expression ("1 - e^{-4/3}"), a
step label ("Step 2"), a time condition after a marked value ("R ≈ 0.9048 at t = 100 h") and
the figures of an exponent are not answers; a sentence goes on through ", which", ", so" or a
dash to the value it concludes with ("at least 25 days is e^{-0.8}, which is approximately
0.4493", also "from 0.75 to 0.9375"), unless that value only rounds, bounds or is compared with
the answer, and a line ending on "is", "=" or ":" is concluded on the next. A final list or
Markdown table gives its one bold item, else its last. A response cut off by the token limit
(`truncated=True`) is never credited with a stray number: without a box or a final-answer
marker it has no answer.

Targets with several values ("31, 521", "R = 0.95; MTTF = 1000") are graded part by part in
order: the answer must give as many values (one box holding them, one box each, a final list,
or one line), each within the tolerance; the reward band is that of the worst part.

Numbers: signed decimals, `1.2e-5`, `2.52 \\times 10^{5}`, `2.52×10^5`, `10⁻⁴`, `23,717`,
`1{,}128`, `1 128`, European `0,001`, `14/33`, `\\frac{14}{33}`, `3.1%`, units and LaTeX/Markdown
decoration. A comma followed by exactly three-digit groups is a thousands separator (`2,500` is
2500); any other comma between digits is a decimal comma (`0,001`, `1,5`); a comma followed by a
space separates values (`0.04, 0.20`). `\\infty`, NaN and values that overflow give no value.

Percentages: `3.1%` is 0.031. When exactly one side (answer or target) carries a `%` sign, the
percent numbers are compared as well, so target `3.1%` accepts `0.031`, `3.1%` and `3.1`;
target `0.031` accepts `3.1%` but not `3.1`.

Scoring: the tolerance rule (`rule`, one of TOLERANCE_RULES) names the error judged against
`tolerance` (default 5%) and the partial-credit bands of RewardTiers. "study", the study's rule
and the default: relative error |a - t| / |t|. "complement": for a target of kind "probability"
(see below) strictly inside (0, 1) the error is |a - t| / min(t, 1 - t), so a reliability near 1
is judged on its failure probability (0.95 against 0.9355 is 1.5% off relatively but 22% off on
1 - t); an answer within half the target's last stated digit ("0.9991": 0.00005) counts as
exact, so a target is never graded tighter than it was written; any other target as under
"study". Several values and percent readings follow the rule value by value. A zero target has
no relative error; the answer is correct when |a| <= `abs_tolerance` (default 1e-6).

Target kind (TARGET_KINDS): a dataset row's `target_kind` field when it has one, else inferred
by `infer_target_kind`: "probability" when some target value lies strictly in (0, 1) and the
question's asked quantity (the words after its last "determine / find / calculate / compute /
estimate / evaluate / obtain / give / what / how", up to the first comma, full stop, question
mark or condition such as "if", "given", "when") names first a reliability, availability,
unreliability, probability, fraction, proportion, percentage, chance or importance, or writes
R(..), P(..), F(..), Q(..), A(..) or FV(..), rather than an MTTF, life, time, number, rate, cost,
interval or parameter; else "value". On the study's 54 held-out questions it marks 23
probability (every "determine the reliability / availability / probability ..." question);
"the expected number of failures" (0.5, 0.768), "the optimal replacement interval" (0.999),
"the parameter of the exponential distribution" (0.010353) and "System Effectiveness" (0.837)
stay values. On generated rows it agrees with the field the generator writes.

Every function here is linear in the input length (braces are matched in one pass, the regexes
have no nested unbounded repeats) and never raises on any string.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from itertools import islice, takewhile
from typing import NamedTuple

# --------------------------------------------------------------------------------------------
# Numbers

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
_NUMBER = re.compile(
    r"(?<![\w.^])(?<!\^[-+(])(?<!\^\([-+])"  # not inside a word, a number or an exponent
    r"(?P<sign>[-+]?)(?P<mant>" + _MANTISSA + r")"
    r"(?:[eE](?P<exp>[-+]?\d+))?"
    r"(?:\s*[×x*]\s*10\s*\^\s*\(?\s*(?P<p10>[-+]?\d+)\s*\)?)?"
    r"(?:\s*\^\s*\(?\s*(?P<pow>[-+]?\d+(?:\.\d+)?)\s*\)?)?"
    r"(?:\s*/\s*(?P<den>" + _MANTISSA + r")(?:[eE](?P<dexp>[-+]?\d+))?)?"
    r"(?P<pct>\s*%|\s+percent\b)?"
)
_THOUSANDS = re.compile(r"[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")
_DIGIT = re.compile(r"\d")
_NAN = re.compile(r"\bnan\b", re.IGNORECASE)
_MAX_DIGITS = 400  # more integer digits than this overflows a float anyway
_MAX_TEXT = 200  # extracted text kept in results (a runaway box can be megabytes)


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


def _number(m: re.Match) -> Number:
    raw, reason = _evaluate(m)
    percent = m["pct"] is not None
    value = raw / 100 if percent and raw is not None else raw
    return Number(m.group(), value, raw, percent, m.start(), m.end(), reason)


def find_numbers(text: str) -> list[Number]:
    """Every numeric expression in an already normalized text, in order."""
    return [_number(m) for m in _NUMBER.finditer(text)]


def _no_number_reason(text: str) -> str:
    if "∞" in text:
        return "infinite value"
    if _NAN.search(text):
        return "not a number (NaN)"
    return "no number"


def parse_number(text: str) -> float | None:
    """The value of the first number in `text` (percent as a fraction), or None."""
    number = _first_number(normalize(text or ""))
    return number.value if number is not None else None


def _first_number(normalized: str) -> Number | None:
    match = _NUMBER.search(normalized)
    return _number(match) if match else None


def _after_relation(text: str) -> str:
    """The part after the last `=` or `≈` (already normalized text), or all of it."""
    cut = max(text.rfind("="), text.rfind("≈"))
    return text[cut + 1:] if cut >= 0 else text


def _same(a: Number, b: Number) -> bool:
    return a.value is not None and b.value is not None and math.isclose(a.value, b.value,
                                                                          rel_tol=1e-9)


@lru_cache(maxsize=4096)  # a GRPO group grades G responses against the same target
def _parse_target_text(text: str) -> tuple[Number | None, str]:
    text = normalize(text).strip()
    if not text:
        return None, "empty answer"
    tail = _after_relation(text)
    numbers = find_numbers(tail)
    if not numbers:
        return None, _no_number_reason(tail)
    first = numbers[0]
    if first.value is None:
        return None, first.reason
    others = [n for n in numbers[1:] if not _same(n, first)]
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


_AND = re.compile(r"\s+(?:and|&)\s+", re.IGNORECASE)


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
        if all(n is not None for n in numbers) and any(not _same(n, numbers[0]) for n in numbers[1:]):
            return tuple(numbers), ""
    single, reason = _parse_target_text(text)
    return ((single,), "") if single is not None else (None, reason)


def parse_target_values(text) -> tuple[tuple[Number, ...] | None, str]:
    """Ground truth as one or more Numbers in order (several for "31, 521" or "R = 0.95;
    MTTF = 1000": parts separated by ", " or ";", each one number), or (None, why not). A range
    ("0.9-0.95", "between 3 and 5") is not a list of values."""
    return _parse_target_values("" if text is None else str(text))


# --------------------------------------------------------------------------------------------
# Extraction


def strip_thinking(text: str) -> str:
    """Remove `<think>...</think>` blocks; a leading block whose `<think>` was in the prompt
    (only `</think>` present) goes too, and an unclosed `<think>` drops everything after it."""
    pos = 0
    first_close, first_open = text.find("</think>"), text.find("<think>")
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        pos = first_close + len("</think>")
    parts = []
    while True:
        start = text.find("<think>", pos)
        if start == -1:
            parts.append(text[pos:])
            break
        parts.append(text[pos:start])
        end = text.find("</think>", start + len("<think>"))
        if end == -1:
            break
        pos = end + len("</think>")
    return "".join(parts)


_BOX = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"\\[{}]|[{}]")


def boxed_contents(text: str) -> list[tuple[int, str]]:
    """(start, content) of every complete \\boxed{...}, matching braces in one linear pass."""
    opens = {m.end() - 1: m.start() for m in _BOX.finditer(text)}
    if not opens:
        return []
    boxes, stack = [], []
    for m in _BRACE.finditer(text, min(opens)):
        brace = m.group()
        if brace == "{":
            stack.append(m.start())
        elif brace == "}" and stack:
            open_at = stack.pop()
            if open_at in opens:
                boxes.append((opens[open_at], text[open_at + 1:m.start()]))
    boxes.sort()
    return boxes


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_FINAL_BEFORE = re.compile(r"final\s+$")
_COLON_AFTER = re.compile(r"\s*:")
_WORD_CHAR = re.compile(r"\w")
_LEAD = re.compile(r"^(?:[\s:*#)\]>|]|\.(?=\s))*(?:is\b)?[\s:*]*", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,2}[.)]|\(?[a-z]\)|[-*•])\s+")
_TABLE_ROW = re.compile(r"^\s*\|")
_BOLD_WITH_DIGIT = re.compile(r"\*\*[^*\n]*\d[^*\n]*\*\*")
_MAX_IN_LINE = 64
_MAX_ITEMS = 32  # list items or table rows read from one final-answer section
# a side remark: after a space, and not a term of an expression such as "1 - (0.35)^3"
_PARENTHETICAL = re.compile(r"(?<=\s)(?<![-+−*/×·]\s)\([^()]*\)(?!\s*[\^*/×·])")
_CLAUSE_BREAK = re.compile(
    r"[.;!?](?=\s|$)|,\s+(?:which|meaning|i\.e\.|that is|so|and|or)\b|\s—\s", re.IGNORECASE
)
_MARKED = re.compile(
    r"(?:[=≈:≥]|\b(?:is|was|are|be|equals?|becomes|gives|yields|approximately|approx\.?"
    r"|about|roughly|around|nearly))\s*(?:(?:approximately|approx\.?|about|roughly|around"
    r"|nearly|only|exactly|just|equal to|estimated at)\s*)?$",
    re.IGNORECASE,
)
# Joiners after which a sentence goes on to conclude (a _CLAUSE_BREAK that does not end it).
_CONTINUES = re.compile(r",\s+(?:which|meaning|that is|so)\b|\s—\s", re.IGNORECASE)
_TIME_CONDITION = re.compile(
    r"\b(?:at|for|after|over|within|during|until|by)\s+(?:time\s+)?t\s*=\s*$", re.IGNORECASE
)
_FROM_BEFORE = re.compile(r"\bfrom\s*$", re.IGNORECASE)
_TO_AFTER = re.compile(r"\s*(?:[^\W\d]+\s+)?to\s*", re.IGNORECASE)
_BOUND_BEFORE = re.compile(r"≥\s*$")
_COMPARATIVE_AFTER = re.compile(
    r"\s*(?:[^\W\d]+\s+)?(?:above|below|higher|lower|more|less|greater|smaller|better|worse"
    r"|over|under|short|than)\b",
    re.IGNORECASE,
)
# What follows these is a number restated for comparison, not the answer.
_REFERENCE = re.compile(
    r"\b(?:compared\s+(?:to|with)|in\s+comparison\s+(?:to|with)|versus|vs\.?|as\s+opposed\s+to"
    r"|relative\s+to|rather\s+than|instead\s+of|up\s+from|down\s+from)(?!\w)",
    re.IGNORECASE,
)
# A number that starts an expression ("1 - e^-4/3", "1 - (0.2)^3"), sits in an exponent or a
# denominator ("e^-4/3"), or labels a step ("Step 2:") is not a value of its own.
_EXPRESSION_AFTER = re.compile(r"\)?\s*(?:\^|[-+×*/]\s*(?:[\d.(\\]|e\^|e\b|exp\b|ln\b|sqrt\b))")
_EXPRESSION_BEFORE = re.compile(r"(?:[/^]|\^[-+(]|\^\([-+])\s*$")
_LABEL_BEFORE = re.compile(
    r"\b(?:step|part|case|term|stage|phase|method|option|scenario|example|problem|question"
    r"|equation|eq\.?)\s*#?\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Extraction:
    text: str | None  # the answer as written (the number, or the box content when not numeric)
    value: float | None
    n_boxed: int
    source: str | None  # "boxed", "final", "last_number" or None
    percent: bool = False
    raw: float | None = None
    reason: str = ""  # why there is no value ("" when there is one)


def _is_value(line: str, m: re.Match) -> bool:
    """Whether a number of a line of prose can be an answer (not an expression's first term,
    an exponent, a denominator or a step label)."""
    before = max(0, m.start() - 16)
    return not (_EXPRESSION_AFTER.match(line, m.end())
                or _EXPRESSION_BEFORE.search(line, before, m.start())
                or _LABEL_BEFORE.search(line, before, m.start()))


def _pick_in_line(line: str) -> Number | None:
    """The answer number of one line of prose: the last number right after '=', 'is',
    'approximately'... in the first clause that has a number, else that clause's first number.
    Only a clause's first numbers are read: a line with more is not an answer line anyway.
    Numbers after "compared to", "versus"... are left out once the clause has had a number.
    The sentence goes on through clauses joined by ", which", ", so", ", meaning", ", that is"
    or a dash, and the value it concludes with wins ("at least 25 days is e^{-0.8}, which is
    approximately 0.4493"): a later marked number, unless it only rounds the answer ("0.6065,
    so about 61%") or is compared with it ("which is above the required 0.95")."""
    for variant in _line_variants(line):
        answer, clause_start = None, 0
        for brk in [*_CLAUSE_BREAK.finditer(variant), None]:
            cut = brk.end() if brk else len(variant)
            matches, marked, timed = _clause_numbers(variant, clause_start, cut)
            clause_start = cut
            if answer is None:
                marked = marked or timed  # "reached at t = 1054 h": then the time is the answer
                values = [m for m in marked if _is_value(variant, m)]
                if marked and not values:
                    continue  # "= 1 - e^{-4/3}": an exact expression, its value comes later
                first_values = (m for m in matches if _is_value(variant, m))
                answer = next(_finite(reversed(values)), None) or next(_finite(first_values),
                                                                       None)
            else:  # a later clause of the sentence: a value it is marked with concludes it
                values = (m for m in reversed(marked) if _is_value(variant, m))
                answer = next((n for n in _finite(values) if _concludes(variant, n, answer)),
                              answer)
            if answer is not None and not (brk and _CONTINUES.match(brk.group())):
                return answer
    return None


def _finite(matches):
    """The Numbers of these matches that have a value."""
    return (n for n in map(_number, matches) if n.value is not None)


def _clause_numbers(text: str, start: int, end: int
                    ) -> tuple[list[re.Match], list[re.Match], list[re.Match]]:
    """(numbers, marked, timed) of one clause: its first numbers, those after a reference
    ("compared to") left out; those a relation, "is" or the "to" of "from ... to" marks; and
    those only the "=" of a time condition marks ("at t = 100 h"), which say when, not what."""
    matches = list(islice(_NUMBER.finditer(text, start, end), _MAX_IN_LINE))
    if len(matches) > 1:  # only a second number can be a restated one
        reference = _REFERENCE.search(text, matches[0].end(), end)
        if reference:
            matches = [m for m in matches if m.start() < reference.start()]
    marked, timed, previous = [], [], None
    for m in matches:
        previous_end = previous.end() if previous else start
        if _TIME_CONDITION.search(text, max(previous_end, m.start() - 24), m.start()):
            timed.append(m)
        elif _MARKED.search(text, max(previous_end, m.start() - 40), m.start()) or (
                previous and _TO_AFTER.fullmatch(text, previous_end, m.start())
                and _FROM_BEFORE.search(text, max(start, previous.start() - 8), previous.start())):
            marked.append(m)  # the "to" of "from 0.75 to 0.9375" marks the result
        previous = m
    return matches, marked, timed


def _concludes(text: str, later: Number, answer: Number) -> bool:
    """Whether a marked number of a later clause of the sentence replaces its answer: not a
    bound ("≥ 0.95"), a comparison ("3% above the target") or the answer rounded ("about 61%"
    after 0.6065, "about 1" after 0.9999994)."""
    if _BOUND_BEFORE.search(text, max(0, later.start - 16), later.start) \
            or _COMPARATIVE_AFTER.match(text, later.end):
        return False
    return abs(later.value - answer.value) > half_last_digit(later) * _FLOOR_SLACK


def _line_variants(line: str):
    """The line without list numbering and side remarks in parentheses, then less stripped."""
    plain = _LIST_ITEM.sub("", line, count=1)
    yield _PARENTHETICAL.sub(" ", plain)
    yield plain
    yield line


def _numeric_lines(section: str):
    """(raw, normalized) lines of a section that hold a number, read lazily (sections can be
    long)."""
    for raw in section.splitlines():
        if _DIGIT.search(raw):  # cheap test first: most lines of prose hold no digit
            line = normalize(raw)
            if _NUMBER.search(line):
                yield raw, line


def _final_markers(text: str) -> list[tuple[int, int]]:
    """(start, end) of each "final answer" and of each "Answer:" opening a line. Found from the
    occurrences of "answer" (one fast literal scan) rather than by a regex tried everywhere."""
    low, found = text.lower(), []
    if len(low) != len(text):  # a few characters (such as "İ") lower-case to two
        low = text.translate(_ASCII_LOWER)
    at = low.find("answer")
    while at != -1:
        end, head = at + len("answer"), low[max(0, at - 40):at]
        final = _FINAL_BEFORE.search(head)
        if final:
            found.append((at - len(head) + final.start(), end))
        else:
            newline = head.rfind("\n")
            line_head = head[newline + 1:] if newline != -1 or at <= 40 else None
            if line_head is not None and not _WORD_CHAR.search(line_head) \
                    and _COLON_AFTER.match(low, end):
                found.append((at, end))
        at = low.find("answer", end)
    return found


def _announces(line: str) -> bool:
    """Whether a line leaves its sentence for the next line to conclude: it ends on a colon, a
    relation or "is" ("At t = 100 hours the reliability is:", "... at least 25 days is")."""
    return bool(_MARKED.search(line.rstrip(" *")))


def _is_item(line: str) -> bool:
    return bool(_LIST_ITEM.match(line) or _TABLE_ROW.match(line))


def _answer_lines(text: str, markers: list[tuple[int, int]], k: int) -> list[tuple[str, str]]:
    """The numeric lines of marker k's section that hold its answer: the first (or the one
    after it when it only announces the answer, see _announces), and when that line opens a
    list or a table, every item of it."""
    end = markers[k + 1][0] if k + 1 < len(markers) else len(text)
    lines = _numeric_lines(_LEAD.sub("", text[markers[k][1]:end], count=1))
    chosen = next(lines, None)
    if chosen is None:
        return []
    if _announces(chosen[1]):
        chosen = next(lines, chosen)
    items = [chosen]
    if _is_item(chosen[1]):
        for following in islice(lines, _MAX_ITEMS):
            if not _is_item(following[1]):
                break
            items.append(following)
    return items


def _item_value(item: tuple[str, str]) -> Number | None:
    """The answer of one line; of a table row, that of its last cell holding a number."""
    line = item[1]
    if _TABLE_ROW.match(line):
        cells = [cell for cell in line.split("|") if _NUMBER.search(cell)]
        line = cells[-1] if cells else line
    return _pick_in_line(line)


def _pick_item(items: list[tuple[str, str]]) -> Number | None:
    """A list or table builds up to its last item, unless exactly one item is set in bold."""
    if len(items) == 1:
        return _item_value(items[0])
    bold = [item for item in items if _BOLD_WITH_DIGIT.search(item[0])]
    return _item_value(bold[0] if len(bold) == 1 else items[-1])


def _from_final_section(text: str, markers: list[tuple[int, int]] | None = None,
                        first: int = 0) -> Number | None:
    """The answer in the last "final answer" section (from marker `first` on) with a number."""
    markers = _final_markers(text) if markers is None else markers
    for k in range(len(markers) - 1, first - 1, -1):
        items = _answer_lines(text, markers, k)
        number = _pick_item(items) if items else None
        if number is not None:
            return number
    return None


_OPEN_END = re.compile(r"[\\×/+\-=^({\[,<≤≥>]\s*$")
_WORD = re.compile(r"[^\W\d]+")


def _last_line(text: str) -> str:
    return next((line for line in reversed(text.splitlines()) if line.strip()), "")


def _last_number_of_last_line(text: str) -> Number | None:
    """The last number of the last line, unless that line was cut off mid-expression or
    mid-sentence (ends on an operator, or runs on for words after its last number). A step
    label ("Step 2: Compute the") is not a number of the answer, nor a time condition after a
    marked value ("R ≈ 0.9048 at t = 100 h")."""
    line = _LIST_ITEM.sub("", normalize(_last_line(text)), count=1)
    for m in reversed(list(_NUMBER.finditer(line))):
        number = _number(m)
        if number.value is None or _LABEL_BEFORE.search(line, max(0, m.start() - 16), m.start()) \
                or (_TIME_CONDITION.search(line, max(0, m.start() - 24), m.start())
                    and _clause_numbers(line, 0, m.start())[1]):
            continue
        trailing = line[number.end:].rstrip()
        if _OPEN_END.search(line.rstrip(" *_")) or (len(_WORD.findall(trailing)) > 4
                                                     and not trailing.endswith((".", "!", "?"))):
            return None
        return number
    return None


def _without_cut_line(text: str) -> str:
    """A truncated response without its last line when that line stops mid-expression."""
    body = text.rstrip()
    cut = body.rfind("\n")
    if _OPEN_END.search(normalize(body[cut + 1:]).rstrip(" *_")):
        return body[:cut + 1] if cut != -1 else ""
    return text


def extract_answer(response: str, allow_plain: bool = False, *,
                   truncated: bool = False) -> Extraction:
    """The final answer of a model response (see the module docstring for the rules).
    `truncated`: the response hit the token limit, so its last number is no answer."""
    text = response if isinstance(response, str) else ""
    if not text.strip():
        return Extraction(None, None, 0, None, reason="empty response")
    visible = strip_thinking(text)
    boxes = boxed_contents(visible)
    box_text, reason = None, "no boxed answer"
    if boxes:
        box_text = boxes[-1][1].strip()
        tail = _after_relation(normalize(box_text))
        number = _first_number(tail)
        if number is not None and number.value is not None:
            later = _final_after_box(visible, boxes[-1]) if allow_plain else None
            if later is not None and not _same(later, number):
                return _extraction(later, len(boxes), "final")
            return _extraction(number, len(boxes), "boxed")
        why = number.reason if number is not None else _no_number_reason(tail)
        reason = "boxed answer is not a number" if why == "no number" else f"boxed answer: {why}"
        box_text = box_text[:_MAX_TEXT]
    elif "<think>" in text and not visible.strip():
        reason = "cut off inside <think>"
    if allow_plain:
        if truncated:
            visible = _without_cut_line(visible)
        number = _from_final_section(visible)
        if number is not None:
            return _extraction(number, len(boxes), "final")
        number = None if truncated else _last_number_of_last_line(visible)
        if number is not None:
            return _extraction(number, len(boxes), "last_number")
        if reason == "no boxed answer":
            reason = "cut off at the token limit before a final answer" if truncated \
                else "no answer found"
    return Extraction(box_text, None, len(boxes), None, reason=reason)


def _box_end(text: str, box: tuple[int, str]) -> int:
    return _BOX.match(text, box[0]).end() + len(box[1])


def _final_after_box(text: str, box: tuple[int, str]) -> Number | None:
    """The answer of a "final answer" section after the last box, when no marker precedes the
    box (so the box holds an intermediate result of the working, not the final answer)."""
    markers = _final_markers(text)
    if not markers or markers[0][0] < box[0]:
        return None
    end = _box_end(text, box)
    first = next((k for k, (start, _) in enumerate(markers) if start >= end), None)
    return None if first is None else _from_final_section(text, markers, first)


def _extraction(number: Number, n_boxed: int, source: str) -> Extraction:
    return Extraction(number.text.strip()[:_MAX_TEXT], number.value, n_boxed, source,
                      number.percent, number.raw)


# --------------------------------------------------------------------------------------------
# Several values


def _box_values(content: str) -> list[Number]:
    """The values of one box, in order ("31, 521", "31 and 521", "n_1 = 31; n_2 = 521")."""
    values = []
    for part in split_values(normalize(content), words=True):
        number = _first_number(_after_relation(part))
        if number is None or number.value is None:
            return []
        values.append(number)
    return values


def _line_values(line: str) -> list[Number]:
    """The values of one normalized line of prose, in order."""
    values = (_pick_in_line(part) for part in split_values(line, words=True))
    return [number for number in values if number is not None]


def _section_values(text: str, markers: list[tuple[int, int]], k: int,
                    count: int) -> list[Number] | None:
    """`count` values from marker k's section: one line holding them all, else one per item of
    the list or table it opens (its last items), else one per numeric line."""
    end = markers[k + 1][0] if k + 1 < len(markers) else len(text)
    # in a list of labelled answers ("1. Final answer (90%): 31\n2. Final answer (99%): 521")
    # what comes before the next marker on its line ("2. ") belongs to the next item
    cut = text.rfind("\n", markers[k][1], end)
    end = cut if cut != -1 and k + 1 < len(markers) else end
    lines = list(islice(_numeric_lines(_LEAD.sub("", text[markers[k][1]:end], count=1)),
                        _MAX_ITEMS))
    if not lines:
        return None
    if _announces(lines[0][1]) and len(lines) > 1:
        lines = lines[1:]
    if not _TABLE_ROW.match(lines[0][1]):
        values = _line_values(lines[0][1])
        if len(values) == count:
            return values
    if _is_item(lines[0][1]):
        items = list(takewhile(lambda line: _is_item(line[1]), lines))
        chosen = items[-count:]
    else:
        chosen = lines[:count]
    values = [_item_value(line) for line in chosen]
    if len(chosen) == count and all(v is not None for v in values):
        return values
    return None


def extract_values(response: str, count: int, allow_plain: bool = False, *,
                   truncated: bool = False) -> tuple[list[Number] | None, str | None, int, str]:
    """(values, source, boxes, reason): `count` answer values in order, for a target with
    several values. From the last box holding them all, or the last `count` boxes holding one
    each; with `allow_plain`, from the last final-answer section (one line, or a list or table
    of one value an item), then from the last line unless the response was truncated."""
    text = response if isinstance(response, str) else ""
    if not text.strip():
        return None, None, 0, "empty response"
    visible = strip_thinking(text)
    boxes = boxed_contents(visible)
    if boxes:
        values = _box_values(boxes[-1][1])
        if len(values) == count:
            return values, "boxed", len(boxes), ""
        singles = [_box_values(box[1]) for box in boxes[-count:]] if len(boxes) >= count else []
        if singles and all(len(v) == 1 for v in singles):
            return [v[0] for v in singles], "boxed", len(boxes), ""
    if allow_plain:
        if truncated:
            visible = _without_cut_line(visible)
        markers = _final_markers(visible)
        for k in range(len(markers) - 1, max(-1, len(markers) - 1 - _MAX_ITEMS), -1):
            values = _section_values(visible, markers, k, count)
            if values is not None:
                return values, "final", len(boxes), ""
        # one labelled answer a value ("Final answer (90%): 31" then "Final answer (99%): 521"),
        # as one box a value is
        singles = [_section_values(visible, markers, k, 1)
                   for k in range(len(markers) - count, len(markers))] if len(markers) >= count else []
        if singles and all(v is not None for v in singles):
            return [v[0] for v in singles], "final", len(boxes), ""
        if not truncated:
            values = _line_values(normalize(_last_line(visible)))
            if len(values) == count:
                return values, "last_number", len(boxes), ""
    where = "boxed answer" if boxes or not allow_plain else "answer"
    return None, None, len(boxes), f"no {where} with {count} values"


# --------------------------------------------------------------------------------------------
# Scoring

TOLERANCE_RULES = ("study", "complement")
TARGET_KINDS = ("probability", "value")


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
_FLOOR_SLACK = 1 + 1e-9  # 0.99905 against "0.9991" is exactly half a digit off, give or take a ulp


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


def half_last_digit(number: Number) -> float:
    """Half a unit of the last digit a number was written with, in its value's units: 0.00005
    for "0.9991", 5e-8 for "5.70e-5", 0.0005 for "3.1%". A quotient or a power ("14/33",
    "2^-3") states no digit: 0."""
    m = _NUMBER.fullmatch(number.text)
    if m is None or m["den"] is not None or m["pow"] is not None:
        return 0.0
    mantissa = _decimal(m["mant"])
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = (_small_int(m["exp"]) or 0) + (_small_int(m["p10"]) or 0) - decimals
    if abs(exponent) > 300:
        return 0.0
    half = 0.5 * 10.0 ** exponent
    return half / 100 if number.percent else half


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
            return (0.0 if diff <= floor * unit * _FLOOR_SLACK else measured), measured
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
    extracted = ", ".join(v.text.strip() for v in values)[:_MAX_TEXT]
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


# --------------------------------------------------------------------------------------------
# Target kind

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
