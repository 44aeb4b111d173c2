"""Turn families into dataset rows, split rows by group, count them.

Rows follow the study's schema (question, answer, answer_type, source, reasoning) plus id,
group, family, topic, difficulty, target_kind. A group is one parameter draw: its base
phrasing and its paraphrases, which share the answer. Randomness is seeded per group, so the
same seed and filters always give the same bytes.

In the new wording (wording="new") each group is a problem asked in its family's new phrasings
only (Family.new_phrasings), which no usual row and no built-in model's pretraining holds; its
group id ends in NEW_SUFFIX.
"""
from __future__ import annotations

import itertools
import re
from collections import Counter

import numpy as np

from .base import Family, Problem
from .registry import FAMILIES

MAX_REDRAWS = 50  # draws without a new problem before a family counts as used up
WORDINGS = ("usual", "new")
NEW_SUFFIX = "-new"
# a generated group's id, as generate_rows writes it: family, seed and draw number
GROUP_ID = re.compile(r"(?P<family>\w+)-s(?P<seed>\d+)-(?P<draw>\d+)(?:" + NEW_SUFFIX + ")?")


def excluded(family: Family, problem: Problem, exclude: frozenset[str]) -> bool:
    """Whether any wording of `problem`, usual or new, is among the `exclude` questions."""
    return bool(exclude) and not exclude.isdisjoint(
        (*problem.questions, *family.new_questions(problem.params)))


def problem_rows(family: Family, rng: np.random.Generator, group: str, paraphrases: int,
                 seen: set[str], exclude: frozenset[str] = frozenset(),
                 exclude_keys: frozenset[str] = frozenset(),
                 wording: str = "usual") -> list[dict] | None:
    """Rows for one new parameter draw of `family`, or None when every draw repeats `seen` or
    `exclude_keys` (Problem.key) or has a phrasing in `exclude`."""
    for _ in range(MAX_REDRAWS):
        problem = family.generate(rng)
        if problem.key not in seen and problem.key not in exclude_keys \
                and not excluded(family, problem, exclude):
            break
    else:
        return None
    seen.add(problem.key)
    if wording == "new":
        problem = family.reworded(problem)
    count = 1 + min(paraphrases, len(problem.questions) - 1)
    order = rng.permutation(len(problem.questions))[:count]
    return [{
        "question": problem.questions[int(index)],
        "answer": problem.answer,
        "answer_type": "numeric",
        "source": f"generated:{family.name}",
        "reasoning": problem.reasoning,
        "id": f"{group}-p{j}",
        "group": group,
        "family": family.name,
        "topic": family.topic,
        "difficulty": family.difficulty,
        "target_kind": family.target_kind,
        # last, and only for families that have one, so other rows keep their bytes
        **({"expression": problem.expression} if problem.expression is not None else {}),
    } for j, index in enumerate(order)]


def generate_rows(families: list[Family], n: int, seed: int, paraphrases: int = 2,
                  exclude: frozenset[str] = frozenset(), exclude_keys: frozenset[str] = frozenset(),
                  wording: str = "usual") -> list[dict]:
    """n rows: base problems cycling through `families` in a seeded order, each followed by up
    to `paraphrases` other phrasings in the same group (the last group may be cut short).
    A problem with any phrasing among the `exclude` questions, or whose key (Problem.key) is
    among `exclude_keys`, is never drawn. wording="new" asks each problem in its family's new
    phrasings instead (every family must have them)."""
    if n < 1 or seed < 0 or paraphrases < 0:
        raise ValueError("n must be >= 1, seed and paraphrases >= 0")
    if wording not in WORDINGS:
        raise ValueError(f"unknown wording {wording!r} (wordings: {', '.join(WORDINGS)})")
    lacking = [f.name for f in families if wording == "new" and not f.new_phrasings]
    if lacking:
        raise ValueError(f"no new wording for {', '.join(lacking)}")
    suffix = NEW_SUFFIX if wording == "new" else ""
    rows: list[dict] = []
    seen: set[str] = set()
    active = list(families)
    k = 0
    for round_no in itertools.count():
        if len(rows) >= n:
            break
        if not active:
            raise ValueError(f"the chosen families gave no new distinct problem after "
                             f"{len(rows)} rows; ask for fewer rows or more families")
        order = np.random.default_rng([seed, 1, round_no]).permutation(len(active))
        for family in [active[int(i)] for i in order]:
            if len(rows) >= n:
                break
            group = f"{family.name}-s{seed}-{k:05d}{suffix}"
            new = problem_rows(family, np.random.default_rng([seed, 0, k]), group, paraphrases,
                               seen, exclude, exclude_keys, wording)
            k += 1
            if new is None:
                active.remove(family)
                continue
            rows.extend(new[: n - len(rows)])
    return rows


def row_key(row: dict) -> str | None:
    """The Problem.key of a row generate_rows wrote, found by drawing its group's problem again
    (the group id names family, seed and draw) until one has the row's question; None for a row
    it did not write (another generator's, a file edited by hand)."""
    match = GROUP_ID.fullmatch(str(row.get("group", "")))
    family = FAMILIES.get(match["family"]) if match else None
    if family is None:
        return None
    rng = np.random.default_rng([int(match["seed"]), 0, int(match["draw"])])
    for _ in range(MAX_REDRAWS):  # the draws problem_rows made, in its order
        problem = family.generate(rng)
        if row.get("question") in (*problem.questions, *family.new_questions(problem.params)):
            return problem.key
    return None


def row_keys(rows: list[dict]) -> frozenset[str]:
    """The keys of the problems generate_rows wrote among `rows`: one look-up a group, as a
    group's rows are one problem."""
    firsts = {row.get("group"): row for row in reversed(rows)}  # each group's first row
    return frozenset(key for key in map(row_key, firsts.values()) if key is not None)


def group_of(row: dict) -> str:
    return str(row.get("group") or row.get("id") or row["question"])


def split_rows(rows: list[dict], seed: int, val_frac: float, holdout_frac: float,
               ood_families=(), ood_topics=()) -> dict[str, list[dict]]:
    """train / val / holdout (and ood) by group: no group appears in two splits. Rows of the
    OOD families or topics all go to 'ood'; the other groups are shuffled by `seed`."""
    out: dict[str, list[dict]] = {"train": [], "val": [], "holdout": []}
    if ood_families or ood_topics:
        out["ood"] = []
    ood_families, ood_topics = set(ood_families), set(ood_topics)
    groups = list(dict.fromkeys(group_of(r) for r in rows
                                if r.get("family") not in ood_families
                                and r.get("topic") not in ood_topics))
    shuffled = [groups[int(i)] for i in np.random.default_rng(seed).permutation(len(groups))]
    n_hold = round(holdout_frac * len(groups))
    n_val = round(val_frac * len(groups))
    where = {g: "holdout" for g in shuffled[:n_hold]}
    where.update({g: "val" for g in shuffled[n_hold:n_hold + n_val]})
    for row in rows:
        if row.get("family") in ood_families or row.get("topic") in ood_topics:
            out["ood"].append(row)
        else:
            out[where.get(group_of(row), "train")].append(row)
    return out


def count_rows(rows: list[dict]) -> dict:
    """Counts by topic, family and difficulty (rows without the field count as '(none)')."""

    def by(field):
        counts = Counter(str(r.get(field, "(none)")) for r in rows)
        return dict(sorted(counts.items()))

    return {"rows": len(rows), "groups": len({group_of(r) for r in rows}),
            "by_topic": by("topic"), "by_family": by("family"), "by_difficulty": by("difficulty")}
