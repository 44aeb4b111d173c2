"""JSON from untrusted text: bounded size, nesting depth and number length; one error class.

json.loads alone lets three things escape a reader that catches JSONDecodeError: an integer of
more than 4,300 digits (Python's int-digit ValueError), deep nesting (RecursionError) and
NaN/Infinity (accepted, then poisoning every mean). Here the size is checked first, then the
nesting depth by a linear scan of the brackets outside strings (before json.loads could recurse),
then json.loads runs with number hooks that refuse an oversize literal before it becomes an int
and refuse non-finite numbers. Any failure is an UntrustedInputError naming the source.
"""
from __future__ import annotations

import json
import math
import re
from itertools import accumulate

import relrl.untrusted.limits as limits
from relrl.untrusted.errors import UntrustedInputError, excerpt

# A JSON string, or an unterminated one running to the end of the text (so a scan never restarts
# inside a string it could not close: linear on any input).
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)'
_STRINGS = re.compile(_STRING, re.DOTALL)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STRING_OR_BRACKET = re.compile(_STRING + r"|[\[\]{}]", re.DOTALL)
_STRING_OR_LITERAL = re.compile(
    _STRING + r"|-?(?:\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?|NaN|-?Infinity", re.DOTALL)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class _Refused(ValueError):
    """Raised inside json.loads by a number hook; `literal` locates it afterwards."""

    def __init__(self, problem: str, literal: str):
        super().__init__(problem)
        self.problem = problem
        self.literal = literal


def nesting_depth(text: str) -> int:
    """The deepest nesting of [ and { outside strings (the running count's maximum), in linear
    time; for valid JSON it is exact, for anything else it bounds how deep a parser would go."""
    if "[" not in text and "{" not in text:
        return 0
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _too_deep_at(text: str, max_depth: int) -> int:
    """Offset of the first bracket that opens level max_depth + 1 (the error path only)."""
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > max_depth:
                return match.start()
        elif token in "]}":
            depth -= 1
    return 0


def _literal_at(text: str, literal: str) -> int | None:
    """Offset of the first number literal `literal` outside strings."""
    for match in _STRING_OR_LITERAL.finditer(text):
        if match.group() == literal:
            return match.start()
    return None


def _number_hooks(max_int_digits: int, max_number_chars: int) -> dict:
    def parse_int(literal: str) -> int:
        digits = len(literal) - literal.startswith("-")
        if digits > max_int_digits:
            raise _Refused(f"an integer of {digits} digits (at most {max_int_digits})", literal)
        return int(literal)

    def parse_float(literal: str) -> float:
        if len(literal) > max_number_chars:
            raise _Refused(f"a number of {len(literal)} characters "
                           f"(at most {max_number_chars})", literal)
        value = float(literal)
        if not math.isfinite(value):
            raise _Refused(f"number {excerpt(literal)} is too large for a float", literal)
        return value

    def parse_constant(literal: str):
        raise _Refused(f"{literal} is not a number JSON allows", literal)

    return {"parse_int": parse_int, "parse_float": parse_float, "parse_constant": parse_constant}


def text_size(text: str | bytes, max_bytes: int) -> int:
    """The UTF-8 size of `text` (computed only when it could exceed max_bytes)."""
    if isinstance(text, (bytes, bytearray)) or len(text) * 4 <= max_bytes:
        return len(text)
    if len(text) > max_bytes:
        return len(text)  # at least that many bytes: enough to refuse
    return len(text.encode("utf-8", "surrogatepass"))


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def loads_json(text: str | bytes, source: str, *, first_line: int | None = None,
               max_bytes: int = limits.MAX_BYTES, max_depth: int = limits.MAX_DEPTH,
               max_int_digits: int = limits.MAX_INT_DIGITS,
               max_number_chars: int = limits.MAX_NUMBER_CHARS) -> object:
    """json.loads(text) within bounds, else UntrustedInputError naming `source`.

    `source` names where the text came from ("results/x.json", "reply to gpt-4o, question 12",
    "tool call"). With `first_line` (the line of `source` where the text starts) the error names
    `source:line`; without it a multi-line text's error says "at line N"."""

    def refuse(problem: str, offset: int | None = None, lineno: int | None = None):
        if lineno is None and offset is not None and isinstance(text, str):
            lineno = _line_of(text, offset)
        if first_line is not None:
            return UntrustedInputError(source, problem, first_line + (lineno or 1) - 1)
        if lineno is not None and isinstance(text, str) and "\n" in text:
            problem = f"{problem} at line {lineno}"
        return UntrustedInputError(source, problem)

    try:
        size = text_size(text, max_bytes)
        if size > max_bytes:
            raise refuse(f"{size} bytes of JSON, more than the {max_bytes} allowed")
        if isinstance(text, (bytes, bytearray)):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise refuse(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        if not isinstance(text, str):
            raise refuse(f"expected JSON text, got {type(text).__name__}")
        # the scan only where the brackets alone could pass the bound (str.count is cheap)
        if text.count("[") + text.count("{") > max_depth and nesting_depth(text) > max_depth:
            raise refuse(f"JSON nested deeper than {max_depth} levels",
                         _too_deep_at(text, max_depth))
        hooks = _number_hooks(max_int_digits, max_number_chars)
        return json.loads(text, **hooks)
    except UntrustedInputError:
        raise
    except _Refused as exc:
        raise refuse(exc.problem, _literal_at(text, exc.literal)) from None
    except json.JSONDecodeError as exc:
        raise refuse(f"malformed JSON ({exc.msg})", lineno=exc.lineno) from None
    except RecursionError:
        raise refuse("JSON nested too deeply to read") from None
    except MemoryError:
        raise refuse("JSON too large to read into memory") from None
    except UnicodeError as exc:
        raise refuse(f"not valid text ({type(exc).__name__})") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise refuse(f"unreadable JSON ({type(exc).__name__}: {excerpt(exc)})") from None
