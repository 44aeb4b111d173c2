"""Command-line conventions shared by every script.

Bad input is a one-line message on stderr and exit status 2, never a traceback;
flags win over the study's environment variables, which win over defaults.
"""
from __future__ import annotations

import argparse
import os
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
    except ValueError as exc:
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


def int_at_least(flag: str, minimum: int):
    """argparse type for an integer >= minimum whose error names the flag."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{flag} must be >= {minimum}, got {value}")
        return value

    return parse


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
                        help="auto: 4-bit NF4 on CUDA for hub/local models, float32 on the CPU")
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
