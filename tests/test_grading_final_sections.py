"""The grader on "final answer" sections of plain (non-boxed) answers: how a marker is found
("final answer" anywhere, "Answer:" only at the start of a line, seen through a 40-character
look-back), where its section ends (at the next marker), a line that announces the answer on the
next one, lists and tables inside a section, several sections, a section after a box, and the
same rules for targets with several values."""
import pytest

from relrl.grading.extraction import extract_answer, extract_values

WORKING = ("We model the time to failure as exponential with rate $\\lambda$. The data give "
           "$\\lambda = 2 \\times 10^{-3}$ per hour, so $R(t) = e^{-\\lambda t}$.\n\n")


def plain(response, **kwargs):
    """(value, source) of extract_answer with allow_plain."""
    got = extract_answer(response, allow_plain=True, **kwargs)
    return got.value, got.source


def values_of(response, count=2):
    """(values as floats, source) of extract_values with allow_plain."""
    values, source, _, _ = extract_values(response, count, allow_plain=True)
    return (None if values is None else [v.value for v in values]), source


# ---------------------------------------------------------------- finding a marker

@pytest.mark.parametrize("response, expected", [
    # "final" is seen up to 40 characters before "answer": 5 letters and 35 spaces, not 36
    ("FINAL" + " " * 35 + "ANSWER: 0.75\nA check with 3 units gives 0.8.", (0.75, "final")),
    ("FINAL" + " " * 36 + "ANSWER: 0.75\nA check with 3 units gives 0.8.", (0.8, "last_number")),
    # "Answer:" at the start of the text counts when at most 40 characters precede it ...
    (" " * 40 + "Answer: 0.75\nA check with 3 units gives 0.8.", (0.75, "final")),
    (" " * 41 + "Answer: 0.75\nA check with 3 units gives 0.8.", (0.8, "last_number")),
    # ... and after a line break only when the line break is within those 40 characters
    ("\n" + " " * 39 + "Answer: 0.75\nA check with 3 units gives 0.8.", (0.75, "final")),
    ("\n" + " " * 40 + "Answer: 0.75\nA check with 3 units gives 0.8.", (0.8, "last_number")),
])
def test_a_marker_is_seen_through_a_40_character_look_back(response, expected):
    assert plain(response) == expected


@pytest.mark.parametrize("response", [
    # the line before holds words: only the text after the last line break opens the line
    "R(100) = 0.6\nThus 0.6\n**Answer:** 0.75\nAll 3 checks pass.",
    "R(100) = 0.6 so\n**Answer:** 0.75\nAll 3 checks pass.",
    WORKING + "**Answer:** 0.75\nAll 3 checks pass.",  # far into the response
])
def test_an_answer_label_opening_a_line_is_a_marker(response):
    assert plain(response) == (0.75, "final")


@pytest.mark.parametrize("response, expected", [
    ("1. Answer: 0.75 is too high\nWe settle on 0.8.", 0.8),  # a list number before it
    ("a) Answer: 0.75 is too high\nWe settle on 0.8.", 0.8),
    ("To get the answer: multiply 0.9 by 0.95, so R = 0.855.", 0.855),  # mid-sentence
])
def test_an_answer_label_after_a_word_on_its_line_is_no_marker(response, expected):
    assert plain(response) == (expected, "last_number")


def test_markers_are_found_in_text_whose_lower_case_is_longer():
    # "İ".lower() is two characters: marker positions must still be those of the text
    response = "Plants: İzmir, İstanbul and İnegöl.\nFinal answer: 12 units"
    assert plain(response) == (12.0, "final")


# ---------------------------------------------------------------- where a section ends

def test_a_final_list_stops_at_the_next_final_answer_marker():
    # the last item opens a section of its own, whose closed form has no value: the list of the
    # first section ends before it, so its last item is R(100), not the 500 of the closed form
    response = ("FINAL ANSWER:\n- Failure rate: λ = 0.002 per hour\n"
                "- Reliability at 100 hours: R(100) = 0.8187\n"
                "- Closed form of the final answer: R(t) = e^{-t/500}")
    assert plain(response) == (0.8187, "final")


