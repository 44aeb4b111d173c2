"""Every run of a demo stage, kept in the results folder (stage_times.jsonl), so a study that is
stopped and resumed across sessions still reports how long each stage took and which commit of
the code ran it.

One JSON line per attempt: {"stage", "start", "end" (Unix seconds), "status" (the script's exit
status, or "interrupted"), "code" (commit, "+changes" when tracked files differed from it)}.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from relrl.untrusted import UntrustedInputError, iter_jsonl

FILE_NAME = "stage_times.jsonl"


def code_version(root: Path) -> str:
    """Short commit of the checkout at `root`, "+changes" when tracked files differ from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        head = git("rev-parse", "--short=12", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + ("+changes" if changed else "")


def record(path: Path, stage: str, start: float, end: float, status, code: str) -> None:
    """Append one attempt. One write of one short line to a file opened for appending, so
    stages finishing side by side never interleave and a kill cannot leave half a line."""
    line = json.dumps({"stage": stage, "start": round(start, 1), "end": round(end, 1),
                       "status": status, "code": code}) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


FIELDS = ("stage", "start", "end", "status", "code")


def read(path: Path) -> list[dict]:
    """Every attempt recorded in `path` ([] when there is none yet). A line that is not one of
    record()'s is an UntrustedInputError naming path:line (relrl.untrusted bounds the rest)."""
    if not path.is_file():
        return []
    records = []
    for line_no, row in iter_jsonl(path):
        if not isinstance(row, dict) or any(name not in row for name in FIELDS) or not all(
                isinstance(row[t], (int, float)) and not isinstance(row[t], bool)
                for t in ("start", "end")):
            raise UntrustedInputError(path, f"not a stage record (needs {', '.join(FIELDS)})",
                                      line_no)
        records.append(row)
    return records


def per_stage(records: list[dict]) -> list[dict]:
    """Stage -> attempts, seconds summed over them, the last status and the commits, in the
    order the stages first ran."""
    out: dict[str, dict] = {}
    for r in records:
        row = out.setdefault(r["stage"], {"stage": r["stage"], "attempts": 0, "seconds": 0.0,
                                          "codes": []})
        row["attempts"] += 1
        row["seconds"] += r["end"] - r["start"]
        row["status"] = r["status"]
        if r["code"] not in row["codes"]:
            row["codes"].append(r["code"])
    return list(out.values())


def busy_seconds(records: list[dict]) -> float:
    """Wall-clock time some stage was running: the union of the attempts' intervals, so stages
    run side by side count once and the gaps between sessions not at all."""
    total, until = 0.0, float("-inf")
    for start, end in sorted((r["start"], r["end"]) for r in records):
        if end > until:
            total += end - max(start, until)
            until = end
    return total
