"""Targets with several values ("31, 521"): where the answer's values are read from (one box,
one box each, a final-answer line, list or table, the last line), how a response cut off at the
token limit is read, and how the parts are scored into one Grade."""
import pytest

from relrl.grading.extraction import _without_cut_line, extract_values
from relrl.grading.scoring import grade

TARGET = "31, 521"  # spares needed for 90% and 99% confidence


def values_of(response, count=2, **kwargs):
    """(values, source, boxes, reason) of extract_values with the Numbers as plain floats."""
    values, source, boxes, reason = extract_values(response, count, **kwargs)
    return (None if values is None else [v.value for v in values]), source, boxes, reason


# ---------------------------------------------------------------- boxed answers

@pytest.mark.parametrize("response, expected", [
    ("\\boxed{31, 521}", [31.0, 521.0]),
    ("\\boxed{521, 31}", [521.0, 31.0]),  # read in order, never sorted
    ("\\boxed{31 \\text{ and } 521}", [31.0, 521.0]),  # " and " separates values in a box
    ("\\boxed{n_{90} = 31; n_{99} = 521}", [31.0, 521.0]),  # each part after its "="
    ("\\boxed{R = 0.95 & MTTF = 1000 \\text{ h}}", [0.95, 1000.0]),
])
def test_two_values_in_one_box_are_read_in_order(response, expected):
    assert values_of(response) == (expected, "boxed", 1, "")


def test_the_last_box_holding_all_values_wins():
    response = "First try \\boxed{30, 500}; after rounding up \\boxed{31, 521}."
    assert values_of(response) == ([31.0, 521.0], "boxed", 2, "")


def test_one_box_per_value_counts_as_all_values():
    assert values_of("For 90%: \\boxed{31}. For 99%: \\boxed{521}.") == \
        ([31.0, 521.0], "boxed", 2, "")
    assert values_of("\\boxed{1} \\boxed{2} \\boxed{3}", 3) == ([1.0, 2.0, 3.0], "boxed", 3, "")


def test_one_box_per_value_uses_the_last_boxes():
    # an intermediate box first: the last two boxes are the answer
    response = "\\lambda = \\boxed{0.002}, so n_{90} = \\boxed{31} and n_{99} = \\boxed{521}"
    assert values_of(response) == ([31.0, 521.0], "boxed", 3, "")


@pytest.mark.parametrize("response", [
    "\\boxed{31, \\text{many}}",  # a part without a number
    "\\boxed{31, \\infty}",  # a part that is not a finite number
    "\\boxed{31, 10^{999}}",  # a part that overflows
    "\\boxed{31}",  # too few values
    "\\boxed{31, 521, 1000}",  # too many values
    "\\boxed{31, 521, 1000} \\boxed{7}",  # the last two boxes do not hold one value each
])
def test_a_box_without_exactly_the_asked_values_gives_none(response):
    assert values_of(response) == (None, None, response.count("\\boxed"),
                                   "no boxed answer with 2 values")


def test_boxes_are_read_only_outside_thinking():
    assert values_of("<think>maybe \\boxed{30, 500}</think>So \\boxed{31, 521}") == \
        ([31.0, 521.0], "boxed", 1, "")


# ---------------------------------------------------------------- what to read, and the reason

def test_without_allow_plain_only_boxes_are_read():
    # the GRPO reward: a plain final answer is no answer
    assert values_of("FINAL ANSWER: 31, 521") == (None, None, 0, "no boxed answer with 2 values")


@pytest.mark.parametrize("response, allow_plain, reason", [
    ("no numbers here", False, "no boxed answer with 2 values"),
    ("no numbers here", True, "no answer with 2 values"),
    ("\\boxed{31}", True, "no boxed answer with 2 values"),  # a box was there, with one value
    ("\\boxed{31}", False, "no boxed answer with 2 values"),
])
def test_the_reason_says_what_kind_of_answer_was_missing(response, allow_plain, reason):
    assert values_of(response, allow_plain=allow_plain)[3] == reason


@pytest.mark.parametrize("response", ["", "  \n\t", None, 31])
def test_an_empty_or_non_text_response_has_no_values(response):
    assert values_of(response, allow_plain=True) == (None, None, 0, "empty response")


def test_an_empty_response_is_graded_as_no_answer():
    g = grade("", TARGET)
    assert (g.value, g.reward, g.n_boxed, g.source) == (None, 0.0, 0, None)
    assert g.reason == "target has several values (31, 521): empty response"


# ---------------------------------------------------------------- plain answers

