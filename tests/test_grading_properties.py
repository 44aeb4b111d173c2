"""Property-based tests: the grader never raises, and finishes in time linear in its input.

Speed is asserted two ways, both on this process's CPU time (other jobs on a shared machine do
not count): every hostile text grades within a generous budget per character (50 µs, where the
worst hostile text measured here costs under 3 µs and quadratic behaviour at these sizes costs
seconds), and each formerly quadratic construction, at four times the size, takes well under
the 16 times a quadratic would (the scaling tests). `make fuzz` runs the properties (marked
`fuzz`) with many more examples (the `fuzz` profile of tests/conftest.py).

`python tests/test_grading_properties.py [SIZES]` prints the time of each construction at each
size: the before and after table of docs/grading.md ("Linear time").
"""
import gc
import math
import sys
import time

import pytest
from grading_helpers import parse_number
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relrl.grading.extraction import extract_answer
from relrl.grading.numbers import parse_target, parse_target_values
from relrl.grading.rewards import reliability_reward
from relrl.grading.scoring import grade
from relrl.grading.target_kind import infer_target_kind

# Pieces that exercise every branch of the grader when glued together at random.
TOKENS = ["\\boxed{", "{", "}", "\\{", "<think>", "</think>", "1", "0", "9", ",", ".", " ", "e",
          "E", "-", "+", "%", "\\%", "\\frac{", "\\dfrac", "^", "^{", "×", "\\times", "10", "⁻⁴",
          "/", "=", "≈", "\\approx", "(", ")", "final answer:", "FINAL ANSWER", "Answer:",
          "\n", "**", "$", "\\text{", "hours", "_", "∞", "\\infty", "NaN", "1,234", "0,5",
          "1 128", "percent", "is approximately ", "1. ", "—", "İ"]

