"""Multi-turn rollouts: generate until a turn ends, run the tool calls it made, insert the
answers, continue. Both engines sample through this loop; they differ only in `sample_round`,
which samples one turn for a batch of requests.

- Ids: a completion's ids are the sampled ids of every turn plus the ids the engine inserted
  (tool_turn_text, tokenised on its own), never a re-tokenisation of sampled text, with a
  per-token mask (1 sampled, 0 inserted). The model's `<|im_end|>` after a tool call stays
  (it is sampled) but does not end the completion.
- Budget: --max-new-tokens counts the model's own tokens over all turns; the inserted ones must
  fit in the context (vLLM's max_model_len, the built-in model's positions), or the completion
  ends there as truncated.
- Seeds: turn t of sample j of a question samples with turn_seed(sample_seed(seed, j), t), so a
  completion depends only on its question, attempt, sample and turn.
- Without tools (--tools none) there is one round, exactly the single-turn sampling of before.
- Hostile model text: finding and answering calls never raises (protocol.answer_call turns any
  failure into an error answer), every answer is one line without markers' text
  (protocol.safe_answer, prompting.without_markers), so the inserted ids hold the template's
  special tokens only, and the work is linear in the turn's length.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from relrl.data.prompting import tool_turn_text
from relrl.engines.base import (
    Completion,
    SamplingConfig,
    encode_prompts,
    sample_seed,
    stop_token_ids,
    turn_seed,
)
from relrl.tools.protocol import ToolAnswer, answer_call, tool_call_bodies


@dataclass(frozen=True)
class Request:
    """One turn to sample: the ids so far (prompt, earlier turns, inserted answers)."""

    ids: list[int]
    seed: int
    max_tokens: int


# sample_round(requests, sampling, should_stop) -> per request (sampled ids, their log-probs or
# None); ids may run past a stop token or max_tokens (the loop cuts them); raises
# GenerationStopped when should_stop says yes.
SampleRound = Callable[[list[Request], SamplingConfig, Callable[[], bool] | None],
                       list[tuple[list[int], list[float] | None]]]


@dataclass
class _Rollout:
    prompt: list[int]
    seed: int
    ids: list[int] = field(default_factory=list)
    sampled: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    turn: int = 0
    turn_start: int = 0  # where the current turn's sampled ids begin in `ids`
    run: int = 0     # calls run (at most max_tool_calls)
    calls: int = 0   # calls answered: run, or refused past the limit
    errors: int = 0  # answers that were errors
    truncated: bool = False

    @property
    def own(self) -> int:
        return sum(self.sampled)

    def add(self, ids: list[int], sampled: int, logprobs: list[float] | None) -> None:
        self.ids += ids
        self.sampled += [sampled] * len(ids)
        if self.logprobs is not None:
            self.logprobs = None if logprobs is None else self.logprobs + logprobs


def _cut(tokens: list[int], logprobs, stops: set[int], limit: int):
    """Tokens up to and with the first stop token, at most `limit`; whether a stop ended them."""
    tokens = tokens[:limit]
    end = next((k for k, t in enumerate(tokens) if t in stops), None)
    kept = tokens if end is None else tokens[:end + 1]
    return kept, None if logprobs is None else list(logprobs[:len(kept)]), end is not None


def _answers(text: str, rollout: _Rollout, sampling: SamplingConfig) -> list[str]:
    """Answers to this turn's calls (counted on the rollout); calls past the limit are refused."""
    answers = []
    for body in tool_call_bodies(text):
        if rollout.run >= sampling.max_tool_calls:
            answer = ToolAnswer(f"error: no more tool calls (the limit is "
                                f"{sampling.max_tool_calls})", True)
        else:
            answer = answer_call(body, sampling.tools)
            rollout.run += 1
        rollout.calls += 1
        rollout.errors += answer.failed
        answers.append(answer.text)
    return answers


def run_rollouts(sample_round: SampleRound, tokenizer, prompts: list[str], n: int,
                 seeds: list[int], sampling: SamplingConfig,
                 should_stop: Callable[[], bool] | None = None,
                 context_limit: int | None = None) -> list[list[Completion]]:
    """result[i][j]: sample j of prompts[i] (see the module docstring). `context_limit` bounds
    prompt + completion when tools insert tokens (None: unbounded)."""
    encoded = encode_prompts(tokenizer, prompts, n, seeds)
    stops = set(stop_token_ids(tokenizer))
    rollouts = [[_Rollout(encoded[i], sample_seed(seeds[i], j)) for j in range(n)]
                for i in range(len(prompts))]
    limit = context_limit if sampling.tools != "none" else None
    pending = [r for row in rollouts for r in row]
    while pending:
        requests, ready = [], []
        for r in pending:
            room = sampling.max_new_tokens - r.own
            if limit is not None:
                room = min(room, limit - len(r.prompt) - len(r.ids))
            if room < 1:
                r.truncated = True  # a prompt that fills the context
                continue
            requests.append(Request(r.prompt + r.ids, turn_seed(r.seed, r.turn), room))
            ready.append(r)
        pending = ready
        if not pending:
            break
        outputs = sample_round(requests, sampling, should_stop)
        still = []
        for r, request, (tokens, logprobs) in zip(pending, requests, outputs, strict=True):
            kept, logprobs, stopped = _cut(tokens, logprobs, stops, request.max_tokens)
            r.add(kept, 1, logprobs)
            if not stopped:
                r.truncated = True
                continue
            if sampling.tools == "none" or r.run >= sampling.max_tool_calls:
                continue
            text = tokenizer.decode(kept, skip_special_tokens=True)
            if not tool_call_bodies(text):
                continue  # a turn without calls is the last one
            inserted = tokenizer(tool_turn_text(tokenizer, _answers(text, r, sampling)),
                                 add_special_tokens=False)["input_ids"]
            full = limit is not None and len(r.prompt) + len(r.ids) + len(inserted) >= limit
            if full or r.own >= sampling.max_new_tokens:
                r.truncated = True  # no room left for the model to answer
                continue
            r.add(inserted, 0, [0.0] * len(inserted))
            r.turn, r.turn_start = r.turn + 1, len(r.ids)
            still.append(r)
        pending = still
    return [[_completion(tokenizer, r) for r in row] for row in rollouts]


def _completion(tokenizer, r: _Rollout) -> Completion:
    inserted = 0 in r.sampled
    return Completion(
        text=tokenizer.decode(r.ids[r.turn_start:], skip_special_tokens=True),
        token_ids=r.ids, prompt_ids=list(r.prompt), truncated=r.truncated, logprobs=r.logprobs,
        sampled_mask=r.sampled if inserted else None,
        transcript=tokenizer.decode(r.ids, skip_special_tokens=True),
        tool_calls=r.calls, tool_errors=r.errors)