def test_several_values_on_one_final_answer_line():
    assert values_of("FINAL ANSWER: 31, 521", allow_plain=True) == \
        ([31.0, 521.0], "final", 0, "")
    assert values_of("FINAL ANSWER: 31 spares and 521 spares", allow_plain=True) == \
        ([31.0, 521.0], "final", 0, "")


def test_a_plain_final_answer_after_a_box_with_one_value():
    response = "The rate is \\boxed{\\lambda = 0.002}.\n\nFinal answer: 31, 521"
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 1, "")


def test_the_first_line_of_the_section_is_the_answer_not_the_remark_after_it():
    response = "Final answer: 31, 521\nThese were rounded up from 30.2 and 520.4."
    assert values_of(response, allow_plain=True)[0] == [31.0, 521.0]


@pytest.mark.parametrize("response", [
    "FINAL ANSWER for the 90% and 99% levels:\n31 and 521 spares",
    "FINAL ANSWER: the spares needed at 90% and 99% confidence are:\n- 31\n- 521",
    "FINAL ANSWER:\n*At 90% and 99% confidence the spare counts are:*\n- 31\n- 521",  # italic
])
def test_a_line_announcing_the_answer_is_skipped(response):
    # its numbers (90%, 99%) are the question's, not the answer's
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 0, "")


@pytest.mark.parametrize("response", [
    "Final answer (90%): 31\nFinal answer (99%): 521",
    "- Final answer (90%): 31\n- Final answer (99%): 521",
    # the list number before the second label is not a value of the first section
    "1. Final answer (90%): 31\n2. Final answer (99%): 521",
])
def test_one_labelled_final_answer_per_value_counts_as_all_values(response):
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 0, "")


def test_one_labelled_answer_per_value_uses_the_last_labels():
    response = "Final answer: 30\nFinal answer: 31\nFinal answer: 521"
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 0, "")
    # a label without a value among the last ones: no values from single labels
    assert values_of("Final answer: 31\nFinal answer: see above", allow_plain=True)[0] is None


def test_final_answer_list_gives_one_value_per_item():
    response = ("### FINAL ANSWER\n\n1. Spares needed for 90% confidence: **31**\n"
                "2. Spares needed for 99% confidence: **521**\n")
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 0, "")


def test_final_answer_list_longer_than_the_target_gives_its_last_items():
    response = ("FINAL ANSWER:\n1. Failure rate: λ = 0.002 per hour\n2. R(100) = 0.8187\n"
                "3. MTTF = 500 hours")
    assert values_of(response, allow_plain=True)[:2] == ([0.8187, 500.0], "final")
    g = grade(response, "0.8187, 500", allow_plain=True)
    assert (g.correct, g.values, g.source) == (True, (0.8187, 500.0), "final")


def test_final_answer_list_ends_at_the_first_line_that_is_no_item():
    response = ("Final answer:\n- 90% confidence: 31 spares\n- 99% confidence: 521 spares\n"
                "Both counts assume 1000 h of operation.")
    assert values_of(response, allow_plain=True)[0] == [31.0, 521.0]


def test_a_remark_mentioning_the_final_answer_does_not_extend_the_list():
    # the last item opens a section of its own ("final answer assumes 1000 h"): the list above
    # is read up to it, not through it, so 1000 is no value of the answer
    response = ("Final answer:\n- 90% confidence: 31 spares\n- 99% confidence: 521 spares\n"
                "- Note: this final answer assumes 1000 h of operation.")
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 0, "")


def test_final_answer_table_gives_the_value_cell_of_each_row():
    response = ("## Final Answer\n\n| Confidence | Spares |\n|---|---|\n| 90% | 31 |\n"
                "| 99% | 521 |")
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 0, "")


def test_one_value_per_numeric_line_of_the_section():
    response = "Final answer:\nAt 90% confidence: 31 spares\nAt 99% confidence: 521 spares"
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 0, "")


def test_the_last_final_answer_section_wins_over_an_earlier_one():
    response = ("Answer: 30, 500\n\nWait, the counts must be rounded up.\n\n"
                "Final answer: 31, 521\n\nThis final answer uses the upper tail.")
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 0, "")


def test_an_earlier_section_is_read_when_the_last_has_no_values():
    response = "Final answer: 31, 521\n\nThis final answer rounds both counts up."
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 0, "")


def test_a_trailing_mention_of_the_final_answer_with_one_number_is_not_the_answer():
    # its one line ends on ":" but there is nothing after it to announce
    response = "Answer: 31, 521\n\nWe double-check the final answer at the 99% level:"
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "final", 0, "")


