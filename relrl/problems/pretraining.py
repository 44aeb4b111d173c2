"""The rows the built-in models were pretrained on, drawn again, so that a test set can leave out
every problem a model has seen (build_dataset.py generate --exclude-pretraining).

Each model's rows are its build's training_rows (relrl.models.tiny_build, tiny_tool_build),
restated here because those modules import torch; tests/test_transfer_data.py checks that the
rows are the same. Both draw again exactly: a tokenizer trained on them is, merge for merge, the
one shipped with the model (relrl/models/shipped/).
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import stray_numbers
from .dataset import generate_rows, row_keys
from .registry import TOOL_FAMILIES, select


@dataclass(frozen=True)
class Pretraining:
    families: tuple[str, ...] | None  # None: every family
    rows: int
    seed: int
    paraphrases: int
    # only the rows whose question states the expression's numbers as it writes them (tiny-tool)
    verbatim: bool = False


PRETRAINING = {
    "tiny": Pretraining(None, 4000, 20240601, 0),                      # tiny_build.RECIPE
    "tiny-tool": Pretraining(TOOL_FAMILIES, 6000, 20240602, 2, True),  # tiny_tool_build.RECIPE
}


def pretraining_rows(model: str) -> list[dict]:
    """The rows the built-in `model` (a PRETRAINING name) was pretrained on."""
    spec = PRETRAINING[model]
    rows = generate_rows(select(spec.families), spec.rows, spec.seed, spec.paraphrases)
    if spec.verbatim:
        rows = [row for row in rows if not stray_numbers(row["expression"], row["question"])]
    return rows


def pretraining_problems(model: str) -> tuple[frozenset[str], frozenset[str]]:
    """(problem keys, questions) of `model`'s pretraining rows: what a test set leaves out."""
    rows = pretraining_rows(model)
    keys = row_keys(rows)
    if len(keys) != len({row["group"] for row in rows}):  # every group was drawn here
        raise RuntimeError(f"the {model} pretraining rows did not all give their problem back")
    return keys, frozenset(row["question"] for row in rows)
