"""The tolerance rule reaches the TRL and verl rewards: the rule as a setting, the target kind
from the dataset's `target_kind` column (TRL), from the question when that column is absent, and
from extra_info (verl)."""
import pytest

from relrl.grading.rewards import compute_score, make_reliability_reward, reliability_reward

WIDE = "\\boxed{0.95}"  # 1.5% off 0.9355 relatively (reward 0.4), 22% off its complement (0.01)


def test_trl_reward_reads_the_target_kind_column():
    reward = make_reliability_reward(rule="complement")
    assert reward([WIDE, WIDE], answer=["0.9355"] * 2,
                  target_kind=["probability", "value"]) == [0.01, 0.4]
    assert reliability_reward([WIDE], answer=["0.9355"], target_kind=["probability"]) == [0.4]


def test_trl_reward_infers_the_kind_from_the_question_column():
    reward = make_reliability_reward(rule="complement")
    questions = ["Determine the reliability of the pump at 1000 h.",
                 "What is the optimal replacement interval?"]
    assert reward([WIDE, WIDE], answer=["0.9355"] * 2, question=questions) == [0.01, 0.4]
    # a None in the column (a row without the field) falls back to the question too
    assert reward([WIDE], answer=["0.9355"], question=questions[:1],
                  target_kind=[None]) == [0.01]


def test_trl_reward_checks_its_columns():
    with pytest.raises(ValueError, match="2 completions but 1 target kinds"):
        reliability_reward([WIDE, WIDE], answer=["0.9355"] * 2, target_kind=["value"])
    with pytest.raises(ValueError, match="target_kind must be one of probability, value"):
        reliability_reward([WIDE], answer=["0.9355"], target_kind=["prob"])
    with pytest.raises(ValueError, match="tolerance rule must be one of"):
        make_reliability_reward(rule="relative")([WIDE], answer=["0.9355"])


def test_verl_compute_score_reads_extra_info_and_the_rule():
    info = {"index": 0, "target_kind": "probability"}
    assert compute_score("relrl/reliability", WIDE, "0.9355", info) == 0.4
    assert compute_score("relrl/reliability", WIDE, "0.9355", info,
                         tolerance_rule="complement") == 0.01
    assert compute_score("relrl/reliability", WIDE, "0.9355", {"target_kind": "value"},
                         tolerance_rule="complement") == 0.4
    assert compute_score("relrl/reliability", WIDE, "0.9355", None,
                         tolerance_rule="complement") == 0.4