@pytest.mark.parametrize("sections, found", [(32, True), (33, False)])
def test_only_the_last_32_final_answer_sections_are_searched(sections, found):
    # a bound on the work per response: the 33rd section from the end is never read
    response = "Final answer: 31, 521\n" + "Checked again: the final answer stands.\n" * (
        sections - 1)
    assert values_of(response, allow_plain=True)[0] == ([31.0, 521.0] if found else None)


def test_a_final_list_is_read_only_to_its_32nd_numeric_line():
    # the same bound inside one section: items past the 32nd are not read
    items = "".join(f"- t = {10 * i} h: R = 0.{99 - i}\n" for i in range(1, 41))
    assert values_of("FINAL ANSWER:\n" + items, allow_plain=True)[0] == [0.68, 0.67]


def test_the_last_line_is_the_fallback_without_a_marker():
    response = "Rounding up, we need 31 and 521 spares"
    assert values_of(response, allow_plain=True) == ([31.0, 521.0], "last_number", 0, "")
    # ... and it must hold exactly the asked values
    assert values_of(response, 3, allow_plain=True)[0] is None


# ---------------------------------------------------------------- cut off at the token limit

@pytest.mark.parametrize("text, kept", [
    ("FINAL ANSWER: 31, 521\nCheck: 31 + 521 =", "FINAL ANSWER: 31, 521\n"),
    ("a 31\nb 521\nc = 1 +", "a 31\nb 521\n"),  # only the last line goes
    ("FINAL ANSWER: 31\nso n = 31 +\n\n", "FINAL ANSWER: 31\n"),  # trailing blank lines
    ("R = 0.992 \\times 0.991\n\\times", "R = 0.992 \\times 0.991\n"),  # a LaTeX operator
    ("R = 0.992\n*R = 0.992 ×*", "R = 0.992\n"),  # Markdown emphasis after the operator
    ("1\n2 ×", "1\n"),  # a one-character first line
    ("R = 0.992 × 0.991 ×", ""),  # a one-line response cut mid-expression
    ("R = 0.992 × **", ""),  # ... cut before its bold closed
    ("FINAL ANSWER: 31, 521", "FINAL ANSWER: 31, 521"),  # a finished line stays
    ("R = 0.95\nvalid while t < X", "R = 0.95\nvalid while t < X"),  # it ends on a name
    ("FINAL ANSWER: 31, 521\n", "FINAL ANSWER: 31, 521\n"),
])
def test_truncated_response_drops_its_cut_last_line(text, kept):
    assert _without_cut_line(text) == kept


def test_a_cut_final_line_does_not_override_the_answer_before_it():
    response = "Answer: 31, 521\n\nWith the safety margin the final answer becomes 33, 540 +"
    assert values_of(response, allow_plain=True)[0] == [33.0, 540.0]  # not cut off: read
    assert values_of(response, allow_plain=True, truncated=True) == \
        ([31.0, 521.0], "final", 0, "")


def test_a_truncated_response_has_no_last_line_answer():
    response = "Rounding up, we need 31 and 521 spares"
    assert values_of(response, allow_plain=True, truncated=True) == \
        (None, None, 0, "no answer with 2 values")
    g = grade(response, TARGET, allow_plain=True, truncated=True)
    assert (g.correct, g.value, g.source, g.truncated) == (False, None, None, True)
    assert g.to_dict()["truncated"] is True


def test_a_truncated_response_keeps_its_boxes():
    assert values_of("so \\boxed{31, 521} and then", truncated=True)[:2] == \
        ([31.0, 521.0], "boxed")


# ---------------------------------------------------------------- scoring the parts

def test_several_values_grade_fields():
    g = grade("\\boxed{31, 530}", TARGET)  # 530 is 1.7% off
    assert (g.extracted, g.value, g.target, g.values, g.targets) == \
        ("31, 530", 31.0, 31.0, (31.0, 530.0), (31.0, 521.0))
    assert (g.correct, g.source, g.n_boxed, g.truncated) == (True, "boxed", 1, False)
    assert g.rel_error == pytest.approx(9 / 521)
    assert g.reason == "2 values: within 0.1%, within 5%"


def test_several_values_reward_is_the_worst_part():
    assert grade("\\boxed{31, 521}", TARGET).reward == 1.0
    assert grade("\\boxed{31.1, 521}", TARGET).reward == 0.8  # 0.3% off
    assert grade("\\boxed{31, 530}", TARGET).reward == 0.4
    g = grade("\\boxed{40, 521}", TARGET)  # 29% off: a wrong number
    assert (g.correct, g.reward, g.reason) == (False, 0.01, "2 values: off by 29%, within 0.1%")


def test_the_relative_error_is_that_of_the_worst_part():
    assert grade("\\boxed{31.31, 530}", TARGET).rel_error == pytest.approx(9 / 521)
    assert grade("\\boxed{34.1, 521}", TARGET).rel_error == pytest.approx(0.1)