@pytest.mark.parametrize("response, expected", [
    ("Final answer: 0.8187\n\nThis final answer is rounded.", 0.8187),
    # three sections: the last has no number, the middle one is the answer, not the first
    ("Answer: 0.5\n\nWait, let me recheck.\n\nFinal answer: 0.8\n\nThis final answer is rounded.",
     0.8),
])
def test_the_last_section_with_a_number_is_the_answer(response, expected):
    assert plain(response) == (expected, "final")


# ---------------------------------------------------------------- a line announcing the answer

def test_an_italic_line_announcing_the_answer_is_skipped():
    response = "FINAL ANSWER: *At t = 100 hours the reliability is:*\nR(100) = 0.8187"
    assert plain(response) == (0.8187, "final")


def test_a_line_ending_on_a_colon_is_read_when_nothing_follows_it():
    response = WORKING + "FINAL ANSWER: At t = 100 hours the reliability is:"
    assert plain(response) == (100.0, "final")
    assert plain(response, truncated=True) == (100.0, "final")


def test_a_colon_followed_by_a_word_does_not_announce_the_next_line():
    response = "FINAL ANSWER: R = 0.8187, reached only by design: X\nDesign Y reaches 0.7408."
    assert plain(response) == (0.8187, "final")
    response = "Final answer: 31 and 521 spares, by policy: X\nPolicy Y would need 35 and 600."
    assert values_of(response) == ([31.0, 521.0], "final")


# ---------------------------------------------------------------- lists and tables

def test_a_final_list_followed_by_a_remark_gives_its_last_item():
    response = ("FINAL ANSWER:\n1. λ = 0.002 per hour\n2. R(100) = 0.8187\n\n"
                "These values assume 5 units.")
    assert plain(response) == (0.8187, "final")


def test_a_final_list_is_read_to_its_33rd_item():
    # a bound on the work per section: the first item and 32 more
    items = "".join(f"- t = {10 * i} h: R = 0.{99 - i}\n" for i in range(1, 41))
    assert plain("FINAL ANSWER:\n" + items) == (0.66, "final")


@pytest.mark.parametrize("cell, value", [
    ("2.5 × 10⁻⁴ per hour", 2.5e-4),  # the whole cell is one number, not its last word
    ("0.8187 (81.9%)", 0.8187),  # a remark in parentheses inside the cell
])
def test_a_table_row_is_read_in_its_last_cell_as_a_whole(cell, value):
    response = ("## Final Answer\n\n| Quantity | Value |\n|---|---|\n| MTTF | 4,000 hours |\n"
                f"| Last quantity | {cell} |\n")
    assert plain(response) == (pytest.approx(value), "final")


# ---------------------------------------------------------------- a section after a box

def test_a_marker_inside_the_last_box_is_not_read_when_the_section_after_it_has_no_number():
    response = "\\boxed{0.5 \\text{ (final answer: } 0.7)}\n\nThis final answer is checked."
    assert plain(response) == (0.5, "boxed")


def test_a_final_answer_label_written_against_its_box_keeps_the_box():
    # the marker precedes the box, so the box is the final answer, not an intermediate result
    response = "Final answer\\boxed{0.8187}\n\nFinal answer for 200 hours: 0.6703"
    assert plain(response) == (0.8187, "boxed")


# ---------------------------------------------------------------- several values

@pytest.mark.parametrize("response", [
    "Final answer (90%): 31; final answer (99%): 521",
    "We round both counts up.\nFinal answer (90%): 31; final answer (99%): 521",
])
def test_two_labelled_answers_on_one_line_give_one_value_each(response):
    assert values_of(response) == ([31.0, 521.0], "final")


@pytest.mark.parametrize("response", [
    # the next marker is wrapped over two lines: the line where it starts is not in the list
    ("Final answer:\n- 90% confidence: 31 spares\n- 99% confidence: 521 spares\n"
     "- Note: for 1000 h of operation this is the final\nanswer."),
    # a line after the next marker's line does not pull that line into the list
    ("Final answer:\n- 90% confidence: 31 spares\n- 99% confidence: 521 spares\n"
     "- Note: this final answer assumes 1000 h of operation.\nBoth counts are rounded up."),
])
def test_a_list_of_values_ends_before_the_line_of_the_next_marker(response):
    assert values_of(response) == ([31.0, 521.0], "final")
