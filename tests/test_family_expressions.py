"""Every family's calculator expression gives the family's exact answer, is written with the
question's own numbers, and leaves the dataset rows of the other families as they were."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from relrl.problems.base import num, num_pct, stray_numbers
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import FAMILIES, TOOL_FAMILIES, expand_sets
from relrl.tools.calculator import evaluate

WITH_EXPRESSION = [f for f in FAMILIES.values() if f.expression is not None]


def test_enough_families_across_topics_have_an_expression():
    assert len(WITH_EXPRESSION) >= 20
    assert len({f.topic for f in WITH_EXPRESSION}) >= 8


@pytest.mark.parametrize("family", WITH_EXPRESSION, ids=lambda f: f.name)
def test_expression_gives_the_exact_value_with_the_question_numbers(family):
    rng = np.random.default_rng(2029)
    for _ in range(50):
        problem = family.generate(rng)
        value = evaluate(problem.expression)
        assert value == pytest.approx(problem.value, rel=1e-9), problem.expression
        stray = stray_numbers(problem.expression, problem.questions[0])
        assert not stray, f"{problem.expression} has numbers not in: {problem.questions[0]}"


def test_stray_numbers_are_those_the_question_does_not_give():
    question = "A pump fails at 2.3 × 10^-5 per hour. Find R(49,000 h) at 90% confidence."
    assert stray_numbers("exp(-(2.3 × 10^-5)*49000)", question) == set()
    assert stray_numbers("(90/100)*(1 - 273.15)", question) == set()
    assert stray_numbers("exp(-2.4e-5*49000)", question) == {2.4e-5}
    assert stray_numbers("0.93^2", question) == {0.93}


def test_number_helpers_write_what_the_question_writes():
    assert num(0.00023) == "0.00023"
    assert num(2.3e-5) == "(2.3 × 10^-5)"
    assert evaluate(f"1/{num(2.3e-5)}") == pytest.approx(1 / 2.3e-5, rel=1e-12)
    assert num_pct(0.9) == "(90/100)"
    assert evaluate(f"1 - {num_pct(0.975)}") == pytest.approx(0.025, rel=1e-12)


def test_rows_gain_the_expression_last_and_only_where_a_family_has_one():
    rows = generate_rows(list(FAMILIES.values()), 300, seed=7)
    for row in rows:
        family = FAMILIES[row["family"]]
        if family.expression is None:
            assert "expression" not in row
        else:
            assert list(row)[-1] == "expression"
            assert math.isfinite(evaluate(row["expression"]))
    assert {r["family"] for r in rows if "expression" in r} == {f.name for f in WITH_EXPRESSION}


def test_the_tiny_tool_set_names_expression_families():
    assert len(TOOL_FAMILIES) >= 12
    assert all(FAMILIES[name].expression is not None for name in TOOL_FAMILIES)
    assert expand_sets([TOOL_FAMILIES[-1], "tiny-tool"]) == \
        [TOOL_FAMILIES[-1], *TOOL_FAMILIES[:-1]]
    assert expand_sets(["weibull_mttf", "pm_reliability"]) == ["weibull_mttf", "pm_reliability"]


def test_build_dataset_generates_the_tiny_tool_families(tmp_path):
    out = tmp_path / "tool.jsonl"
    done = subprocess.run([sys.executable, str(ROOT / "generators" / "build_dataset.py"),
                           "generate", "--n", "90", "--seed", "3", "--families", "tiny-tool",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 90
    assert {r["family"] for r in rows} == set(TOOL_FAMILIES)
    assert all(evaluate(r["expression"]) > 0 for r in rows)
