"""The built-in models: `tiny-random` (random weights, instant) and `tiny` (trained, cached).

Both are Qwen3ForCausalLM with a locally trained byte-level BPE tokenizer, so every script runs
the same code path on a laptop as on Qwen3-8B, with nothing downloaded. Load them by name
with relrl.models.by_name.load_model; `tiny` is built by relrl.models.tiny_build.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from relrl.modeling.tiny_tokenizer import fixed_tokenizer

# The checkout this package was installed from (pip install -e .), whose .cache holds built models.
REPO_ROOT = Path(__file__).resolve().parents[2]

# About 1M parameters: 4 blocks of width 128 and a 512-token vocabulary (tied embeddings).
TINY_RANDOM_DIMS = dict(hidden_size=128, intermediate_size=512, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=32)


def cache_root() -> Path:
    """Where built models live: $RELRL_CACHE, else .cache/relrl in the checkout, else (an install
    outside a checkout) ~/.cache/relrl."""
    if os.environ.get("RELRL_CACHE"):
        return Path(os.environ["RELRL_CACHE"])
    if (REPO_ROOT / "pyproject.toml").is_file():
        return REPO_ROOT / ".cache" / "relrl"
    return Path.home() / ".cache" / "relrl"


# transformers' model classes are imported where a model is made: importing them costs seconds,
# and every trainer and evaluation script imports this module (through relrl.models.by_name).
def qwen3_config(tokenizer, max_positions: int = 2048, **dims) -> Qwen3Config:
    from transformers import Qwen3Config

    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return Qwen3Config(
        vocab_size=len(tokenizer),
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        eos_token_id=stop,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        **dims,
    )


def new_model(config: Qwen3Config, seed: int, name: str) -> Qwen3ForCausalLM:
    """Freshly initialised weights that depend only on `seed` (global RNG left untouched)."""
    from transformers import GenerationConfig, Qwen3ForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id)
    name_model(model, name)
    return model


def name_model(model, name: str) -> None:
    # Adapters record this as their base, so `tiny` adapters say "tiny", not a cache path.
    model.config.name_or_path = name
    model.name_or_path = name


def build_tiny_random(seed: int = 0):
    tokenizer = fixed_tokenizer()
    model = new_model(qwen3_config(tokenizer, **TINY_RANDOM_DIMS), seed, "tiny-random")
    return model.float().eval(), tokenizer