def test_the_parts_are_matched_in_order():
    g = grade("\\boxed{521, 31}", TARGET)
    assert not g.correct and g.values == (521.0, 31.0)


def test_the_tolerance_applies_to_every_part():
    g = grade("\\boxed{31, 530}", TARGET, tolerance=0.01)
    assert (g.correct, g.reward) == (False, 0.4)  # the reward bands do not move


def test_a_zero_part_is_judged_by_absolute_error():
    g = grade("\\boxed{0, 521}", "0, 521")
    assert (g.correct, g.reward, g.rel_error) == (True, 1.0, 0.0)
    assert g.reason == "2 values: zero target, absolute error 0, within 0.1%"
    g = grade("\\boxed{0.001, 521}", "0, 521")
    assert (g.correct, g.reward) == (False, 0.01)
    assert grade("\\boxed{0.001, 521}", "0, 521", abs_tolerance=0.01).correct
    # the zero part has no relative error: the Grade's is that of the other part
    g = grade("\\boxed{0, 0.0}", "0, 0.5")
    assert (g.rel_error, g.correct) == (1.0, False)


def test_percent_parts_are_compared_as_percent_numbers():
    g = grade("\\boxed{95, 99}", "95%, 99%")
    assert (g.correct, g.reward, g.targets) == (True, 1.0, (0.95, 0.99))
    assert g.reason == "2 values: within 0.1%, within 0.1%; compared as percent numbers"


def test_too_many_boxes_penalised_for_several_values():
    g = grade("\\boxed{90} \\boxed{95} \\boxed{99}", "95%, 99%")
    assert (g.correct, g.reward, g.n_boxed) == (True, -0.3, 3)
    assert g.reason == ("2 values: within 0.1%, within 0.1%; compared as percent numbers; "
                        "3 boxed answers (more than 2)")


def test_one_box_per_value_is_no_guessing():
    g = grade("For 90%: \\boxed{31}. For 99%: \\boxed{521}.", TARGET)
    assert (g.reward, g.reason) == (1.0, "2 values: within 0.1%, within 0.1%")


def test_too_many_boxes_without_the_values_is_penalised():
    g = grade("\\boxed{31}, \\boxed{521}, \\boxed{\\text{both rounded up}}", TARGET)
    assert (g.extracted, g.value, g.target, g.rel_error, g.correct, g.reward, g.n_boxed,
            g.source, g.truncated, g.values, g.targets) == \
        ("\\text{both rounded up}", None, 31.0, None, False, -0.3, 3, None, False, None,
         (31.0, 521.0))
    assert g.reason == ("target has several values (31, 521): no boxed answer with 2 values; "
                        "3 boxed answers (more than 2)")


# ---------------------------------------------------------------- too few values

@pytest.mark.parametrize("response, allow_plain, extracted, source, reason", [
    ("\\boxed{31}", False, "31", "boxed", "no boxed answer with 2 values"),
    ("FINAL ANSWER: 31 spares", True, "31", "final", "no answer with 2 values"),
    # past an intermediate box, the single-value reading still finds the final answer
    ("The rate is \\boxed{\\lambda = 0.002}.\n\nFinal answer: 31 spares", True, "31", "final",
     "no boxed answer with 2 values"),
])
def test_too_few_values_report_what_the_answer_said(response, allow_plain, extracted, source,
                                                     reason):
    g = grade(response, TARGET, allow_plain=allow_plain)
    assert (g.extracted, g.value, g.target, g.rel_error, g.correct, g.reward, g.n_boxed,
            g.source, g.truncated, g.values, g.targets) == \
        (extracted, 31.0, 31.0, None, False, 0.0, response.count("\\boxed"), source, False,
         None, (31.0, 521.0))
    assert g.reason == f"target has several values (31, 521): {reason}"


def test_a_plain_answer_is_not_read_for_the_reward():
    g = grade("FINAL ANSWER: 31, 521", TARGET)  # allow_plain=False
    assert (g.correct, g.value, g.source) == (False, None, None)


def test_too_few_values_in_a_truncated_response_report_no_stray_number():
    g = grade("We need 31 spares", TARGET, allow_plain=True, truncated=True)
    assert (g.value, g.source, g.truncated) == (None, None, True)
    assert grade("We need 31 spares", TARGET, allow_plain=True).value == 31.0


def test_to_dict_keeps_the_values_of_a_target_with_several():
    out = grade("\\boxed{31, 521}", TARGET).to_dict()
    assert (out["values"], out["targets"]) == ((31.0, 521.0), (31.0, 521.0))
    assert "truncated" not in out
