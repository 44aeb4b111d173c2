"""Batched sampling whose randomness belongs to each (question, sample index).

All prompts x n samples go through `model.generate` in micro-batches with left padding. Instead
of the shared RNG of HF sampling, every row gets its own torch.Generator and its token is chosen
by the Gumbel-max trick (argmax of temperature-scaled, top-p-filtered logits plus Gumbel noise),
which draws exactly from the same distribution as softmax sampling. A question's completions
therefore do not depend on what else is in the batch, the batch size, the shard or resume point.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

from relrl.cli import UsageError
from relrl.modeling import device_of

STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 1.0
    top_p: float = 0.95
    max_new_tokens: int = 3072
    micro_batch: int = 32
    do_sample: bool = True  # False: greedy decoding, temperature and top_p unused

    def __post_init__(self):
        if not self.max_new_tokens > 0:
            raise UsageError(f"--max-new-tokens: must be >= 1, got {self.max_new_tokens}")
        if self.do_sample and not self.temperature > 0:
            raise UsageError(f"--temperature: must be > 0 when sampling, got {self.temperature} "
                             "(use greedy decoding for a deterministic answer)")
        if not 0 < self.top_p <= 1:
            raise UsageError(f"--top-p: must be in (0, 1], got {self.top_p}")
        if not self.micro_batch >= 1:
            raise UsageError(f"--micro-batch: must be >= 1, got {self.micro_batch}")


@dataclass
class Completion:
    text: str  # decoded without special tokens
    token_ids: list[int]  # sampled tokens, ending with the stop token unless truncated
    prompt_ids: list[int]
    truncated: bool  # hit max_new_tokens before a stop token


def _hash_seed(*parts) -> int:
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def question_seed(base_seed: int, qid) -> int:
    """A question's seed from the run seed and its id: independent of the question's position."""
    return _hash_seed("question", base_seed, qid)


def sample_seed(seed: int, index: int) -> int:
    """The seed of sample `index` of a question whose seed is `seed`."""
    return _hash_seed("sample", seed, index)


def filter_top_p(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """-inf outside the smallest set of most likely tokens whose probability reaches top_p."""
    if top_p >= 1.0:
        return scores
    sorted_scores, order = scores.sort(dim=-1, descending=True)
    probs = sorted_scores.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs
    drop_sorted = mass_before >= top_p  # the most likely token always stays
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return scores.masked_fill(drop, float("-inf"))


class SeededGumbelSampler(LogitsProcessor):
    """Turns greedy decoding into sampling: argmax(logits/T filtered by top-p + Gumbel noise),
    with row r's noise drawn from its own generator seeded by seeds[r]."""

    def __init__(self, temperature: float, top_p: float, seeds: list[int], device):
        self.temperature = temperature
        self.top_p = top_p
        self.generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores = filter_top_p(scores.float() / self.temperature, self.top_p)
        vocab = scores.shape[-1]
        uniform = torch.stack([torch.rand(vocab, generator=g, device=scores.device)
                               for g in self.generators])
        return scores - torch.log(-torch.log(uniform))


def stop_token_ids(tokenizer) -> list[int]:
    vocab = tokenizer.get_vocab()
    ids = {vocab[t] for t in STOP_TOKENS if t in vocab}
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return sorted(ids)


def _generation_config(config: SamplingConfig, stop_ids: list[int], pad_id: int) -> GenerationConfig:
    # Every processor a model's own generation_config could switch on is set to "off" here,
    # since generate() fills unset (None) fields from the model's defaults.
    return GenerationConfig(
        max_new_tokens=config.max_new_tokens, do_sample=False, num_beams=1, num_return_sequences=1,
        eos_token_id=stop_ids, pad_token_id=pad_id, use_cache=True,
        repetition_penalty=1.0, encoder_repetition_penalty=1.0, no_repeat_ngram_size=0,
        min_new_tokens=0,
    )


def _left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, row in enumerate(rows):
        ids[k, width - len(row):] = torch.tensor(row, dtype=torch.long)
        mask[k, width - len(row):] = 1
    return ids, mask


def generate(model, tokenizer, prompts: list[str], n: int, seeds: list[int],
             config: SamplingConfig) -> list[list[Completion]]:
    """n completions per prompt: result[i][j] is sample j of prompts[i], seeded by
    sample_seed(seeds[i], j)."""
    if len(seeds) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
    if n < 1:
        raise UsageError(f"--samples: must be >= 1, got {n}")
    encoded = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    if any(len(e) == 0 for e in encoded):
        raise UsageError("empty prompt")
    # Longest prompts first, so micro-batches hold prompts of similar length (less padding).
    rows = sorted(((i, j) for i in range(len(prompts)) for j in range(n)),
                  key=lambda row: -len(encoded[row[0]]))
    stop_ids = stop_token_ids(tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_ids[0]
    gen_config = _generation_config(config, stop_ids, pad_id)
    device = device_of(model)
    results: list[list[Completion | None]] = [[None] * n for _ in prompts]

    was_training = model.training
    model.eval()  # dropout off, and the KV cache is not disabled by gradient checkpointing
    try:
        for start in range(0, len(rows), config.micro_batch):
            chunk = rows[start:start + config.micro_batch]
            ids, mask = _left_pad([encoded[i] for i, _ in chunk], pad_id)
            processors = LogitsProcessorList()
            if config.do_sample:
                seeds_here = [sample_seed(seeds[i], j) for i, j in chunk]
                processors.append(SeededGumbelSampler(config.temperature, config.top_p, seeds_here, device))
            with torch.no_grad():
                out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                     generation_config=gen_config, logits_processor=processors)
            new_tokens = out[:, ids.shape[1]:].tolist()
            for (i, j), tokens in zip(chunk, new_tokens):
                results[i][j] = _completion(tokenizer, tokens, encoded[i], set(stop_ids))
    finally:
        if was_training:
            model.train()
    return results


def _completion(tokenizer, tokens: list[int], prompt_ids: list[int], stops: set[int]) -> Completion:
    end = next((k for k, t in enumerate(tokens) if t in stops), None)
    kept = tokens if end is None else tokens[:end + 1]
    return Completion(text=tokenizer.decode(kept, skip_special_tokens=True), token_ids=kept,
                      prompt_ids=list(prompt_ids), truncated=end is None)
