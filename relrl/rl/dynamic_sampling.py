"""DAPO dynamic sampling: only groups that carry a correctness signal reach the update.

A group is one question with G scored completions. It is informative (`informative_by`):
  correct   when some of its completions are correct and some are not (and their rewards differ,
            or every advantage would be zero): the default. A group whose rewards differ only by
            format or partial credit (all correct, one within 0.1% and one within 1%) teaches
            nothing about getting the answer right, so it is dropped.
  reward    when its rewards differ at all: the study's rule ("If all G generations produce the
            same reward ... discard and re-sample"), under which such groups train.
An uninformative group is dropped ("wasted") and another question is drawn. Counters, as the
study kept them:
    total_attempts   groups generated
    useful_steps     informative groups handed to the update (one per useful step)
    all_correct / all_wrong / same_partial   wasted groups by kind (wasted_steps is their sum)
    resample_events  draws made to replace a dropped group (batch mode: extra generation rounds)
    exhausted_steps  steps that gave up after max_attempts_per_step draws without signal
    surplus_groups   informative groups generated in batch mode beyond a full training batch
waste_rate = wasted groups / groups generated.

With `drop_uninformative=False` (--dynamic-sampling off: plain GRPO, the study's 42% -> 23%
comparison) every group trains, uninformative ones with all-zero advantages: each group
generated is a useful step, and the waste counters count the groups that carried no signal.

Two modes. "step" (the study's): each step draws one question, and draws again while its group
is uninformative; the steps of one training batch draw side by side, sharing a generation call
(the policy does not change between them). "batch" (the DAPO paper's): many questions per
generation call (as many as the informative rate so far says will fill the training batch, at
most gen_batch), informative groups kept until the batch is full; the per-step cap then counts
generation rounds.

QuestionSampler draws which questions to try: shuffled passes over the data, or pass-rate
aware: it remembers each question's recent pass rate p and draws in proportion to the chance
that a group of G is informative, 1 - p^G - (1-p)^G (a floor keeps every question in play,
since pass rates move as the policy learns). Its state is JSON, saved in checkpoints.
Scheme "predictive" (v2) draws instead the k questions whose next group is likeliest to be
informative under a Beta posterior of their last two groups. benchmarks/sampler_simulation.py
compares them at the study's scale: neither reaches 0.7 of uniform's waste once pass rates
drift as the policy learns (docs/training.md, "Dynamic sampling").
"""
from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import numpy as np

WASTE_KINDS = ("all_correct", "all_wrong", "same_partial")
SCHEMES = ("plug-in", "predictive")
INFORMATIVE_BY = ("correct", "reward")


def waste_kind(rewards: Sequence[float], correct: Sequence[bool], min_spread: float = 1e-6,
               full_reward: float = 1.0, informative_by: str = "correct") -> str | None:
    """None for an informative group, else why it carries no signal. By correctness: every
    answer wrong, every answer right, or right and wrong answers with one reward ("same_partial",
    e.g. a length penalty evened them out). By reward (the study): every answer wrong, every
    answer right with full reward, or the same partial credit for all (e.g. all within 5% but
    none within 0.1%)."""
    spread = max(rewards) - min(rewards) > min_spread
    if informative_by == "correct":
        n_correct = sum(map(bool, correct))
        if n_correct == 0:
            return "all_wrong"
        if n_correct == len(correct):
            return "all_correct"
        return None if spread else "same_partial"
    if spread:
        return None
    if not any(correct):
        return "all_wrong"
    if all(correct) and rewards[0] >= full_reward - min_spread:
        return "all_correct"
    return "same_partial"


@dataclass
class Group:
    """One question's G completions with their scores; `payload` is the trainer's (token ids)."""
    index: int
    attempt: int  # global attempt number: the generation seed derives from it
    rewards: list[float]
    correct: list[bool]
    payload: object = None


@dataclass
class WasteCounters:
    total_attempts: int = 0
    useful_steps: int = 0
    all_correct: int = 0
    all_wrong: int = 0
    same_partial: int = 0
    resample_events: int = 0
    exhausted_steps: int = 0
    surplus_groups: int = 0

    @property
    def wasted_steps(self) -> int:
        return self.all_correct + self.all_wrong + self.same_partial

    @property
    def waste_rate(self) -> float:
        return self.wasted_steps / self.total_attempts if self.total_attempts else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "wasted_steps": self.wasted_steps, "waste_rate": self.waste_rate}

    @classmethod
    def from_dict(cls, data: dict) -> "WasteCounters":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


