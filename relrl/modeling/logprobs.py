"""Per-token log-probabilities of completion tokens, without a full-vocabulary log-softmax
over every position at once.

The decoder runs once per micro-batch; the hidden states of real completion tokens (padding
skipped) then go through lm_head a chunk of tokens at a time, and under autograd each chunk is
checkpointed so only the hidden states are kept for the backward pass.

Chunk size: every chunk reads all of lm_head (151,936 x 4,096 in bf16 for Qwen3-8B: 1.2 GB), so
a chunk of n tokens does n FLOPs per byte of head read (2nHV over 2HV). On a GPU that is
memory-bound below a few hundred tokens; 55-token chunks read the head ~220 times per 4 x 3,072-token micro-batch
forward (and again twice backward). On CUDA a chunk is CUDA_CHUNK_TOKENS tokens (1,024: 0.6 GB
of float32 logits, 12 head reads per micro-batch); on the CPU, where memory is what is short and
the head of a small model is cheap to re-read, a chunk holds LOGITS_PER_CHUNK logits (32 MB).
benchmarks/logprob_chunking.py prints peak memory and time per chunk size side by side.

Precision: the logits come from one matmul in the head's dtype (bf16 on CUDA) and are never
copied to float32 whole (float32 logits, as on the CPU, take torch's own fused kernels). The
log-normaliser, the token's log-prob and the entropy are accumulated in float32 over
vocabulary blocks of VOCAB_BLOCK, and the backward writes the gradient (one-hot minus
softmax) block by block in the logits' dtype: the float32 temporaries are chunk x VOCAB_BLOCK,
not chunk x vocabulary. (A float32 matmul instead would re-cast the whole head every chunk and
run several times slower than bf16 on tensor cores.)

Unsloth's Qwen3 forward drops a 2-D attention mask in training mode, so for an Unsloth model a
micro-batch goes to the decoder as one packed row of its real tokens, each sequence with its own
positions and its length in `packed_seq_lengths`, which its attention kernels honour in both
modes; padding is then never in the row at all.
This assumes logits = lm_head(last hidden state), true of Qwen, Llama and Mistral models.
"""
from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from relrl.modeling.loading import is_unsloth

LOGITS_PER_CHUNK = 1 << 23  # CPU: 32 MB of float32 logits, 55 tokens of Qwen3's vocabulary
CUDA_CHUNK_TOKENS = 1024  # CUDA: chosen from benchmarks/logprob_chunking.py (docs/testing.md)
VOCAB_BLOCK = 16384  # vocabulary columns per float32 temporary


