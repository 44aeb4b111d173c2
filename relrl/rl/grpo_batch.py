"""A GRPO training batch cut into micro-batches: the model's inputs and what the loss needs.

The training batch is every completion of the batch's groups, each with its group's advantage.
Sorted by completion length, so that a micro-batch holds completions of similar lengths and
pads less, it is cut into micro-batches of `size` completions: one forward and backward pass
each. The loss divides by the whole batch's token and sequence counts (batch_counts), so the
order and the cut change only the order of float sums, not the update.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from relrl.modeling.logprobs import pack_sequences
from relrl.rl.grpo_loss import batch_counts


@dataclass
class MicroBatch:
    """Completions packed for one forward/backward pass: prompts left-padded to a common length,
    completions right-padded after them, so every completion starts at column `start`."""
    ids: torch.Tensor  # [B, S] prompt and completion token ids
    attention: torch.Tensor  # [B, S] 1 on real tokens
    start: int  # the column of the first completion token
    sampler_logp: torch.Tensor | None  # [B, T] the rollout engine's log-probs (None: not reported)
    mask: torch.Tensor  # [B, T] 1 on the completion tokens the loss counts
    advantages: torch.Tensor  # [B] each completion's advantage
    owner: torch.Tensor  # [B] the position of each completion's group in the training batch


def pack(rows: list[tuple[int, object, float]], pad_id: int,
         mask_truncated: bool = False) -> MicroBatch:
    """A micro-batch of (group position, completion, advantage) rows. The mask holds the
    tokens the model sampled: padding and the tokens a tool loop inserted (sampled_mask 0) stay
    out of the loss, the KL, the entropy and the importance ratio, so the sampler's log-probs
    there (0.0) are never read. `mask_truncated` takes completions cut at max_new_tokens out of
    the loss. The sampler's log-probs are kept only when every completion carries them."""
    completions = [c for _, c, _ in rows]
    ids, attention, start = pack_sequences([c.prompt_ids for c in completions],
                                           [c.token_ids for c in completions], pad_id)
    mask = attention[:, start:].float()
    for r, c in enumerate(completions):  # tokens a tool loop inserted are not the model's
        if c.sampled_mask is not None:
            mask[r, :len(c.sampled_mask)] *= torch.tensor(c.sampled_mask, dtype=mask.dtype)
    if mask_truncated:
        keep = torch.tensor([0.0 if c.truncated else 1.0 for c in completions])
        mask = mask * keep.unsqueeze(1)
    sampler_logp = None
    if all(c.logprobs is not None for c in completions):
        sampler_logp = torch.zeros_like(mask)
        for r, c in enumerate(completions):
            sampler_logp[r, :len(c.logprobs)] = torch.tensor(c.logprobs)
    return MicroBatch(ids, attention, start, sampler_logp, mask,
                      advantages=torch.tensor([a for _, _, a in rows]),
                      owner=torch.tensor([k for k, _, _ in rows]))


def micro_batches(payloads: list[list], advantages: torch.Tensor, size: int, pad_id: int,
                  mask_truncated: bool = False) -> list[MicroBatch]:
    """The training batch of groups (payloads[k]: group k's completions, advantages[k, j]:
    completion j's) in micro-batches of `size` completions, shortest completions first. The
    trainer/sampler correction needs the sampler's log-probs of every completion: where one
    lacks them, no micro-batch keeps them."""
    rows = [(k, c, float(advantages[k, j]))
            for k, completions in enumerate(payloads) for j, c in enumerate(completions)]
    rows.sort(key=lambda row: len(row[1].token_ids))
    batches = [pack(rows[i:i + size], pad_id, mask_truncated) for i in range(0, len(rows), size)]
    if any(b.sampler_logp is None for b in batches):
        for b in batches:
            b.sampler_logp = None
    return batches


def batch_normalisers(batches: list[MicroBatch]) -> tuple[int, int]:
    """(tokens, sequences with a token) under the masks of the whole training batch."""
    counts = [batch_counts(b.mask) for b in batches]
    return sum(t for t, _ in counts), sum(s for _, s in counts)
