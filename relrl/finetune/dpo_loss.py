"""Direct preference optimisation losses (Rafailov et al. 2023; IPO: Azar et al. 2023).

Inputs are per-pair log-probabilities of the chosen and rejected completions under the policy
and under the reference (the same model with its adapter disabled). The implicit reward of a
completion is beta * (policy logp - reference logp); DPO pushes the chosen reward above the
rejected one through -log sigmoid(margin), IPO regresses the log-ratio gap onto 1 / (2 beta).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

LOSS_TYPES = ("sigmoid", "ipo")


@dataclass
class DPOOutput:
    loss: torch.Tensor  # scalar, mean over pairs; carries the gradient
    chosen_rewards: torch.Tensor  # (pairs,) beta * (pi - ref) of the chosen completion, detached
    rejected_rewards: torch.Tensor  # (pairs,) same for the rejected completion, detached
    margins: torch.Tensor  # (pairs,) chosen_rewards - rejected_rewards
    accuracy: torch.Tensor  # scalar: share of pairs whose implicit reward prefers the chosen one


def dpo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    reference_chosen: torch.Tensor,
    reference_rejected: torch.Tensor,
    *,
    beta: float = 0.1,
    loss_type: str = "sigmoid",
) -> DPOOutput:
    """DPO (`sigmoid`) or IPO (`ipo`) loss over a batch of pairs, each input of shape (pairs,).

    For IPO pass length-normalised (mean per-token) log-probs: its squared target 1/(2 beta)
    is a fixed gap, which summed log-probs would make depend on completion length.
    """
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
    chosen_ratio = policy_chosen - reference_chosen
    rejected_ratio = policy_rejected - reference_rejected
    gap = chosen_ratio - rejected_ratio
    if loss_type == "sigmoid":
        losses = -F.logsigmoid(beta * gap)
    else:
        losses = (gap - 1.0 / (2.0 * beta)) ** 2
    chosen_rewards = (beta * chosen_ratio).detach()
    rejected_rewards = (beta * rejected_ratio).detach()
    margins = chosen_rewards - rejected_rewards
    return DPOOutput(
        loss=losses.mean(),
        chosen_rewards=chosen_rewards,
        rejected_rewards=rejected_rewards,
        margins=margins,
        accuracy=(margins > 0).float().mean(),
    )
