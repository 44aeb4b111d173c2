"""Edges of the number parser and the scorer: the exact reason given for a value that is not
usable (overflow, underflow, division by zero, infinite, NaN, no target), a sign read after a power,
the limits of the parser (300-digit integers, 400-character mantissas and denominators, six-digit
exponents, exponents beyond +-10,000), the fields of a Number and an Extraction, the percent
reading, and grades whose error falls exactly on a tolerance or band limit."""
import pytest
from grading_helpers import parse_number

from relrl.grading.extraction import extract_answer
from relrl.grading.numbers import (
    find_numbers,
    parse_target,
    parse_target_number,
    parse_target_values,
)
from relrl.grading.scoring import _EPS, RewardTiers, grade

# ---------------------------------------------------------------- why a value is unusable

TINY_FRACTION = "0." + "0" * 9999 + "1"  # 1e-10000 written out


@pytest.mark.parametrize("target, reason", [
    ("9" * 500, "overflow"),  # more than 400 integer digits
    ("1e400", "overflow"),  # beyond the float range
    ("1e20000", "overflow"),  # an exponent beyond 10,000
    ("1e1234567", "overflow"),  # an exponent of more than six digits
    ("10^{99999}", "overflow"),  # a power that overflows
    ("0^{-1}", "overflow"),  # a power that divides by zero
    ("1e-400", "underflow"),  # non-zero, but below the smallest float
    ("1e-20000", "underflow"),
    ("1e-1234567", "underflow"),
    ("1/0", "division by zero"),
    ("\\frac{3}{0}", "division by zero"),
    ("\\infty", "infinite value"),
    ("∞ hours", "infinite value"),
    ("NaN", "not a number (NaN)"),
    ("nan hours", "not a number (NaN)"),
    ("not applicable", "no number"),
])
def test_an_unusable_target_says_exactly_why(target, reason):
    assert parse_target(target) == (None, reason)
    assert grade("\\boxed{1}", target).reason == f"target: {reason}"


@pytest.mark.parametrize("content, reason", [
    ("10^{99999}", "boxed answer: overflow"),
    ("1e-400", "boxed answer: underflow"),
    ("\\frac{1}{0}", "boxed answer: division by zero"),
    ("\\infty", "boxed answer: infinite value"),
    ("NaN", "boxed answer: not a number (NaN)"),
])
def test_an_unusable_boxed_answer_says_exactly_why(content, reason):
    got = extract_answer(f"So the MTTF is \\boxed{{{content}}}.")
    assert (got.value, got.reason) == (None, reason)


@pytest.mark.parametrize("content, value", [
    ("-10^{-4}", -1e-4), ("-2^2", -4.0), ("-8^{0.5}", -8 ** 0.5),
    ("-1.5 \\times 10^{-4}", -1.5e-4), ("+2^3", 8.0),
])
def test_a_minus_sign_applies_after_the_power(content, value):
    # as in written maths: -2^2 is -(2^2); read before the power, -10^{-4} would be +0.0001
    assert extract_answer(f"\\boxed{{{content}}}").value == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("text", ["1e400", "9" * 500, "1/0", "1e-400", "NaN", "\\infty"])
def test_the_number_found_carries_its_reason(text):
    number, reason = parse_target_number(text)
    assert number is None and reason == parse_target(text)[1] != ""
    found = find_numbers(text)
    assert all(n.value is None and n.reason == reason for n in found)


@pytest.mark.parametrize("text", ["12", "-7", "1.5", "2.5e-3", "14/33", "3.1%", "0.93^3"])
def test_a_usable_number_has_no_reason(text):
    (number,) = find_numbers(text)
    assert number.value is not None and number.reason == ""
    assert parse_target_number(text)[0].reason == ""


@pytest.mark.parametrize("call", [parse_target_number, parse_target_values, parse_target])
def test_a_missing_target_is_an_empty_answer(call):
    assert call(None) == (None, "empty answer")


def test_a_missing_target_grades_as_no_answer():
    g = grade("\\boxed{0.5}", None)
    assert (g.correct, g.reward, g.target, g.reason) == (False, 0.0, None, "target: empty answer")


def test_an_unparsable_target_is_never_correct():
    g = grade("\\boxed{0.5}", "see the figure")
    assert (g.correct, g.reward, g.reason) == (False, 0.0, "target: no number")


# ---------------------------------------------------------------- limits of the parser

