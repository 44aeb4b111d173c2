"""Command-line conventions shared by every script.

Bad input is a one-line message on stderr and exit status 2, never a traceback;
flags win over the study's environment variables, which win over defaults.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from typing import Callable

from relrl.grading.scoring import TOLERANCE_RULES
from relrl.untrusted import UntrustedInputError


class UsageError(Exception):
    """A problem with the user's input: reported in one line, exit status 2."""


def env_default(name: str, default, cast: Callable = str):
    """The value of environment variable `name` cast to the flag's type, else `default`."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return cast(raw)
    except (ValueError, argparse.ArgumentTypeError) as exc:  # number_type's: names the flag
        raise UsageError(f"environment variable {name}={raw!r}: {exc}") from None


MESSAGE_LIMIT = 1000  # an error line echoing a huge value (a flag, a recipe's list) is cut here


def fail(message: str, code: int = 2) -> None:
    if len(message) > MESSAGE_LIMIT:
        message = f"{message[:MESSAGE_LIMIT]}… ({len(message) - MESSAGE_LIMIT} more characters)"
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors that name the flag, exit status 2."""

    def error(self, message: str):  # noqa: D102 - argparse hook
        fail(f"{self.prog}: {message}")


def run_main(main: Callable[[], int | None]) -> None:
    """Run a script's main(), turning input errors into one line and exit status 2."""
    try:
        code = main()
    except (UsageError, UntrustedInputError) as exc:  # DatasetError is a UsageError; an
        fail(str(exc))  # UntrustedInputError (relrl.untrusted) names its file:line already
    except KeyboardInterrupt:
        fail("interrupted", code=130)
    sys.exit(code or 0)


# ------------------------------------------------------------------ numeric ranges
# A setting's range is declared once, where the setting is defined, as a short text: ">= 1",
# "> 0", "<= 4", "[0, 1]", "(0, 1]", "[0, 1)"; None: any finite number. check_range is the one
# function that checks a value against it, whichever layer the value came from.
_BOUND = re.compile(r"^(>=|>|<=|<)\s*(\S+)$")
_INTERVAL = re.compile(r"^([\[(])\s*([^,\s]+)\s*,\s*([^\])\s]+)\s*([\])])$")


def parse_range(spec: str | None) -> tuple[float, bool, float, bool]:
    """(low, low included, high, high included) of a range text; ValueError when malformed."""
    if spec is None or spec == "finite":
        return -math.inf, False, math.inf, False
    text = spec.strip()
    if match := _BOUND.match(text):
        op, bound = match.group(1), float(match.group(2))
        if op.startswith(">"):
            return bound, op == ">=", math.inf, False
        return -math.inf, False, bound, op == "<="
    if match := _INTERVAL.match(text):
        low, high = float(match.group(2)), float(match.group(3))
        if not low < high:
            raise ValueError(f"range {spec!r}: empty")
        return low, match.group(1) == "[", high, match.group(4) == "]"
    raise ValueError(f"range {spec!r}: expected '>= x', '> x', '<= x', '< x' or an interval "
                     "such as '[0, 1)'")


def in_range(value, spec: str | None) -> bool:
    """Whether a number is finite and inside the range text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    low, low_in, high, high_in = parse_range(spec)
    return (value > low or low_in and value == low) and (value < high or high_in and value == high)


def range_text(spec: str | None) -> str:
    """The words of a message: 'finite and >= 0', 'finite and in [0, 1)'."""
    if spec is None or spec == "finite":
        return "finite"
    return f"finite and {'in ' if spec.strip()[0] in '[(' else ''}{spec.strip()}"


def check_range(value, spec: str | None, name: str, source: str = "") -> None:
    """Refuse a number that is not finite or not in `spec`, in one line naming the flag `name`
    (and where the value came from, a recipe or an environment variable, when given)."""
    if in_range(value, spec):
        return
    bounds = None if spec in (None, "finite") else spec.strip()
    if bounds is None or isinstance(value, float) and not math.isfinite(value):
        rule = range_text(spec)
    else:  # a finite number out of range: the range alone, as the other checks word it
        rule = f"in {bounds}" if bounds[0] in "[(" else bounds
    raise UsageError(f"{name}: must be {rule}, got {value}{f' (from {source})' if source else ''}")


def number_type(flag: str, kind: type = float, spec: str | None = None):
    """argparse type: an int or a float, finite and within `spec`, whose error names the flag."""

    def parse(text: str):
        try:
            value = kind(text)  # int("1e3") and int("inf") fail: "must be an integer"
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{flag} must be {what}, got {text!r}") from None
        try:
            check_range(value, spec, flag)
        except UsageError as exc:  # "--flag must be ...", as int_at_least words it
            raise argparse.ArgumentTypeError(str(exc).replace(f"{flag}: ", f"{flag} ", 1)) from None
        return value

    parse.flag, parse.kind, parse.range = flag, kind, spec  # what tests enumerate
    return parse


def int_at_least(flag: str, minimum: int):
    """argparse type for an integer >= minimum whose error names the flag."""
    return number_type(flag, int, f">= {minimum}")


def positive_int(flag: str):
    return int_at_least(flag, 1)


def seed_list(flag: str):
    """argparse type for distinct comma-separated seeds >= 0, such as 2,3,4."""

    def parse(text: str) -> list[int]:
        try:
            seeds = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            seeds = []
        if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
            raise argparse.ArgumentTypeError(
                f"{flag} must be distinct comma-separated seeds >= 0 such as 2,3,4, got {text!r}")
        return seeds

    return parse


def add_load_args(parser, *, unsloth: bool = True) -> None:
    """How the base model is loaded, the same flags in every script that loads one."""
    parser.add_argument("--load-in-4bit", choices=("auto", "yes", "no"), default="auto",
                        help="auto: a pre-quantized checkpoint in 4-bit anywhere, a full-precision "
                        "one in 4-bit NF4 on CUDA and float32 on the CPU; yes: quantize wherever "
                        "bitsandbytes runs; no: full precision")
    if unsloth:
        parser.add_argument("--unsloth", action="store_true", help="load through Unsloth (CUDA only)")


def add_tolerance_rule_arg(parser) -> None:
    """--tolerance-rule, the same flag wherever answers are graded (relrl.grading.scoring)."""
    parser.add_argument("--tolerance-rule", choices=TOLERANCE_RULES, default="study",
                        help="study: relative error, the study's rule (default); complement: a "
                        "probability target t is judged on min(t, 1 - t), a reliability near 1 "
                        "on its failure probability")


def load_in_4bit_flag(args) -> bool | None:
    """--load-in-4bit as load_model takes it: None (auto), True or False."""
    return {"auto": None, "yes": True, "no": False}[args.load_in_4bit]


def parse_shard(spec: str | None) -> tuple[int, int]:
    """'i/n' (0-based i) -> (i, n); None falls back to SLURM array variables, then (0, 1)."""
    if spec is None:
        task = os.environ.get("SLURM_ARRAY_TASK_ID")
        count = os.environ.get("SLURM_ARRAY_TASK_COUNT")
        if task is None or count is None:
            return 0, 1
        spec = f"{task}/{count}"
    try:
        i_text, n_text = spec.split("/")
        i, n = int(i_text), int(n_text)
    except ValueError:
        raise UsageError(f"--shard: expected i/n such as 0/4, got {spec!r}") from None
    if n < 1 or not 0 <= i < n:
        raise UsageError(f"--shard: index must satisfy 0 <= i < n, got {spec!r}")
    return i, n
