"""The complement tolerance rule: probability targets judged on min(t, 1 - t), a floor of half
the target's last stated digit, the same error for partial-credit tiers, several values,
percent answers, scoring of extracted values, and the target kind of a row."""
import json
from pathlib import Path

import pytest

from relrl.grading.numbers import half_last_digit, parse_target_number
from relrl.grading.scoring import TOLERANCE_RULES, grade, is_correct_value
from relrl.grading.target_kind import TARGET_KINDS, asked_quantity, infer_target_kind, target_kind_of

P = "probability"


@pytest.mark.parametrize("answer, target, study, complement", [
    ("0.95", "0.9355", True, False),  # 1.5% off relatively, 22% off on 1 - t
    ("0.9902", "0.99", True, True),  # 2% off on 1 - t = 0.01
    ("5.2e-4", "5e-4", True, True),  # small target: min(t, 1 - t) is t
    ("0.52", "0.5", True, True),
    ("0.994", "0.999", True, False),
    ("0.93", "0.9000", True, False),  # 30% off on 0.1
    ("0.93", "0.9", True, True),  # "0.9" is stated to 0.05: within half its last digit
])
def test_issue_cases(answer, target, study, complement):
    response = f"\\boxed{{{answer}}}"
    assert grade(response, target).correct is study
    assert grade(response, target, rule="complement", target_kind=P).correct is complement
    assert is_correct_value(float(answer), target) is study
    assert is_correct_value(float(answer), target, rule="complement", target_kind=P) is complement


def test_value_targets_keep_the_relative_rule():
    for kind in (None, "value"):
        g = grade("\\boxed{0.95}", "0.9355", rule="complement", target_kind=kind)
        assert g.correct and g.reason == "within 5%"
    # a probability kind only changes targets strictly inside (0, 1)
    assert grade("\\boxed{1040}", "1000", rule="complement", target_kind=P).correct


def test_complement_error_is_reported():
    g = grade("\\boxed{0.95}", "0.9355", rule="complement", target_kind=P)
    assert g.rel_error == pytest.approx(0.0145 / 0.0645)
    assert g.reason == "off by 22.5% of min(t, 1 - t)"
    assert g.tolerance_rule == "complement" and g.to_dict()["tolerance_rule"] == "complement"
    assert grade("\\boxed{0.95}", "0.9355").to_dict()["tolerance_rule"] == "study"


@pytest.mark.parametrize("text, half", [
    ("0.9991", 0.00005), ("0.99", 0.005), ("5.70e-5", 5e-8), ("3.1%", 0.0005),
    ("2.5 \\times 10^{-3}", 5e-5), ("0,001", 0.0005), ("7", 0.5), ("14/33", 0.0),
])
def test_half_last_digit(text, half):
    assert half_last_digit(parse_target_number(text)[0]) == pytest.approx(half)


def test_digit_floor():
    # 1 - 0.9991 = 0.0009: 5% of it (0.000045) is less than the rounding of the stated target
    target = "0.9991"
    assert grade("\\boxed{0.99905}", target, rule="complement", target_kind=P).correct
    assert grade("\\boxed{0.99914}", target, rule="complement", target_kind=P).correct
    g = grade("\\boxed{0.99915}", target, rule="complement", target_kind=P)
    assert g.reason == "within half the target's last digit" and g.reward == 1.0
    assert not grade("\\boxed{0.99916}", target, rule="complement", target_kind=P).correct
    # a target written with more digits is judged on its own last digit
    assert not grade("\\boxed{0.99905}", "0.99912", rule="complement", target_kind=P).correct
    # the floor is the complement rule's only: "study" is unchanged
    assert grade("\\boxed{0.52}", "0.5").correct and not grade("\\boxed{0.53}", "0.5").correct
    assert grade("\\boxed{0.54}", "0.5", rule="complement", target_kind=P).correct
    assert not grade("\\boxed{0.54}", "0.50", rule="complement", target_kind=P).correct


@pytest.mark.parametrize("answer, reward", [
    ("0.99001", 1.0),  # 0.1% of 0.01
    ("0.99005", 0.8),  # 0.5%
    ("0.9903", 0.4),   # 3%
    ("0.9908", 0.01),  # 8%: a wrong number
])
def test_tiers_follow_the_complement_error(answer, reward):
    g = grade(f"\\boxed{{{answer}}}", "0.99000", rule="complement", target_kind=P)
    assert g.reward == reward
    assert grade(f"\\boxed{{{answer}}}", "0.99000").reward == 1.0  # all within 0.1% relatively


