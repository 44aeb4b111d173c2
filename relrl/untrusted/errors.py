"""The one error every untrusted reader raises: one short line naming where the input came from.

Untrusted input (a dataset row, a recipe, a model's tool call, an API reply, a result file) can be
any size; the message never is. An echoed excerpt is cut to EXCERPT_CHARS, the whole line to
MESSAGE_CHARS, and line breaks are flattened, so a 10 MB value cannot reach a log or a terminal.
"""
from __future__ import annotations

EXCERPT_CHARS = 60
MESSAGE_CHARS = 300


def one_line(text: object, limit: int) -> str:
    """`text` as a single line of at most `limit` characters (an ellipsis marks a cut)."""
    text = str(text)
    if len(text) > 4 * limit:  # flatten only what can be shown
        text = text[: 4 * limit]
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """A short, quoted excerpt of `value` for an error message."""
    return repr(one_line(value, limit))


class UntrustedInputError(ValueError):
    """Untrusted input that cannot be read: `source` names the file (with its line), the request
    or "tool call"; `problem` says what is wrong. str() is one line of at most MESSAGE_CHARS."""

    def __init__(self, source: object, problem: object, line: int | None = None):
        self.source = one_line(source, 160)
        self.problem = one_line(problem, MESSAGE_CHARS)
        self.line = line
        super().__init__(self.__str__())

    def __reduce__(self):  # picklable across processes (a worker's error reaches its parent)
        return type(self), (self.source, self.problem, self.line)

    @property
    def where(self) -> str:
        """`source:line`, or `source` alone when no line is known."""
        return f"{self.source}:{self.line}" if self.line is not None else self.source

    def __str__(self) -> str:
        return one_line(f"{self.where}: {self.problem}", MESSAGE_CHARS)
