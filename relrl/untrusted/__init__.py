"""The one reader of untrusted JSON, YAML and numbers (dataset rows, recipes, tool calls written
by a model, API replies, result and progress files).

Size, nesting depth and integer length are bounded, NaN/Infinity and YAML aliases refused, and
any failure is an UntrustedInputError (a ValueError): one line naming the source (file:line,
the request, or "tool call"), never echoing more than a short excerpt. The scripts report it
like every other input error: one line, exit status 2 (relrl.runtime.cli.run_main).

This package is in the bottom layer and imports nothing else from relrl.
"""
from relrl.untrusted.errors import UntrustedInputError, excerpt, one_line
from relrl.untrusted.files import iter_jsonl, iter_jsonl_text, load_json_file, read_text_file
from relrl.untrusted.json_text import loads_json, nesting_depth
from relrl.untrusted.limits import (MAX_BYTES, MAX_DEPTH, MAX_INT_DIGITS, MAX_NUMBER_CHARS,
                                    MAX_YAML_BYTES)
from relrl.untrusted.yaml_text import compose_yaml, construct_yaml, load_yaml_file, loads_yaml

__all__ = [
    "UntrustedInputError", "excerpt", "one_line",
    "loads_json", "nesting_depth", "load_json_file", "iter_jsonl", "iter_jsonl_text",
    "read_text_file", "loads_yaml", "load_yaml_file", "compose_yaml", "construct_yaml",
    "MAX_BYTES", "MAX_DEPTH", "MAX_INT_DIGITS", "MAX_NUMBER_CHARS", "MAX_YAML_BYTES",
]
