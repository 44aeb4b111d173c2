"""Text handling of the grader: the exact reason an extraction gives when there is no answer,
responses that are not strings, `allow_plain` and `words` defaults, `<think>` blocks (a leading
block opened in the prompt, stray closing tags, several blocks), brackets when a list of values
is split, and the plain text `normalize` makes of LaTeX and unicode spellings."""
import pytest
from grading_helpers import parse_number

from relrl.grading.extraction import Extraction, extract_answer, strip_thinking
from relrl.grading.numbers import normalize, parse_target_values, split_values
from relrl.grading.scoring import grade

EMPTY = Extraction(None, None, 0, None, reason="empty response")


# ---------------------------------------------------------------- no answer, and why

@pytest.mark.parametrize("response", ["", "  \n\t ", None, 42, ["\\boxed{0.5}"]])
@pytest.mark.parametrize("allow_plain", [False, True])
def test_an_empty_or_non_string_response_is_an_empty_response(response, allow_plain):
    assert extract_answer(response, allow_plain=allow_plain) == EMPTY


def test_only_boxed_answers_are_read_by_default():
    got = extract_answer("The reliability is therefore 0.55.")
    assert (got.value, got.source, got.reason) == (None, None, "no boxed answer")
    assert extract_answer("The reliability is therefore 0.55.", allow_plain=True).value == 0.55


# (response, keyword arguments, the exact reason)
REASONS = [
    ("We still have to compute it.", {"allow_plain": True}, "no answer found"),
    ("We still have to compute it.", {"allow_plain": True, "truncated": True},
     "cut off at the token limit before a final answer"),
    ("So the reliability at t = 100 h is", {"allow_plain": True, "truncated": True},
     "cut off at the token limit before a final answer"),
    ("We still have to compute it.", {}, "no boxed answer"),
    ("<think>R = 0.5 so the answer is", {}, "cut off inside <think>"),
    ("<think>R = 0.5 so the answer is", {"allow_plain": True}, "cut off inside <think>"),
    # thinking that was closed is no cut-off, even with nothing (or no number) after it
    ("The prompt opened the block; R = 0.5.</think>", {}, "no boxed answer"),
    ("<think>R = 0.5</think>The reliability is high.", {}, "no boxed answer"),
    ("\\boxed{\\text{see above}}", {}, "boxed answer is not a number"),
    ("\\boxed{}", {"allow_plain": True}, "boxed answer is not a number"),
    ("\\boxed{\\infty}", {}, "boxed answer: infinite value"),
    ("\\boxed{NaN}", {}, "boxed answer: not a number (NaN)"),
    ("\\boxed{1/0}", {}, "boxed answer: division by zero"),
    ("\\boxed{10^{99999}}", {}, "boxed answer: overflow"),
    ("\\boxed{R = \\frac{3}{0}}", {}, "boxed answer: division by zero"),
]


@pytest.mark.parametrize("response, kwargs, reason", REASONS)
def test_the_reason_names_why_there_is_no_answer(response, kwargs, reason):
    got = extract_answer(response, **kwargs)
    assert got.value is None and got.source is None
    assert got.reason == reason


def test_the_grade_reports_the_extraction_reason():
    g = grade("\\boxed{1/0}", "0.5")
    assert (g.reward, g.reason) == (0.0, "boxed answer: division by zero")
    g = grade("We still have to compute it.", "0.5", allow_plain=True, truncated=True)
    assert g.reason == "cut off at the token limit before a final answer"


# ---------------------------------------------------------------- <think> blocks

@pytest.mark.parametrize("text, visible", [
    # the prompt opened the block: everything up to the first </think> is thinking
    ("plan the computation</think>The answer is \\boxed{3}", "The answer is \\boxed{3}"),
    ("plan</think>draft<think>check again</think> final", "draft final"),
    # only the leading block goes; a later stray closing tag stays
    ("plan</think>draft</think>final", "draft</think>final"),
    ("no thinking at all", "no thinking at all"),
    ("<think>a</think>b<think>c</think>d", "bd"),
    ("<think>a</think>b<think>never closed", "b"),  # an unclosed block drops the rest
    ("lead<think>x</think></think>tail", "lead</think>tail"),
])
def test_strip_thinking(text, visible):
    assert strip_thinking(text) == visible


def test_a_box_in_thinking_opened_by_the_prompt_is_not_counted():
    got = extract_answer("perhaps \\boxed{9} ... </think> so \\boxed{0.5}")
    assert (got.value, got.n_boxed) == (0.5, 1)


# ---------------------------------------------------------------- lists of values

def test_split_values_splits_at_and_only_when_asked():
    assert split_values("31 and 521") == ["31 and 521"]
    assert split_values("31 and 521", words=True) == ["31", "521"]


@pytest.mark.parametrize("text, parts", [
    ("31, 521", ["31", " 521"]),
    ("(0.9, 0.95), 3", ["(0.9, 0.95)", " 3"]),
    ("R(t_{1}, t_{2}) = 0.9; MTTF = 1000", ["R(t_{1}, t_{2}) = 0.9", " MTTF = 1000"]),
    ("f(g(1), 2), 3", ["f(g(1), 2)", " 3"]),
    ("[(0, 1), (1, 2)]; 5", ["[(0, 1), (1, 2)]", " 5"]),
    ("0.9), 0.8", ["0.9)", " 0.8"]),  # a stray closing bracket opens nothing
])
def test_separators_inside_brackets_do_not_split(text, parts):
    assert split_values(text) == parts


def test_a_target_with_nested_brackets_has_one_value_a_part():
    values, reason = parse_target_values("R(t_{1}, t_{2}) = 0.9; MTTF = 1000")
    assert [v.value for v in values] == [0.9, 1000.0] and reason == ""


# ---------------------------------------------------------------- normalize

@pytest.mark.parametrize("text, plain", [
    ("10⁻⁴", "10^(-4)"),
    ("0.93³", "0.93^(3)"),
    ("\\frac{14}{33}", " 14/33 "),
    ("\\mathbf{0.9048}", " 0.9048"),
    ("\\displaystyle R = 0.9", "  R = 0.9"),  # a wrapper without braces
    ("R_{sys} = 0.9", "R = 0.9"),
    ("L_10 = 774 hours", "L = 774 hours"),  # a subscript without braces or backslash
    ("MRL(L_{10}) = 774", "MRL(L) = 774"),
    ("R = 0.9", "R = 0.9"),
])
def test_normalize_spells_numbers_as_plain_text(text, plain):
    assert normalize(text) == plain


@pytest.mark.parametrize("text, value", [
    ("\\bf0.95", 0.95),  # a wrapper glued to its number
    ("{0.5}^{2}", 0.25),
])
def test_latex_decoration_around_a_number_is_dropped(text, value):
    assert parse_number(text) == pytest.approx(value)