@dataclass
class QuestionSampler:
    n_questions: int
    seed: int
    pass_rate_aware: bool = False
    group_size: int = 4
    window: int | None = None  # groups remembered per question (plug-in 4, predictive 2)
    prior: float = 0.25  # pseudo-counts of a right and of a wrong answer
    floor: float = 0.05  # smallest draw weight, relative to an unseen question's
    scheme: str = "plug-in"  # pass-rate aware draws: "plug-in" (v1) or "predictive" (v2)
    history: dict = field(default_factory=dict)  # str(index) -> [[n_correct, n], ...]
    queue: list = field(default_factory=list)  # rest of the current shuffled pass

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {self.scheme!r}")
        if self.window is None:  # predictive forgets sooner: pass rates drift as it trains
            self.window = 2 if self.scheme == "predictive" else 4
        self.rng = np.random.Generator(np.random.PCG64(self.seed))

    def draw(self, k: int) -> list[int]:
        if self.pass_rate_aware and self.scheme == "predictive":
            # the k likeliest to be informative, ties (e.g. equal screening scores) at random
            order = np.lexsort((self.rng.random(self.n_questions), -self.predictive_weights()))
            return [int(i) for i in order[:min(k, self.n_questions)]]
        if self.pass_rate_aware:
            weights = self.weights()
            size = min(k, self.n_questions)
            return [int(i) for i in self.rng.choice(self.n_questions, size, replace=False,
                                                    p=weights / weights.sum())]
        picks = []
        while len(picks) < k:
            if not self.queue:
                self.queue = [int(i) for i in self.rng.permutation(self.n_questions)]
            picks.append(self.queue.pop(0))
        return picks

    def pass_rate(self, index: int) -> float:
        """Posterior mean of the recent pass rate (0.5 when unseen). The prior is weak because
        pass rates are mostly near 0 or 1: one all-wrong group is strong evidence."""
        seen = self.history.get(str(index), [])
        a = self.prior
        return (a + sum(c for c, _ in seen)) / (2 * a + sum(n for _, n in seen))

    def weights(self) -> np.ndarray:
        g = self.group_size
        p = np.array([self.pass_rate(i) for i in range(self.n_questions)])
        informative = 1.0 - p**g - (1.0 - p) ** g
        return np.maximum(informative, self.floor * (1.0 - 2 * 0.5**g))

    def predictive_weights(self) -> np.ndarray:
        """P(the next group of G is informative) under each question's Beta(prior + right,
        prior + wrong) posterior over its last `window` groups: 1 - E[p^G] - E[(1-p)^G].
        Unlike the plug-in weights it counts how little a few samples say (one right of four
        and two of four have mean pass rates 0.28 and 0.5, predictive 0.59 and 0.73)."""
        g, prior = self.group_size, self.prior
        right = np.full(self.n_questions, prior)
        wrong = np.full(self.n_questions, prior)
        for key, seen in self.history.items():
            right[int(key)] += sum(c for c, _ in seen)
            wrong[int(key)] += sum(n - c for c, n in seen)
        all_right = np.ones(self.n_questions)
        all_wrong = np.ones(self.n_questions)
        for j in range(g):
            all_right *= (right + j) / (right + wrong + j)
            all_wrong *= (wrong + j) / (right + wrong + j)
        return np.clip(1.0 - all_right - all_wrong, 0.0, 1.0)

    def record(self, index: int, n_correct: int, n: int) -> None:
        seen = self.history.setdefault(str(index), [])
        seen.append([n_correct, n])
        del seen[: -self.window]

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "history": self.history,
                "queue": list(self.queue)}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.history = {k: [list(x) for x in v] for k, v in state["history"].items()}
        self.queue = list(state["queue"])


Rollout = Callable[[list[int], int], list[Group]]  # (question indices, first attempt) -> groups


