"""Generated worked solutions checked step by step (generators/verify_reasoning.py), not only by
their final box: every `a op b = c` step recomputes, and a planted slip in one step is caught."""
import re
from argparse import Namespace

import pytest

from generators.verify_reasoning import _NUM, arithmetic_steps, check_item
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import FAMILIES

ARGS = Namespace(tolerance=0.01, step_tolerance=0.01,  # verify_reasoning.py's defaults
                 tolerance_rule="study")


@pytest.fixture(scope="module")
def rows():
    return generate_rows(list(FAMILIES.values()), 400, seed=0)


@pytest.mark.parametrize("rule", ["study", "complement"])
def test_generated_worked_solutions_pass_every_step_check(rows, rule):
    reports = [check_item(row, Namespace(**{**vars(ARGS), "tolerance_rule": rule}))
               for row in rows]
    flagged = [(r["id"], r["problems"]) for r in reports if r["status"] != "ok"]
    assert not flagged, flagged[:3]
    assert sum(r["steps_checked"] for r in reports) >= len(rows)  # steps were really read
    assert len({row["family"] for row in rows}) == len(FAMILIES)


def plant_slip(reasoning: str) -> tuple[str, str] | None:
    """The reasoning with one plainly written step result made wrong by about 40%, and that
    wrong result; None when no step has a plain numeric result in the raw text."""
    for step in arithmetic_steps(reasoning, ARGS.step_tolerance):
        written = step["written"]
        if not re.fullmatch(_NUM, written) or float(written.replace(",", "")) == 0:
            continue
        wrong = f"{float(written.replace(',', '')) * 1.4 + 1:.4g}"
        for found in re.finditer(r"=\s*" + re.escape(written) + r"(?![\d.])", reasoning):
            start = found.end() - len(written)
            slipped = reasoning[:start] + wrong + reasoning[found.end():]
            # the slip must land in this step, not in a look-alike such as "R_1 = 1:"
            if any(s["expr"] == step["expr"] and s["written"] == wrong
                   for s in arithmetic_steps(slipped, ARGS.step_tolerance)):
                return slipped, wrong
    return None


def test_a_wrong_step_in_a_worked_solution_is_flagged(rows):
    planted = 0
    for row in {row["family"]: row for row in rows}.values():  # one solution per family
        slipped = plant_slip(row["reasoning"])
        if slipped is None:
            continue
        reasoning, wrong = slipped
        report = check_item({**row, "reasoning": reasoning}, ARGS)
        assert report["status"] == "flagged", (row["id"], wrong)
        assert any(s["written"] == wrong for s in report["wrong_steps"]), report["problems"]
        planted += 1
    assert planted >= len(FAMILIES) * 3 // 4  # most families write checkable steps (54 of 63)
