"""The train_log's timings: every group of one optimiser step carries the step's timings, so
wall time per useful step must count each step once."""
import pytest

from relrl.rl.grpo_metrics import trainer_seconds


def test_trainer_seconds_counts_each_optimiser_step_once():
    log = [{"step": 1, "t_sample": 30.0, "t_update": 5.0, "total_attempts": 9},
           {"step": 2, "t_sample": 30.0, "t_update": 5.0, "total_attempts": 9},
           {"step": 3, "t_sample": 30.0, "t_update": 5.0, "total_attempts": 20},  # equal timings,
           {"step": 4, "t_sample": 12.5, "t_update": 2.5, "total_attempts": 26}]  # another step
    assert trainer_seconds(log) == pytest.approx(35.0 + 35.0 + 15.0)
    assert trainer_seconds([]) == 0
