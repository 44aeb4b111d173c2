"""Checkpoints that resume exactly, shared by the GRPO, SFT and DPO trainers.

A checkpoint is a folder `checkpoint-N/` (N = the trainer's step count) holding
    adapter_model.safetensors, adapter_config.json   standard PEFT files: any PEFT tool loads them
    optimizer.pt, scheduler.pt                       torch state dicts
    rng_state.json                                   python, numpy, torch (and CUDA) global RNG
                                                     states plus any named generators
    trainer_state.json                               the trainer's own state and the run fingerprint
It is written into a temporary folder beside its final place and renamed, so a kill mid-write
never leaves a half checkpoint under a checkpoint name.

The run fingerprint (a hash of the settings that define a run) stops a second run from writing
into a folder that holds another run's checkpoints unless it is told to resume or overwrite.
SLURM's notice before a time limit becomes a flag in relrl.runtime.stop (StopFlag), which the
trainers poll to write a checkpoint at a safe point.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

from relrl.runtime.cli import UsageError
from relrl.untrusted import UntrustedInputError, load_json_file

STATE_FILE = "trainer_state.json"
_NAME = re.compile(r"^checkpoint-(\d+)$")


def run_fingerprint(settings: dict) -> str:
    """A short hash of the settings that make two runs the same run."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def list_checkpoints(output_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, folder) of every complete checkpoint-N/ in output_dir, by step."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = []
    for child in output_dir.iterdir():
        match = _NAME.match(child.name)
        if match and (child / STATE_FILE).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def read_state(checkpoint: str | os.PathLike) -> dict:
    path = Path(checkpoint) / STATE_FILE
    if not path.is_file():
        raise UsageError(f"{checkpoint}: not a checkpoint (no {STATE_FILE})")
    return _read_json(path)


def _read_json(path: Path):
    """A checkpoint's JSON through relrl.untrusted: a bad file is a UsageError naming it."""
    try:
        return load_json_file(path)
    except UntrustedInputError as exc:
        raise UsageError(str(exc)) from None


def prepare_output_dir(output_dir: str | os.PathLike, fingerprint: str, *, resume=None,
                       overwrite: bool = False, run_files: tuple[str, ...] = ()) -> Path | None:
    """Check the output folder before any work; return the checkpoint to resume from, if any.

    resume: None (start a new run), True (the latest checkpoint, or a new run when there is
    none) or a checkpoint path. overwrite deletes this folder's checkpoints, best/ and the
    named run_files (logs, statistics), nothing else.
    """
    output_dir = Path(output_dir)
    if resume and overwrite:
        raise UsageError("--resume and --overwrite exclude each other")
    found = list_checkpoints(output_dir)
    if overwrite:
        for _, folder in found:
            shutil.rmtree(folder)
        for name in ("best", *run_files):
            target = output_dir / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        return None
    if resume:
        checkpoint = found[-1][1] if resume is True and found else None
        if resume is not True:
            checkpoint = Path(resume)
            read_state(checkpoint)  # a clear error when it is not a checkpoint
        if checkpoint is None:
            print(f"no checkpoint in {output_dir}: starting a new run", file=sys.stderr)
            return None
        theirs = read_state(checkpoint).get("fingerprint")
        if theirs != fingerprint:
            print(f"warning: resuming {checkpoint}, written with different settings "
                  f"(fingerprint {theirs}, now {fingerprint})", file=sys.stderr)
        return checkpoint
    if found:
        step, folder = found[-1]
        theirs = read_state(folder).get("fingerprint")
        whose = "this run's" if theirs == fingerprint else f"another run's (fingerprint {theirs})"
        raise UsageError(f"{output_dir} already holds {whose} checkpoints up to {folder.name}: "
                         "pass --resume to continue or --overwrite to start again")
    return None


def _rng_state(generators: dict) -> dict:
    legacy = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": [legacy[0], legacy[1].tolist(), *legacy[2:]],
        "torch": torch.get_rng_state().tolist(),
        "cuda": [s.tolist() for s in torch.cuda.get_rng_state_all()]
        if torch.cuda.is_available() else [],
        "generators": {},
    }
    for name, gen in generators.items():
        if isinstance(gen, torch.Generator):
            state["generators"][name] = gen.get_state().tolist()
        elif isinstance(gen, np.random.Generator):
            state["generators"][name] = gen.bit_generator.state
        elif isinstance(gen, random.Random):
            state["generators"][name] = gen.getstate()
        else:
            raise TypeError(f"generator {name!r}: unsupported type {type(gen).__name__}")
    return state


def _set_rng_state(state: dict, generators: dict) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), *rest))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])
    for name, gen in generators.items():
        saved = state["generators"][name]
        if isinstance(gen, torch.Generator):
            gen.set_state(torch.tensor(saved, dtype=torch.uint8))
        elif isinstance(gen, np.random.Generator):
            gen.bit_generator.state = saved
        else:
            version, internal, gauss = saved
            gen.setstate((version, tuple(internal), gauss))


def _fsync_tree(folder: Path) -> None:
    for path in folder.iterdir():
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())


def save_checkpoint(folder: str | os.PathLike, *, model, state: dict, fingerprint: str,
                    optimizer=None, scheduler=None, generators: dict | None = None) -> Path:
    """Write a complete checkpoint to `folder` atomically (temp folder, then rename)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".tmp-{folder.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        tmp.mkdir()
        # PEFT's default would look the base model up on the hub to decide about embeddings
        model.save_pretrained(str(tmp), save_embedding_layers=False)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        if scheduler is not None:
            torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        (tmp / "rng_state.json").write_text(json.dumps(_rng_state(generators or {})))
        payload = {"fingerprint": fingerprint, **state}
        # key order kept: a resumed run must write byte-identical statistics
        (tmp / STATE_FILE).write_text(json.dumps(payload, indent=1) + "\n")
        _fsync_tree(tmp)
        old = folder.parent / f".old-{folder.name}-{os.getpid()}"
        if folder.exists():
            folder.rename(old)
        tmp.rename(folder)
        if old.exists():
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def load_adapter_weights(model, checkpoint: str | os.PathLike) -> None:
    """Copy a checkpoint's adapter weights into `model`'s (already attached, same config)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = load_file(str(Path(checkpoint) / "adapter_model.safetensors"))
    result = set_peft_model_state_dict(model, weights)
    missing = [k for k in getattr(result, "missing_keys", []) if "lora_" in k]
    if missing:
        raise UsageError(f"{checkpoint}: adapter does not match the model ({missing[0]} missing)")


def load_checkpoint(checkpoint: str | os.PathLike, *, model=None, optimizer=None,
                    scheduler=None, generators: dict | None = None) -> dict:
    """Restore what was saved into the given objects; return the trainer state."""
    checkpoint = Path(checkpoint)
    state = read_state(checkpoint)
    if model is not None:
        load_adapter_weights(model, checkpoint)
    # Onto the CPU first: saved as they were on rank 0's GPU, the tensors would otherwise all
    # land there (or fail where that GPU is absent); load_state_dict moves the optimiser's state
    # to its parameters' device.
    if optimizer is not None:
        optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location="cpu",
                                              weights_only=True))
    if scheduler is not None:
        scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", map_location="cpu",
                                              weights_only=True))
    rng = _read_json(checkpoint / "rng_state.json")
    _set_rng_state(rng, generators or {})
    return state
