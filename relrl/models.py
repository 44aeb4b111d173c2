"""Every model by name: the built-in `tiny-random` and `tiny`, a Hugging Face id, a local folder.

The built-in models sit above model loading (relrl.modeling) and the engines (relrl.engines):
`tiny` is built with the HF engine. This module, one layer higher still, resolves the built-in
names and hands every other name down, so no lower module needs to know the built-in models.
Scripts load models, tokenizers and engines from here.
"""
from __future__ import annotations

from pathlib import Path

import torch

from relrl import engines
from relrl.cli import load_in_4bit_flag
from relrl.engines import DEFAULT_VLLM_MEMORY, Engine
from relrl.engines import vllm as vllm_engine
from relrl.modeling import (BUILTIN_MODELS, check_load_flags, check_model_source, finish_loading,
                            load_adapter, load_pretrained)
from relrl.tiny_build import load_or_build_tiny, tiny_dir
from relrl.tiny_models import build_tiny_random


def load_builtin(name: str, seed: int = 0):
    """(model, tokenizer) of a built-in model on the CPU; `seed` sets `tiny-random`'s weights."""
    if name == "tiny-random":
        return build_tiny_random(seed)
    if name == "tiny":
        return load_or_build_tiny()
    raise ValueError(f"unknown built-in model {name!r}")


def load_model(name_or_path: str, *, load_in_4bit: bool | None = None, use_unsloth: bool = False,
               seed: int = 0, flag: str = "--model"):
    """(model, tokenizer) in eval mode. `seed` sets the weights of `tiny-random` and Unsloth's
    random_state.

    load_in_4bit=None means: 4-bit NF4 on CUDA for hub/local models, full precision otherwise
    (the built-in models always load in float32).
    """
    if name_or_path not in BUILTIN_MODELS:
        return load_pretrained(name_or_path, load_in_4bit=load_in_4bit, use_unsloth=use_unsloth,
                               seed=seed, flag=flag)
    check_load_flags(load_in_4bit, use_unsloth)
    model, tokenizer = load_builtin(name_or_path, seed=seed)
    if torch.cuda.is_available():
        model.to("cuda")
    return finish_loading(model, tokenizer)


def load_tokenizer(name: str):
    """The tokenizer alone, set up as load_model sets it."""
    check_model_source(name)
    if name in BUILTIN_MODELS:  # a few MB: loading the model too costs nothing
        return load_model(name)[1]
    return vllm_engine.load_tokenizer(name)


def base_folder(source: str, seed: int, scratch: Path) -> str:
    """What vLLM loads: a hub id or folder as given, the built-in models from disk (`tiny` from
    its cache, `tiny-random` saved to the engine's scratch folder with this seed's weights)."""
    if source == "tiny":
        folder = tiny_dir()
        if not (folder / "config.json").is_file():
            load_or_build_tiny()
        return str(folder)
    if source == "tiny-random":
        model, tokenizer = build_tiny_random(seed)  # the weights load_model gives for this seed
        folder = scratch / "tiny-random"
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return str(folder)
    return source


def make_engine(name: str, model, tokenizer, *, source: str | None = None, seed: int = 0,
                adapter: str | None = None, max_new_tokens: int = 3072,
                gpu_memory_utilization: float = DEFAULT_VLLM_MEMORY) -> Engine:
    """relrl.engines.make_engine, with vLLM able to serve the built-in models by name."""
    return engines.make_engine(name, model, tokenizer, source=source, seed=seed, adapter=adapter,
                               max_new_tokens=max_new_tokens,
                               gpu_memory_utilization=gpu_memory_utilization,
                               base_folder=base_folder)


def open_engine(args, *, adapter: str | None = None, max_new_tokens: int = 3072,
                seed: int = 0):
    """(engine, tokenizer) for an evaluation script: hf loads the model (and the frozen
    adapter); vllm loads only the tokenizer and serves the base model and adapter itself."""
    name = args.rollout_engine
    engines.check_memory_fraction(args.vllm_gpu_memory_utilization)
    if name == "vllm":
        engines.require_vllm()
        tokenizer = load_tokenizer(args.model)
        return make_engine("vllm", None, tokenizer, source=args.model, seed=seed, adapter=adapter,
                           max_new_tokens=max_new_tokens,
                           gpu_memory_utilization=args.vllm_gpu_memory_utilization), tokenizer
    model, tokenizer = load_model(args.model, load_in_4bit=load_in_4bit_flag(args))
    if adapter is not None:
        model = load_adapter(model, adapter, trainable=False)
    return make_engine("hf", model, tokenizer), tokenizer
