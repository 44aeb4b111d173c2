"""Per-token log-probabilities of completion tokens, without a full-vocabulary log-softmax
over every position at once.

The decoder runs once per micro-batch; the hidden states of real completion tokens (padding
skipped) then go through lm_head a chunk of tokens at a time, and under autograd each chunk is
checkpointed so only the hidden states are kept for the backward pass. With Qwen3's 151k
vocabulary, 3,072 positions of float32 logits would be 1.9 GB per sequence; a chunk's logits
are held to 32 MB.
This assumes logits = lm_head(last hidden state), true of Qwen, Llama and Mistral models.
"""
from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

LOGITS_PER_CHUNK = 1 << 23  # 32 MB of float32 logits: 55 tokens of Qwen3's vocabulary


def _parts(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder(), base.get_output_embeddings()


def _chunk_stats(head, hidden: torch.Tensor, targets: torch.Tensor, with_entropy: bool):
    logits = head(hidden).float()
    norm = torch.logsumexp(logits, dim=-1)
    token = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - norm
    if not with_entropy:
        return token, None
    probs = torch.softmax(logits, dim=-1)
    return token, norm - (probs * logits).sum(dim=-1)


def completion_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        logits_start: int, micro_batch: int = 8, *, chunk_size: int | None = None,
                        return_entropy: bool = False):
    """log p(input_ids[:, t] | input_ids[:, :t]) for t in [logits_start, T), shape
    (B, T - logits_start), 0 where attention_mask is 0. With return_entropy, also the entropy of
    the predictive distribution at those positions (same shape).

    Left-pad prompts so every completion starts at `logits_start`. Only real completion tokens
    go through lm_head, `chunk_size` tokens at a time (default: as many as keep one chunk's
    logits at LOGITS_PER_CHUNK floats, whatever the vocabulary). Under autograd the whole batch's graph
    stays alive until backward, so a trainer short of memory calls this once per micro-batch
    and steps backward in between; `micro_batch` bounds the decoder passes.
    """
    if not 1 <= logits_start < input_ids.shape[1]:
        raise ValueError(f"logits_start must be in [1, {input_ids.shape[1]}), got {logits_start}")
    decoder, head = _parts(model)
    if chunk_size is None:
        chunk_size = max(16, LOGITS_PER_CHUNK // head.weight.shape[0])
    grad = torch.is_grad_enabled()
    token_parts, entropy_parts = [], []
    for first in range(0, input_ids.shape[0], micro_batch):
        ids = input_ids[first:first + micro_batch]
        mask = attention_mask[first:first + micro_batch]
        # The positions generate() used: count only real tokens, so left padding changes nothing.
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        hidden = decoder(input_ids=ids, attention_mask=mask, position_ids=positions,
                         use_cache=False).last_hidden_state
        valid = mask[:, logits_start:].bool()
        hidden = hidden[:, logits_start - 1:-1][valid]  # (real completion tokens, H)
        targets = ids[:, logits_start:][valid]
        tokens, entropies = [], []
        for s in range(0, targets.shape[0], chunk_size):
            args = (head, hidden[s:s + chunk_size], targets[s:s + chunk_size], return_entropy)
            if grad:
                token, entropy = checkpoint(_chunk_stats, *args, use_reentrant=False)
            else:
                token, entropy = _chunk_stats(*args)
            tokens.append(token)
            entropies.append(entropy)
        zeros = torch.zeros(valid.shape, dtype=torch.float32, device=valid.device)
        token_parts.append(zeros.masked_scatter(valid, _cat(tokens, zeros)))
        if return_entropy:
            entropy_parts.append(zeros.masked_scatter(valid, _cat(entropies, zeros)))
    token_logprobs = torch.cat(token_parts, dim=0)
    if return_entropy:
        return token_logprobs, torch.cat(entropy_parts, dim=0)
    return token_logprobs


def _cat(parts: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    return torch.cat(parts) if parts else like.new_zeros(0)


def pack_sequences(prompts: list[list[int]], completions: list[list[int]], pad_id: int):
    """(input_ids, attention_mask, logits_start) for completion_logprobs: prompts left-padded to
    a common length, completions right-padded after them."""
    if len(prompts) != len(completions):
        raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
    width_p = max(len(p) for p in prompts)
    width_c = max(1, max(len(c) for c in completions))
    ids = torch.full((len(prompts), width_p + width_c), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for k, (p, c) in enumerate(zip(prompts, completions)):
        ids[k, width_p - len(p):width_p] = torch.tensor(p, dtype=torch.long)
        ids[k, width_p:width_p + len(c)] = torch.tensor(c, dtype=torch.long)
        mask[k, width_p - len(p):width_p + len(c)] = 1
    return ids, mask, width_p


def naive_logprobs(model, input_ids, attention_mask, logits_start):
    """Reference: one forward pass and a full-vocabulary log-softmax at every position."""
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                   use_cache=False).logits.float()
    logp = torch.log_softmax(logits[:, logits_start - 1:-1], dim=-1)
    token = logp.gather(-1, input_ids[:, logits_start:].unsqueeze(-1)).squeeze(-1)
    return token * attention_mask[:, logits_start:].float()
