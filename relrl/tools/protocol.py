"""Tool calls in Qwen3's format: the declaration a chat template puts in the system turn, the
call the model writes, and the answer the engine sends back.

The model ends a turn with `<tool_call>{"name": ..., "arguments": {...}}</tool_call><|im_end|>`
(one or more calls); every complete call in that turn is answered, in order, and a malformed one
(bad JSON, an unknown tool, a missing argument) gets an `error: ...` line as its answer, so the
model sees why and can try again. How an answer is laid out as a turn (`<tool_response>` inside a
user turn, then a new assistant prefix) is the chat template's business: relrl.data.prompting.

The model's text is untrusted: finding the calls is one forward pass (str.find, no regular
expression that could rescan), the JSON goes through relrl.untrusted.loads_json (bounded size,
nesting and integer length), and whatever goes wrong in reading or running a call, its answer is
an error line, never an exception. Every answer is one line of at most MAX_ANSWER_CHARS with `<`
escaped, so no answer can hold a chat marker's text (`<|im_end|>`, `</tool_response>`...) and
change the structure of the turn it is inserted in.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from relrl.tools.calculator import calculator, quote
from relrl.untrusted import UntrustedInputError, loads_json

TOOL_CHOICES = ("none", "calculator")  # --tools
DEFAULT_MAX_TOOL_CALLS = 4
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
MAX_CALL_BYTES = 16 * 1024  # a call's JSON: an expression of the calculator's 1,000 characters, escaped
MAX_CALL_DEPTH = 8  # {"name", "arguments": {"expression"}} is 2 deep
MAX_ANSWER_CHARS = 240
BAD_JSON = ('error: the tool call is not valid JSON (write {"name": "calculator", '
            '"arguments": {"expression": "..."}})')

CALCULATOR_SCHEMA = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate one arithmetic expression, optionally after named values, and "
                       "return its value. Numbers, + - * / ^, parentheses, exp, ln, log10, sqrt, "
                       "factorial (or n!), gamma, comb, erf, norm_cdf, norm_ppf, chi2_ppf, pi, e.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {
                "type": "string",
                "description": "e.g. exp(-0.002*500), or lam = 0.002; t = 500; exp(-lam*t)"}},
            "required": ["expression"],
        },
    },
}
_TOOLS = {"calculator": CALCULATOR_SCHEMA}


def tool_schemas(tools: str) -> list[dict] | None:
    """What a chat template's `tools` argument gets for --tools (None: no tools declared)."""
    if tools == "none":
        return None
    if tools not in _TOOLS:
        raise ValueError(f"unknown tools {tools!r}: one of {', '.join(TOOL_CHOICES)}")
    return [_TOOLS[tools]]


def format_tool_call(name: str, arguments: dict) -> str:
    """A call as the model writes it (and as worked solutions show it)."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{CALL_OPEN}\n{body}\n{CALL_CLOSE}"


def calculator_call(expression: str) -> str:
    return format_tool_call("calculator", {"expression": expression})


def tool_call_bodies(text: str) -> list[str]:
    """The text inside every complete <tool_call>...</tool_call> of a turn, in order (a call
    runs from an opening to the first closing after it). One forward pass: a regular expression
    rescanned the rest of the turn from every opening that is never closed (quadratic)."""
    bodies, start = [], 0
    while (opening := text.find(CALL_OPEN, start)) >= 0:
        closing = text.find(CALL_CLOSE, opening + len(CALL_OPEN))
        if closing < 0:
            break
        bodies.append(text[opening + len(CALL_OPEN):closing])
        start = closing + len(CALL_CLOSE)
    return bodies


@dataclass(frozen=True)
class ToolAnswer:
    text: str     # what the model is shown
    failed: bool  # malformed call, unknown tool, or the tool's own error


def safe_answer(text: str) -> str:
    """An answer as it may be inserted: one line, at most MAX_ANSWER_CHARS (then the escapes),
    every `<` written `\\x3c` (a number or an error never needs one)."""
    line = " ".join(text[:4 * MAX_ANSWER_CHARS].split())[:MAX_ANSWER_CHARS]
    return line.replace("<", "\\x3c")


def answer_call(body: str, tools: str = "calculator") -> ToolAnswer:
    """Run one call written by the model; every way it can be wrong, including an exception
    anywhere in reading or running it, gets an error answer (safe_answer)."""
    try:
        answer = _answer(body, tools)
    except Exception:  # the rollout must go on whatever the model wrote
        answer = ToolAnswer("error: the tool call could not be run", True)
    return ToolAnswer(safe_answer(answer.text), answer.failed)


def _json(text: str):
    return loads_json(text, "tool call", max_bytes=MAX_CALL_BYTES, max_depth=MAX_CALL_DEPTH)


def _answer(body: str, tools: str) -> ToolAnswer:
    try:
        call = _json(body)
    except UntrustedInputError:
        return ToolAnswer(BAD_JSON, True)
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return ToolAnswer("error: the tool call needs a \"name\"", True)
    if call["name"] != tools:
        return ToolAnswer(f"error: unknown tool {quote(call['name'])}; the tool is {tools!r}", True)
    arguments = call.get("arguments")
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = _json(arguments)
        except UntrustedInputError:
            arguments = None
    if not isinstance(arguments, dict) or not isinstance(arguments.get("expression"), str):
        return ToolAnswer('error: missing argument "expression" (a string)', True)
    result = calculator(arguments["expression"])
    return ToolAnswer(result, result.startswith("error:"))