# The loaded profile's example count (tests/conftest.py: 100, or 2,000 under `make fuzz`) scales
# every property's.
EXAMPLES = settings.default.max_examples
NO_DEADLINE = settings(deadline=None, max_examples=EXAMPLES * 3 // 2)


def assert_well_formed(response, target="0.5"):
    for allow_plain in (False, True):
        g = grade(response, target, allow_plain=allow_plain)
        assert math.isfinite(g.reward)
        assert g.value is None or math.isfinite(g.value)
        assert g.correct in (True, False)


@pytest.mark.fuzz
@NO_DEADLINE
@given(st.text(max_size=20_000))
def test_any_text_grades_without_raising(text):
    assert_well_formed(text)
    assert_well_formed("\\boxed{" + text + "}", target=text[:50])


@pytest.mark.fuzz
@NO_DEADLINE
@given(st.lists(st.sampled_from(TOKENS), max_size=2_000))
def test_token_soup_grades_without_raising(tokens):
    text = "".join(tokens)[:20_000]
    assert_well_formed(text)
    value, reason = parse_target(text[:200])
    assert (value is None) == bool(reason)
    number = parse_number(text)
    assert number is None or math.isfinite(number)


@pytest.mark.fuzz
@NO_DEADLINE
@given(st.floats(min_value=-1e300, max_value=1e300, allow_nan=False).filter(lambda x: x != 0))
def test_written_numbers_read_back(x):
    assert parse_number(repr(x)) == x
    assert parse_number(f"{x:,}") == x  # thousands separators
    assert grade(f"\\boxed{{{x!r}}}", repr(x)).reward == 1.0


@pytest.mark.fuzz
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


# --------------------------------------------------------------------------------------------
# Linear time

# The units hostile text repeats: whitespace runs, separators, clauses, braces (nested,
# unbalanced, escaped), digit runs, boxes, markers, and the spellings normalize() turns into
# spaces or relations. Each is repeated into a run of a few characters or of thousands: long
# enough that a quadratic path overruns the budget (16,000 spaces took 2.7 s in one).
UNITS = [" ", "\t", "\n", " \n", ", ", ",", ";", "; ", " and ", " & ", "a, b. ", ", which is ",
         ", so ", " — ", " at t = 5", "R = 0.5 ", "1", "9", "0", "1,234", ",234", " 234", "0,5",
         "1.", "{", "}", "\\{", "\\}", "\\boxed{", "\\boxed{1}", "**", "**1", "(", ")", " (a)",
         "^", "^(", "×10^", "\\times 10^", "e-", "%", "/", "=", "≈", "≥", "\\frac{", "\\frac{1}{",
         "_{", "_", "final answer: ", "Answer:", "\nAnswer: 1", "<think>", "</think>",
         "is approximately ", "- ", "- 1\n", "| ", "| 1 |", "compared to 2 ", "from 1 to ",
         "Step 2 ", "$", "\\(", "\\)", "\\,", "~", "`", "\\text{", "⁻", "⁻⁴", "İ", "∞",
         "determine ", "the reliability ", "R("]
# Half the runs repeat one of these: what the quadratic paths fed on (whitespace, and the
# spellings normalize() turns into spaces; digits; braces; boxes; separators; clauses).
FILLERS = [" ", "\t", "$", "~", "\\,", "`", "1", "{", "\\boxed{", ", ", ";", " at t = 5", "a, b. "]
MAX_RUN = 32_000
MAX_TEXT = 40_000
# What may come before a run: any token, or the start of a value, an exponent, a bold item, a
# relation or a box that the run then drags out.
HEADS = TOKENS + ["31,", "31", "2^", "2 \\times 10^", "\n- **", "R = 0.5", "\\boxed{31,",
                  "Final answer: 31,", "R = 0.5 at t = 5", "\n"]
# CPU seconds a grade may take: a fixed part plus a budget a character some 20 times the worst
# hostile text's measured cost (about 2.5 µs a character), so a slow machine passes; at these
# sizes the quadratic paths this guards against took seconds (docs/grading.md, "Linear time").
BUDGET_FIXED, BUDGET_PER_CHAR = 0.05, 50e-6


@st.composite
def hostile_texts(draw):
    """Up to three runs of hostile units, each after a token or the start of a value."""
    sizes = st.one_of(st.integers(1, 64), st.integers(8_000, MAX_RUN))
    units = st.one_of(st.sampled_from(FILLERS), st.sampled_from(UNITS + TOKENS))
    runs = draw(st.lists(st.tuples(units, sizes), min_size=1, max_size=3))
    glue = draw(st.lists(st.sampled_from(HEADS), min_size=len(runs), max_size=len(runs)))
    text = "".join(g + unit * max(1, size // len(unit)) for g, (unit, size) in zip(glue, runs))
    return text[:MAX_TEXT]


WRAPPINGS = ["{}", "\\boxed{{{}}}", "Final answer: {}", "Step 1: R = 0.5\n{}", "<think>{}</think>",
             "\\boxed{{31, {} 521}}", "{} \\boxed{{0.5}}"]


def cpu_seconds(fn) -> float:
    """This process's CPU time for one call (garbage collection off, so a collection that
    earlier tests' objects trigger is not counted)."""
    gc.disable()
    try:
        start = time.process_time()
        fn()
        return time.process_time() - start
    finally:
        gc.enable()


def assert_within_budget(what: str, text: str, fn):
    budget = BUDGET_FIXED + BUDGET_PER_CHAR * len(text)
    took = cpu_seconds(fn)
    assert took <= budget, f"{what} took {took:.2f} s on {len(text):,} characters " \
                           f"(budget {budget:.2f} s): {text[:80]!r}..."


@pytest.mark.fuzz
@settings(deadline=None, max_examples=max(1, EXAMPLES // 5),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_texts(), st.sampled_from(WRAPPINGS))
def test_hostile_text_grades_in_linear_time(text, wrapping):
    """Every grading path (the reward's boxed answers, the plain answers of evaluation, a
    truncated response, the target and its kind) stays within a budget proportional to the
    size, and grading is deterministic."""
    response = wrapping.format(text)
    for target, allow_plain, truncated in (("0.5", False, False), ("0.5", True, False),
                                           ("31, 521", False, False), ("31, 521", True, False),
                                           ("31, 521", True, True)):
        assert_within_budget(f"grade({target!r}, allow_plain={allow_plain}, "
                             f"truncated={truncated})", response,
                             lambda: grade(response, target, allow_plain=allow_plain,
                                           truncated=truncated))
    first = grade(response, "31, 521", allow_plain=True)
    assert grade(response, "31, 521", allow_plain=True) == first
    assert_within_budget("parse_target_values", text, lambda: parse_target_values(text))
    assert_within_budget("infer_target_kind", text, lambda: infer_target_kind(text, "0.5"))


# Constructions that were quadratic (or worse) before docs/grading.md's "Linear time", and a few
# that never were: (name, text of about n characters, target, allow_plain).
def _spaces(n: int) -> str:
    return " " * n


CONSTRUCTIONS = [
    ("multi-value box, spaces between values",
     lambda n: "\\boxed{31," + _spaces(n) + "521}", "31, 521", False),
    ("multi-value final answer, spaces between values",
     lambda n: "Final answer: 31," + _spaces(n) + " 521", "31, 521", True),
    ("multi-value box, spaces before 'and'",
     lambda n: "\\boxed{31" + _spaces(n) + "and 521}", "31, 521", False),
    ("last line of time conditions",
     lambda n: "R = 0.5" + " at t = 5" * (n // 9), "0.5", True),
    ("power sign, then spaces",
     lambda n: "\\boxed{2^" + _spaces(n) + "x}", "2", False),
    ("times ten to the, then spaces",
     lambda n: "\\boxed{2 \\times 10^" + _spaces(n) + "x}", "2", False),
    ("bold list item of digits",
     lambda n: "Final answer:\n- **" + "1" * n + "\n- 2", "2", True),
    ("nested boxes",
     lambda n: "\\boxed{" * (n // 8) + "1" + "}" * (n // 8), "1", False),
    ("clauses of the last line",
     lambda n: "a, b. " * (n // 6) + "1", "1", True),
    ("clauses of a multi-value last line",  # about 3 µs a character: a quarter of the size
     lambda n: "x\n" + "1, " * (n // 12) + "2", "1, 2", True),
    ("unclosed boxes",
     lambda n: "\\boxed{" * (n // 7), "1", True),
    ("digits in a box",
     lambda n: "\\boxed{" + "7" * n + "}", "1", True),
    ("final-answer markers",
     lambda n: "final answer: 1 " * (n // 16), "1, 2", True),
    ("thousands separators",
     lambda n: "\\boxed{1" + ",234" * (n // 4) + "5}", "1", True),
    ("nested braces",
     lambda n: "\\boxed{" + "{" * (n // 2) + "1" + "}" * (n // 2) + "}", "1", True),
]
SCALING_N = 20_000
QUADRATIC_RATIO = 16  # what four times the input costs a quadratic path; linear is 4
MAX_RATIO = 8


def scaling_ratio(run, build, n: int = SCALING_N, rounds: int = 5) -> float:
    """CPU time of run(build(4n)) over that of run(build(n)), each the best of up to `rounds`
    alternating tries (stopping once the ratio is clearly linear, or clearly not)."""
    small, large = build(n), build(4 * n)
    best_small = best_large = math.inf
    for k in range(rounds):
        best_small = min(best_small, cpu_seconds(lambda: run(small)))
        best_large = min(best_large, cpu_seconds(lambda: run(large)))
        ratio = best_large / max(best_small, 1e-4)
        if (k >= 2 and ratio < MAX_RATIO) or best_large > 2.0:
            break
    return ratio


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, build, target, allow_plain", CONSTRUCTIONS,
                         ids=[c[0] for c in CONSTRUCTIONS])
def test_four_times_the_input_takes_about_four_times_as_long(name, build, target, allow_plain):
    ratio = scaling_ratio(lambda text: grade(text, target, allow_plain=allow_plain), build)
    assert ratio < MAX_RATIO, f"{name}: 4x the input took {ratio:.1f}x the time " \
                              f"(linear 4, quadratic {QUADRATIC_RATIO})"


def test_the_scaling_test_catches_a_quadratic_path():
    """The scaling test can fail: a path that rescans the rest of a run of spaces from each
    of its characters, as the old multi-value split did, gives about the quadratic ratio."""
    def rescan(text):
        return sum(text.count(" ", i) for i in range(len(text)))

    assert scaling_ratio(rescan, lambda n: " " * n, n=3_000, rounds=3) >= MAX_RATIO


def test_the_reward_path_of_the_reported_case_is_fast():
    """The case the attacker reported through the GRPO reward: a few milliseconds now (2.35 s
    then, 16,000 spaces)."""
    completion = "\\boxed{31," + " " * 16_000 + "521}"
    took = cpu_seconds(lambda: reliability_reward([completion], ["31, 521"]))
    assert reliability_reward([completion], ["31, 521"]) == [1.0]
    assert took < 0.25


if __name__ == "__main__":  # the before/after table of docs/grading.md
    SIZES = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "4000,16000,64000").split(",")]
    for name, build, target, allow_plain in CONSTRUCTIONS:
        times = [min(cpu_seconds(lambda: grade(build(n), target, allow_plain=allow_plain))
                     for _ in range(3)) for n in SIZES]
        print(f"{name:50s}" + "".join(f"  {n:>9,}: {t * 1000:8.2f} ms" for n, t in zip(SIZES, times)))
