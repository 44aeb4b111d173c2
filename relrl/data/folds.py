"""Group-aware k-fold splits, shared by SFT cross-validation and the per-fold baselines.

Rows with the same `group` (a question and its paraphrases) always land in the same fold, so a
paraphrase of a test question is never trained on. Rows without a group are their own group.
The split depends only on the rows and the seed, so every script that asks for fold k of the
same dataset with the same seed gets the same questions.
"""
from __future__ import annotations

import random

from relrl.runtime.cli import UsageError


def group_of(row: dict) -> str:
    group = row.get("group")
    return str(group) if group not in (None, "") else f"id:{row['id']}"


def kfold_by_group(rows: list[dict], k: int, seed: int = 0) -> list[list[int]]:
    """Test-row indices of each of k folds (ascending within a fold).

    Groups are shuffled with the seed, then placed largest first into the fold with the fewest
    rows so far, which keeps folds within one group's size of each other.
    """
    if k < 2:
        raise UsageError(f"--folds: need at least 2 folds, got {k}")
    members: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        members.setdefault(group_of(row), []).append(index)
    if len(members) < k:
        raise UsageError(f"--folds: {len(members)} question groups cannot fill {k} folds")
    groups = list(members.values())
    random.Random(seed).shuffle(groups)
    groups.sort(key=len, reverse=True)  # stable: equal sizes keep the shuffled order
    folds: list[list[int]] = [[] for _ in range(k)]
    for group in groups:
        smallest = min(range(k), key=lambda f: len(folds[f]))
        folds[smallest].extend(group)
    return [sorted(fold) for fold in folds]


def fold_rows(rows: list[dict], k: int, fold: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(train rows, test rows) of fold `fold` (0-based), both in dataset order."""
    if not 0 <= fold < k:
        raise UsageError(f"--fold: must satisfy 0 <= fold < {k}, got {fold}")
    test = set(kfold_by_group(rows, k, seed)[fold])
    train_rows = [row for i, row in enumerate(rows) if i not in test]
    test_rows = [row for i, row in enumerate(rows) if i in test]
    return train_rows, test_rows
