"""The bound form of a family's expression (relrl.problems.bound_form): the question's numbers
in order as names, then the formula over the names, with the value of the plain expression."""
import math

import pytest

from relrl.problems.bound_form import bound_expression, question_numbers
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import FAMILIES
from relrl.tools.calculator import evaluate

WITH_EXPRESSION = [f for f in FAMILIES.values() if f.expression is not None]


def test_the_example_of_the_docstring():
    question = ("Find the probability that a brake pad survives 23,000 km, given a two-parameter "
                "Weibull life with characteristic life 36,000 km and slope 2.8.")
    assert bound_expression(question, "exp(-(23000/36000)^2.8)") == \
        "x1 = 23000; x2 = 36000; x3 = 2.8; exp(-(x1/x2)^x3)"


def test_numbers_inside_names_and_scientific_forms_are_kept_whole():
    question = "A part has lambda = 7.2 × 10^-6 per hour; find the 10-year log10 value for 2 units."
    assert question_numbers(question) == ["7.2 × 10^-6", "10", "10", "2"]
    assert bound_expression(question, "log10(2*7.2 × 10^-6) + 1e-5") == \
        "x1 = 7.2 × 10^-6; x2 = 10; x3 = 10; x4 = 2; log10(x4*x1) + 1e-5"


@pytest.mark.parametrize("family", WITH_EXPRESSION, ids=lambda f: f.name)
def test_every_phrasing_keeps_the_value_and_binds_the_question_numbers_in_order(family):
    for row in generate_rows([family], 30, 11, paraphrases=2):
        bound = bound_expression(row["question"], row["expression"])
        assert math.isclose(evaluate(bound), evaluate(row["expression"]), rel_tol=1e-9), bound
        bindings = bound.split("; ")[:-1]
        assert [b.split(" = ", 1)[1] for b in bindings] == question_numbers(row["question"])
