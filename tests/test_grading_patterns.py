"""The grader on the shapes of plain (non-boxed) answers it used to misread, on targets with
several values, and on responses cut off at the token limit. Every response here is written for
this test in the style of frontier-model answers (Markdown, LaTeX, a FINAL ANSWER section)."""
from dataclasses import dataclass

import pytest

from relrl.evaluation.runner import score_question
from relrl.evaluation.settings import EvalSettings
from relrl.grading.extraction import extract_answer
from relrl.grading.numbers import parse_target, parse_target_values
from relrl.grading.scoring import grade

WORKING = ("We model the time to failure as exponential with rate $\\lambda$. The data give "
           "$\\lambda = 2 \\times 10^{-3}$ per hour, so $R(t) = e^{-\\lambda t}$.\n\n")


# ---------------------------------------------------------------- an intermediate box

INTERMEDIATE_BOX = (
    "**Step 1: Failure rate.** The pooled estimate is\n\n"
    "$$\\boxed{\\lambda = 0.002 \\text{ per hour}}$$\n\n"
    "**Step 2: Reliability at 100 hours.**\n\n$$R(100) = e^{-0.002 \\times 100} = e^{-0.2}$$\n\n"
    "## Final Answer\n\nThe reliability at 100 hours is **0.8187** (about 81.9%).")


def test_a_final_answer_section_after_an_intermediate_box_wins():
    g = grade(INTERMEDIATE_BOX, "0.8187", allow_plain=True)
    assert (g.correct, g.value, g.source) == (True, 0.8187, "final")


def test_the_boxed_reward_path_still_reads_the_box():
    g = grade(INTERMEDIATE_BOX, "0.8187")  # allow_plain=False: the GRPO reward
    assert (g.value, g.source, g.reward) == (0.002, "boxed", 0.01)


def test_a_box_inside_the_final_section_stays_the_answer():
    text = ("## Final Answer\n\n$$\\boxed{R(100) \\approx 0.8187}$$\n\n"
            "So the final answer means 82 of 100 units survive.")
    assert grade(text, "0.8187", allow_plain=True).source == "boxed"



def test_a_final_answer_label_inside_the_last_box_is_part_of_the_box():
    # only a final-answer section that starts after the box can override it
    text = "So \\boxed{0.5 \\text{ (final answer: } 0.7)}"
    g = grade(text, "0.5", allow_plain=True)
    assert (g.correct, g.value, g.source) == (True, 0.5, "boxed")

# ---------------------------------------------------------------- cut off at the token limit

CUT_AT_A_STEP = (
    "To find the MTBF we average the observed times between failures, which is the maximum "
    "likelihood estimate for exponential data.\n\n**Step 1: List the data.** 1200, 1650, 980 "
    "and 2210 hours.\n\n**Step 2: Compute the")


def test_a_step_label_is_never_the_answer():
    # the number that would be credited is the label "2", here made the target on purpose
    for truncated in (False, True):
        g = grade(CUT_AT_A_STEP, "2", allow_plain=True, truncated=truncated)
        assert not g.correct and g.value is None


def test_a_truncated_response_without_a_final_answer_gets_no_stray_number():
    # cut off before R(250) was computed; its last line still looks like a finished sentence
    text = WORKING + "At t = 250 hours the exponent is λt = 0.002 × 250 = 0.5."
    assert extract_answer(text, allow_plain=True).value == 0.5  # read when not cut off ...
    g = grade(text, "0.5", allow_plain=True, truncated=True)
    assert not g.correct and g.value is None and g.truncated  # ... never when cut off
    assert "cut off at the token limit" in g.reason
    assert g.to_dict()["truncated"] is True


def test_a_truncated_response_keeps_a_final_answer_it_wrote():
    text = WORKING + "FINAL ANSWER: R(250) ≈ 0.6065, so about 61% of the units are still"
    g = grade(text, "0.6065", allow_plain=True, truncated=True)
    assert g.correct and g.source == "final"


def test_a_final_answer_cut_mid_expression_is_not_credited():
    text = WORKING + "FINAL ANSWER: R_sys = 0.992 \\times 0.991 \\times"
    assert grade(text, "0.991", allow_plain=True, truncated=True).value is None


def test_truncation_does_not_change_a_boxed_answer():
    assert grade("so \\boxed{0.6065} and then the", "0.6065", truncated=True).reward == 1.0


def test_the_evaluation_runner_passes_truncation_to_the_grader():
    @dataclass
    class Cut:
        text: str
        truncated: bool

    row = {"id": "q1", "question": "What is R(250)?", "answer": "0.5"}
    settings = EvalSettings(allow_plain=True)
    text = WORKING + "With t = 250 h the exponent is 0.5."
    assert score_question(row, [Cut(text, False)], settings)["correct"]
    assert not score_question(row, [Cut(text, True)], settings)["correct"]


# ---------------------------------------------------------------- a number restated in the answer

def test_a_number_restated_for_comparison_is_not_the_answer():
    text = ("For warm standby the dormant unit can fail, so the reliability drops a little.\n\n"
            "**FINAL ANSWER:** The warm-standby system reliability is R ≈ 0.9688, compared to "
            "the cold-standby value of R = 0.9712 found in part (a).")
    g = grade(text, "0.9688", allow_plain=True, tolerance=0.001)
    assert g.correct and g.value == 0.9688