def test_several_values_part_by_part():
    target = "R = 0.9355; MTTF = 1000"
    good = "\\boxed{0.9360, 1040}"
    bad = "\\boxed{0.95, 1040}"
    assert grade(good, target, rule="complement", target_kind=P).correct
    g = grade(bad, target, rule="complement", target_kind=P)
    assert not g.correct and g.tolerance_rule == "complement"
    assert "off by 22.5% of min(t, 1 - t)" in g.reason and "within 5%" in g.reason
    assert grade(bad, target).correct
    assert not is_correct_value(0.9355, target)  # one number never meets a target of two


def test_percent_answers():
    rule = {"rule": "complement", "target_kind": P}
    assert grade("\\boxed{93.6\\%}", "0.9355", **rule).correct
    assert not grade("\\boxed{95\\%}", "0.9355", **rule).correct
    assert grade("\\boxed{95\\%}", "0.9355").correct
    # target in percent, answer as a percent number: complement of 93.55 percent is 6.45
    assert grade("\\boxed{93.6}", "93.55%", **rule).correct
    assert not grade("\\boxed{95}", "93.55%", **rule).correct
    assert grade("\\boxed{95}", "93.55%").correct
    assert is_correct_value(0.936, "93.55%", **rule)
    assert not is_correct_value(0.95, "93.55%", **rule)


def test_is_correct_value_edges():
    assert not is_correct_value(float("nan"), "0.5")
    assert not is_correct_value(None, "0.5")
    assert not is_correct_value(0.5, "not a number")
    assert is_correct_value(0.0, "0") and not is_correct_value(0.01, "0")


def test_bad_rule_or_kind():
    with pytest.raises(ValueError, match="tolerance rule must be one of study, complement"):
        grade("\\boxed{1}", "1", rule="relative")
    with pytest.raises(ValueError, match="target_kind must be one of probability, value"):
        is_correct_value(1.0, "1", target_kind="prob")
    assert TOLERANCE_RULES == ("study", "complement") and TARGET_KINDS == (P, "value")


@pytest.mark.parametrize("question, answer, kind", [
    ("Determine the reliability of the system.", "0.984", P),
    ("What is the probability that it survives 25 days?", "0.4493", P),
    ("Find the availability of the pump.", "0.9523", P),
    ("What fraction of the units fail before 1000 h?", "0.12", P),
    ("Determine the expected number of failures if a replacement occurs every two weeks.",
     "0.5", "value"),
    ("What is the optimal replacement interval?", "0.999", "value"),
    ("Determine the MTTF of a device whose reliability is 0.9 at 100 h.", "0.95", "value"),
    ("How many devices are needed to achieve an overall reliability of 0.999?", "5", "value"),
    ("Determine the reliability of the device.", "1", "value"),  # not inside (0, 1)
    ("If a reliability of 90% is desired, determine the reliability that each component must "
     "have.", "0.999947", P),
    ("What is the reliability of this system ? Component reliabilities are A = 0.80", "0.96", P),
    ("Assuming a lognormal life, what is R(9,100 h)?", "0.8123", P),  # a thousands comma
    ("Basic event probabilities: P(A) = 0.01. Compute P(TOP).", "0.0123", P),
    ("What is the long-run probability that at least one unit is up?", "0.9986", P),
    ("How long until the reliability falls to 0.9, in years?", "0.8", "value"),
    ("Find the Birnbaum importance of component 3.", "0.0963", P),
    ("Given P(A) = 0.2, determine the failure rate.", "0.0031", "value"),
])
def test_infer_target_kind(question, answer, kind):
    assert infer_target_kind(question, answer) == kind


def test_asked_quantity():
    assert asked_quantity("Given R = 0.9, what is the MTTF, assuming no repair?") == " is the MTTF"
    assert asked_quantity("Determine the reliability. Give your answer to 4 digits.") \
        == " the reliability"


def test_target_kind_field_wins_and_is_checked():
    row = {"question": "What is the optimal replacement interval?", "answer": "0.999"}
    assert target_kind_of(row) == "value"
    assert target_kind_of({**row, "target_kind": P}) == P
    with pytest.raises(ValueError, match="got 'Probability'"):
        target_kind_of({**row, "target_kind": "Probability"})


HOLDOUT = Path("/work/shared/seed-data/holdout_54q.jsonl")


@pytest.mark.skipif(not HOLDOUT.exists(), reason="the study's data is not in this checkout")
def test_study_holdout_reading():
    rows = [json.loads(line) for line in HOLDOUT.read_text().splitlines() if line.strip()]
    kinds = [target_kind_of(row) for row in rows]
    assert (len(rows), kinds.count(P)) == (54, 23)
    constant = [is_correct_value(0.95, row["answer"]) for row in rows]
    complement = [is_correct_value(0.95, row["answer"], rule="complement", target_kind=k)
                  for row, k in zip(rows, kinds)]
    assert (sum(constant), sum(complement)) == (14, 2)  # 25.9% and 3.7% of 54
