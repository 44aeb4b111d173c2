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


class _Bounds:
    """The refusals both loaders below share: aliases, nesting past max_depth, long integers."""

    max_depth = limits.MAX_DEPTH
    max_int_digits = limits.MAX_INT_DIGITS
    _depth = 0

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


class _PyBoundedLoader(_Bounds, yaml.SafeLoader):
    """yaml.SafeLoader, bounded (PyYAML without libyaml)."""


try:  # libyaml's scanner and parser, with PyYAML's composer (so the composer can be bounded)
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    CParser = None

if CParser is not None:
    class _CBoundedLoader(_Bounds, yaml.composer.Composer, yaml.constructor.SafeConstructor,
                          yaml.resolver.Resolver, CParser):
        """libyaml's parser (pure-Python scanning is seconds on a flow list of 200 kB) below
        PyYAML's composer and safe constructor, bounded."""

        def __init__(self, stream):
            CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    BoundedSafeLoader = _CBoundedLoader
else:  # pragma: no cover
    BoundedSafeLoader = _PyBoundedLoader

for _loader_class in {_PyBoundedLoader, BoundedSafeLoader}:
    _loader_class.add_constructor("tag:yaml.org,2002:int", _Bounds.construct_yaml_int)


class _Reader:
    """One bounded read of untrusted YAML: every failure becomes UntrustedInputError naming
    `source` (and `source:line` when `first_line`, the line where the text starts, is given)."""

    def __init__(self, source: str, first_line: int | None):
        self.source, self.first_line = source, first_line

    def refuse(self, problem: str, mark=None) -> UntrustedInputError:
        line = None
        if self.first_line is not None:
            line = self.first_line + (mark.line if mark is not None else 0)
        elif mark is not None:
            problem = f"{problem} at line {mark.line + 1}"
        return UntrustedInputError(self.source, problem, line)

    def run(self, step):
        try:
            return step()
        except _Refused as exc:
            raise self.refuse(exc.problem, exc.problem_mark) from None
        except yaml.MarkedYAMLError as exc:
            problem = exc.problem or exc.context or "unreadable"
            mark = exc.problem_mark or exc.context_mark
            raise self.refuse(f"not valid YAML ({one_line(problem, 120)})", mark) from None
        except yaml.YAMLError as exc:
            first = (str(exc).splitlines() or ["unreadable"])[0]
            raise self.refuse(f"not valid YAML ({one_line(first, 120)})") from None
        except RecursionError:
            raise self.refuse("YAML nested too deeply to read") from None
        except MemoryError:
            raise self.refuse("YAML too large to read into memory") from None
        except (ValueError, TypeError, OverflowError) as exc:  # e.g. a date like 2024-13-45
            raise self.refuse(f"unreadable YAML value ({type(exc).__name__}: {excerpt(exc)})"
                              ) from None


def _loader(text: str, reader: _Reader, max_bytes: int, max_depth: int,
            max_int_digits: int) -> BoundedSafeLoader:
    size = text_size(text, max_bytes)
    if size > max_bytes:
        raise reader.refuse(f"{size} bytes of YAML, more than the {max_bytes} allowed")
    loader = BoundedSafeLoader(text)
    loader.max_depth, loader.max_int_digits = max_depth, max_int_digits
    return loader


def loads_yaml(text: str, source: str, *, first_line: int | None = None,
               max_bytes: int = limits.MAX_YAML_BYTES, max_depth: int = limits.MAX_DEPTH,
               max_int_digits: int = limits.MAX_INT_DIGITS) -> object:
    """yaml.safe_load(text) without aliases and within bounds, else UntrustedInputError naming
    `source` (and `source:line` when `first_line`, the line where the text starts, is given).
    No message echoes more than a short excerpt of the text."""
    reader = _Reader(source, first_line)
    loader = _loader(text, reader, max_bytes, max_depth, max_int_digits)
    try:
        return reader.run(loader.get_single_data)
    finally:
        loader.dispose()


def compose_yaml(text: str, source: str, *, first_line: int | None = None,
                 max_bytes: int = limits.MAX_YAML_BYTES, max_depth: int = limits.MAX_DEPTH,
                 max_int_digits: int = limits.MAX_INT_DIGITS) -> yaml.Node | None:
    """yaml.compose(text) with the same refusals as loads_yaml: the node tree, for a reader
    that names each key's line. Construct its values with construct_yaml."""
    reader = _Reader(source, first_line)
    loader = _loader(text, reader, max_bytes, max_depth, max_int_digits)
    try:
        return reader.run(loader.get_single_node)
    finally:
        loader.dispose()


def construct_yaml(node: yaml.Node, source: str, *, first_line: int | None = None,
                   max_int_digits: int = limits.MAX_INT_DIGITS) -> object:
    """The Python value of a node from compose_yaml (safe types, integers bounded)."""
    reader = _Reader(source, first_line)
    constructor = BoundedSafeLoader("")
    constructor.max_int_digits = max_int_digits
    return reader.run(lambda: constructor.construct_document(node))


def load_yaml_file(path: str | os.PathLike, **bounds) -> object:
    """One YAML document from a file; an error names path:line. `bounds` as for loads_yaml."""
    text = read_text_file(path, max_bytes=bounds.get("max_bytes", limits.MAX_YAML_BYTES))
    return loads_yaml(text, str(path), first_line=1, **bounds)
