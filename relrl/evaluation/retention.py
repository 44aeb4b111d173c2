"""The retention set: held-out questions the base model already answers right often.

Forgetting can only show where there is something to forget: the out-of-distribution topics
are nearly all wrong for the base (2.3% at seed 0), so no loss there could be significant.
The retention set takes the holdout's questions (groups neither SFT nor GRPO trained on, from
the training families) that the base got right in at least `min_score` of its screening
samples (2 of 4, i.e. >= 50% >= the 30% asked for). Selection and measurement must not share
samples, or regression to the mean fakes a drop: the set is evaluated with another run seed
than screening used (demo.py's eval_seed_offset).
"""
from __future__ import annotations

from typing import Collection, Iterable, Sequence


def select_retention(holdout: Sequence[dict], screened: Iterable[dict], min_score: int,
                     exclude_groups: Collection[str] = frozenset()) -> list[dict]:
    """The holdout rows (in holdout order) whose screening pass count is >= min_score, with
    base_score and base_samples from the screened rows (screen_v4's mixed and non-mixed),
    leaving out the paraphrase groups `exclude_groups` (those of the held-out mixed-style set,
    so that forgetting and the primary gain are measured on different questions)."""
    scores = {str(r["id"]): r for r in screened}
    missing = [r["id"] for r in holdout if str(r["id"]) not in scores]
    if missing:
        raise ValueError(f"{len(missing)} holdout questions were not screened (e.g. {missing[0]})")
    out = []
    for row in holdout:
        s = scores[str(row["id"])]
        if int(s["base_score"]) >= min_score and str(row["group"]) not in exclude_groups:
            out.append({**row, "base_score": s["base_score"], "base_samples": s["base_samples"]})
    return out
