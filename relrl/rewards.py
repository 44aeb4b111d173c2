"""Reward functions with the signatures trainers call, all backed by relrl.grading.grade.

- TRL (GRPOTrainer): `reliability_reward(completions, answer, **kwargs) -> list[float]`, where
  completions are strings or conversations (lists of {"role", "content"} messages) and `answer`
  is the dataset column of the same length. Other dataset columns arrive in kwargs and are
  ignored: a column must never change how answers are graded.
- verl: `compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float`.

Rewards never read answers outside `\\boxed{}` (allow_plain=False): the policy is rewarded for
the answer format it is asked to use.
"""
from __future__ import annotations

from typing import Callable, Sequence

from relrl.grading import DEFAULT_TIERS, RewardTiers, grade


def completion_text(completion) -> str:
    """The text of one completion: a string, or the assistant turn(s) of a conversation, whose
    content may itself be a list of parts ({"type": "text", "text": ...})."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, (list, tuple)):
        return ""
    messages = [m for m in completion if isinstance(m, dict)]
    assistant = [m for m in messages if m.get("role", "assistant") == "assistant"] or messages
    return "".join(_content_text(m.get("content")) for m in assistant)


def _content_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(part.get("text", "") for part in content
                       if isinstance(part, dict) and isinstance(part.get("text", ""), str))
    return ""


def make_reliability_reward(*, tolerance: float = 0.05,
                            tiers: RewardTiers = DEFAULT_TIERS) -> Callable[..., list[float]]:
    """A TRL reward function with other tiers or tolerance (the tolerance only sets the
    `correct` flag; the reward comes from the tiers)."""

    def reliability_reward(completions: Sequence, answer, **kwargs) -> list[float]:
        answers = [answer] * len(completions) if isinstance(answer, (str, int, float)) \
            else list(answer)
        if len(answers) != len(completions):
            raise ValueError(f"reliability_reward: {len(completions)} completions but "
                             f"{len(answers)} answers")
        return [grade(completion_text(c), a, tolerance=tolerance, tiers=tiers).reward
                for c, a in zip(completions, answers)]

    return reliability_reward


reliability_reward = make_reliability_reward()


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """verl reward: the study's tiered reward for one response (data_source is not used: every
    source in this project is a numeric reliability question; verl's reward_kwargs, if any,
    arrive in kwargs and are ignored)."""
    return grade(solution_str if isinstance(solution_str, str) else "", ground_truth).reward
