"""QuestionSampler's pass-rate weighting: exact predictive ("v2") weights for small hand-computed
Beta posteriors, their clipping to [0, 1], the default memory window of each scheme, and the
predictive scheme's draw of the k likeliest-informative questions."""
from fractions import Fraction

import pytest

from relrl.rl.dynamic_sampling import QuestionSampler


def predictive(n_questions=2, seed=0, **kwargs):
    return QuestionSampler(n_questions, seed, pass_rate_aware=True, scheme="predictive", **kwargs)


# With prior a = 1/4 and G = 4, a question with r right and w wrong answers has
# 1 - prod_j (a+r+j)/(2a+r+w+j) - prod_j (a+w+j)/(2a+r+w+j), j = 0..3, e.g. unseen:
# 1 - 2 * (1/4 * 5/4 * 9/4 * 13/4) / (1/2 * 3/2 * 5/2 * 7/2) = 17/56.
@pytest.mark.parametrize("groups, want", [
    ([], Fraction(17, 56)),
    ([(1, 4)], Fraction(469, 792)),  # the docstring's 0.59
    ([(2, 4)], Fraction(321, 440)),  # the docstring's 0.73
    ([(0, 4)], Fraction(1649, 10296)),
    ([(4, 4)], Fraction(1649, 10296)),  # all right is as uninformative as all wrong
    ([(1, 4), (2, 4)], Fraction(2353, 3128)),  # both remembered groups count: 3 right of 8
])
def test_predictive_weight_is_the_beta_posterior_chance_of_an_informative_group(groups, want):
    q = predictive()
    for c, n in groups:
        q.record(1, c, n)
    weights = q.predictive_weights()
    assert weights[0] == pytest.approx(17 / 56, abs=1e-12)  # the other question stays unseen
    assert weights[1] == pytest.approx(float(want), abs=1e-12)


@pytest.mark.parametrize("group_size, prior, groups, want", [
    (2, 0.25, [], Fraction(1, 6)),  # 1 - 2 * (1/4 * 5/4) / (1/2 * 3/2)
    (2, 0.25, [(1, 4)], Fraction(65, 198)),  # 1 - (5/4*9/4 + 13/4*17/4) / (9/2 * 11/2)
    (4, 1.0, [], Fraction(3, 5)),  # uniform prior: E[p^4] = 1/5
    (3, 1.0, [(1, 2)], Fraction(3, 5)),  # Beta(2, 2): 1 - 2 * (2*3*4)/(4*5*6)
])
def test_predictive_weight_follows_group_size_and_prior(group_size, prior, groups, want):
    q = predictive(1, group_size=group_size, prior=prior)
    for c, n in groups:
        q.record(0, c, n)
    assert q.predictive_weights()[0] == pytest.approx(float(want), abs=1e-12)


def test_a_group_of_one_is_never_informative_and_its_weight_is_exactly_zero():
    q = predictive(2, group_size=1)
    q.record(0, 1, 1)  # 1 - 5/6 - 1/6 rounds to a hair below zero in floating point
    assert q.predictive_weights().tolist() == [0.0, 0.0]


def test_a_corrupt_record_cannot_push_a_predictive_weight_above_one():
    q = predictive(2, group_size=2)
    q.record(0, 0, -1)  # a negative group size: the raw formula gives 1.5
    assert q.predictive_weights()[0] == 1.0
    assert q.predictive_weights()[1] == pytest.approx(1 / 6)


def test_the_predictive_scheme_remembers_two_groups_by_default():
    q = predictive()
    assert q.window == 2
    for c in (4, 1, 2):  # the all-right group is forgotten
        q.record(1, c, 4)
    assert q.history["1"] == [[1, 4], [2, 4]]
    assert q.predictive_weights()[1] == pytest.approx(2353 / 3128, abs=1e-12)


def test_the_plug_in_scheme_remembers_four_groups_by_default():
    q = QuestionSampler(1, seed=0, pass_rate_aware=True)
    assert q.window == 4
    for c in (0, 4, 4, 4, 4):  # the all-wrong group is forgotten
        q.record(0, c, 4)
    assert q.pass_rate(0) == 16.25 / 16.5


def test_an_explicit_window_overrides_the_scheme_default():
    assert predictive(window=3).window == 3
    assert QuestionSampler(1, seed=0, window=1).window == 1


def test_an_unknown_scheme_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"scheme must be one of \('plug-in', 'predictive'\), "
                                         r"got 'greedy'"):
        QuestionSampler(3, seed=0, scheme="greedy")


def informative_ladder(seed):
    """Four questions whose predictive weights fall from question 2 to 3 to 0 to 1."""
    q = QuestionSampler(4, seed=seed, pass_rate_aware=True, scheme="predictive")
    q.record(0, 0, 4)  # 0.160
    q.record(1, 0, 4)
    q.record(1, 0, 4)  # 0.097
    q.record(2, 2, 4)  # 0.730
    q.record(3, 1, 4)  # 0.592
    return q


@pytest.mark.parametrize("seed", range(5))
def test_predictive_draws_take_the_likeliest_informative_questions_first(seed):
    assert informative_ladder(seed).draw(2) == [2, 3]
    assert informative_ladder(seed).draw(4) == [2, 3, 0, 1]


def test_predictive_draws_of_more_than_there_are_return_each_question_once():
    assert informative_ladder(0).draw(10) == [2, 3, 0, 1]


def test_predictive_draws_break_ties_at_random():
    draws = {tuple(predictive(5, seed).draw(5)) for seed in range(10)}
    assert all(sorted(d) == [0, 1, 2, 3, 4] for d in draws)
    assert len(draws) > 1  # unseen questions tie, and the order is not fixed
