"""How the grader picks the answer number out of one line. In a box or a target: the value
after the last `=` or `≈`. In a final-answer line: list numbering and side remarks in
parentheses left out, the first clause with a number read (only its first 64 numbers), the
number a relation or "is" marks within the 40 characters before it, an exact expression giving
way to its value in the next clause, and a step label ("Scenario 2") in the 16 characters before
a number passed over. On the last line of a response without a marker: its list-item prefix, a
line left open on an operator (also inside Markdown emphasis), and how many words may trail its
last number."""
import pytest

from relrl.grading.extraction import extract_answer
from relrl.grading.numbers import parse_target_number, parse_target_values
from relrl.grading.scoring import grade

WORKING = ("The units fail independently with rate 0.002 per hour, so the reliability of the "
           "series system is the product of the unit reliabilities.\n\n")


def plain(response, **kwargs):
    """(value, source) of the plain-answer reading used for grading outside models."""
    answer = extract_answer(response, allow_plain=True, **kwargs)
    return answer.value, answer.source


# ---------------------------------------------------------------- the value after a relation

@pytest.mark.parametrize("response, value", [
    # the last "=" gives the value, not the first one (a product written before its result)
    ("So \\boxed{R_{sys} = 0.9 \\times 0.95 = 0.855}", 0.855),
    ("The path holds \\boxed{R = 0.99 \\cdot 0.98 \\approx 0.9702}", 0.9702),
    # written without spaces: neither the figure before "=" nor the first one after it is lost
    ("\\boxed{R(100)=e^{-0.1}=0.9048}", 0.9048),
    ("\\boxed{n_{99}=521}", 521.0),
])
def test_a_box_gives_the_value_after_its_last_relation(response, value):
    answer = extract_answer(response)
    assert (answer.value, answer.source) == (value, "boxed")


def test_a_target_gives_the_value_after_its_last_relation():
    number, reason = parse_target_number("R_sys = 0.9 × 0.95 = 0.855")
    assert (number.value, reason) == (0.855, "")
    assert [n.value for n in parse_target_values("n=31; N=521")[0]] == [31.0, 521.0]


@pytest.mark.parametrize("bare, labelled", [
    ("≈ 0.8187", "R ≈ 0.8187"),
    ("= 0.8187", "R(100) = 0.8187"),
    ("=0.8187", "R=0.8187"),
])
def test_a_target_opening_with_its_relation_sign_reads_like_a_labelled_one(bare, labelled):
    # the same Number, its position counted in the text after the sign
    assert parse_target_number(bare) == parse_target_number(labelled)


# ---------------------------------------------------------------- step labels before a number

@pytest.mark.parametrize("line", [
    "FINAL ANSWER: Scenario 2 gives the higher reliability, 0.9512.",  # the label opens the line
    "FINAL ANSWER: The higher reliability comes from scenario 2, 0.9512.",
    "FINAL ANSWER:\n\nStep 3 confirms a system reliability of 0.9512 over the mission.",
])
def test_a_label_number_in_a_final_answer_is_not_the_answer(line):
    assert plain(line) == (0.9512, "final")


@pytest.mark.parametrize("spaces, expected", [
    (10, (None, None)),  # "Option" and its padding fill the 16 characters: a label number
    (11, (0.9512, "final")),  # a word 17 characters back labels nothing
])
def test_a_label_is_looked_for_in_the_16_characters_before_a_final_answer_number(spaces,
                                                                                  expected):
    text = "Final answer\n\nOption" + " " * spaces + "0.9512\n\nThat completes the analysis."
    assert plain(text) == expected


@pytest.mark.parametrize("spaces, expected", [
    (8, (None, None)),
    (9, (0.9512, "last_number")),
])
def test_a_label_is_looked_for_in_the_16_characters_before_a_last_line_number(spaces, expected):
    text = WORKING + "Scenario" + " " * spaces + "0.9512"
    assert plain(text) == expected


def test_a_step_label_ending_the_last_line_is_passed_over_for_the_number_before_it():
    assert plain(WORKING + "Hence R(500) ≈ 0.8825, from Step 3.") == (0.8825, "last_number")


# ---------------------------------------------------------------- list numbering, side remarks

@pytest.mark.parametrize("last_line", ["3. 0.9512", "- 0.9512", "* **0.9512**", "(b) 0.9512"])
def test_a_last_line_that_is_a_list_item_gives_the_number_after_its_numbering(last_line):
    assert plain(WORKING + "The reliabilities are:\n\n" + last_line) == (0.9512, "last_number")


