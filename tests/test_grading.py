"""Table-driven tests of the shared grader: number formats, ground truth, extraction, rewards."""
import dataclasses
import math

import pytest
from grading_helpers import parse_number

from relrl.grading.extraction import extract_answer, strip_thinking
from relrl.grading.numbers import parse_target
from relrl.grading.rewards import compute_score, make_reliability_reward, reliability_reward
from relrl.grading.scoring import DEFAULT_TIERS, RewardTiers, grade

# (text, value): every number format the issue lists.
NUMBERS = [
    ("0.5", 0.5),
    ("-3.25", -3.25),
    ("+4", 4.0),
    (".75", 0.75),
    ("1.2e-5", 1.2e-5),
    ("1.2E+05", 1.2e5),
    ("5.70e-5 failures/hour", 5.70e-5),
    ("2.52 \\times 10^{5}", 2.52e5),
    ("2.52×10^5", 2.52e5),
    ("2.52 \\cdot 10^{-3}", 2.52e-3),
    ("2.52 x 10^-3", 2.52e-3),
    ("10⁻⁴", 1e-4),
    ("5.70×10⁻⁵", 5.70e-5),
    ("4.993×10^(–4)", 4.993e-4),  # en dash as minus, exponent in parentheses
    ("1.14 × 10^{−4}", 1.14e-4),  # unicode minus
    ("23,717", 23717.0),
    ("1{,}128", 1128.0),
    ("1 128", 1128.0),
    ("1\\,128", 1128.0),
    ("1,234,567.5", 1234567.5),
    ("0,001", 0.001),  # European decimal comma
    ("1,5", 1.5),
    ("3.1%", 0.031),
    ("3.1\\%", 0.031),
    ("98.25 %", 0.9825),
    ("12 percent", 0.12),
    ("14/33", 14 / 33),
    ("8,760 / 10,000", 0.876),
    ("\\frac{14}{33}", 14 / 33),
    ("\\dfrac{9}{8}", 1.125),
    ("\\tfrac{3}{4}", 0.75),
    ("\\text{MTTF} \\approx 10{,}233 \\text{ hours}", 10233.0),
    ("\\mathrm{0.95}", 0.95),
    ("\\mathbf{0.9048}", 0.9048),
    ("870 hours", 870.0),
    ("2.5 hr", 2.5),
    ("5 h", 5.0),
    ("7.97e-4 failures/hour", 7.97e-4),
    ("250 FIT", 250.0),
    ("**0.9980**", 0.998),
    ("$0.8187$", 0.8187),
    ("$$R = 0.55$$", 0.55),
    ("≈ 1,128 hours", 1128.0),
    ("λ₁ = 5.699e-5", 5.699e-5),  # the subscript 1 is part of the name, not a number
    ("R_{5} 0.99", 0.99),
    ("MRL(L_{10}) 774", 774.0),
    ("0.93³", 0.93 ** 3),
]

# Inputs that hold no usable value: None, never an exception.
NO_VALUE = ["\\infty", "-\\infty", "∞", "NaN", "nan hours", "1e999", "9" * 500, "hours", "",
            "10^{99999}", "1/0", "\\frac{1}{\\lambda}", "x^{2}", "e^{-0.2}", "e^(-0.2)",
            "\\sqrt{2}"]


