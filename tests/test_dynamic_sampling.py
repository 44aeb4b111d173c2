"""Dynamic sampling: uninformative groups never reach the update, and the counters add up."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.grpo_step import simulated_waste  # the simulation the benchmark prints
from relrl.rl.dynamic_sampling import DynamicSampler, Group, QuestionSampler, waste_kind

C, W, S = [1.0] * 4, [0.0] * 4, [0.5] * 4  # all correct, all wrong, same partial credit
I1, I2 = [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.5, 0.0]  # informative


class Scripted:
    """A rollout that scores each drawn question with the next reward list of a script."""

    def __init__(self, script):
        self.script, self.calls = list(script), []

    def __call__(self, indices, first_attempt):
        self.calls.append((list(indices), first_attempt))
        return [Group(i, first_attempt + k, r, [x >= 0.4 for x in r])
                for k, (i, r) in enumerate(zip(indices, (self.script.pop(0) for _ in indices)))]


def sampler(script, **kwargs):
    return DynamicSampler(Scripted(script), QuestionSampler(10, seed=0), **kwargs)


def test_waste_kinds_by_reward_the_studys_rule():
    def kind(rewards, correct):
        return waste_kind(rewards, correct, informative_by="reward")

    assert kind(I1, [True, False, False, False]) is None
    assert kind(C, [True] * 4) == "all_correct"
    assert kind(W, [False] * 4) == "all_wrong"
    assert kind([0.01] * 4, [False] * 4) == "all_wrong"  # a wrong number, no credit
    assert kind(S, [True] * 4) == "same_partial"  # all right, none exact
    assert kind([0.4, 0.4 + 1e-9], [True, True]) == "same_partial"
    assert kind([0.01, 0.0], [False, False]) is None  # a number against none: format only


def test_waste_kinds_by_correctness_the_default():
    assert waste_kind(I1, [True, False, False, False]) is None
    assert waste_kind(C, [True] * 4) == waste_kind(S, [True] * 4) == "all_correct"
    assert waste_kind(W, [False] * 4) == waste_kind([0.01, 0.0], [False, False]) == "all_wrong"
    # right and wrong answers that a penalty left with one reward: no advantage to follow
    assert waste_kind([0.4, 0.4], [True, False]) == "same_partial"


def test_a_group_right_throughout_is_no_signal_by_correctness_but_is_by_reward():
    """Rewards 1.0 and 0.8: both answers right, one within 0.1% and one within 1%."""
    assert waste_kind([1.0, 0.8], [True, True]) == "all_correct"
    assert waste_kind([1.0, 0.8], [True, True], informative_by="reward") is None
    partial = [1.0, 0.8, 1.0, 0.8]
    assert [g.rewards for g in sampler([partial, I1]).collect(1)] == [I1]
    assert [g.rewards for g in sampler([partial, I1], informative_by="reward").collect(1)] == \
        [partial]
    with pytest.raises(ValueError, match="informative_by must be one of"):
        sampler([], informative_by="rewards")


def test_step_mode_counts_match_a_hand_count():
    ds = sampler([C, W, I1, S, W, I2])
    kept = ds.collect(2)
    assert [g.rewards for g in kept] == [I1, I2]
    assert [g.attempt for g in kept] == [2, 5]
    # the two steps draw side by side (one call), then step 2 alone; attempts are numbered
    assert [(len(indices), first) for indices, first in ds.rollout.calls] == \
        [(2, 0), (2, 2), (1, 4), (1, 5)]
    counts = ds.counters.to_dict()
    assert counts == {"total_attempts": 6, "useful_steps": 2, "all_correct": 2, "all_wrong": 2,
                      "same_partial": 0, "resample_events": 4, "exhausted_steps": 0,
                      "surplus_groups": 0, "wasted_steps": 4, "waste_rate": 4 / 6}


def test_per_step_cap_skips_the_step():
    ds = sampler([C, C, W, I1], max_attempts_per_step=2)
    kept = ds.collect(2)
    assert [g.rewards for g in kept] == [I1]
    c = ds.counters
    assert (c.total_attempts, c.exhausted_steps, c.resample_events, c.wasted_steps) == (4, 1, 2, 3)


def test_total_cap_stops_drawing():
    ds = sampler([W] * 10, max_total_attempts=3)
    assert ds.collect(4) == []
    assert ds.counters.total_attempts == 3 and ds.counters.all_wrong == 3


def test_batch_mode_fills_the_training_batch_with_one_call_per_round():
    ds = sampler([C, I1, W, I2, I1, S], mode="batch", gen_batch=3)
    kept = ds.collect(2)
    assert [g.rewards for g in kept] == [I1, I2]
    assert [len(indices) for indices, _ in ds.rollout.calls] == [3, 3]
    assert [first for _, first in ds.rollout.calls] == [0, 3]
    c = ds.counters.to_dict()
    assert (c["total_attempts"], c["useful_steps"], c["surplus_groups"], c["wasted_steps"],
            c["resample_events"], c["all_correct"], c["all_wrong"], c["same_partial"]) == \
        (6, 2, 1, 3, 1, 2, 1, 0)


def test_batch_mode_draws_as_many_questions_as_the_informative_rate_needs():
    ds = sampler([I1] * 20 + [W] * 20, mode="batch", gen_batch=8)
    ds.collect(2)  # nothing seen yet: one in two assumed informative, so 4 questions
    ds.collect(2)  # 4 of 4 were informative: (4 + 1) / (4 + 2) -> 3 questions
    assert [len(indices) for indices, _ in ds.rollout.calls] == [4, 3]
    assert ds.counters.surplus_groups == 3


REWARDS = st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=4, max_size=4)


def has_signal(rewards, informative_by):
    """Scripted's groups: a reward of 0.4 or more is a right answer."""
    if informative_by == "reward":
        return max(rewards) > min(rewards)
    return 0 < sum(r >= 0.4 for r in rewards) < len(rewards)