def test_a_final_list_of_bare_values_gives_its_values_not_their_numbering():
    g = grade("### FINAL ANSWER\n1. 31\n2. 521", "31, 521", allow_plain=True)
    assert g.correct and g.values == (31.0, 521.0)
    assert plain("## Final Answer\n\n1. 0.8187") == (0.8187, "final")


def test_a_side_remark_in_parentheses_between_is_and_the_value_is_skipped():
    text = "FINAL ANSWER: At t = 1000 h the reliability is (to four decimals) 0.3679."
    assert plain(text) == (0.3679, "final")  # not the 1000 of "t = 1000"


@pytest.mark.parametrize("text", [
    "FINAL ANSWER: R = 1 - (0.35)^3; numerically R ≈ 0.9571.",
    "FINAL ANSWER: R = 1 - (0.35) ^ 3; numerically R ≈ 0.9571.",
    "FINAL ANSWER: R = 0.5 + (0.35 × 0.3) * 4.1; numerically R ≈ 0.9305.",
])
def test_a_term_of_an_expression_in_parentheses_is_no_side_remark(text):
    # left out as a remark, "1 - (0.35)^3" would read as a finished "1", 4.5% from 0.9571
    value = float(text.rsplit("≈ ", 1)[1].rstrip("."))
    assert plain(text) == (value, "final")


# ---------------------------------------------------------------- clauses and marked values

def test_the_first_clause_with_a_number_gives_the_answer():
    text = "FINAL ANSWER: R(100) ≈ 0.9048. The MTTF is 1000 hours."
    assert plain(text) == (0.9048, "final")


def test_an_exact_expression_in_its_own_clause_gives_way_to_the_value_in_the_next():
    text = ("FINAL ANSWER: R = 1 - e^{-4/3}; numerically R ≈ 0.7364.\n\n"
            "That completes the analysis.")
    assert plain(text) == (0.7364, "final")


@pytest.mark.parametrize("spaces, value", [
    (39, 0.9048),  # the ":" is within the 40 characters before the number: it marks it
    (40, 100.0),  # 41 characters back it marks nothing: the clause's first number is read
])
def test_a_marker_is_looked_for_in_the_40_characters_before_a_number(spaces, value):
    text = "FINAL ANSWER: R(100 h):" + " " * spaces + "0.9048"
    assert plain(text) == (value, "final")


TIMES = [str(900 + 7 * i) for i in range(64)]  # failure times in hours


@pytest.mark.parametrize("n_times, value", [(63, 1131.5), (64, 900.0)])
def test_only_the_first_64_numbers_of_a_clause_are_read(n_times, value):
    # with 63 listed times the MTTF is the clause's 64th number and is read as marked; one
    # more time pushes it out, and the clause's first number is all that is left
    text = ("FINAL ANSWER: from the failure times " + ", ".join(TIMES[:n_times])
            + " hours the MTTF = 1131.5 hours")
    assert plain(text) == (value, "final")


# ---------------------------------------------------------------- the end of the last line

@pytest.mark.parametrize("last_line, value", [
    ("The reliability is 0.9512 for the whole mission", 0.9512),  # four trailing words
    ("So the system reliability is 0.9512 over the whole mission time.  ", 0.9512),  # hard break
    ("R(100) ≈ 0.9048, more than enough for this mission.", 0.9048),
    ("R(100) ≈ 0.9048, which is excellent for this mission!", 0.9048),
    ("R(100) ≈ 0.9048, but is that enough for the mission?", 0.9048),
    ("So R ≈ 0.95 for path A–X", 0.95),  # ends on a letter, not on the dash before it
])
def test_a_finished_last_line_gives_its_last_number(last_line, value):
    assert plain(WORKING + last_line) == (value, "last_number")


@pytest.mark.parametrize("last_line", [
    "At t = 100 h the reliability is 0.9048, and we now compute the",  # five words run on
    "*R(100) = 0.9048 ×*",  # an operator left open inside Markdown emphasis
    "_R(100) = 0.9048 -_",
    "**R(100) = 0.9048 ×** ",
])
def test_a_last_line_cut_off_gives_no_number(last_line):
    answer = extract_answer(WORKING + last_line, allow_plain=True)
    assert answer.value is None and answer.reason == "no answer found"
