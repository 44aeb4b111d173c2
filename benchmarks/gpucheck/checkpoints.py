"""The checkpoints every path loads, made once in --work-dir and reused by a rerun: a
random-weight model with Qwen3-8B's architecture (bf16 safetensors on CUDA, float32 on the CPU)
and a pre-quantized 4-bit one: the default model from the hub where it is reachable (--model
auto on a GPU), else those random weights quantized to NF4 by bitsandbytes and written with
save_pretrained, as hub bnb-4bit checkpoints are."""
from __future__ import annotations

import json
import os
import shutil

import torch

from gpucheck.common import SHAPE_KEYS, Check, cuda, model_config
from gpucheck.environment import Skip, require
from relrl.modeling.four_bit import prequantized, save_pre_quantized
from relrl.modeling.tiny_tokenizer import fixed_tokenizer

DEFAULT_MODEL = "unsloth/Qwen3-8B-unsloth-bnb-4bit"  # the study's --model
HUB_TIMEOUT_S = 10


def prepare_checkpoint(check: Check, out: dict) -> None:
    """Random weights in the architecture, saved with a tokenizer, so every loader
    (transformers, bitsandbytes, Unsloth, vLLM) reads the same folder offline."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    folder = check.folder
    wanted = model_config(check.config)
    if (folder / "model.safetensors.index.json").is_file() or (folder / "model.safetensors").is_file():
        saved = json.loads((folder / "config.json").read_text())
        if all(saved.get(key) == wanted[key] for key in SHAPE_KEYS):
            out["reused"] = str(folder)
            return
        shutil.rmtree(folder)  # saved by an older version of this check with other dimensions
    torch.manual_seed(0)
    dtype = torch.bfloat16 if cuda() else torch.float32
    with torch.device("cuda" if cuda() else "cpu"):
        model = Qwen3ForCausalLM(Qwen3Config(**wanted)).to(dtype)
    tmp = folder.with_name(folder.name + ".partial")
    model.save_pretrained(tmp)
    fixed_tokenizer().save_pretrained(tmp)
    del model
    tmp.rename(folder)
    out["saved"] = str(folder)


def hub_snapshot(repo: str) -> tuple[str | None, str]:
    """(local folder of `repo`, how it was had) where the hub answers; (None, why) where not."""
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return None, "HF_HUB_OFFLINE=1"
    try:
        from huggingface_hub import model_info, snapshot_download
    except ImportError:
        return None, "huggingface_hub is not installed"
    try:
        model_info(repo, timeout=HUB_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - any failure means: not reachable from here
        return None, f"the hub is not reachable ({type(exc).__name__})"
    return snapshot_download(repo), "downloaded or cached"


def prepare_nf4(check: Check, out: dict) -> None:
    """The pre-quantized 4-bit checkpoint the exp7 and 4bit paths load by path."""
    require("bitsandbytes")
    pointer = check.work_dir / f"{check.config}-nf4.source"
    pointer.unlink(missing_ok=True)
    if check.model == "auto" and check.config == "qwen3-8b":
        folder, how = hub_snapshot(DEFAULT_MODEL)
        if folder is not None:
            pointer.write_text(folder)
            out.update(source=DEFAULT_MODEL, folder=folder, how=how)
            return
        out["hub"] = f"{DEFAULT_MODEL}: {how}; random weights quantized instead"
    folder = check.nf4_folder
    out["source"] = "random weights, quantized here"
    wanted = model_config(check.config)
    if (folder / "config.json").is_file():
        saved = json.loads((folder / "config.json").read_text())
        if prequantized(saved) and all(saved.get(key) == wanted[key] for key in SHAPE_KEYS):
            out["reused"] = str(folder)
            return
        shutil.rmtree(folder)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    save_pre_quantized(check.folder, tmp, device="cuda" if cuda() else "cpu")
    tmp.rename(folder)
    out.update(saved=str(folder), bytes=sum(f.stat().st_size for f in folder.glob("*.safetensors")))


def hub_model(check: Check) -> bool:
    """The 4-bit checkpoint is the hub's default model (its tokenizer, real weights)."""
    return (check.work_dir / f"{check.config}-nf4.source").is_file()


__all__ = ["Skip", "hub_model", "prepare_checkpoint", "prepare_nf4"]
