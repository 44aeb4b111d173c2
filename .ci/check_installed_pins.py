"""CI: the installed CPU set is constraints-cpu.txt, so what `make test` ran on is the set the
repository pins. Every pinned package installed at its pinned version, nothing else installed
(pip and setuptools aside), and torchvision/torchaudio/torchcodec absent (make install removes
them: PyPI's builds break beside the CPU torch). The last line reads "N passed, M failed".
"""
from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

PINS = Path(__file__).resolve().parent.parent / "constraints-cpu.txt"
REMOVED = {"torchvision", "torchaudio", "torchcodec"}
UNPINNED_OK = {"pip", "setuptools", "wheel", "relrl"}  # relrl: this repository, installed editable


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main() -> int:
    pins = {}
    for line in PINS.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if match:
            pins[norm(match[1])] = match[2]
    installed = {norm(d.metadata["Name"]): d.version for d in metadata.distributions()}
    problems = []
    for name, version in sorted(pins.items()):
        if name in REMOVED:
            if name in installed:
                problems.append(f"{name} {installed[name]} is installed (make install removes it)")
        elif installed.get(name) != version:
            problems.append(f"{name}: pinned {version}, installed {installed.get(name, 'nothing')}")
    for name in sorted(set(installed) - set(pins) - UNPINNED_OK):
        problems.append(f"{name} {installed[name]} is installed but not pinned")
    for problem in problems:
        print(f"FAIL {problem}")
    checked = len(pins) + len(set(installed) - set(pins) - UNPINNED_OK)
    print(f"installed pins: {checked - len(problems)} passed, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
