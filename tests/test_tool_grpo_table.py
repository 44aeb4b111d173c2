"""benchmarks/tool_grpo_table.py: a loss's paraphrase groups pooled over seeds (issue 29's
judgement over development seeds 100 and 101), and its --seeds flag."""
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.tool_grpo_table import pooled_rows, seed_groups

ROOT = Path(__file__).resolve().parent.parent


def pair(seed, gains):
    """One question a group, 4 samples: the base right once, the trained model 1 + gain times."""
    ids = [f"s{seed}-g{i}" for i in range(len(gains))]
    base = [{"id": q, "group": q, "pass_count": 1, "samples": 4} for q in ids]
    ft = [{"id": q, "group": q, "pass_count": 1 + g, "samples": 4} for q, g in zip(ids, gains)]
    return {"base": {"results": base}, "finetuned": {"results": ft}}


def row(loss, seed, gains):
    return {"loss": loss, "seed": seed, "diffs": seed_groups(pair(seed, gains), seed),
            "delta": sum(gains) / 4 / len(gains)}


def test_pooled_groups_over_seeds_give_the_exact_test_of_all_groups():
    rows = [row("grpo", 100, [1] * 5), row("grpo", 101, [1] * 4 + [0]), row("gspo", 100, [0, 1])]
    grpo, gspo = pooled_rows(rows)
    assert grpo["seeds"] == [100, 101] and grpo["groups"] == 10
    assert grpo["base"] == pytest.approx(0.25) and grpo["trained"] == pytest.approx(0.25 + 0.9 / 4)
    # nine groups all gained, one did not move: 2 of the 2^9 sign patterns are as extreme
    assert grpo["p"] == pytest.approx(2 / 2 ** 9)
    assert grpo["per_seed"] == pytest.approx([0.25, 0.2])
    assert gspo["groups"] == 2 and gspo["p"] == pytest.approx(1.0)
    # the stratified bootstrap resamples within seeds: every group's gain is 0 or 1/4
    assert 0 < grpo["ci"][0] <= grpo["delta"] <= grpo["ci"][1] <= 0.25


@pytest.mark.parametrize("flag", ["100,x", "100,100", ","])
def test_bad_seed_lists_are_refused_with_status_2(flag):
    done = subprocess.run([sys.executable, "benchmarks/tool_grpo_table.py", "--seeds", flag],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "--seeds" in done.stderr
