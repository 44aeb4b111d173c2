"""The predictive (v2) question sampler and the simulation that compares the samplers."""
import json

import numpy as np
import pytest
from scipy.stats import betabinom

from benchmarks import sampler_simulation as sim
from relrl.rl.dynamic_sampling import QuestionSampler


def test_predictive_weights_are_the_beta_binomial_chance_of_a_mixed_group():
    qs = QuestionSampler(3, seed=0, pass_rate_aware=True, scheme="predictive")
    qs.record(0, 1, 4)
    qs.record(1, 2, 4)
    w = qs.predictive_weights()
    for i, (a, b) in enumerate([(1.25, 3.25), (2.25, 2.25), (0.25, 0.25)]):  # prior 0.25 each
        expected = 1 - betabinom.pmf(0, 4, a, b) - betabinom.pmf(4, 4, a, b)
        assert w[i] == pytest.approx(expected)
    # by hand: 1 - (1.25*2.25*3.25*4.25 + 3.25*4.25*5.25*6.25) / (4.5*5.5*6.5*7.5) = 0.5922
    assert w[0] == pytest.approx(0.5922, abs=1e-4) and w[1] == pytest.approx(0.7295, abs=1e-4)


def test_predictive_sampler_remembers_two_groups_and_draws_the_likeliest():
    qs = QuestionSampler(4, seed=1, pass_rate_aware=True, scheme="predictive")
    assert qs.window == 2 and QuestionSampler(4, 1, pass_rate_aware=True).window == 4
    for c in (4, 0, 4):  # the 2/4 of question 0 is forgotten after two more groups
        qs.record(0, c, 4)
    qs.record(1, 2, 4)
    qs.record(2, 0, 4)
    assert qs.history["0"] == [[0, 4], [4, 4]]
    # 0/4 then 4/4 (Beta(4.25, 4.25): 0.79) beats 2/4 (0.73), unseen (0.30) and 0/4 (0.16)
    assert qs.draw(1) == [0]
    assert qs.draw(4) == [0, 1, 3, 2]


def test_predictive_ties_are_broken_at_random_and_state_round_trips():
    a = QuestionSampler(50, seed=4, pass_rate_aware=True, scheme="predictive")
    draws = {tuple(a.draw(5)) for _ in range(5)}
    assert len(draws) > 1  # all unseen: equal weights, a different five each time
    b = QuestionSampler(50, seed=99, pass_rate_aware=True, scheme="predictive")
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert [b.draw(3) for _ in range(4)] == [a.draw(3) for _ in range(4)]


def test_uniform_default_is_unchanged():
    qs = QuestionSampler(9, seed=7)
    rng = np.random.Generator(np.random.PCG64(7))
    expected = [int(i) for i in rng.permutation(9)] + [int(i) for i in rng.permutation(9)]
    assert qs.draw(12) + qs.draw(6) == expected
    assert set(qs.state_dict()) == {"rng", "history", "queue"}


def test_unknown_scheme_is_refused():
    with pytest.raises(ValueError, match="scheme"):
        QuestionSampler(3, 0, pass_rate_aware=True, scheme="greedy")


def test_simulated_worlds_are_screened_mixed_and_shared_by_the_samplers():
    s = sim.Setup(questions=60)
    logits, counts = sim.world(3, s)
    assert len(logits) == len(counts) == 60 and set(counts) <= {1, 2, 3}
    again, _ = sim.world(3, s)
    assert np.array_equal(logits, again)


def test_simulation_counts_add_up_and_the_oracle_bounds_the_samplers():
    s = sim.Setup(questions=80, useful_steps=60)
    runs = {name: sim.simulate(0, name, s) for name in sim.SAMPLERS}
    for c in runs.values():
        assert c["useful_steps"] == 60
        assert c["wasted_steps"] == c["all_correct"] + c["all_wrong"] + c["same_partial"]
        assert c["total_attempts"] >= c["useful_steps"] + c["wasted_steps"]
    assert runs["oracle"]["waste_rate"] < min(r["waste_rate"] for k, r in runs.items()
                                              if k != "oracle")


def test_without_drift_the_predictive_sampler_wastes_much_less_than_uniform():
    out = sim.study(3, sim.Setup(self_gain=0.0, global_gain=0.0, noise=0.0))
    assert out["samplers"]["pass-rate"]["ratio"] < 0.8
    assert out["plain_loop_zero_gradient_share"] == out["samplers"]["uniform"]["waste_rate"]
