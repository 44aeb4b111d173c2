"""4-bit NF4 through bitsandbytes: when a model loads in 4-bit, the one quantization the project
uses, and a pre-quantized checkpoint made the way hub bnb-4bit checkpoints are.

What --load-in-4bit means (relrl.modeling.loading.load_pretrained applies it):
- auto: a pre-quantized checkpoint (its config.json carries a bitsandbytes 4-bit
  `quantization_config`, as the default `unsloth/Qwen3-8B-unsloth-bnb-4bit` does) loads in 4-bit
  wherever bitsandbytes runs, CUDA or the CPU; a full-precision checkpoint loads in 4-bit on
  CUDA and in float32 on the CPU (so the CPU suite stays fast on full-precision models);
- yes: quantized on loading on any device where bitsandbytes runs, the CPU included;
- no: full precision; a pre-quantized checkpoint is refused (it cannot give full precision).

bitsandbytes (0.50.2, pinned in both sets) runs NF4 on the CPU as well as on CUDA: the 4-bit
path of the study (a pre-quantized checkpoint, LoRA on top, the adapter switched off for the
reference) runs in the CPU suite (tests/test_four_bit.py). It is imported only here and only
when a model is loaded in 4-bit.
"""
from __future__ import annotations

import contextlib
import json
import logging
import warnings
from pathlib import Path

import torch

from relrl.runtime.cli import UsageError

BNB_PIN = "bitsandbytes==0.50.2"  # the version both pinned sets carry
COMPUTE_DTYPE = torch.bfloat16  # the study's compute dtype, on the CPU too (the same code path)


def four_bit_wanted(load_in_4bit: bool | None, *, cuda: bool, prequantized: bool) -> bool:
    """Whether a hub or local model loads in 4-bit (the module docstring's table)."""
    if load_in_4bit is None:
        return prequantized or cuda
    return bool(load_in_4bit)


def prequantized(config: dict) -> bool:
    """A config.json (as a dict) of a checkpoint saved in bitsandbytes 4-bit."""
    quant = config.get("quantization_config") if isinstance(config, dict) else None
    return isinstance(quant, dict) and quant.get("quant_method") == "bitsandbytes" and \
        bool(quant.get("load_in_4bit") or quant.get("_load_in_4bit"))


@contextlib.contextmanager
def quiet_cpu_kernel_notice():
    """bitsandbytes, imported on a CPU with AVX512-BF16, warns that a faster kernel needs the
    `kernels` package (not needed: its own CPU kernel runs); keep that out of the run's log."""
    logger = logging.getLogger("bitsandbytes")
    level = logger.level
    logger.setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*kernels.*")
        try:
            yield
        finally:
            logger.setLevel(level)


def require_bitsandbytes(why: str) -> str:
    """bitsandbytes' version, or one line naming the package (and the pin) when it is absent."""
    try:
        with quiet_cpu_kernel_notice():  # it says so when imported
            import bitsandbytes  # optional and heavy: only when a model loads in 4-bit
    except ImportError:
        raise UsageError(f"--load-in-4bit: {why} needs bitsandbytes, which is not installed "
                         f"(pip install {BNB_PIN})") from None
    return str(bitsandbytes.__version__)


def bnb_config():
    """NF4 with double quantisation and bf16 compute: the study's 4-bit setting."""
    from transformers import BitsAndBytesConfig  # needs bitsandbytes at load time

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                              bnb_4bit_compute_dtype=COMPUTE_DTYPE,
                              bnb_4bit_use_double_quant=True)


def one_cpu_kernel(model) -> None:
    """On a CPU with AVX512-BF16, bitsandbytes repacks a Linear4bit's weight for a faster kernel
    the first time it runs in eval mode without gradients (every rollout does), and from then on
    every forward, training ones included, takes that kernel, which has no backward: the
    gradient through the frozen 4-bit weights is dropped (torch warns "an autograd kernel was
    not registered"), so every LoRA but the last layer's gets a wrong gradient. Switched off
    here, every CPU runs bitsandbytes' portable path (dequantize, then matmul, differentiable),
    and a test's verdict does not depend on the CPU's instruction set."""
    for module in model.modules():
        if hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False


def four_bit_layers(model) -> int:
    """How many bitsandbytes Linear4bit modules the model holds (0 without bitsandbytes)."""
    try:
        from bitsandbytes.nn import Linear4bit  # imported only to count its modules
    except ImportError:
        return 0
    return sum(isinstance(m, Linear4bit) for m in model.modules())


def save_pre_quantized(source: str | Path, dest: str | Path, device: str = "cpu") -> Path:
    """A pre-quantized 4-bit checkpoint in `dest`, made as hub bnb-4bit checkpoints are: the
    full-precision checkpoint `source` loaded with bnb_config() on `device` and written with
    save_pretrained (its quantization_config lands in config.json), tokenizer beside it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    require_bitsandbytes("a pre-quantized checkpoint")
    dest = Path(dest)
    with quiet_cpu_kernel_notice():
        model = AutoModelForCausalLM.from_pretrained(
            str(source), quantization_config=bnb_config(), dtype=COMPUTE_DTYPE,
            device_map={"": device})
    model.save_pretrained(str(dest))
    AutoTokenizer.from_pretrained(str(source)).save_pretrained(str(dest))
    config = json.loads((dest / "config.json").read_text())
    if not prequantized(config):
        raise RuntimeError(f"{dest}: save_pretrained wrote no 4-bit quantization_config")
    return dest
