"""A concluding sentence that names a condition or an intermediate value besides its result:
the value the sentence concludes with is the answer. One test a shape, the sentences made up: a
condition before "is <exact form>, which is approximately <value>" (as reported from frontier
answers); and, as found in the frontier models' answers to the study's holdout, an
intermediate value then ", so" or a dash and the result, a sentence carried over to the next
line after "is" or "≈", "from <old> to <new>", and a time condition after a marked result
("at t = 100 h"). A later number that only rounds the answer, compares with it or bounds it
does not conclude."""
import pytest

from relrl.grading.extraction import extract_answer
from relrl.grading.scoring import grade

WORKING = ("Each unit fails at a constant rate, so its reliability is an exponential in the "
           "mission time.\n\n")


def final(sentence, **kwargs):
    """The value read from a final-answer section holding `sentence`."""
    answer = extract_answer(WORKING + "FINAL ANSWER: " + sentence, allow_plain=True, **kwargs)
    assert answer.source == "final"
    return answer.value


@pytest.mark.parametrize("sentence, value", [
    ("The chance that a pump runs at least 40 days is e^{-0.6}, which is approximately 0.5488.",
     0.5488),
    ("A valve that has already run 300 cycles survives the next one with probability "
     "e^{-0.2}, which is about 0.8187.", 0.8187),
])
def test_a_condition_before_an_exact_form_gives_way_to_the_value_it_concludes_with(sentence,
                                                                                    value):
    assert final(sentence) == value


@pytest.mark.parametrize("sentence, value", [
    ("Across 800 relays, μ = 3.91, so approximately 0.49% of them trip early.", 0.0049),
    ("Here, λ = 0.0003, so e^{-3000 × 0.0003} = e^{-0.9} ≈ 0.4066, close to the exact value.",
     0.4066),
    ("Mission = 6000 hours, so the scale factor is 6000/2000 = 3.", 3.0),
    ("λ = 0.004 per hour — so R(50) = 0.8187.", 0.8187),
    ("The shape is β = 2, meaning the MTTF is 886 hours.", 886.0),
])
def test_an_intermediate_value_then_so_and_the_result_gives_the_result(sentence, value):
    assert final(sentence) == value


@pytest.mark.parametrize("sentence, value", [
    # a later number that rounds the answer restates it: the precise one stays
    ("R(300) ≈ 0.7408, so about 74% of the fans still run.", 0.7408),
    ("The availability is 0.9999987, which is approximately 1.", 0.9999987),
    # compared with the answer, or a bound on it: not a result
    ("R = 0.9631, which is above the required 0.95.", 0.9631),
    ("R = 0.9631, which is 1.3% above the target.", 0.9631),
    ("R = 0.9631, which meets R ≥ 0.95.", 0.9631),
    # "and", ";" and a full stop end the sentence: the first value stays
    ("R = 0.9631, and the MTTF is 2700 hours.", 0.9631),
    ("R = 0.9631; MTTF = 2700 hours.", 0.9631),
])
def test_a_later_number_that_restates_compares_or_starts_a_new_sentence_does_not_conclude(
        sentence, value):
    assert final(sentence) == value


@pytest.mark.parametrize("section, value", [
    ("The chance that a pump runs at least 40 days is\n\n$$e^{-0.6} \\approx 0.5488$$", 0.5488),
    ("Over T = 10^4 hours the expected number of renewals is approximately\n\n"
     "N ≈ 10^4 / 2500 ≈ 4.0", 4.0),
    ("Across 800 relays the share that trips early =\n\n**0.49%**", 0.0049),
])
def test_a_sentence_carried_over_to_the_next_line_concludes_there(section, value):
    assert final(section) == value


def test_a_line_ending_on_is_with_nothing_after_it_is_still_read():
    assert final("The chance that a pump runs at least 40 days is") == 40.0


@pytest.mark.parametrize("sentence, value", [
    ("Adding a standby raises the reliability from 0.81 to 0.9639.", 0.9639),
    ("Halving the parts count lifts R from ~72.4% to ~85.1%.", 0.851),
    ("The MTTF grows from 1200 hours to 1800 hours.", 1800.0),
])
def test_from_an_old_value_to_a_new_one_gives_the_new_one(sentence, value):
    assert final(sentence) == value


@pytest.mark.parametrize("sentence, value", [
    ("R ≈ 0.8825 at t = 250 h.", 0.8825),
    ("The reliability is 0.8825 for t = 250 hours.", 0.8825),
    ("The MTTF = 4000 h, so the target is met at t = 250 h.", 4000.0),  # nor does it conclude
    # nothing else marked: the time may be what was asked ("when does R reach 0.9?")
    ("The reliability drops to 0.9 at t = 1054 hours.", 1054.0),
])
def test_a_time_condition_after_a_marked_result_is_not_the_answer(sentence, value):
    assert final(sentence) == value


@pytest.mark.parametrize("last_line, value", [
    ("So R ≈ 0.8825 at t = 250 h.", 0.8825),
    ("The reliability drops to 0.9 at t = 1054 hours.", 1054.0),
])
def test_a_time_condition_after_a_marked_result_ending_the_last_line_is_passed_over(last_line,
                                                                                      value):
    answer = extract_answer(WORKING + last_line, allow_plain=True)
    assert (answer.value, answer.source) == (value, "last_number")


def test_the_concluding_value_is_what_is_graded():
    response = WORKING + ("FINAL ANSWER: Across 800 relays, μ = 3.91, so approximately 0.49% "
                          "of them trip early.")
    g = grade(response, "0.0049", allow_plain=True)
    assert g.correct and g.extracted == "0.49%"
    assert not grade(response, "3.91", allow_plain=True).correct