@pytest.mark.parametrize("text, expected", [
    ("1.0", 1.0),
    ("1.00", 1.0),
    ("-1.0", -1.0),
    ("+1.0e0", 1.0),
    ("0.0", 0.0),
    ("0.000", 0.0),
])
def test_a_decimal_of_one_or_zero_keeps_its_value(text, expected):
    assert parse_number(text) == expected


@pytest.mark.parametrize("digits", [299, 300, 301])
def test_integers_of_about_300_digits_are_read_exactly(digits):
    text = "7" * digits
    assert parse_number(text) == float(text)
    assert parse_number(text + "%") == float(text) / 100
    assert parse_number("-" + text) == -float(text)


def test_a_400_digit_mantissa_is_read_and_a_401_digit_one_overflows():
    one_then_zeros = "1" + "0" * 399  # 400 digits: 1e399, brought back by the exponent
    assert parse_number(one_then_zeros + "e-100") == 1e299
    assert parse_number("0" * 50 + one_then_zeros + "e-100") == 1e299  # leading zeros are free
    assert parse_target(one_then_zeros + "0e-100") == (None, "overflow")  # 401 digits


def test_an_exponent_counts_up_to_six_digits():
    assert parse_number("1e000005") == 1e5  # six digits, leading zeros included
    assert parse_number("1e-000005") == 1e-5
    assert parse_number("1e+000005") == 1e5
    assert parse_number("2.5e-00003") == 2.5e-3
    # seven digits are out of range whatever their value: clamped to an overflow
    assert parse_target("1e0000005") == (None, "overflow")


def test_an_exponent_of_more_than_six_digits_counts_as_a_million():
    # the clamped exponent is exactly +-10**6, so a "× 10^" of the other sign cancels it
    assert parse_number("1e-9999999 × 10^999999") == pytest.approx(0.1)
    assert parse_number("1e9999999 × 10^-999999") == pytest.approx(10.0)


def test_an_exponent_is_cut_off_beyond_ten_thousand():
    # up to 10,000 the mantissa and the exponent are read together, however long the mantissa
    assert parse_number(TINY_FRACTION + "e10000") == 1.0
    assert parse_number(TINY_FRACTION + "e5000 × 10^5000") == 1.0
    # beyond it the value is out of range whatever the mantissa
    assert parse_target("0." + "0" * 10000 + "1e10001") == (None, "overflow")
    assert parse_target("1e-10001") == (None, "underflow")


@pytest.mark.parametrize("text, expected", [
    ("1/2e3", 0.0005),  # the denominator's own exponent
    ("3/1.5E-2", 200.0),
    ("\\frac{1}{4}", 0.25),
])
def test_a_denominator_keeps_its_exponent(text, expected):
    assert parse_number(text) == pytest.approx(expected, rel=1e-12)


def test_a_denominator_is_read_up_to_400_characters():
    assert parse_number("1/0.5" + "0" * 397) == 2.0  # 400 characters
    # a longer one counts as unbounded: the fraction underflows
    assert parse_target("1/0.5" + "0" * 398) == (None, "underflow")
    assert parse_target("1/1" + "0" * 500 + "e-490") == (None, "underflow")


# ---------------------------------------------------------------- Numbers and Extractions

def test_numbers_report_where_they_are():
    found = find_numbers("R = 0.95 and MTTF = 1,000 h (3.1%)")
    assert [(n.text, n.start, n.end) for n in found] == \
        [("0.95", 4, 8), ("1,000", 20, 25), ("3.1%", 29, 33)]


def test_numbers_report_whether_they_are_percent():
    found = find_numbers("3.1% of 12 units, or 40 percent")
    assert [(n.value, n.raw, n.percent) for n in found] == \
        [(pytest.approx(0.031), 3.1, True), (12.0, 12.0, False), (0.4, 40.0, True)]


def test_an_extraction_reports_whether_the_answer_is_percent():
    percent = extract_answer("The availability is \\boxed{99.5\\%}.")
    assert (percent.value, percent.raw, percent.percent) == (0.995, 99.5, True)
    plain = extract_answer("The availability is \\boxed{0.995}.")
    assert (plain.value, plain.raw, plain.percent) == (0.995, 0.995, False)
    final = extract_answer("FINAL ANSWER: 12%", allow_plain=True)
    assert (final.value, final.raw, final.percent, final.source) == (0.12, 12.0, True, "final")