@pytest.mark.parametrize("text, expected", NUMBERS)
def test_parse_number(text, expected):
    assert parse_number(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text", NO_VALUE)
def test_parse_number_without_value(text):
    assert parse_number(text) is None


# (ground truth, value or None, words the reason must contain)
TARGETS = [
    ("0.9945", 0.9945, ""),
    ("5.70e-5", 5.70e-5, ""),
    ("252530", 252530.0, ""),
    ("3.1%", 0.031, ""),
    ("R = 0.95", 0.95, ""),
    ("0.031 (3.1%)", 0.031, ""),  # one value written twice
    ("23,717 hours", 23717.0, ""),
    ("0.04, 0.20", None, "several values"),
    ("31, 521", None, "several values"),
    ("0.9-0.95", None, "several values"),
    ("between 3 and 5", None, "several values"),
    ("\\infty", None, "infinite"),
    ("NaN", None, "NaN"),
    ("1e400", None, "overflow"),
    ("", None, "empty"),
    ("not applicable", None, "no number"),
]


@pytest.mark.parametrize("text, value, reason", TARGETS)
def test_parse_target(text, value, reason):
    got, why = parse_target(text)
    if value is None:
        assert got is None and reason in why
    else:
        assert got == pytest.approx(value) and why == ""


# (response, allow_plain, value, source)
EXTRACTIONS = [
    ("so \\boxed{0.55}", False, 0.55, "boxed"),
    ("\\boxed{1} then \\boxed{2}", False, 2.0, "boxed"),
    ("\\boxed{\\frac{1}{2}}", False, 0.5, "boxed"),
    ("\\boxed{MTTF = \\frac{9}{8} = 1.125 \\text{ time units}}", False, 1.125, "boxed"),
    ("\\boxed{R_{sys}(10^4) \\approx 1.497 \\times 10^{-3} \\approx 0.001497}", False, 0.001497,
     "boxed"),
    ("\\boxed{R \\approx 0.9825 \\text{ (or } 98.25\\%)}", False, 0.9825, "boxed"),
    ("\\boxed{R_S \\approx 0.3029 \\approx 30.3\\%}", False, 0.303, "boxed"),
    ("\\boxed{\\lambda_1 ≈ 5.699 \\times 10^{-5} \\text{ failures per hour}}", False, 5.699e-5,
     "boxed"),
    ("\\boxed{\\text{MTBF} \\approx 29,038 \\text{ hours}}", False, 29038.0, "boxed"),
    ("\\boxed{\\left\\{ 3 \\right\\}}", False, 3.0, "boxed"),
    ("\\boxed{{{0.25}}}", False, 0.25, "boxed"),
    ("<think>maybe \\boxed{5}</think>The answer is \\boxed{7}.", False, 7.0, "boxed"),
    ("prompt opened the block... \\boxed{9}</think> so \\boxed{0.5}", False, 0.5, "boxed"),
    ("\\boxed{0.4} and then \\boxed{0.6", False, 0.4, "boxed"),  # the last box never closed
    ("FINAL ANSWER: the median life is approximately 34,657 hours", True, 34657.0, "final"),
    ("FINAL ANSWER: 870 hours.", True, 870.0, "final"),
    ("## FINAL ANSWER\n\n**Expected number of failures in one year = 0.876**", True, 0.876,
     "final"),
    ("FINAL ANSWER: The reliability of the unit at 20,000 hours is 0.8 (or 80%).", True, 0.8,
     "final"),
    ("Final Answer: The reliability apportioned to the 5th subsystem should be approximately "
     "0.9890.", True, 0.989, "final"),
    ("FINAL ANSWER: The availability is approximately 0.9999994 (that is, nearly 100% "
     "available).", True, 0.9999994, "final"),
    ("FINAL ANSWER: 5 devices in parallel are needed to achieve a reliability of 0.999.", True,
     5.0, "final"),
    ("FINAL ANSWER: λ2 ≈ 0.000114 failures per hour.", True, 0.000114, "final"),
    ("FINAL ANSWER: 5.70×10⁻⁵ failures per hour.", True, 5.70e-5, "final"),
    ("**FINAL ANSWER:**\n434.78 hours", True, 434.78, "final"),
    ("FINAL ANSWER:\n1. Estimated λ = 0.01035 per hour\n2. Reliability at t = 49 hours ≈ 0.6023",
     True, 0.6023, "final"),
    ("Step 4. State the Final Answer.\n\nFINAL ANSWER: 0.444 (or about 44.4%)", True, 0.444,
     "final"),
    ("Final Answer\n\nAt t = 100 hours the reliability is:\n\nR = 0.9945", True, 0.9945, "final"),
    ("**Answer:** 0.42", True, 0.42, "final"),
    ("FINAL ANSWER: -0.5", True, -0.5, "final"),
    ("Total Warranty Cost = $8,619", True, 8619.0, "last_number"),
    ("The reliability is therefore 0.55.", True, 0.55, "last_number"),
    ("| **R(49)** | **0.6020** |", True, 0.602, "last_number"),
]


@pytest.mark.parametrize("response, allow_plain, value, source", EXTRACTIONS)
def test_extract_answer(response, allow_plain, value, source):
    got = extract_answer(response, allow_plain=allow_plain)
    assert got.value == pytest.approx(value, rel=1e-9)
    assert got.source == source


# (response, allow_plain, reason): responses with no answer, and why.
NO_ANSWER = [
    ("", False, "empty response"),
    ("The reliability is 0.55.", False, "no boxed answer"),
    ("\\boxed{\\infty}", False, "infinite"),
    ("\\boxed{}", False, "not a number"),
    ("\\boxed{0.5", False, "no boxed answer"),
    ("<think>R = 0.5 so \\boxed{0.5}", False, "cut off inside <think>"),
    ("<think>R = 0.5 so \\boxed{0.5}", True, "cut off inside <think>"),
    ("We still have to compute it.", True, "no answer found"),
    # cut off mid-expression or mid-sentence: the last number is not an answer
    ("R = 0.992 \\times 0.991 \\", True, "no answer found"),
    ("Because T is between 0 and 1 one may scan over T and look for where it is", True,
     "no answer found"),
    ("1. **Working properly:** The diode allows current to", True, "no answer found"),
]


@pytest.mark.parametrize("response, allow_plain, reason", NO_ANSWER)
def test_no_answer(response, allow_plain, reason):
    got = extract_answer(response, allow_plain=allow_plain)
    assert got.value is None and reason in got.reason


def test_boxed_answer_wins_over_final_answer_line():
    text = "FINAL ANSWER: 0.7\n\n\\boxed{0.9}\n\nFinal answer: 0.7"
    assert extract_answer(text, allow_plain=True).value == 0.9


def test_boxes_are_counted_outside_thinking_only():
    text = "<think>\\boxed{1}\\boxed{2}\\boxed{3}</think>\\boxed{4}"
    assert extract_answer(text).n_boxed == 1


def test_strip_thinking_keeps_text_between_blocks():
    assert strip_thinking("a<think>x</think>b<think>y</think>c") == "abc"


# (response, target, correct, reward, words in the reason): the study's reward tiers.
GRADES = [
    ("\\boxed{0.5}", "0.5", True, 1.0, "within 0.1%"),
    ("\\boxed{0.1001}", "0.1", True, 1.0, "within 0.1%"),  # exactly on the 0.1% boundary
    ("\\boxed{0.1005}", "0.1", True, 0.8, "within 1%"),
    ("\\boxed{0.101}", "0.1", True, 0.8, "within 1%"),
    ("\\boxed{0.104}", "0.1", True, 0.4, "within 5%"),
    ("\\boxed{0.105}", "0.1", True, 0.4, "within 5%"),
    ("\\boxed{0.106}", "0.1", False, 0.01, "off by 6%"),
    ("\\boxed{-0.5}", "0.5", False, 0.01, "off by 200%"),
    ("R = 0.5", "0.5", False, 0.0, "no boxed answer"),
    ("\\boxed{1} \\boxed{2}", "2", True, 1.0, "within"),  # two boxes are allowed
    ("\\boxed{1} \\boxed{2} \\boxed{0.5}", "0.5", True, -0.3, "3 boxed answers"),
    ("\\boxed{1} \\boxed{2} \\boxed{3}", "0.5", False, -0.3, "more than 2"),
    ("\\boxed{0.5}", "0.04, 0.20", False, 0.0, "several values"),
    # percentages: the fraction, the percent number and the percent sign all compare alike
    ("\\boxed{3.1\\%}", "0.031", True, 1.0, "within 0.1%"),
    ("\\boxed{0.031}", "3.1%", True, 1.0, "within 0.1%"),
    ("\\boxed{3.1}", "3.1%", True, 1.0, "percent numbers"),
    ("\\boxed{3.1\\%}", "3.1", True, 1.0, "percent numbers"),
    ("\\boxed{3.1}", "0.031", False, 0.01, "off by"),
    # a zero target uses the absolute tolerance (1e-6 by default)
    ("\\boxed{0}", "0", True, 1.0, "zero target"),
    ("\\boxed{5 \\times 10^{-7}}", "0", True, 1.0, "zero target"),
    ("\\boxed{0.001}", "0", False, 0.01, "zero target"),
]


@pytest.mark.parametrize("response, target, correct, reward, reason", GRADES)
def test_grade(response, target, correct, reward, reason):
    g = grade(response, target)
    assert (g.correct, g.reward) == (correct, reward)
    assert reason in g.reason


def test_grade_result_fields():
    g = grade("\\boxed{R \\approx 0.9944}", "0.9945")
    assert g.to_dict() == {"extracted": "0.9944", "value": 0.9944, "target": 0.9945,
                           "rel_error": pytest.approx(1 / 9945), "correct": True,
                           "reward": 1.0, "n_boxed": 1, "reason": "within 0.1%",
                           "source": "boxed", "tolerance_rule": "study"}


def test_grade_accepts_numeric_targets():
    assert grade("\\boxed{5.7e-5}", 5.7e-5).reward == 1.0


def test_tolerance_sets_correct_but_not_reward():
    loose = grade("\\boxed{0.108}", "0.1", tolerance=0.1)
    assert loose.correct and loose.reward == 0.01
    assert not grade("\\boxed{0.1}", "0.104", tolerance=0.01).correct


def test_abs_tolerance_for_zero_target():
    assert grade("\\boxed{0.001}", "0", abs_tolerance=0.01).correct


def test_tiers_are_parameters():
    tiers = RewardTiers(bands=((0.02, 2.0),), wrong_number=-1.0, no_answer=-2.0, max_boxes=1,
                        too_many_boxes=-5.0)
    assert grade("\\boxed{0.101}", "0.1", tiers=tiers).reward == 2.0
    assert grade("\\boxed{0.2}", "0.1", tiers=tiers).reward == -1.0
    assert grade("no box", "0.1", tiers=tiers).reward == -2.0
    assert grade("\\boxed{0.1}\\boxed{0.1}", "0.1", tiers=tiers).reward == -5.0


def test_tiers_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_TIERS.wrong_number = 1.0


def test_grade_rewards_are_finite_for_odd_inputs():
    for response in ["\\boxed{NaN}", "\\boxed{1e999}", "\\boxed{\\infty}", None, 42]:
        g = grade(response, "1")
        assert math.isfinite(g.reward) and g.value is None


# ---- reward wrappers


def test_trl_reward_plain_completions():
    assert reliability_reward(["\\boxed{0.5}", "0.5", "\\boxed{0.6}"], ["0.5"] * 3) == \
        [1.0, 0.0, 0.01]


def test_trl_reward_conversational_completions_and_extra_columns():
    completions = [[{"role": "assistant", "content": "so \\boxed{870} hours"}],
                   [{"role": "assistant", "content": [{"type": "text", "text": "\\boxed{1}"}]}]]
    rewards = reliability_reward(completions, answer=["870", "2"], question=["q1", "q2"],
                                 tolerance=["not an option"])
    assert rewards == [1.0, 0.01]


def test_trl_reward_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="2 completions but 1 answers"):
        reliability_reward(["a", "b"], ["1"])


def test_trl_reward_factory_uses_its_tiers():
    reward = make_reliability_reward(tiers=RewardTiers(wrong_number=0.0))
    assert reward(["\\boxed{7}"], ["1"]) == [0.0]


def test_verl_compute_score():
    assert compute_score("reliability", "<think>x</think>\\boxed{0.9944}", "0.9945") == 1.0
    assert compute_score("reliability", "FINAL ANSWER: 0.9944", "0.9945", extra_info={}) == 0.0