@settings(max_examples=60, deadline=None)
@given(script=st.lists(REWARDS, min_size=1, max_size=40), mode=st.sampled_from(["step", "batch"]),
       want=st.integers(1, 4), cap=st.integers(1, 5),
       informative_by=st.sampled_from(["correct", "reward"]))
def test_groups_without_signal_never_reach_the_update(script, mode, want, cap, informative_by):
    ds = sampler(script, mode=mode, gen_batch=3, max_attempts_per_step=cap,
                 max_total_attempts=len(script), informative_by=informative_by)
    kept = []
    while ds.attempts_left > 0:
        kept += ds.collect(want)
    assert all(has_signal(g.rewards, informative_by) for g in kept)
    c = ds.counters
    informative = sum(has_signal(r, informative_by) for r in script)
    assert c.total_attempts == len(script)
    assert c.useful_steps == len(kept) == informative - c.surplus_groups
    assert c.wasted_steps == len(script) - informative


def test_uniform_draws_are_shuffled_passes():
    qs = QuestionSampler(7, seed=3)
    first, second = qs.draw(7), qs.draw(7)
    assert sorted(first) == sorted(second) == list(range(7)) and first != second


def test_pass_rate_sampler_prefers_likely_informative_questions():
    qs = QuestionSampler(3, seed=0, pass_rate_aware=True)
    for _ in range(4):
        qs.record(0, 4, 4)  # always right
        qs.record(1, 0, 4)  # always wrong
        qs.record(2, 2, 4)  # mixed
    assert qs.pass_rate(0) == pytest.approx(16.25 / 16.5) and qs.pass_rate(2) == 0.5
    draws = [qs.draw(1)[0] for _ in range(400)]
    assert draws.count(2) > 2 * max(draws.count(0), draws.count(1))
    assert draws.count(0) > 0  # the floor keeps every question in play


def test_pass_rate_sampler_wastes_fewer_generations():
    uniform, aware = simulated_waste(False), simulated_waste(True)
    assert uniform > 0.7 and aware < uniform - 0.15


def test_sampler_state_survives_a_json_round_trip():
    a = DynamicSampler(Scripted([I1, W, C, I2] * 5), QuestionSampler(5, 1, pass_rate_aware=True))
    a.collect(2)
    state = json.loads(json.dumps(a.state_dict()))
    b = DynamicSampler(Scripted([]), QuestionSampler(5, 99, pass_rate_aware=True))
    b.load_state_dict(state)
    assert b.counters == a.counters
    assert [b.questions.draw(2) for _ in range(5)] == [a.questions.draw(2) for _ in range(5)]


def test_a_collect_stopped_in_its_second_generation_call_leaves_no_trace():
    from relrl.engines import GenerationStopped

    script = [C, W, I1, S, W, I2]
    reference = sampler(list(script))
    expected = reference.collect(2)

    ds = sampler(list(script))
    before = json.loads(json.dumps(ds.state_dict()))
    scripted, calls = ds.rollout, []

    def stopped_in_the_second_call(indices, first_attempt):
        calls.append(first_attempt)
        if len(calls) == 2:
            raise GenerationStopped
        return scripted(indices, first_attempt)

    ds.rollout = stopped_in_the_second_call
    with pytest.raises(GenerationStopped):
        ds.collect(2)
    assert json.loads(json.dumps(ds.state_dict())) == before  # the first call's draws undone
    ds.rollout = scripted
    scripted.script = list(script)  # a resumed run would regenerate the same rollouts
    again = ds.collect(2)
    assert [(g.index, g.attempt, g.rewards) for g in again] == \
        [(g.index, g.attempt, g.rewards) for g in expected]
    assert ds.counters.to_dict() == reference.counters.to_dict()


# -- edges found by mutation testing ------------------------------------------------------------
def test_waste_kind_boundaries():
    # a spread of exactly min_spread is still no signal
    assert waste_kind([0.0, 0.5], [False, True], min_spread=0.5) == "same_partial"
    # all correct with full reward is judged on the rewards' level, within min_spread
    assert waste_kind([0.95, 0.88], [True, True], min_spread=0.1) == "all_correct"
    assert waste_kind([0.5, 0.5], [True, True], min_spread=0.5) == "all_correct"


