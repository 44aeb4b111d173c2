"""--informative-by: the trainer keeps a group for its correctness signal (the default), or for
any spread of rewards (the study's rule); on tiny-random with a scripted reward."""
import json

import pytest
from test_grpo_trainer import ROWS, config, letters, tiny_policy

from relrl.rl.grpo_config import GRPOConfig
from relrl.rl.grpo_main import build_parser
from relrl.rl.grpo_trainer import GRPOTrainer
from relrl.runtime.cli import UsageError

RIGHT_THROUGHOUT = {"q1", "q3"}


def reward(text, row):
    """q1 and q3: every answer right, at two levels of partial credit (1.0 and 0.8), as the
    grader pays answers within 0.1% and within 1%; the others: right on an even length."""
    if row["id"] in RIGHT_THROUGHOUT:
        return (1.0 if len(text) % 2 else 0.8), True
    right = len(text) % 2 == 0
    return float(right) + 0.1 * letters(text, row)[0], right


def run(tmp_path, informative_by):
    model, tokenizer = tiny_policy()
    cfg = config(tmp_path, informative_by=informative_by, max_useful_steps=8,
                 max_total_attempts=80)
    stats = GRPOTrainer(cfg, model, tokenizer, ROWS, reward_fn=reward).run()
    log = [json.loads(x) for x in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    return stats, log


def test_groups_right_throughout_never_train_when_judged_by_correctness(tmp_path):
    stats, log = run(tmp_path, "correct")
    assert stats["useful_steps"] == 8
    assert not {x["question_id"] for x in log} & RIGHT_THROUGHOUT
    assert all(0 < x["n_correct"] < 4 for x in log)
    assert stats["waste_by_kind"]["all_correct"] > 0  # q1 and q3 drawn, and dropped


def test_the_studys_rule_trains_on_partial_credit_alone(tmp_path):
    stats, log = run(tmp_path, "reward")
    trained = [x for x in log if x["question_id"] in RIGHT_THROUGHOUT]
    assert trained and all(x["n_correct"] == 4 and x["reward_std"] > 0 for x in trained)


def test_the_default_judges_by_correctness_except_for_the_toy_reward(tmp_path):
    assert GRPOConfig().informative_by == "correct"
    assert GRPOConfig(reward="digit-share").informative_by == "reward"
    base = ["--model", "tiny-random", "--dataset", "x.jsonl", "--output-dir", str(tmp_path)]
    parse = build_parser("exp10").parse
    assert parse(base)[0].informative_by == "correct"
    assert parse([*base, "--informative-by", "reward"])[0].informative_by == "reward"
    with pytest.raises(UsageError, match="--informative-by: correct or reward"):
        GRPOConfig(informative_by="rewards").check()


def test_a_run_from_before_the_option_keeps_its_fingerprint():
    """Runs before --informative-by judged groups by reward: that value is left out of the
    settings, so they resume; the new default is part of a run's identity."""
    assert "informative_by" not in GRPOConfig(informative_by="reward").settings()
    assert GRPOConfig().settings()["informative_by"] == "correct"
