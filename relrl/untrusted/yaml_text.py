"""YAML from untrusted text (recipes, config.yaml, pipeline.yaml): aliases refused, size, depth
and integer length bounded; any failure one UntrustedInputError naming the source and line.

yaml.safe_load expands aliases, so a few hundred bytes ("billion laughs": each anchor a list of
aliases to the one before) become gigabytes, and an error message that prints the value prints
every expansion. A recipe has no use for aliases, so the composer refuses the first one it meets,
before anything is expanded. Nesting is counted as nodes are composed, and an integer literal is
measured before int() sees it.
"""
from __future__ import annotations

import os

import yaml

import relrl.untrusted.limits as limits
from relrl.untrusted.errors import UntrustedInputError, excerpt, one_line
from relrl.untrusted.files import read_text_file
from relrl.untrusted.json_text import text_size


class _Refused(yaml.MarkedYAMLError):
    """A bound this loader enforces, with the mark of the node that broke it."""


class BoundedSafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader (the pure-Python one, so the composer can be bounded) without aliases."""

    max_depth = limits.MAX_DEPTH
    max_int_digits = limits.MAX_INT_DIGITS

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):  # noqa: D102 - yaml.composer.Composer hook
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(problem=f"YAML aliases are not allowed (*{one_line(event.anchor, 40)}); "
                           "write the value out", problem_mark=event.start_mark)
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise _Refused(problem=f"YAML nested deeper than {self.max_depth} levels",
                               problem_mark=self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node):  # noqa: D102 - yaml.constructor hook
        literal = str(node.value)
        digits = sum(ch.isalnum() for ch in literal)
        if digits > self.max_int_digits:
            raise _Refused(problem=f"an integer of {digits} digits (at most {self.max_int_digits})",
                           problem_mark=node.start_mark)
        return super().construct_yaml_int(node)


BoundedSafeLoader.add_constructor("tag:yaml.org,2002:int", BoundedSafeLoader.construct_yaml_int)


def loads_yaml(text: str, source: str, *, first_line: int | None = None,
               max_bytes: int = limits.MAX_YAML_BYTES, max_depth: int = limits.MAX_DEPTH,
               max_int_digits: int = limits.MAX_INT_DIGITS) -> object:
    """yaml.safe_load(text) without aliases and within bounds, else UntrustedInputError naming
    `source` (and `source:line` when `first_line`, the line where the text starts, is given).
    No message echoes more than a short excerpt of the text."""

    def refuse(problem: str, mark=None):
        line = None
        if first_line is not None:
            line = first_line + (mark.line if mark is not None else 0)
        elif mark is not None:
            problem = f"{problem} at line {mark.line + 1}"
        return UntrustedInputError(source, problem, line)

    size = text_size(text, max_bytes)
    if size > max_bytes:
        raise refuse(f"{size} bytes of YAML, more than the {max_bytes} allowed")
    loader = BoundedSafeLoader(text)
    loader.max_depth, loader.max_int_digits = max_depth, max_int_digits
    try:
        return loader.get_single_data()
    except _Refused as exc:
        raise refuse(exc.problem, exc.problem_mark) from None
    except yaml.MarkedYAMLError as exc:
        problem = exc.problem or exc.context or "unreadable"
        raise refuse(f"not valid YAML ({one_line(problem, 120)})", exc.problem_mark) from None
    except yaml.YAMLError as exc:
        raise refuse(f"not valid YAML ({one_line(str(exc).splitlines()[0], 120)})") from None
    except RecursionError:
        raise refuse("YAML nested too deeply to read") from None
    except MemoryError:
        raise refuse("YAML too large to read into memory") from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a date like 2024-13-45
        raise refuse(f"unreadable YAML value ({type(exc).__name__}: {excerpt(exc)})") from None
    finally:
        loader.dispose()


def load_yaml_file(path: str | os.PathLike, **bounds) -> object:
    """One YAML document from a file; an error names path:line. `bounds` as for loads_yaml."""
    text = read_text_file(path, max_bytes=bounds.get("max_bytes", limits.MAX_YAML_BYTES))
    return loads_yaml(text, str(path), first_line=1, **bounds)
