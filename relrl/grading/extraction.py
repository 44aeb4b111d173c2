"""Reading the final answer out of a model response.

Drop `<think>` blocks, take the last complete `\\boxed{...}` and, inside it, the value after the
last `=` / `\\approx` / `≈`. With `allow_plain` (grading outside models, never rewards) fall back
to the last "final answer" section, then to the last number of the last line; a "final answer"
section after a box that no marker precedes (an intermediate result boxed in the working) wins
over that box. In a final-answer line a number restated for comparison ("compared to the
cold-standby value of 0.9712"), a number that starts an expression ("1 - e^{-4/3}"), a step label
("Step 2"), a time condition after a marked value ("R ≈ 0.9048 at t = 100 h") and the figures
of an exponent are not answers; a sentence goes on through ", which", ", so" or a dash to the
value it concludes with ("at least 25 days is e^{-0.8}, which is approximately 0.4493", also
"from 0.75 to 0.9375"), unless that value only rounds, bounds or is compared with the answer,
and a line ending on "is", "=" or ":" is concluded on the next. A final list or Markdown table
gives its one bold item, else its last. A response cut off by the token limit
(`truncated=True`) is never credited with a stray number: without a box or a final-answer
marker it has no answer.

For a target with several values, `extract_values` reads as many values in order: one box
holding them, one box each, a final list or table, or one line.

Every function here is linear in the input length and never raises on any string: braces are
matched in one pass and boxes kept as positions, no regex can rescan a run from each of its
characters, no loop rereads a prefix per item (docs/grading.md, "Linear time").
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice, takewhile

from relrl.grading.numbers import (
    FLOOR_SLACK,
    NUMBER,
    Number,
    after_relation,
    first_number,
    half_last_digit,
    no_number_reason,
    normalize,
    number_of,
    same_value,
    split_values,
)

_DIGIT = re.compile(r"\d")
MAX_TEXT = 200  # extracted text kept in results (a runaway box can be megabytes)


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


def _box_spans(text: str) -> list[tuple[int, int, int]]:
    """(start, content start, content end) of every complete \\boxed{...} in order, matching
    braces in one linear pass."""
    opens = {m.end() - 1: m.start() for m in _BOX.finditer(text)}
    if not opens:
        return []
    spans, stack = [], []
    for m in _BRACE.finditer(text, min(opens)):
        brace = m.group()
        if brace == "{":
            stack.append(m.start())
        elif brace == "}" and stack:
            open_at = stack.pop()
            if open_at in opens:
                spans.append((opens[open_at], open_at + 1, m.start()))
    spans.sort()
    return spans


class Boxes(Sequence):
    """The (start, content) of each complete box, in order. A content is cut out of the text
    only when it is read: n nested boxes would otherwise copy the text n times over."""

    def __init__(self, text: str, spans: list[tuple[int, int, int]]):
        self._text, self._spans = text, spans

    def __len__(self) -> int:
        return len(self._spans)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._box(span) for span in self._spans[i]]
        return self._box(self._spans[i])

    def _box(self, span: tuple[int, int, int]) -> tuple[int, str]:
        return span[0], self._text[span[1]:span[2]]

    def end(self, i: int) -> int:
        """Where box i's content ends (at its closing brace)."""
        return self._spans[i][2]


def boxed_contents(text: str) -> Boxes:
    """(start, content) of every complete \\boxed{...}, matching braces in one linear pass."""
    return Boxes(text, _box_spans(text))


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_FINAL_BEFORE = re.compile(r"final\s+$")
_COLON_AFTER = re.compile(r"\s*:")
_WORD_CHAR = re.compile(r"\w")
_LEAD = re.compile(r"^(?:[\s:*#)\]>|]|\.(?=\s))*(?:is\b)?[\s:*]*", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,2}[.)]|\(?[a-z]\)|[-*•])\s+")
_TABLE_ROW = re.compile(r"^\s*\|")
# "**...**" holding a digit. Written as a lookahead for the digit, then the whole run to the
# closing "**" taken at once, since [^*\n]*\d[^*\n]*\*\* backtracks quadratically in a long
# unclosed run of digits.
_BOLD_WITH_DIGIT = re.compile(r"\*\*(?=[^*\n\d]*+\d)[^*\n]*+\*\*")
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
    return (n for n in map(number_of, matches) if n.value is not None)


def _clause_numbers(text: str, start: int, end: int
                    ) -> tuple[list[re.Match], list[re.Match], list[re.Match]]:
    """(numbers, marked, timed) of one clause: its first numbers, those after a reference
    ("compared to") left out; those a relation, "is" or the "to" of "from ... to" marks; and
    those only the "=" of a time condition marks ("at t = 100 h"), which say when, not what."""
    matches = list(islice(NUMBER.finditer(text, start, end), _MAX_IN_LINE))
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
    return abs(later.value - answer.value) > half_last_digit(later) * FLOOR_SLACK


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
            if NUMBER.search(line):
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
        cells = [cell for cell in line.split("|") if NUMBER.search(cell)]
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
    first_marked = None  # where the line's first marked number starts, found once when needed
    for m in reversed(list(NUMBER.finditer(line))):
        number = number_of(m)
        if number.value is None or _LABEL_BEFORE.search(line, max(0, m.start() - 16), m.start()):
            continue
        if _TIME_CONDITION.search(line, max(0, m.start() - 24), m.start()):
            # a marked number before this one, as _clause_numbers(line, 0, m.start()) would
            # find it: the marks of the line's first numbers do not depend on where the line is
            # cut, so they are read once rather than once a number (quadratic in the line)
            if first_marked is None:
                marked = _clause_numbers(line, 0, len(line))[1]
                first_marked = marked[0].start() if marked else len(line)
            if first_marked < m.start():
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
        tail = after_relation(normalize(box_text))
        number = first_number(tail)
        if number is not None and number.value is not None:
            later = _final_after_box(visible, boxes) if allow_plain else None
            if later is not None and not same_value(later, number):
                return _extraction(later, len(boxes), "final")
            return _extraction(number, len(boxes), "boxed")
        why = number.reason if number is not None else no_number_reason(tail)
        reason = "boxed answer is not a number" if why == "no number" else f"boxed answer: {why}"
        box_text = box_text[:MAX_TEXT]
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


def _final_after_box(text: str, boxes: Boxes) -> Number | None:
    """The answer of a "final answer" section after the last box, when no marker precedes the
    box (so the box holds an intermediate result of the working, not the final answer)."""
    markers = _final_markers(text)
    if not markers or markers[0][0] < boxes[-1][0]:
        return None
    end = boxes.end(-1)
    first = next((k for k, (start, _) in enumerate(markers) if start >= end), None)
    return None if first is None else _from_final_section(text, markers, first)


def _extraction(number: Number, n_boxed: int, source: str) -> Extraction:
    return Extraction(number.text.strip()[:MAX_TEXT], number.value, n_boxed, source,
                      number.percent, number.raw)


# --------------------------------------------------------------------------------------------
# Several values


def _box_values(content: str) -> list[Number]:
    """The values of one box, in order ("31, 521", "31 and 521", "n_1 = 31; n_2 = 521")."""
    values = []
    for part in split_values(normalize(content), words=True):
        number = first_number(after_relation(part))
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
