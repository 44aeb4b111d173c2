"""The GRPO policy loss and its published variants, on per-token log-probabilities.

Shapes: a batch of B completions padded to T tokens. `logp` is the current policy's log-prob of
each completion token [B, T] (with grad), `old_logp` the policy that generated the rollouts
(detached), `ref_logp` the reference policy (adapter disabled), `mask` 1 on real completion
tokens and 0 on padding (and on truncated completions when those are masked).

Per token:  ratio = exp(logp - old_logp)
            surrogate = min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A)
            loss_t = -w * surrogate + beta * k3,   k3 = exp(ref - logp) - (ref - logp) - 1
w is 1, or with a separate sampler (vLLM) the truncated importance weight
min(exp(old_logp - sampler_logp), C), detached (TIS, as in TRL and verl): the rollouts were
drawn by the sampler, whose probabilities differ a little from the trainer's own.
Aggregation over the training batch:
    token_mean           sum over all tokens / number of tokens            (DAPO)
    seq_mean_token_mean  mean over sequences of each sequence's token mean (original GRPO)
    seq_sum_constant     sum over all tokens / (sequences * constant)      (Dr. GRPO)
A training batch may be split into micro-batches: pass the whole batch's token and sequence
counts so that the micro-batch losses add up to the batch loss exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_sum_constant")
ADVANTAGE_MODES = ("group_norm", "mean_only")


def group_advantages(rewards: torch.Tensor, mode: str = "group_norm", eps: float = 1e-4):
    """Advantages for rewards [groups, G]: (r - mean) / (std + eps), or r - mean (Dr. GRPO).

    std is the sample standard deviation within each group (torch.std's default). A group whose
    rewards are all equal gets all-zero advantages in both modes.
    """
    if mode not in ADVANTAGE_MODES:
        raise ValueError(f"advantage mode must be one of {ADVANTAGE_MODES}, got {mode!r}")
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be [groups, G] with G >= 2, got {tuple(rewards.shape)}")
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if mode == "mean_only":
        return centred
    return centred / (rewards.std(dim=1, keepdim=True) + eps)


def overlong_penalty(length: int, max_len: int, buffer: int) -> float:
    """DAPO's soft overlong punishment added to the reward: 0 up to max_len - buffer tokens,
    then falling linearly to -1 at max_len (and -1 beyond)."""
    if buffer <= 0 or length <= max_len - buffer:
        return 0.0
    if length > max_len:
        return -1.0
    return (max_len - buffer - length) / buffer


@dataclass(frozen=True)
class LossConfig:
    clip_low: float = 0.2
    clip_high: float = 0.28
    beta: float = 0.0
    aggregation: str = "token_mean"
    constant: float = 1.0  # Dr. GRPO's per-sequence normaliser: the maximum completion length

    def __post_init__(self):
        if not 0.0 <= self.clip_low < 1.0:
            raise ValueError(f"clip_low must be in [0, 1), got {self.clip_low}")
        if self.clip_high < 0.0:
            raise ValueError(f"clip_high must be >= 0, got {self.clip_high}")
        if self.beta < 0.0:
            raise ValueError(f"beta must be >= 0, got {self.beta}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}")
        if self.constant <= 0:
            raise ValueError(f"constant must be > 0, got {self.constant}")


@dataclass
class LossTerms:
    loss: torch.Tensor  # scalar with grad: this micro-batch's share of the batch loss
    row_loss: torch.Tensor  # [B] each completion's share of it (detached; sums to loss)
    row_tokens: torch.Tensor  # [B] tokens under the mask
    row_clip_low: torch.Tensor  # [B] tokens clipped because ratio < 1 - clip_low with A < 0
    row_clip_high: torch.Tensor  # [B] tokens clipped because ratio > 1 + clip_high with A > 0
    row_kl: torch.Tensor | None  # [B] sum of k3 over tokens (None without a reference)

    def share(self, rows: torch.Tensor) -> torch.Tensor:
        """Per-token mean of a per-row sum over this micro-batch (0 with no tokens)."""
        return rows.sum() / self.row_tokens.sum().clamp(min=1)

    @property
    def clip_frac(self) -> float:
        return float(self.share(self.row_clip_low + self.row_clip_high))

    @property
    def kl(self) -> float:
        return float(self.share(self.row_kl)) if self.row_kl is not None else 0.0


def batch_counts(mask: torch.Tensor) -> tuple[int, int]:
    """(tokens, sequences with at least one token) under a mask: the normalisers of a batch."""
    return int(mask.sum().item()), int((mask.sum(dim=1) > 0).sum().item())


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: LossConfig,
    ref_logp: torch.Tensor | None = None,
    batch_tokens: int | None = None,
    batch_seqs: int | None = None,
    tis_weight: torch.Tensor | None = None,
) -> LossTerms:
    """Clipped surrogate (+ beta * k3 KL) aggregated as config.aggregation; see module doc.
    `tis_weight` [B, T]: per-token importance weights on the surrogate (None: all 1)."""
    mask = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype).unsqueeze(1)
    ratio = torch.exp(logp - old_logp.detach())
    clipped_ratio = ratio.clamp(1.0 - config.clip_low, 1.0 + config.clip_high)
    per_token = -torch.minimum(ratio * adv, clipped_ratio * adv)
    if tis_weight is not None:
        per_token = per_token * tis_weight.detach().to(per_token.dtype)
    kl = None
    if ref_logp is not None:
        delta = ref_logp.detach() - logp
        kl = torch.exp(delta) - delta - 1.0
        if config.beta > 0:
            per_token = per_token + config.beta * kl

    own_tokens, own_seqs = batch_counts(mask)
    n_tokens = max(batch_tokens if batch_tokens is not None else own_tokens, 1)
    n_seqs = max(batch_seqs if batch_seqs is not None else own_seqs, 1)
    row_sum = (per_token * mask).sum(dim=1)
    row_tokens = mask.sum(dim=1)
    if config.aggregation == "token_mean":
        row_loss = row_sum / n_tokens
    elif config.aggregation == "seq_mean_token_mean":
        row_loss = row_sum / row_tokens.clamp(min=1.0) / n_seqs
    else:
        row_loss = row_sum / (n_seqs * config.constant)

    loss = row_loss.sum()
    with torch.no_grad():
        low = ((ratio < 1.0 - config.clip_low) & (adv < 0)).to(mask.dtype) * mask
        high = ((ratio > 1.0 + config.clip_high) & (adv > 0)).to(mask.dtype) * mask
        return LossTerms(
            loss=loss,
            row_loss=row_loss.detach(),
            row_tokens=row_tokens,
            row_clip_low=low.sum(dim=1),
            row_clip_high=high.sum(dim=1),
            row_kl=(kl * mask).sum(dim=1) if kl is not None else None,
        )
