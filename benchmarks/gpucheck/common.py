"""What the steps share: the shapes, the model configs, the Check every step reads, and the
helpers that sample, score and compare log-probs."""
from __future__ import annotations

import json
import platform
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from relrl.data.prompting import build_prompt
from relrl.engines import SamplingConfig
from relrl.modeling.loading import device_of
from relrl.modeling.logprobs import completion_logprobs, pack_sequences

ROOT = Path(__file__).resolve().parents[2]
CONFIG_8B = ROOT / "benchmarks" / "configs" / "qwen3-8b" / "config.json"
# The study's shapes, and scaled-down ones a CPU runs in seconds (the same code paths).
SHAPES = {
    "qwen3-8b": {"completion": 3072, "prompt": 256, "hf_rollout_tokens": 512,
                 "vllm_rollout_tokens": 1024, "sft_tokens": 4096},
    "small": {"completion": 48, "prompt": 16, "hf_rollout_tokens": 8, "vllm_rollout_tokens": 8,
              "sft_tokens": 64},
}
SMALL_DIMS = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "vocab_size": 4096,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32}
SHAPE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim")
G, GROUPS, TRAIN_MICRO_BATCH, SFT_MICRO_BATCH = 4, 4, 4, 2
GEN_BATCH = 8  # exp7's questions per generation call in batch mode (recipe default)
LORA_R = 32
# adapter_sync sets every lora_B to N(0, this): a LoRA that moves the log-probs far more than
# the sampler and the trainer disagree
SYNC_B_STD = 0.2
STOP_AFTER_STEPS = 3


@dataclass
class Check:
    """What the steps share: settings, the checkpoint folder, each path's live objects."""
    config: str
    shapes: dict
    vocab: int
    work_dir: Path
    vllm_memory: float
    skip_vllm: bool
    model: str = "random"  # checkpoint_nf4's source: random, or auto (the hub's default model)
    paths: dict = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        """The random-weight full-precision checkpoint (checkpoint)."""
        return self.work_dir / self.config

    @property
    def nf4_folder(self) -> Path:
        """The pre-quantized 4-bit checkpoint: checkpoint_nf4 writes where it is (the hub's
        snapshot, or the random weights quantized) into this file."""
        pointer = self.work_dir / f"{self.config}-nf4.source"
        return Path(pointer.read_text().strip()) if pointer.is_file() else self.work_dir / f"{self.config}-nf4"


# ---------------------------------------------------------------------------- helpers
def model_config(name: str) -> dict:
    config = json.loads(CONFIG_8B.read_text())
    if name == "small":
        config.update(SMALL_DIMS, max_window_layers=SMALL_DIMS["num_hidden_layers"])
    return config


def cuda() -> bool:
    return torch.cuda.is_available()


def sync():
    if cuda():
        torch.cuda.synchronize()


def random_ids(n: int, vocab: int, gen: torch.Generator) -> list[int]:
    return torch.randint(10, vocab, (n,), generator=gen).tolist()


def gpu_name() -> str:
    name = torch.cuda.get_device_name() if cuda() else f"cpu-{platform.machine()}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")


def trainer_logprobs(model, completions) -> list[list[float]]:
    """The trainer's log-probs of each completion's tokens (eval mode, no grad)."""

    ids, attention, start = pack_sequences([c.prompt_ids for c in completions],
                                           [c.token_ids for c in completions], 0)
    device = device_of(model)
    with torch.no_grad():
        logp = completion_logprobs(model, ids.to(device), attention.to(device), start)
    return [logp[k, :len(c.token_ids)].float().tolist() for k, c in enumerate(completions)]


def sampler_vs_trainer(completions, trainer: list[list[float]]) -> dict:
    """How far the sampler's reported log-probs are from the trainer's, per token, and the
    importance ratio p_trainer / p_sampler that truncated importance sampling would use."""
    diffs = [t - s for c, row in zip(completions, trainer) for s, t in zip(c.logprobs, row)]
    ratios = torch.tensor(diffs).exp()
    return {"tokens": len(diffs), "mean_abs_diff": float(torch.tensor(diffs).abs().mean()),
            "max_abs_diff": float(torch.tensor(diffs).abs().max()),
            "ratio_mean": float(ratios.mean()), "ratio_above_2": float((ratios > 2).float().mean())}


def mean_abs(a: list[list[float]], b: list[list[float]]) -> float:
    pairs = [(x, y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)]
    return sum(abs(x - y) for x, y in pairs) / len(pairs)


def rollout(engine, prompts, new_tokens: int, out: dict, seed: int = 0) -> list:
    """G completions of each prompt through `engine`; tokens/s into `out`."""

    sync()
    start = time.perf_counter()
    rows = engine.generate(prompts, G, list(range(seed, seed + len(prompts))),
                           SamplingConfig(max_new_tokens=new_tokens, micro_batch=G * len(prompts)))
    sync()
    seconds = time.perf_counter() - start
    completions = [c for row in rows for c in row]
    generated = sum(len(c.token_ids) for c in completions)
    out.update(sequences=len(completions), new_tokens=generated, max_new_tokens=new_tokens,
               generate_seconds=round(seconds, 2), tokens_per_s=round(generated / seconds, 1))
    return completions


def scripted_call(real, tokenizer, call_ids: list[int]):
    """A sample_round whose first turn is a calculator call (random weights never write one) and
    whose later turns are the model's own."""
    def round_(*args):
        requests, out = args[-3], real(*args)
        first = [tokenizer.decode(r.ids).count("<|im_start|>assistant") == 1 for r in requests]
        return [(call_ids, [0.0] * len(call_ids)) if f else o for f, o in zip(first, out)]
    return round_



# Prompts in the study's format (its system prompt and chat template, the model's tokenizer)
# with reliability questions, not random ids.
QUESTIONS = (
    "A pump fails at a constant rate of 0.002 per hour. What is its reliability at 500 hours?",
    "Two identical components with reliability 0.9 each work in parallel. What is the system reliability?",
    "A bearing has a Weibull life with shape 2 and scale 1000 h. What is its reliability at 500 h?",
    "A system has MTBF 2000 h and MTTR 10 h. What is its steady-state availability?",
)


def study_prompts(tokenizer, n: int, tools: str = "none") -> list[str]:
    return [build_prompt(tokenizer, QUESTIONS[k % len(QUESTIONS)], tools=tools) for k in range(n)]
