"""Tool calls in Qwen3's format: the declaration a chat template puts in the system turn, the
call the model writes, and the answer the engine sends back.

The model ends a turn with `<tool_call>{"name": ..., "arguments": {...}}</tool_call><|im_end|>`
(one or more calls); every complete call in that turn is answered, in order, and a malformed one
(bad JSON, an unknown tool, a missing argument) gets an `error: ...` line as its answer, so the
model sees why and can try again. How an answer is laid out as a turn (`<tool_response>` inside a
user turn, then a new assistant prefix) is the chat template's business: relrl.data.prompting.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from relrl.tools.calculator import calculator

TOOL_CHOICES = ("none", "calculator")  # --tools
DEFAULT_MAX_TOOL_CALLS = 4
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
_CALL = re.compile(re.escape(CALL_OPEN) + r"(.*?)" + re.escape(CALL_CLOSE), re.S)

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
    """The text inside every complete <tool_call>...</tool_call> of a turn, in order."""
    return [m.group(1) for m in _CALL.finditer(text)]


@dataclass(frozen=True)
class ToolAnswer:
    text: str     # what the model is shown
    failed: bool  # malformed call, unknown tool, or the tool's own error


def answer_call(body: str, tools: str = "calculator") -> ToolAnswer:
    """Run one call written by the model; every way it can be wrong gets an error answer."""
    try:
        call = json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        return ToolAnswer('error: the tool call is not valid JSON (write {"name": "calculator", '
                          '"arguments": {"expression": "..."}})', True)
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return ToolAnswer("error: the tool call needs a \"name\"", True)
    if call["name"] != tools:
        return ToolAnswer(f"error: unknown tool {call['name'][:40]!r}; the tool is {tools!r}", True)
    arguments = call.get("arguments")
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):
            arguments = None
    if not isinstance(arguments, dict) or not isinstance(arguments.get("expression"), str):
        return ToolAnswer('error: missing argument "expression" (a string)', True)
    result = calculator(arguments["expression"])
    return ToolAnswer(result, result.startswith("error:"))