def test_pass_rate_draws_are_distinct_questions():
    for seed in range(10):
        picks = QuestionSampler(5, seed=seed, pass_rate_aware=True).draw(5)
        assert sorted(picks) == [0, 1, 2, 3, 4]


def test_a_question_known_to_fail_keeps_the_floor_weight():
    q = QuestionSampler(2, seed=0, pass_rate_aware=True, floor=0.2)
    for _ in range(4):
        q.record(0, 0, 4)  # 16 wrong answers: informative chance ~0.06
    weights = q.weights()
    unseen = 1 - 2 * 0.5 ** 4
    assert weights[1] == pytest.approx(unseen)
    assert weights[0] == pytest.approx(0.2 * unseen)  # the floor, relative to an unseen one


def test_a_restored_sampler_continues_the_shuffled_pass():
    first = QuestionSampler(10, seed=3)
    first.draw(3)
    state = json.loads(json.dumps(first.state_dict()))
    second = QuestionSampler(10, seed=99)
    second.load_state_dict(state)
    assert second.draw(7) == first.draw(7)  # the rest of the same pass


def test_defaults_and_a_bad_mode():
    s = DynamicSampler(Scripted([]), QuestionSampler(3, seed=0))
    assert (s.gen_batch, s.max_attempts_per_step, s.max_total_attempts) == (8, 10, 1000)
    with pytest.raises(ValueError, match="mode must be 'step' or 'batch', got 'greedy'"):
        DynamicSampler(Scripted([]), QuestionSampler(3, seed=0), mode="greedy")


def test_full_reward_and_the_waste_callback():
    wasted = []
    s = sampler([S, I1], full_reward=0.5, on_waste=lambda g, kind: wasted.append((g.index, kind)))
    kept = s.collect(1)
    assert [g.rewards for g in kept] == [I1]
    assert len(wasted) == 1 and wasted[0][1] == "all_correct"  # 0.5 is full reward here
    assert s.counters.all_correct == 1 and s.counters.same_partial == 0


def test_step_cap_counts_every_draw_and_every_exhausted_step():
    s = sampler([W] * 20, max_attempts_per_step=3)
    assert s.collect(1) == []
    assert (s.counters.total_attempts, s.counters.resample_events,
            s.counters.exhausted_steps) == (3, 2, 1)
    assert s.collect(2) == []
    assert (s.counters.total_attempts, s.counters.exhausted_steps) == (9, 3)


def test_batch_mode_stops_at_the_total_cap_without_counting_rounds():
    s = sampler([W] * 8, mode="batch", gen_batch=4, max_total_attempts=4)
    assert s.collect(2) == []
    assert (s.counters.total_attempts, s.counters.resample_events,
            s.counters.exhausted_steps) == (4, 0, 0)


def test_batch_mode_rounds_draw_for_what_is_still_missing_and_count_exhaustion():
    script = Scripted([I1, W, W, W] + [W] * 3)
    s = DynamicSampler(script, QuestionSampler(10, seed=0), mode="batch", gen_batch=8,
                       max_attempts_per_step=2)
    kept = s.collect(2)
    # round 0: 2 wanted at a prior rate of 1/2 -> 4 questions; round 1: 1 wanted at 2/6 -> 3
    assert [len(indices) for indices, _ in script.calls] == [4, 3]
    assert len(kept) == 1 and s.counters.resample_events == 1
    assert s.counters.exhausted_steps == 1
    s.rollout = Scripted([W] * 16)
    s.collect(1)
    assert s.counters.exhausted_steps == 2 and s.counters.resample_events == 2


def test_batch_mode_draws_one_question_a_round_when_gen_batch_is_one():
    script = Scripted([W, W, I1])
    s = DynamicSampler(script, QuestionSampler(10, seed=0), mode="batch", gen_batch=1)
    assert len(s.collect(1)) == 1
    assert [len(indices) for indices, _ in script.calls] == [1, 1, 1]
    assert s.counters.resample_events == 2


@pytest.mark.parametrize("mode", ["step", "batch"])
def test_with_dynamic_sampling_off_every_group_trains_and_the_counters_say_which_had_no_signal(mode):
    ds = sampler([C, W, I1, S], mode=mode, gen_batch=4, drop_uninformative=False)
    kept = ds.collect(4)
    assert [g.rewards for g in kept] == [C, W, I1, S]  # one generation call, nothing redrawn
    assert len(ds.rollout.calls) == 1
    counts = ds.counters.to_dict()
    assert (counts["total_attempts"], counts["useful_steps"], counts["resample_events"]) == (4, 4, 0)
    assert (counts["all_correct"], counts["all_wrong"], counts["wasted_steps"]) == (2, 1, 3)  # S: right
