"""Property-based tests: the grader never raises and finishes on hostile inputs.

Speed is not asserted here (see benchmarks/grading_throughput.py); the timeout marks only stop a
quadratic regression from hanging the suite.
"""
import math

import pytest
from grading_helpers import parse_number
from hypothesis import given, settings
from hypothesis import strategies as st

from relrl.grading.extraction import extract_answer
from relrl.grading.numbers import parse_target
from relrl.grading.scoring import grade

# Pieces that exercise every branch of the grader when glued together at random.
TOKENS = ["\\boxed{", "{", "}", "\\{", "<think>", "</think>", "1", "0", "9", ",", ".", " ", "e",
          "E", "-", "+", "%", "\\%", "\\frac{", "\\dfrac", "^", "^{", "×", "\\times", "10", "⁻⁴",
          "/", "=", "≈", "\\approx", "(", ")", "final answer:", "FINAL ANSWER", "Answer:",
          "\n", "**", "$", "\\text{", "hours", "_", "∞", "\\infty", "NaN", "1,234", "0,5",
          "1 128", "percent", "is approximately ", "1. ", "—", "İ"]

NO_DEADLINE = settings(deadline=None, max_examples=150)


def assert_well_formed(response, target="0.5"):
    for allow_plain in (False, True):
        g = grade(response, target, allow_plain=allow_plain)
        assert math.isfinite(g.reward)
        assert g.value is None or math.isfinite(g.value)
        assert g.correct in (True, False)


@NO_DEADLINE
@given(st.text(max_size=20_000))
def test_any_text_grades_without_raising(text):
    assert_well_formed(text)
    assert_well_formed("\\boxed{" + text + "}", target=text[:50])


@NO_DEADLINE
@given(st.lists(st.sampled_from(TOKENS), max_size=2_000))
def test_token_soup_grades_without_raising(tokens):
    text = "".join(tokens)[:20_000]
    assert_well_formed(text)
    value, reason = parse_target(text[:200])
    assert (value is None) == bool(reason)
    number = parse_number(text)
    assert number is None or math.isfinite(number)


@NO_DEADLINE
@given(st.floats(min_value=-1e300, max_value=1e300, allow_nan=False).filter(lambda x: x != 0))
def test_written_numbers_read_back(x):
    assert parse_number(repr(x)) == x
    assert parse_number(f"{x:,}") == x  # thousands separators
    assert grade(f"\\boxed{{{x!r}}}", repr(x)).reward == 1.0


@NO_DEADLINE
@given(st.floats(min_value=1e-6, max_value=1e6), st.floats(min_value=-0.2, max_value=0.2))
def test_reward_follows_relative_error(target, shift):
    answer = target * (1 + shift)
    g = grade(f"\\boxed{{{answer!r}}}", repr(target))
    error = abs(shift)
    if error < 0.0009:
        assert g.reward == 1.0
    elif 0.0011 < error < 0.0099:
        assert g.reward == 0.8
    elif 0.011 < error < 0.049:
        assert g.reward == 0.4
    elif error > 0.051:
        assert g.reward == 0.01 and not g.correct


PATHOLOGICAL = [
    ("10,000 nested braces", "\\boxed{" + "{" * 10_000 + "0.5" + "}" * 10_000 + "}", 0.5),
    ("10,000 unclosed braces", "\\boxed{" + "{" * 10_000 + "0.5", None),
    ("5,000 unclosed boxes", "\\boxed{" * 5_000, None),
    ("5,000 unclosed boxes, then one closed", "\\boxed{" * 5_000 + "0.5}", 0.5),
    ("a million digits", "1" * 1_000_000, None),
    ("a million digits in a box", "\\boxed{" + "7" * 1_000_000 + "}", None),
    ("a million zeros after the point", "\\boxed{0." + "0" * 1_000_000 + "}", 0.0),
    ("a huge exponent", "\\boxed{1e" + "9" * 100_000 + "}", None),
    ("20,000 commas between digits", "1," * 10_000, None),
    ("7,000 open parentheses", "FINAL ANSWER: " + "(1 " * 7_000, 1.0),
    ("7,000 final-answer markers", "final answer: " * 7_000, None),
    ("5,000 think tags", "<think>" * 5_000, None),
    ("5,000 closing think tags", "</think>" * 5_000 + "\\boxed{2}", 2.0),
    ("one line of 5,000 numbers", "FINAL ANSWER: " + " + ".join(["1"] * 5_000), 1.0),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name, text, value", PATHOLOGICAL, ids=[p[0] for p in PATHOLOGICAL])
def test_pathological_inputs_finish(name, text, value):
    got = extract_answer(text, allow_plain=True).value
    assert got == value
    assert_well_formed(text)
