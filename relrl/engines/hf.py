"""The Hugging Face engine: batched `model.generate` whose randomness belongs to each
(question, sample index).

All prompts x n samples go through `model.generate` in micro-batches with left padding. Instead
of the shared RNG of HF sampling, every row gets its own torch.Generator and its token is chosen
by the Gumbel-max trick (argmax of temperature-scaled, top-k- and top-p-filtered logits plus
Gumbel noise),
which draws exactly from the same distribution as softmax sampling. A question's completions
therefore do not depend on what else is in the batch, the batch size, the shard or resume point.
It reports no sampler log-probs: the trainer's own are exact for it.
transformers is imported only when generate runs: Unsloth must be imported before it to patch
it, and a script loads Unsloth's model after importing this package.
"""
from __future__ import annotations

import contextlib
from dataclasses import replace
from functools import partial
from typing import Callable

import torch

from relrl.engines.base import (
    Completion,
    Engine,
    GenerationStopped,
    SamplingConfig,
    stop_token_ids,
)
from relrl.engines.tool_loop import Request, run_rollouts
from relrl.modeling.loading import device_of, generation_mode, reference_policy


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


def filter_top_k(scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """-inf outside the top_k most likely tokens (0: no filter). Applied before top-p, as vLLM
    and transformers apply them."""
    if top_k <= 0 or top_k >= scores.shape[-1]:
        return scores
    kth = scores.topk(top_k, dim=-1).values[..., -1:]
    return scores.masked_fill(scores < kth, float("-inf"))


class SeededGumbelSampler:
    """Turns greedy decoding into sampling: argmax(logits/T filtered by top-k and top-p +
    Gumbel noise), with row r's noise drawn from its own generator seeded by seeds[r]. A
    logits processor for generate, which only calls it."""

    def __init__(self, temperature: float, top_p: float, seeds: list[int], device,
                 top_k: int = 0):
        self.temperature = temperature
        self.top_p, self.top_k = top_p, top_k
        self.generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores = filter_top_k(scores.float() / self.temperature, self.top_k)
        scores = filter_top_p(scores, self.top_p)
        vocab = scores.shape[-1]
        uniform = torch.stack([torch.rand(vocab, generator=g, device=scores.device)
                               for g in self.generators])
        return scores - torch.log(-torch.log(uniform))


class StopRequested:
    """Ends generate() at the end of the current decoding step once `should_stop` says yes (a
    trainer passes its StopFlag's: SLURM's notice), instead of after max_new_tokens. A stopping
    criterion for generate, which only calls it; generate then raises GenerationStopped."""

    def __init__(self, should_stop: Callable[[], bool]):
        self.should_stop, self.fired = should_stop, False

    def __call__(self, input_ids, scores, **kwargs) -> torch.BoolTensor:
        self.fired = self.fired or bool(self.should_stop())
        return torch.full((input_ids.shape[0],), self.fired, dtype=torch.bool,
                          device=input_ids.device)


def _generation_config(config: SamplingConfig, stop_ids: list[int], pad_id: int):
    from transformers import GenerationConfig

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


def sample_round(model, tokenizer, requests: list[Request], config: SamplingConfig,
                 should_stop: Callable[[], bool] | None = None) -> list[tuple[list[int], None]]:
    """One turn for each request (relrl.engines.tool_loop): its ids through `model.generate` in
    micro-batches with left padding, row r sampled with its own seed. No log-probs."""
    from transformers import LogitsProcessorList, StoppingCriteriaList

    # Longest first, so micro-batches hold requests of similar length (less padding).
    order = sorted(range(len(requests)), key=lambda k: -len(requests[k].ids))
    stop_ids = stop_token_ids(tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_ids[0]
    device = device_of(model)
    results: list[tuple[list[int], None] | None] = [None] * len(requests)

    # Eval mode (dropout off, KV cache on) and Unsloth's inference kernels inside; training
    # mode and gradient checkpointing restored after.
    with generation_mode(model):
        for start in range(0, len(order), config.micro_batch):
            if should_stop is not None and should_stop():
                raise GenerationStopped
            chunk = [requests[k] for k in order[start:start + config.micro_batch]]
            ids, mask = _left_pad([r.ids for r in chunk], pad_id)
            # one length for the chunk; the loop cuts each row to its own max_tokens
            gen_config = _generation_config(
                replace(config, max_new_tokens=max(r.max_tokens for r in chunk)), stop_ids, pad_id)
            processors = LogitsProcessorList()
            if config.do_sample:
                processors.append(SeededGumbelSampler(config.temperature, config.top_p,
                                                      [r.seed for r in chunk], device,
                                                      config.top_k))
            stopper = StopRequested(should_stop or (lambda: False))
            with torch.no_grad():
                out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                     generation_config=gen_config, logits_processor=processors,
                                     stopping_criteria=StoppingCriteriaList([stopper]))
            if stopper.fired:
                raise GenerationStopped
            for k, tokens in zip(order[start:start + config.micro_batch],
                                 out[:, ids.shape[1]:].tolist()):
                results[k] = (tokens, None)
    return results


def generate(model, tokenizer, prompts: list[str], n: int, seeds: list[int],
             config: SamplingConfig,
             should_stop: Callable[[], bool] | None = None) -> list[list[Completion]]:
    """n completions per prompt: result[i][j] is sample j of prompts[i], seeded by
    sample_seed(seeds[i], j), with config.tools' calls run between turns. Raises
    GenerationStopped when `should_stop` says yes."""
    positions = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return run_rollouts(partial(sample_round, model, tokenizer), tokenizer, prompts, n, seeds,
                        config, should_stop, context_limit=positions)


class HFEngine(Engine):
    """`generate` above on the policy being trained: nothing to sync, the adapter is live."""

    name = "hf"

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer

    def generate(self, prompts, n, seeds, sampling, should_stop=None):
        return generate(self.model, self.tokenizer, prompts, n, seeds, sampling, should_stop)

    @contextlib.contextmanager
    def base_policy(self):
        with reference_policy(self.model):
            yield self
