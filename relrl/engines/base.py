"""What every rollout engine shares: sampling settings, completions, seeds, the interface.

An engine turns prompts into n completions each, sample j of prompt i seeded by
sample_seed(seeds[i], j), so a question's completions do not depend on what else is in the
call. The trainer and the evaluation runner hold an Engine and never ask which one:
  generate(prompts, n, seeds, sampling, should_stop=None) -> result[i][j] (a Completion)
  sync_adapter(model)   after an optimiser update: the next generate uses the new adapter
  base_policy()         a block in which the adapter is off (the base model's behaviour)
  updating()            a block around an optimiser update (vLLM may sleep to free memory)
  close()
`should_stop` is asked once per decoding step; when it says yes, generate ends within that
step and raises GenerationStopped, returning nothing of the call, so the caller can forget the
call and a resumed run draws it again.
"""
from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass
from typing import Callable

from relrl.runtime.cli import UsageError
from relrl.tools.protocol import DEFAULT_MAX_TOOL_CALLS, TOOL_CHOICES

STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
ENGINES = ("hf", "hf-merged", "vllm")


class GenerationStopped(Exception):
    """`should_stop` said yes during generate(); no completion of that call is returned. The
    engines' own exception: a caller catches it without knowing which engine ran."""


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 1.0
    top_p: float = 0.95
    max_new_tokens: int = 3072
    # 0: no top-k. Like top-p, a truncation the sampler's reported log-probs do not include
    # (they are of the untruncated distribution), so the importance ratio is biased by it.
    top_k: int = 0
    micro_batch: int = 32
    do_sample: bool = True  # False: greedy decoding, temperature and top_p unused
    tools: str = "none"  # --tools: "calculator" runs the model's tool calls (relrl.engines.tool_loop)
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS  # calls a completion may make; more are not run

    def __post_init__(self):
        if not self.max_new_tokens > 0:
            raise UsageError(f"--max-new-tokens: must be >= 1, got {self.max_new_tokens}")
        if self.do_sample and not self.temperature > 0:
            raise UsageError(f"--temperature: must be > 0 when sampling, got {self.temperature} "
                             "(use greedy decoding for a deterministic answer)")
        if not 0 < self.top_p <= 1:
            raise UsageError(f"--top-p: must be in (0, 1], got {self.top_p}")
        if not self.top_k >= 0:
            raise UsageError(f"--top-k: must be >= 1 (or 0: off), got {self.top_k}")
        if not self.micro_batch >= 1:
            raise UsageError(f"--micro-batch: must be >= 1, got {self.micro_batch}")
        if self.tools not in TOOL_CHOICES:
            raise UsageError(f"--tools: one of {', '.join(TOOL_CHOICES)}, got {self.tools!r}")
        if not self.max_tool_calls >= 0:
            raise UsageError(f"--max-tool-calls: must be >= 0, got {self.max_tool_calls}")


@dataclass
class Completion:
    text: str  # the model's last turn, decoded without special tokens: what the grader reads
    # Every token after the prompt: the sampled ones and, with tools, the ones the engine
    # inserted (tool answers and the next assistant prefix); ends with the stop token unless
    # truncated. The trainer scores exactly these ids.
    token_ids: list[int]
    prompt_ids: list[int]
    truncated: bool  # the model's own tokens hit max_new_tokens (or the context) before a stop
    # The sampler's log-prob of each token under the unmodified (temperature 1, no top-p or
    # top-k) distribution, when the engine reports them (vLLM; 0.0 where inserted); None (HF).
    logprobs: list[float] | None = None
    # 1 where the model sampled the token, 0 where the engine inserted it; None: all sampled.
    # Inserted tokens stay out of the loss, the KL, the entropy, the importance ratio, the
    # overlong penalty and the SFT labels.
    sampled_mask: list[int] | None = None
    transcript: str = ""  # the whole completion decoded, tool calls and answers included
    tool_calls: int = 0   # calls answered (run, or refused past --max-tool-calls)
    tool_errors: int = 0  # of which answered with an error (malformed, failed or refused)

    def __post_init__(self):
        if not self.transcript:
            self.transcript = self.text

    @property
    def sampled_tokens(self) -> int:
        """How many of token_ids the model sampled (what --max-new-tokens limits)."""
        return len(self.token_ids) if self.sampled_mask is None else sum(self.sampled_mask)


def _hash_seed(*parts) -> int:
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def question_seed(base_seed: int, qid) -> int:
    """A question's seed from the run seed and its id: independent of the question's position."""
    return _hash_seed("question", base_seed, qid)


def sample_seed(seed: int, index: int) -> int:
    """The seed of sample `index` of a question whose seed is `seed`."""
    return _hash_seed("sample", seed, index)


def turn_seed(seed: int, turn: int) -> int:
    """The seed of turn `turn` of a sample seeded `seed` (turn 0, before any tool call: `seed`
    itself, so a completion without tool calls is the one a run without tools samples)."""
    return seed if turn == 0 else _hash_seed("turn", seed, turn)


def stop_token_ids(tokenizer) -> list[int]:
    vocab = tokenizer.get_vocab()
    ids = {vocab[t] for t in STOP_TOKENS if t in vocab}
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return sorted(ids)


def encode_prompts(tokenizer, prompts: list[str], n: int, seeds: list[int]) -> list[list[int]]:
    """Token ids of each prompt, after the checks every engine makes."""
    if len(seeds) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts but {len(seeds)} seeds")
    if n < 1:
        raise UsageError(f"--samples: must be >= 1, got {n}")
    encoded = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    if any(len(e) == 0 for e in encoded):
        raise UsageError("empty prompt")
    return encoded


class Engine:
    """The interface; see the module docstring."""

    name = "base"

    def generate(self, prompts: list[str], n: int, seeds: list[int], sampling: SamplingConfig,
                 should_stop: Callable[[], bool] | None = None) -> list[list[Completion]]:
        raise NotImplementedError

    def sync_adapter(self, model) -> None:
        """Make the next generate use `model`'s current adapter weights."""

    @contextlib.contextmanager
    def base_policy(self):
        """Generate with the adapter off inside the block."""
        yield self

    @contextlib.contextmanager
    def updating(self):
        """Around an optimiser update."""
        yield self

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
