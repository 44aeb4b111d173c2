"""Build a built-in model in a process of its own whose floating point does not depend on the CPU.

torch picks its vectorised kernels by the CPU it finds (ATEN_CPU_CAPABILITY: default, avx2,
avx512), MKL its GEMM code path (MKL_CBWR) and oneDNN its instruction set (ONEDNN_MAX_CPU_ISA);
each choice rounds differently, so one recipe trained on an AVX-512 machine and on an AVX2 one
gave other weights (docs/testing.md, "The same bits on every CPU"). A build therefore runs in a
child process with all three pinned to AVX2, which every x86-64 server since about 2015 has, and
with its thread count fixed: the weights are then the same bits on any such CPU. Each setting
is read once when the library loads, so pinning means a fresh process, never this one.

    python -m relrl.models.pinned_build MODULE:FUNCTION FOLDER RECIPE_JSON

runs FUNCTION(recipe_dict, folder) under the pins (what the builders call; not a user command).
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

CAPABILITY = "avx2"  # what torch reports back, upper-cased, when the pin took
PINS = {
    "ATEN_CPU_CAPABILITY": CAPABILITY,
    "MKL_CBWR": "AVX2,STRICT",  # STRICT: the same bits whatever the arrays' memory alignment
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
}


def pinned_env(threads: int, env: dict | None = None) -> dict[str, str]:
    """`env` (default this process's environment) with the pins and `threads` threads for every
    library."""
    count = str(threads)
    return {**(os.environ if env is None else env), **PINS, "OMP_NUM_THREADS": count, "MKL_NUM_THREADS": count,
            "RELRL_PINNED_BUILD": "1"}


def in_pinned_process() -> bool:
    """Whether this process was started with the pins (and torch honoured them)."""
    if os.environ.get("RELRL_PINNED_BUILD") != "1":
        return False
    return all(os.environ.get(k) == v for k, v in PINS.items())


def capability_note() -> str | None:
    """A line saying why this process cannot give the registered bits, or None when it can."""
    import torch  # read once a process: the capability this process really runs

    found = torch.backends.cpu.get_cpu_capability()
    if found.lower() != CAPABILITY:
        return (f"this CPU runs torch's {found} kernels, not {CAPABILITY.upper()}: the build "
                f"will differ from the registered bits (use the shipped model instead)")
    return None


def run_pinned(target: str, folder: Path, recipe: dict, threads: int,
               env: dict | None = None) -> None:
    """Run `target` ("module:function") on (recipe, folder) in a pinned child process started
    from `env` (default this process's environment); its output goes where this process's
    goes. Raises RuntimeError if the child fails."""
    command = [sys.executable, "-m", "relrl.models.pinned_build", target, str(folder),
               json.dumps(recipe)]
    done = subprocess.run(command, env=pinned_env(threads, env))
    if done.returncode != 0:
        raise RuntimeError(f"the pinned build of {folder} failed (exit status {done.returncode})")


def main() -> None:
    target, folder, recipe = sys.argv[1:4]
    if not in_pinned_process():
        sys.exit("relrl.models.pinned_build runs only as the pinned child of a build")
    note = capability_note()
    if note:
        print(f"warning: {note}", file=sys.stderr, flush=True)
    module, function = target.split(":")
    getattr(importlib.import_module(module), function)(json.loads(recipe), Path(folder))


if __name__ == "__main__":
    main()
