"""What made each of demo.py's results: a stage's command and a content hash of every input
it names, kept in one ledger per results folder (stage_inputs.json), beside the results.

A result file alone proves nothing: results/demo/eval/ is committed, so it exists in every
clone, while the adapters it measured are retrained there. A stage therefore counts as done
only when its result exists and the ledger says it finished from the same inputs as now: the
same command (settings, seeds, flags such as --tolerance-rule) and the same bytes in every
input file and adapter. Inputs are the files and folders among the command's arguments (given
as Path objects) other than the stage's result and the folders that hold it; an adapter folder
counts by its config and weights alone, so a checkpoint's timings do not make it "changed".

The code version is recorded with each entry but not compared: comparing it would send a
finished study back through hours of training at every commit. Code that changes a result does
so through a flag the command records, or one deletes that result to have it made again.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

from relrl.data.dataset_io import atomic_write_json, read_json
from relrl.modeling.loading import ADAPTER_WEIGHT_FILES

FILE_NAME = "stage_inputs.json"
ADAPTER_FILES = ("adapter_config.json", *ADAPTER_WEIGHT_FILES)
# Flags (each with one value) that choose how a result is laid out on disk, never what it holds:
# left out when two commands are compared, so a result written before the demo asked for
# `--records gzip` (the layout it had then by default) stays done.
LAYOUT_FLAGS = ("--records",)


def digest(path: Path) -> str | None:
    """sha256 of a file; of a folder, of its files' names and contents (an adapter folder's
    config and weights only); None when the path does not exist."""
    if path.is_file():
        return _file_hash(path)
    if not path.is_dir():
        return None
    files = [f for f in sorted(path.rglob("*")) if f.is_file()]
    if (path / "adapter_config.json").is_file():
        files = [path / name for name in ADAPTER_FILES if (path / name).is_file()]
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.relative_to(path).as_posix()}\0{_file_hash(f)}\n".encode())
    return h.hexdigest()


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def inputs_of(args: list, result: Path, shown: Callable[[object], str] = str) -> dict:
    """The stage's command as `shown` writes it, and the hash of each input path in it."""
    def is_output(p: Path) -> bool:
        return result == p or result.is_relative_to(p)

    return {"command": [shown(a) for a in args],
            "files": {shown(a): digest(a) for a in args
                      if isinstance(a, Path) and not is_output(a)}}


def result_command(command: list | None) -> list | None:
    """A recorded command without its layout flags (LAYOUT_FLAGS): what the result depends on."""
    if command is None:
        return None
    kept, skip = [], False
    for arg in command:
        if skip:
            skip = False
        elif arg in LAYOUT_FLAGS:
            skip = True
        else:
            kept.append(arg)
    return kept


def same_inputs(before: dict | None, now: dict) -> bool:
    """Whether two inputs_of records make the same result: the same files, and the same command
    but for its layout flags."""
    return before is not None and not changed(before, now)


def changed(before: dict, now: dict) -> list[str]:
    """What differs between two inputs_of records: "command" and the input paths."""
    out = ["command"] if result_command(before.get("command")) != result_command(now["command"]) \
        else []
    files = before.get("files", {})
    return out + sorted(k for k in {*files, *now["files"]} if files.get(k) != now["files"].get(k))


class Ledger:
    """stage name -> {"inputs", "finished", "code"}; written whole and atomically. Callers
    that run stages side by side hold one lock around get/put."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / FILE_NAME

    def get(self, stage: str) -> dict | None:
        return read_json(self.path).get(stage) if self.path.is_file() else None

    def put(self, stage: str, inputs: dict, *, finished: bool, code: str) -> None:
        entries = read_json(self.path) if self.path.is_file() else {}
        entries[stage] = {"inputs": inputs, "finished": finished, "code": code}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, dict(sorted(entries.items())))


def made_from(entry: dict | None, inputs: dict) -> bool:
    """Whether a ledger entry is a finished run from exactly these inputs."""
    return bool(entry and entry.get("finished") and same_inputs(entry.get("inputs"), inputs))
