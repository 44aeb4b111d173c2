"""Reward functions with the signatures trainers call, all backed by relrl.grading.scoring.grade.

- TRL (GRPOTrainer): `reliability_reward(completions, answer, **kwargs) -> list[float]`, where
  completions are strings or conversations (lists of {"role", "content"} messages) and `answer`
  is the dataset column of the same length. Of the other dataset columns (kwargs) only
  `target_kind` and, where that is absent, `question` are read, and only to find the target
  kind the tolerance rule needs (relrl.grading.target_kind.target_kind_of); the rest are ignored.
- verl: `compute_score(data_source, solution_str, ground_truth, extra_info=None,
  tolerance_rule="study") -> float`: the target kind comes from `extra_info["target_kind"]`
  (relrl.data.verl_export writes it), the rule from verl's `custom_reward_function.reward_kwargs`.

Rewards never read answers outside `\\boxed{}` (allow_plain=False): the policy is rewarded for
the answer format it is asked to use.
"""
from __future__ import annotations

from typing import Callable, Sequence

from relrl.grading.scoring import DEFAULT_TIERS, RewardTiers, grade
from relrl.grading.target_kind import target_kind_of

# (completion text, dataset row) -> (reward, correct): what the GRPO trainer calls
RewardFn = Callable[[str, dict], tuple[float, bool]]


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


def _column(values, n: int, name: str) -> list:
    """A TRL dataset column as a list of n (one value stands for every completion)."""
    if values is None or isinstance(values, (str, int, float)):
        return [values] * n
    values = list(values)
    if len(values) != n:
        raise ValueError(f"reliability_reward: {n} completions but {len(values)} {name}")
    return values


def make_reliability_reward(*, tolerance: float = 0.05, rule: str = "study",
                            tiers: RewardTiers = DEFAULT_TIERS) -> Callable[..., list[float]]:
    """A TRL reward function with other tiers, tolerance or tolerance rule (the tolerance
    only sets the `correct` flag; the reward comes from the tiers, judged by the rule)."""

    def reliability_reward(completions: Sequence, answer, **kwargs) -> list[float]:
        n = len(completions)
        rows = zip(_column(answer, n, "answers"), _column(kwargs.get("question"), n, "questions"),
                   _column(kwargs.get("target_kind"), n, "target kinds"))
        return [grade(completion_text(c), a, tolerance=tolerance, rule=rule, tiers=tiers,
                      target_kind=target_kind_of({"answer": a, "question": q, "target_kind": k})
                      ).reward
                for c, (a, q, k) in zip(completions, rows)]

    return reliability_reward


reliability_reward = make_reliability_reward()


def compute_score(data_source, solution_str, ground_truth, extra_info=None,
                  tolerance_rule: str = "study", **kwargs) -> float:
    """verl reward: the study's tiered reward for one response by the tolerance rule (a
    reward_kwargs entry), the target kind from extra_info (data_source is not used: every source
    in this project is a numeric reliability question; other reward_kwargs are ignored)."""
    kind = extra_info.get("target_kind") if isinstance(extra_info, dict) else None
    return grade(solution_str if isinstance(solution_str, str) else "", ground_truth,
                 rule=tolerance_rule, target_kind=kind).reward


def grader_reward(tolerance: float, rule: str = "study") -> RewardFn:
    """The study's reward: the shared grader against the row's answer, by the tolerance rule
    (the row's target kind decides what "complement" does)."""
    def reward(text: str, row: dict) -> tuple[float, bool]:
        g = grade(text, row["answer"], tolerance=tolerance, rule=rule,
                  target_kind=target_kind_of(row))
        return g.reward, bool(g.correct)

    return reward


def digit_share_reward(text: str, row: dict) -> tuple[float, bool]:
    """A toy reward for smoke tests on tiny-random, which the grader never rewards: the share
    of digits among the completion's visible characters."""
    chars = [c for c in text if not c.isspace()]
    share = sum(c.isdigit() for c in chars) / len(chars) if chars else 0.0
    return share, share == 1.0
