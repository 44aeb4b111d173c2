"""--tolerance-rule in the evaluation runner, the SFT scoring and the GRPO reward: each row's
target kind reaches the grader, and the rule is recorded where results and settings are."""
from dataclasses import dataclass

import pytest

from relrl.evaluation.cli import add_eval_args, settings_from_args
from relrl.evaluation.model_results import model_result
from relrl.evaluation.runner import score_question
from relrl.evaluation.settings import EvalSettings, settings_of
from relrl.finetune.sft_kfold import build_parser as sft_parser
from relrl.finetune.sft_kfold import eval_settings
from relrl.grading.rewards import grader_reward
from relrl.rl.grpo_config import GRPOConfig
from relrl.rl.grpo_main import build_parser
from relrl.runtime.cli import ArgumentParser, UsageError

ROW = {"id": "q1", "question": "Determine the reliability of the pump at 1000 h.",
       "answer": "0.9355"}
WIDE = "\\boxed{0.95}"  # 1.5% off, but 22% off the failure probability


@dataclass
class Done:
    text: str
    truncated: bool = False


def test_evaluation_grades_and_records_by_the_rule():
    study, complement = EvalSettings(), EvalSettings(tolerance_rule="complement")
    assert score_question(ROW, [Done(WIDE)], study)["correct"] is True
    assert score_question(ROW, [Done(WIDE)], complement)["correct"] is False
    valued = {**ROW, "target_kind": "value"}
    record = score_question(valued, [Done(WIDE)], complement)
    assert record["correct"] is True and record["target_kind"] == "value"
    result = model_result([score_question(ROW, [Done(WIDE)], complement)], label="m",
                          model_path="m", adapter=None, dataset="d.jsonl", fingerprint="f",
                          settings=complement)
    assert (result["tolerance_rule"], result["settings"]["tolerance_rule"]) == ("complement",) * 2
    assert settings_of(result) == complement
    # the study's rule stays out of the signature, so results from before still match
    assert "tolerance_rule" not in study.signature()


def test_evaluation_flag():
    parser = ArgumentParser()
    add_eval_args(parser)
    args = parser.parse_args(["--tolerance-rule", "complement"])
    assert settings_from_args(args).tolerance_rule == "complement"
    assert settings_from_args(parser.parse_args([])).tolerance_rule == "study"


def test_sft_scoring_flag(tmp_path):
    cfg, _ = sft_parser("tiny", str(tmp_path), "about").parse(
        ["--dataset", "x.jsonl", "--tolerance-rule", "complement"])
    assert eval_settings(cfg).tolerance_rule == "complement"


def test_grpo_reward_and_config():
    assert grader_reward(0.05)(WIDE, ROW) == (0.4, True)
    assert grader_reward(0.05, "complement")(WIDE, ROW) == (0.01, False)
    assert grader_reward(0.05, "complement")(WIDE, {**ROW, "target_kind": "value"}) == (0.4, True)
    cfg, _ = build_parser("exp10").parse(["--dataset", "x", "--tolerance-rule", "complement"])
    assert cfg.tolerance_rule == "complement" and cfg.settings()["tolerance_rule"] == "complement"
    assert "tolerance_rule" not in GRPOConfig().settings()  # earlier runs still resume
    with pytest.raises(UsageError, match="--tolerance-rule: study or complement"):
        GRPOConfig(tolerance_rule="relative").check()