@pytest.mark.parametrize("phrase", ["versus", "vs.", "up from", "rather than", "compared with"])
def test_other_comparison_phrases(phrase):
    text = f"FINAL ANSWER: The availability becomes 0.9954 {phrase} 0.9871 before the upgrade."
    assert extract_answer(text, allow_plain=True).value == 0.9954


# ---------------------------------------------------------------- Markdown tables

TABLE = ("## Final Answer\n\n| Quantity | Value |\n|---|---|\n"
         "| System failure rate | 2.5 × 10⁻⁴ per hour |\n| MTTF | 4,000 hours |\n"
         "| Reliability at 1,000 h | 0.7788 |\n")


def test_a_final_table_gives_its_last_row_read_in_its_value_cell():
    g = grade(TABLE, "0.7788", allow_plain=True)
    assert g.correct and g.value == 0.7788  # not 2.5e-4 (the first row), not 1000 (the label)


def test_a_final_table_with_one_bold_row_gives_that_row():
    text = TABLE.replace("| MTTF | 4,000 hours |", "| **MTTF** | **4,000 hours** |")
    assert grade(text, "4000", allow_plain=True).correct


# ---------------------------------------------------------------- numbered lists

def test_a_numbered_list_builds_up_to_its_last_item():
    text = ("FINAL ANSWER:\n1. Failure rate: λ = 12/5000 = 0.0024 per hour\n"
            "2. Reliability at t = 100 hours: R ≈ 0.7866")
    assert grade(text, "0.7866", allow_plain=True).correct


def test_a_numbered_list_with_one_bold_quantity_gives_that_one():
    text = ("## Final Answer\n\n1. **Reliability at 500 hours: R(500) ≈ 0.8825**\n"
            "2. Hazard rate at 500 hours: h(500) = 4.1 × 10⁻⁴ per hour\n"
            "3. Mean residual life: about 1,850 hours")
    assert grade(text, "0.8825", allow_plain=True).correct


def test_a_numbered_list_of_several_quantities_grades_a_target_with_several_values():
    text = ("### FINAL ANSWER\n\n1. Spares needed for 90% confidence: **31**\n"
            "2. Spares needed for 99% confidence: **521**\n")
    g = grade(text, "31, 521", allow_plain=True)
    assert g.correct and g.values == (31.0, 521.0) and g.targets == (31.0, 521.0)
    assert not grade(text, "521, 31", allow_plain=True).correct  # in order


# ---------------------------------------------------------------- an expression, then its value

@pytest.mark.parametrize("line", [
    "FINAL ANSWER: P(T ≤ 2) = 1 - e^{-4/3} (or approximately 0.7364)",
    "FINAL ANSWER: $1 - e^{-4/3}$ (approximately 0.7364)",
    "FINAL ANSWER: R = 1 - (0.35)^{3}, roughly 0.9571",
])
def test_an_exact_expression_is_not_read_as_its_first_term(line):
    value = extract_answer(line, allow_plain=True).value
    assert value in (0.7364, 0.9571)


# ---------------------------------------------------------------- targets with several values

def test_targets_with_several_values_are_parsed_in_order():
    values, reason = parse_target_values("31, 521")
    assert [v.value for v in values] == [31.0, 521.0] and reason == ""
    assert [v.value for v in parse_target_values("R = 0.95; MTTF = 1000 h")[0]] == [0.95, 1000]
    assert len(parse_target_values("23,717 hours")[0]) == 1  # a thousands separator
    assert len(parse_target_values("0.031 (3.1%)")[0]) == 1  # one value written twice
    for not_a_list in ("0.9-0.95", "between 3 and 5"):  # ranges stay ungradable
        assert parse_target_values(not_a_list)[0] is None
    assert parse_target("31, 521")[0] is None  # the single-number reading is unchanged


@pytest.mark.parametrize("response", [
    "\\boxed{31, 521}",
    "\\boxed{n_{90} = 31 \\text{ and } n_{99} = 521}",
    "For 90% we need \\boxed{31}; for 99% we need \\boxed{521}.",
])
def test_boxed_answers_with_several_values(response):
    g = grade(response, "31, 521")
    assert (g.correct, g.reward, g.source) == (True, 1.0, "boxed")


def test_several_values_on_one_final_line():
    text = "FINAL ANSWER: 31 spares for 90% confidence and 521 spares for 99% confidence."
    assert grade(text, "31, 521", allow_plain=True).correct


def test_each_part_must_be_right_and_the_worst_part_sets_the_reward():
    g = grade("\\boxed{31, 530}", "31, 521")  # 530 is 1.7% off
    assert g.correct and g.reward == 0.4 and g.rel_error == pytest.approx(9 / 521)
    g = grade("\\boxed{31, 700}", "31, 521")
    assert not g.correct and g.reward == 0.01 and "off by" in g.reason


def test_an_answer_with_too_few_values_is_not_graded_as_right():
    g = grade("\\boxed{31}", "31, 521")
    assert not g.correct and g.reward == 0.0
    assert "several values" in g.reason and g.value == 31.0  # what it said, for the record


def test_one_box_per_value_is_not_penalised_as_guessing():
    g = grade("\\boxed{1} \\boxed{2} \\boxed{3}", "1, 2, 3")
    assert g.correct and g.reward == 1.0
