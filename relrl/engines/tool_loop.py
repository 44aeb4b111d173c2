"""Multi-turn rollouts: generate until a turn ends, run the tool calls it made, insert the
answers, continue. Two drivers share every rule below (one rollout's state, its next request,
the end of its turn):
- run_rollouts, in rounds: `sample_round` samples one turn for every pending request, then all
  their calls are answered (the HF engine: generate is one static batch, nothing can join it).
- run_async, one engine step at a time (vLLM): a TurnStream takes requests at any step, and a
  turn that ends with calls is answered and resubmitted at once, so no request waits for the
  longest turn of a round. Same seeds and the same rules: on an engine whose sampling does not
  depend on the batch, the same completions as the rounds.

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
from typing import Callable, Protocol

from relrl.data.prompting import tool_turn_text
from relrl.engines.base import (
    Completion,
    GenerationStopped,
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


class _Turns:
    """What both drivers share: the rollouts of one generate call, the next request of each,
    and what the end of a turn does (the rules of the module docstring)."""

    def __init__(self, tokenizer, prompts, n, seeds, sampling: SamplingConfig, context_limit):
        encoded = encode_prompts(tokenizer, prompts, n, seeds)
        self.tokenizer, self.sampling = tokenizer, sampling
        self.stops = set(stop_token_ids(tokenizer))
        self.rows = [[_Rollout(encoded[i], sample_seed(seeds[i], j)) for j in range(n)]
                     for i in range(len(prompts))]
        self.limit = context_limit if sampling.tools != "none" else None

    def request(self, r: _Rollout) -> Request | None:
        """The rollout's next turn, or None (and truncated) when it has no room for one."""
        room = self.sampling.max_new_tokens - r.own
        if self.limit is not None:
            room = min(room, self.limit - len(r.prompt) - len(r.ids))
        if room < 1:
            r.truncated = True  # a prompt that fills the context
            return None
        return Request(r.prompt + r.ids, turn_seed(r.seed, r.turn), room)

    def end_turn(self, r: _Rollout, request: Request, tokens: list[int], logprobs) -> bool:
        """Add a sampled turn to its rollout and answer its calls; whether the rollout goes on."""
        sampling = self.sampling
        kept, logprobs, stopped = _cut(tokens, logprobs, self.stops, request.max_tokens)
        r.add(kept, 1, logprobs)
        if not stopped:
            r.truncated = True
            return False
        if sampling.tools == "none" or r.run >= sampling.max_tool_calls:
            return False
        text = self.tokenizer.decode(kept, skip_special_tokens=True)
        if not tool_call_bodies(text):
            return False  # a turn without calls is the last one
        inserted = self.tokenizer(tool_turn_text(self.tokenizer, _answers(text, r, sampling)),
                                  add_special_tokens=False)["input_ids"]
        full = self.limit is not None and len(r.prompt) + len(r.ids) + len(inserted) >= self.limit
        if full or r.own >= sampling.max_new_tokens:
            r.truncated = True  # no room left for the model to answer
            return False
        r.add(inserted, 0, [0.0] * len(inserted))
        r.turn, r.turn_start = r.turn + 1, len(r.ids)
        return True

    def completions(self) -> list[list[Completion]]:
        return [[_completion(self.tokenizer, r) for r in row] for row in self.rows]


def run_rollouts(sample_round: SampleRound, tokenizer, prompts: list[str], n: int,
                 seeds: list[int], sampling: SamplingConfig,
                 should_stop: Callable[[], bool] | None = None,
                 context_limit: int | None = None) -> list[list[Completion]]:
    """result[i][j]: sample j of prompts[i], in rounds (see the module docstring).
    `context_limit` bounds prompt + completion when tools insert tokens (None: unbounded)."""
    turns = _Turns(tokenizer, prompts, n, seeds, sampling, context_limit)
    pending = [r for row in turns.rows for r in row]
    while pending:
        requests = [turns.request(r) for r in pending]
        pending = [r for r, q in zip(pending, requests) if q is not None]
        requests = [q for q in requests if q is not None]
        if not pending:
            break
        outputs = sample_round(requests, sampling, should_stop)
        pending = [r for r, q, (tokens, logprobs) in zip(pending, requests, outputs, strict=True)
                   if turns.end_turn(r, q, tokens, logprobs)]
    return turns.completions()


class TurnStream(Protocol):
    """An engine sampled one step at a time (vLLM's scheduler): turns can be submitted between
    any two steps, and each step returns the turns it ended."""

    def submit(self, keys: list[int], requests: list[Request]) -> None: ...

    def busy(self) -> bool:
        """Whether any turn is in flight."""

    def step(self) -> list[tuple[int, list[int], list[float] | None]]:
        """(key, sampled ids, their log-probs or None) of every turn this step ended; ids may
        run past a stop token or max_tokens, as with SampleRound."""

    def abort(self) -> None:
        """Drop every turn in flight."""


def run_async(stream: TurnStream, tokenizer, prompts: list[str], n: int, seeds: list[int],
              sampling: SamplingConfig, should_stop: Callable[[], bool] | None = None,
              context_limit: int | None = None) -> list[list[Completion]]:
    """result[i][j] as run_rollouts gives it, each rollout at its own pace: should_stop is asked
    before every step (a yes aborts the turns in flight and raises GenerationStopped), and a
    turn that ends with calls is answered and its next turn submitted before the next step."""
    turns = _Turns(tokenizer, prompts, n, seeds, sampling, context_limit)
    rollouts = [r for row in turns.rows for r in row]
    in_flight: dict[int, Request] = {}

    def submit(keys):
        asked = {k: q for k in keys if (q := turns.request(rollouts[k])) is not None}
        if asked:
            stream.submit(list(asked), list(asked.values()))
            in_flight.update(asked)

    submit(range(len(rollouts)))
    while in_flight:
        if should_stop is not None and should_stop():
            stream.abort()
            raise GenerationStopped
        again = [k for k, tokens, logprobs in stream.step()
                 if turns.end_turn(rollouts[k], in_flight.pop(k), tokens, logprobs)]
        submit(again)
    return turns.completions()


def _completion(tokenizer, r: _Rollout) -> Completion:
    inserted = 0 in r.sampled
    return Completion(
        text=tokenizer.decode(r.ids[r.turn_start:], skip_special_tokens=True),
        token_ids=r.ids, prompt_ids=list(r.prompt), truncated=r.truncated, logprobs=r.logprobs,
        sampled_mask=r.sampled if inserted else None,
        transcript=tokenizer.decode(r.ids, skip_special_tokens=True),
        tool_calls=r.calls, tool_errors=r.errors)
