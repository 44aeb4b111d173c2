"""The GRPO policy loss and its published variants, on per-token log-probabilities.

Shapes: a batch of B completions padded to T tokens. `logp` is the current policy's log-prob of
each completion token [B, T] (with grad), `old_logp` the policy that generated the rollouts
(detached), `ref_logp` the reference policy (adapter disabled), `mask` 1 on the tokens that
count and 0 on the rest: padding, truncated completions when those are masked, and any token a
rollout inserted rather than sampled. Every objective below sees only tokens under the mask.

Objectives (LossConfig.loss), with r_t = exp(logp_t - old_logp_t), A the completion's
advantage, sg() stop-gradient, eps_low / eps_high = clip_low / clip_high:
  grpo   per token  -min(r_t A, clip(r_t, 1 - eps_low, 1 + eps_high) A)
         (Shao et al. 2024, DeepSeekMath; asymmetric "clip-higher" ranges from DAPO, Yu et al.
         2025). The study's objective and the default.
  gspo   one ratio per completion, the geometric mean of its token ratios over its own |y|
         tokens under the mask: s = exp((1/|y|) sum_t (logp_t - old_logp_t)); per completion
         -min(s A, clip(s, 1 - eps_low, 1 + eps_high) A) (Zheng et al. 2025, "Group Sequence
         Policy Optimization", arXiv 2507.18071, section 4.1). Computed in its GSPO-token form,
         s_t = sg(s) * exp(logp_t - sg(logp_t)): every token carries the value s and the
         gradient s * grad logp_t, which with one advantage per completion (as here) gives the
         same loss and gradient as GSPO itself under any aggregation below, and lets a future
         per-token advantage plug in (the paper's section 4.3). A completion clipped on its
         advantage's side adds no gradient at all. The paper's settings: eps_low 3e-4,
         eps_high 4e-4 (the ratio is a per-token geometric mean, so its range is narrow) and
         the mean over completions (aggregation seq_mean_token_mean).
  cispo  per token  -sg(clip(r_t, 1 - eps_low, 1 + eps_high)) A logp_t: the importance weight
         is clipped and held constant, so every token keeps its gradient w_t A grad logp_t,
         where grpo drops a clipped token's (MiniMax 2025, the MiniMax-M1 report, arXiv
         2506.13585, section 3.1; used in the ScaleRL recipe, Khatri et al. 2025, arXiv 2510.13786).
         Written as -sg(w_t) A exp(logp_t - sg(logp_t)), whose value is -w_t A (comparable to
         the grpo loss) and whose gradient is the paper's. MiniMax-M1 sets no lower bound and
         tunes eps_high only; clip_low = 1 (allowed for cispo alone) removes the lower bound.
         Its normaliser is the token count (aggregation token_mean).
Each objective uses clip_low, clip_high and aggregation as configured; the published values
above are the settings a recipe for it starts from. With beta > 0 every objective adds
beta * k3 per token, k3 = exp(ref - logp) - (ref - logp) - 1.

A separate sampler (vLLM) draws the rollouts with probabilities slightly unlike the trainer's;
`importance_weights` gives the detached weight on each token's policy term (TIS, as in TRL and
verl), with p_t = exp(old_logp_t - sampler_logp_t) the trainer/sampler ratio and C the cap:
  token          min(p_t, C) per token (truncated importance sampling)
  sequence-mask  rho = prod_t p_t over the completion's tokens (TRL's sequence-level ratio);
                 weight rho on each token, and 0 on every token of a completion with rho > C
                 or rho < 1/C (for C > 1; the bounds are symmetric in log space): that
                 completion adds nothing to the policy term (masked importance sampling, Liu et
                 al. 2025, "When Speed Kills Stability"). Without the lower bound a completion
                 the sampler found far likelier than the trainer does would keep a weight near
                 0 instead of being recognised as off-policy. Its tokens still count in the
                 normalisers, as an importance-sampling estimate keeps its sample size.
Both log-probs are of the full distribution: the trainer's log-softmax, and vLLM's default
raw_logprobs, taken before temperature, top-p and top-k. The tokens were drawn from the
truncated, renormalised distribution q(y) / Z (Z the kept mass), so with top-p < 1 or
top-k > 0 the computed ratio is 1 / Z times the true one per token, and the correction is
biased: it is exact only without truncation.

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
OBJECTIVES = ("grpo", "gspo", "cispo")
TIS_MODES = ("token", "sequence-mask")
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
    loss: str = "grpo"  # the objective: grpo, gspo or cispo (module doc)
    tis_mode: str = "token"  # how importance_weights corrects the sampler: token, sequence-mask

    def __post_init__(self):
        if self.loss not in OBJECTIVES:
            raise ValueError(f"loss must be one of {OBJECTIVES}, got {self.loss!r}")
        if self.tis_mode not in TIS_MODES:
            raise ValueError(f"tis_mode must be one of {TIS_MODES}, got {self.tis_mode!r}")
        if self.loss == "cispo":  # a weight floor of 0 is no floor: MiniMax-M1's setting
            if not 0.0 <= self.clip_low <= 1.0:
                raise ValueError(f"clip_low must be in [0, 1] for cispo, got {self.clip_low}")
        elif not 0.0 <= self.clip_low < 1.0:
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
    # [B] tokens clipped because ratio < 1 - clip_low with A < 0 (cispo: whatever A's sign,
    # its weight is clipped; gspo: every token of a clipped completion)
    row_clip_low: torch.Tensor
    row_clip_high: torch.Tensor  # [B] the same above 1 + clip_high with A > 0
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
    """config.loss's policy term (+ beta * k3 KL) aggregated as config.aggregation; see the
    module doc. `tis_weight` [B, T]: per-token importance weights on the policy term (None:
    all 1), as importance_weights gives them."""
    mask = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype).unsqueeze(1)
    if config.loss == "gspo":  # GSPO-token: each token's ratio has the completion's value
        log_ratio = ((logp - old_logp.detach()) * mask).sum(dim=1, keepdim=True)
        log_ratio = log_ratio / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        ratio = torch.exp(log_ratio.detach() + logp - logp.detach())
    else:
        ratio = torch.exp(logp - old_logp.detach())
    clipped_ratio = ratio.clamp(1.0 - config.clip_low, 1.0 + config.clip_high)
    if config.loss == "cispo":  # value -w A, gradient -w A grad logp
        per_token = -clipped_ratio.detach() * adv * torch.exp(logp - logp.detach())
    else:
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
        cut_low, cut_high = adv < 0, adv > 0  # where the min() takes the clipped side
        if config.loss == "cispo":
            cut_low = cut_high = torch.ones_like(adv, dtype=torch.bool)
        low = ((ratio < 1.0 - config.clip_low) & cut_low).to(mask.dtype) * mask
        high = ((ratio > 1.0 + config.clip_high) & cut_high).to(mask.dtype) * mask
        return LossTerms(
            loss=loss,
            row_loss=row_loss.detach(),
            row_tokens=row_tokens,
            row_clip_low=low.sum(dim=1),
            row_clip_high=high.sum(dim=1),
            row_kl=(kl * mask).sum(dim=1) if kl is not None else None,
        )


@dataclass
class ImportanceWeights:
    weight: torch.Tensor | None  # [B, T] detached, for policy_loss's tis_weight (None: cap 0)
    row_ratio: torch.Tensor  # [B] sum over tokens of the trainer/sampler ratio p_t
    row_capped: torch.Tensor | None  # [B] tokens the cap changed: truncated, or masked out


def importance_weights(old_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
                       cap: float, mode: str = "token") -> ImportanceWeights:
    """Weights correcting for a sampler whose probabilities differ from the trainer's own
    (module doc): per token min(p_t, cap), or in sequence-mask mode the completion's ratio
    prod_t p_t, zeroed for a completion whose ratio is above the cap or below 1/cap (a cap
    above 1; at or below 1 there is no lower bound). Tokens off the mask get
    weight 0 and do not enter a completion's ratio. A cap of 0 turns the correction off."""
    if mode not in TIS_MODES:
        raise ValueError(f"tis_mode must be one of {TIS_MODES}, got {mode!r}")
    mask = mask.to(old_logp.dtype)
    log_ratio = torch.where(mask > 0, old_logp.detach() - sampler_logp.detach(), 0.0)
    ratio = torch.exp(log_ratio) * mask
    if not cap > 0:
        return ImportanceWeights(None, ratio.sum(dim=1), None)
    if mode == "token":
        capped = (ratio > cap).to(mask.dtype) * mask
        weight = ratio.clamp(max=cap)
    else:
        seq_ratio = torch.exp(log_ratio.sum(dim=1, keepdim=True))
        lower = 1.0 / cap if cap > 1 else 0.0
        dropped = (seq_ratio > cap) | (seq_ratio < lower)
        capped = dropped.to(mask.dtype) * mask
        weight = torch.where(dropped, 0.0, seq_ratio) * mask  # an overflowing ratio is dropped too
    return ImportanceWeights(weight, ratio.sum(dim=1), capped.sum(dim=1))