def default_chunk_size(vocab_size: int, device: torch.device) -> int:
    if device.type == "cuda":
        return CUDA_CHUNK_TOKENS
    return max(16, LOGITS_PER_CHUNK // vocab_size)


def _parts(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder(), base.get_output_embeddings()


def _blocks(logits: torch.Tensor):
    for s in range(0, logits.shape[-1], VOCAB_BLOCK):
        yield s, logits[:, s:s + VOCAB_BLOCK].float()


def _log_normaliser(logits: torch.Tensor) -> torch.Tensor:
    """logsumexp over the vocabulary in float32, one block at a time."""
    top = logits.amax(dim=-1).float()
    total = torch.zeros_like(top)
    for _, block in _blocks(logits):
        total += torch.exp(block - top[:, None]).sum(dim=-1)
    return top + torch.log(total)


class _TokenLogprob(torch.autograd.Function):
    """(log p(target), entropy) per row of `logits`, both float32; only the first has a gradient."""

    @staticmethod
    def forward(ctx, logits, targets, with_entropy: bool):
        norm = _log_normaliser(logits)
        token = logits.gather(-1, targets[:, None]).squeeze(-1).float() - norm
        entropy = torch.zeros_like(norm)
        if with_entropy:  # H = log Z - sum_v p_v z_v
            mean_logit = torch.zeros_like(norm)
            for _, block in _blocks(logits):
                mean_logit += (torch.exp(block - norm[:, None]) * block).sum(dim=-1)
            entropy = norm - mean_logit
        ctx.mark_non_differentiable(entropy)
        ctx.save_for_backward(logits, targets, norm, token)
        return token, entropy

    @staticmethod
    def backward(ctx, grad_token, _grad_entropy):
        logits, targets, norm, token = ctx.saved_tensors
        grad = torch.empty_like(logits)
        scale = grad_token.float()[:, None]
        for s, block in _blocks(logits):
            grad[:, s:s + VOCAB_BLOCK] = (-scale * torch.exp(block - norm[:, None])).to(grad.dtype)
        # The target's column in float32: d log p_t / d z_t = 1 - p_t.
        target_grad = grad_token.float() * (1 - torch.exp(token))
        grad.scatter_(-1, targets[:, None], target_grad[:, None].to(grad.dtype))
        return grad, None, None


def _chunk_stats(head, hidden: torch.Tensor, targets: torch.Tensor, with_entropy: bool):
    logits = head(hidden)
    if logits.dtype != torch.float32:
        token, entropy = _TokenLogprob.apply(logits, targets, with_entropy)
        return token, entropy if with_entropy else None
    # Already float32 (the CPU): nothing to cast, and torch's fused kernels are fastest.
    norm = torch.logsumexp(logits, dim=-1)
    token = logits.gather(-1, targets[:, None]).squeeze(-1) - norm
    if not with_entropy:
        return token, None
    with torch.no_grad():
        return token, norm - (torch.softmax(logits, dim=-1) * logits).sum(dim=-1)


def _decoder_hidden(decoder, ids, mask, positions, packed: bool) -> torch.Tensor:
    if not packed:
        return decoder(input_ids=ids, attention_mask=mask, position_ids=positions,
                       use_cache=False).last_hidden_state
    real = mask.bool()
    out = decoder(input_ids=ids[real][None], position_ids=positions[real][None],
                  packed_seq_lengths=real.sum(dim=1).to(torch.int32), use_cache=False)
    flat = out.last_hidden_state[0]
    hidden = flat.new_zeros(*ids.shape, flat.shape[-1])
    return hidden.index_put((real,), flat)  # padded layout again; padding rows stay zero


def head_logprobs(head, hidden: torch.Tensor, targets: torch.Tensor, chunk_size: int,
                  with_entropy: bool = False):
    """(log-probs, entropies or None) of `targets` (N,) under lm_head applied to `hidden` (N, H),
    `chunk_size` tokens at a time, each chunk checkpointed under autograd."""
    grad = torch.is_grad_enabled()
    tokens, entropies = [], []
    for s in range(0, targets.shape[0], chunk_size):
        args = (head, hidden[s:s + chunk_size], targets[s:s + chunk_size], with_entropy)
        if grad:
            token, entropy = checkpoint(_chunk_stats, *args, use_reentrant=False)
        else:
            token, entropy = _chunk_stats(*args)
        tokens.append(token)
        entropies.append(entropy)
    like = hidden.new_zeros(0, dtype=torch.float32)
    return _cat(tokens, like), (_cat(entropies, like) if with_entropy else None)


def completion_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        logits_start: int, micro_batch: int = 8, *, chunk_size: int | None = None,
                        return_entropy: bool = False):
    """log p(input_ids[:, t] | input_ids[:, :t]) for t in [logits_start, T), shape
    (B, T - logits_start), 0 where attention_mask is 0. With return_entropy, also the entropy of
    the predictive distribution at those positions (same shape).

    Left-pad prompts so every completion starts at `logits_start`. Only real completion tokens
    go through lm_head, `chunk_size` tokens at a time (default: default_chunk_size). The entropy
    carries no gradient (a metric). Under autograd the whole batch's graph
    stays alive until backward, so a trainer short of memory calls this once per micro-batch
    and steps backward in between; `micro_batch` bounds the decoder passes.
    """
    if not 1 <= logits_start < input_ids.shape[1]:
        raise ValueError(f"logits_start must be in [1, {input_ids.shape[1]}), got {logits_start}")
    decoder, head = _parts(model)
    if chunk_size is None:
        chunk_size = default_chunk_size(head.weight.shape[0], head.weight.device)
    packed = is_unsloth(model)
    token_parts, entropy_parts = [], []
    for first in range(0, input_ids.shape[0], micro_batch):
        ids = input_ids[first:first + micro_batch]
        mask = attention_mask[first:first + micro_batch]
        # The positions generate() used: count only real tokens, so left padding changes nothing.
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        hidden = _decoder_hidden(decoder, ids, mask, positions, packed)
        valid = mask[:, logits_start:].bool()
        hidden = hidden[:, logits_start - 1:-1][valid]  # (real completion tokens, H)
        targets = ids[:, logits_start:][valid]
        tokens, entropies = head_logprobs(head, hidden, targets, chunk_size, return_entropy)
        zeros = torch.zeros(valid.shape, dtype=torch.float32, device=valid.device)
        token_parts.append(zeros.masked_scatter(valid, tokens))
        if return_entropy:
            entropy_parts.append(zeros.masked_scatter(valid, entropies))
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