def test_a_long_last_line_ending_on_its_number_is_the_answer():
    response = "After all these computations the reliability of the system is 0.55"
    got = extract_answer(response, allow_plain=True)
    assert (got.value, got.source) == (0.55, "last_number")


def test_a_final_answer_repeating_the_boxed_value_keeps_the_box():
    got = extract_answer("We get \\boxed{0.5} here.\n\nFinal answer: 0.5", allow_plain=True)
    assert (got.value, got.source) == (0.5, "boxed")
    got = extract_answer("We get \\boxed{0.5} here.\n\nFinal answer: 50%", allow_plain=True)
    assert (got.value, got.source) == (0.5, "boxed")  # the same value written as a percent


@pytest.mark.parametrize("target", ["0.031 (3.1%)", "R = 0.5 (1/2)", "12, 12"])
def test_a_target_writing_one_value_twice_is_that_value(target):
    number, reason = parse_target_number(target)
    assert reason == "" and number.value == parse_number(target)
    values, reason = parse_target_values(target)
    assert reason == "" and len(values) == 1


def test_a_target_with_an_unusable_second_number_is_not_a_single_number():
    number, reason = parse_target_number("0.5 (or 1e999)")
    assert number is None and reason == "several values (0.5, 1e999): not a single number"


# ---------------------------------------------------------------- the percent reading

def test_both_sides_percent_are_compared_once():
    g = grade("\\boxed{1.2\\%}", "1%")
    assert (g.correct, g.reward, g.reason) == (False, 0.01, "off by 20%")
    assert g.rel_error == pytest.approx(0.2)
    g = grade("\\boxed{1.6\\%}", "1.5%")
    assert g.reason == "off by 6.67%"


def test_a_zero_target_in_percent_is_not_read_as_percent_numbers():
    g = grade("\\boxed{0}", "0%")
    assert (g.correct, g.reward, g.reason) == (True, 1.0, "zero target, absolute error 0")


def test_the_percent_note_comes_before_the_box_count():
    g = grade("\\boxed{1} \\boxed{2} \\boxed{3.1}", "3.1%")
    assert (g.correct, g.reward) == (True, -0.3)
    assert g.reason == "within 0.1%; compared as percent numbers; 3 boxed answers (more than 2)"


def test_the_box_count_note_follows_the_score():
    g = grade("\\boxed{1} \\boxed{2} \\boxed{0.5}", "0.5")
    assert g.reason == "within 0.1%; 3 boxed answers (more than 2)"


# ---------------------------------------------------------------- tolerance boundaries

def test_an_error_exactly_at_the_tolerance_is_correct():
    tolerance = 0.5 - _EPS
    assert tolerance + _EPS == 0.5  # the answer below is off by exactly 0.5
    g = grade("\\boxed{1.5}", "1", tolerance=tolerance)
    assert (g.rel_error, g.correct) == (0.5, True)
    assert not grade("\\boxed{1.5000001}", "1", tolerance=tolerance).correct


def test_an_error_exactly_at_a_band_limit_earns_that_band():
    tiers = RewardTiers(bands=((0.5 - _EPS, 1.0),), wrong_number=-1.0)
    g = grade("\\boxed{1.5}", "1", tiers=tiers)
    assert (g.reward, g.reason) == (1.0, "within 50%")
    g = grade("\\boxed{1.5000001}", "1", tiers=tiers)
    assert (g.reward, g.reason) == (-1.0, "off by 50%")


def test_a_zero_target_accepts_an_error_exactly_at_the_absolute_tolerance():
    g = grade("\\boxed{0.001}", "0", abs_tolerance=0.001)
    assert (g.correct, g.reward, g.rel_error) == (True, 1.0, None)
    assert not grade("\\boxed{0.0011}", "0", abs_tolerance=0.001).correct


# ---------------------------------------------------------------- several values

def test_a_grade_of_several_values_records_truncation():
    g = grade("\\boxed{31, 521}", "31, 521", truncated=True)
    assert (g.values, g.reward, g.truncated) == ((31.0, 521.0), 1.0, True)
    assert grade("\\boxed{31, 521}", "31, 521").truncated is False


def test_a_zero_part_of_several_values_leaves_the_other_parts_error():
    g = grade("\\boxed{0, 0.505}", "0, 0.5")
    assert g.rel_error == pytest.approx(0.01) and g.reward == 0.8