class DynamicSampler:
    def __init__(self, rollout: Rollout, questions: QuestionSampler, *, mode: str = "step",
                 gen_batch: int = 8, max_attempts_per_step: int = 10,
                 max_total_attempts: int = 1000, min_spread: float = 1e-6,
                 full_reward: float = 1.0, informative_by: str = "correct",
                 drop_uninformative: bool = True,
                 on_waste: Callable[[Group, str], None] | None = None):
        if mode not in ("step", "batch"):
            raise ValueError(f"mode must be 'step' or 'batch', got {mode!r}")
        if informative_by not in INFORMATIVE_BY:
            raise ValueError(f"informative_by must be one of {INFORMATIVE_BY}, "
                             f"got {informative_by!r}")
        self.rollout, self.questions, self.mode = rollout, questions, mode
        self.informative_by = informative_by
        self.gen_batch, self.max_attempts_per_step = gen_batch, max_attempts_per_step
        self.max_total_attempts, self.min_spread = max_total_attempts, min_spread
        self.full_reward, self.on_waste = full_reward, on_waste
        self.drop_uninformative = drop_uninformative
        self.counters = WasteCounters()

    @property
    def attempts_left(self) -> int:
        return self.max_total_attempts - self.counters.total_attempts

    def collect(self, n_groups: int) -> list[Group]:
        """Up to n_groups informative groups (fewer when a cap is hit). A collect the rollout
        ends with an exception (a stop signal during generation, say) leaves no trace: draws
        and counters are put back as they were, so a run resumed from the last checkpoint
        draws the same questions with the same seeds."""
        before = copy.deepcopy(self.state_dict())
        try:
            return self._steps(n_groups) if self.mode == "step" else self._one_batch(n_groups)
        except BaseException:
            self.load_state_dict(before)
            raise

    def _generate(self, k: int) -> list[Group]:
        k = min(k, self.attempts_left)
        indices = self.questions.draw(k)
        groups = self.rollout(indices, self.counters.total_attempts)
        self.counters.total_attempts += len(groups)
        return groups

    def _judge(self, group: Group) -> bool:
        """Record the group's pass rate; count it as waste, and keep it if informative (or if
        nothing is dropped)."""
        self.questions.record(group.index, sum(map(bool, group.correct)), len(group.correct))
        kind = waste_kind(group.rewards, group.correct, self.min_spread, self.full_reward,
                          self.informative_by)
        if kind is None:
            return True
        setattr(self.counters, kind, getattr(self.counters, kind) + 1)
        if self.on_waste:
            self.on_waste(group, kind)
        return not self.drop_uninformative

    def _steps(self, n_groups: int) -> list[Group]:
        """Each of n_groups steps redraws one question at a time until its group is
        informative or it has used max_attempts_per_step draws. The steps of one training
        batch draw side by side, so their questions share a generation call."""
        kept: list[Group] = []
        tries = [0] * n_groups  # draws so far of each step still looking
        while tries and self.attempts_left > 0:
            groups = self._generate(len(tries))
            self.counters.resample_events += sum(1 for t in tries[:len(groups)] if t > 0)
            still = []
            for used, group in zip(tries, groups):
                if self._judge(group):
                    kept.append(group)
                    self.counters.useful_steps += 1
                elif used + 1 >= self.max_attempts_per_step:
                    self.counters.exhausted_steps += 1
                else:
                    still.append(used + 1)
            tries = still + tries[len(groups):]  # (a total cap may cut the last call short)
        return kept

    def _one_batch(self, n_groups: int) -> list[Group]:
        kept: list[Group] = []
        for rounds in range(self.max_attempts_per_step):
            if self.attempts_left <= 0:
                return kept
            if rounds:
                self.counters.resample_events += 1
            for group in self._generate(self._round_size(n_groups - len(kept))):
                if self._judge(group):
                    if len(kept) < n_groups:
                        kept.append(group)
                        self.counters.useful_steps += 1
                    else:
                        self.counters.surplus_groups += 1
            if len(kept) == n_groups:
                return kept
        self.counters.exhausted_steps += 1
        return kept

    def _round_size(self, need: int) -> int:
        """Questions to draw for `need` more informative groups: enough at the informative
        rate seen so far (a prior of one in two at the start), at most gen_batch, so that few
        informative groups are generated only to be dropped as surplus."""
        c = self.counters
        rate = (c.useful_steps + c.surplus_groups + 1) / (c.total_attempts + 2)
        return max(1, min(self.gen_batch, math.ceil(need / rate)))

    def state_dict(self) -> dict:
        return {"counters": asdict(self.counters), "questions": self.questions.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.counters = WasteCounters.from_dict(state["counters"])
        self.questions.load_state_dict(state["questions"])
