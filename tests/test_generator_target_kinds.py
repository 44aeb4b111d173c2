"""Every family writes `target_kind`, probability for the families whose answers are
probabilities, and a probability target carries 4 significant figures on its smaller side, so
the complement tolerance rule can judge a reliability near 1 on its failure probability."""
import math
from decimal import Decimal

import numpy as np
import pytest

from relrl.grading.numbers import half_last_digit, parse_target_number
from relrl.grading.scoring import grade
from relrl.grading.target_kind import infer_target_kind
from relrl.problems.base import sig, sig_probability
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import FAMILIES

VALUE = {  # everything else is a probability
    "hazard_from_counts", "exp_mttf_from_reliability", "weibull_hazard", "weibull_bx_life",
    "weibull_mttf", "weibull_mrl", "parallel_mttf", "exp_mle_type1", "exp_mle_type2",
    "chi2_mtbf_lower", "zero_failure_sample_size", "gamma_poisson_mean", "gamma_poisson_upper",
    "arrhenius_af", "eyring_af", "arrhenius_two_temp", "ipl_extrapolate", "event_tree",
    "risk_achievement_worth", "duane_mtbf", "crow_amsaa_mle", "crow_amsaa_expected",
    "spares_required", "expected_backorders"}
PROBABILITY = {
    "empirical_reliability", "binomial_lot", "inspection_bayes", "exp_reliability",
    "weibull_reliability", "weibull3_reliability", "weibull_conditional", "normal_reliability",
    "lognormal_reliability", "erlang_reliability", "series_system", "parallel_active",
    "series_parallel", "k_out_of_n", "two_out_of_three", "bridge", "cold_standby",
    "warm_standby", "inherent_availability", "point_availability", "series_availability",
    "repairable_pair", "pm_reliability", "binomial_lower_bound", "beta_binomial_mean",
    "beta_binomial_predictive", "accel_weibull_use", "ss_normal_normal", "ss_exponential",
    "ss_normal_exp", "ss_lognormal", "ft_gates_exact", "ft_rare_event", "ft_cutset_exact",
    "birnbaum", "fussell_vesely", "beta_factor_pair", "beta_factor_2oo3",
    "spares_sufficiency"}


def test_every_family_is_classified_here():
    assert set(FAMILIES) == VALUE | PROBABILITY and not VALUE & PROBABILITY


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_kind(name):
    assert FAMILIES[name].target_kind == ("value" if name in VALUE else "probability")


def significant_digits(text: str) -> int:
    return len(Decimal(text).as_tuple().digits)


@pytest.mark.parametrize("name", sorted(PROBABILITY))
def test_probability_answers_keep_four_figures_on_the_smaller_side(name):
    family = FAMILIES[name]
    for draw in range(12):
        problem = family.generate(np.random.default_rng([draw, 26]))
        t, value = Decimal(problem.answer), problem.value
        assert 0 < t < 1, problem.answer
        smaller = min(t, 1 - t)  # "0.9991234" -> 0.0008766
        assert significant_digits(str(smaller)) >= 4, (problem.answer, str(smaller))
        exact = min(value, 1 - value)  # the written side is the exact one to half a 4th figure
        assert abs(float(smaller) - exact) <= 0.5 * 10 ** (math.floor(math.log10(exact)) - 3) \
            * (1 + 1e-9), (problem.answer, value)
        # the stated digits never loosen the complement rule's 5% (floor below 0.05%)
        assert half_last_digit(parse_target_number(problem.answer)[0]) <= 5e-4 * exact * 1.0001
        worked = grade(problem.reasoning, problem.answer, rule="complement",
                       target_kind="probability")
        assert worked.correct and worked.rel_error == 0


@pytest.mark.parametrize("name", sorted(VALUE))
def test_value_answers_keep_four_figures(name):
    problem = FAMILIES[name].generate(np.random.default_rng([0, 26]))
    assert problem.answer == sig(problem.value)


def test_rows_carry_their_familys_kind_and_the_inference_reads_them_alike():
    rows = generate_rows(list(FAMILIES.values()), 200, seed=3)
    assert {row["family"] for row in rows} == set(FAMILIES)
    for row in rows:
        assert row["target_kind"] == FAMILIES[row["family"]].target_kind
        # the rule for rows without the field (relrl.grading.target_kind.infer_target_kind) agrees
        assert infer_target_kind(row["question"], row["answer"]) == row["target_kind"], row


@pytest.mark.parametrize("p, text", [
    (0.9991234, "0.9991234"), (0.95, "0.95000"), (0.2, "0.2000"), (0.72566, "0.7257"),
    (0.0099996, "0.01000"), (0.99000004, "0.99000"), (1.06e-5, "1.060e-5"), (0.5, "0.5000"),
    (0.0012345678, "0.001235"),
])
def test_sig_probability(p, text):
    assert sig_probability(p) == text
