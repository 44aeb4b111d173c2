"""Rewrite result files from the gzip records layout into xz, in place (docs/evaluation.md,
`--records`): every result file under the folders whose summary names gzipped records becomes
X.json beside X.records.json.xz, under half the gzip's size, and X.records.json.gz goes.

A file is rewritten only when read_result of its xz layout gives exactly what it gave for the
gzip one; one that does not is left as it is and named (exit status 1). The xz records go in
place before the summary that names them and the gzip goes last, so at no point does a summary
name a records file that is gone. Every result file is read whole before anything is written:
a missing folder or an unreadable result file stops the run with one line (exit status 2).

A stage ledger (stage_inputs.json, study/stage_inputs.py) in a folder above a rewritten file
that holds the hash of its old summary gets the new summary's: the same records in another
layout, so demo.py keeps the stages that read it done instead of running them again.

  python evaluation/recompress_results.py results/demo results/dev-100 --check
  python evaluation/recompress_results.py results/demo results/dev-100
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from relrl.data.dataset_io import atomic_write_json, read_json
from relrl.evaluation.results_io import read_result, records_layout, records_path, write_result
from relrl.runtime.cli import ArgumentParser, UsageError, run_main

LEDGER = "stage_inputs.json"  # study.stage_inputs.FILE_NAME, not imported: it loads torch
STAGING = ".recompress-"  # the temporary folder a file's xz layout is written and read in


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path,
                        help="folders searched, at any depth, for result files in the gzip layout")
    parser.add_argument("--check", action="store_true",
                        help="list what would change and the bytes it would save; write nothing")
    return parser.parse_args(argv)


@dataclass
class Change:
    path: Path
    before: int  # bytes of the summary and its records, gzip
    after: int  # the same, xz
    same: bool  # whether the xz layout reads back exactly as the gzip one did
    ledgers: list[Path]  # ledgers whose hash of the summary was (or would be) updated


def gzip_results(folders: list[Path]) -> list[Path]:
    """Every result file in the gzip layout under the folders, each read whole once so that a
    bad one stops the run before anything is written."""
    found = set()
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"{folder}: no such folder")
        for path in folder.rglob("*.json"):
            staged = any(part.startswith(STAGING) for part in path.parts)
            if path.is_file() and not staged and records_layout(read_json(path)) == "gzip":
                found.add(path)
    paths = sorted(found)
    for path in paths:
        read_result(path)
    for ledger in {ledger for path in paths for ledger in ledgers_above(path)}:
        read_json(ledger)
    return paths


def ledgers_above(path: Path) -> list[Path]:
    return [folder / LEDGER for folder in path.resolve().parents if (folder / LEDGER).is_file()]


def canonical(result) -> str:
    """The JSON text of a result: equal texts, equal keys, order, values and types."""
    return json.dumps(result, ensure_ascii=False)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def size(path: Path, layout: str) -> int:
    return path.stat().st_size + records_path(path, layout).stat().st_size


def recompress(path: Path, check: bool) -> Change:
    """Write the xz layout in a temporary folder (beside the file, so that the renames into
    place are atomic), read it back, and unless checking move it in: records, summary, then
    the gzip removed."""
    old_hash, before = sha256(path), size(path, "gzip")
    old = read_result(path)
    expected = canonical(old)
    with tempfile.TemporaryDirectory(prefix=STAGING, dir=None if check else path.parent) as tmp:
        staged = Path(tmp) / path.name
        write_result(staged, old, records="xz")
        same = canonical(read_result(staged)) == expected
        change = Change(path, before, size(staged, "xz"), same, [])
        if not same:
            return change
        new_hash = sha256(staged)
        if not check:
            os.replace(records_path(staged, "xz"), records_path(path, "xz"))
            os.replace(staged, path)
            records_path(path, "gzip").unlink()
    change.ledgers = relink_ledgers(path, old_hash, new_hash, write=not check)
    return change


def relink_ledgers(path: Path, old_hash: str, new_hash: str, *, write: bool) -> list[Path]:
    """Ledgers above `path` whose inputs named its old summary by hash, given the new one."""
    changed = []
    for ledger in ledgers_above(path):
        entries = read_json(ledger)
        if relink(entries, path.name, old_hash, new_hash):
            if write:  # as study.stage_inputs.Ledger writes it: the same bytes but the hash
                atomic_write_json(ledger, entries)
            changed.append(ledger)
    return changed


def relink(entries, name: str, old_hash: str, new_hash: str) -> int:
    """How many inputs named `name` with hash old_hash now hold new_hash (in place)."""
    count = 0
    for entry in entries.values() if isinstance(entries, dict) else ():
        inputs = entry.get("inputs") if isinstance(entry, dict) else None
        files = inputs.get("files") if isinstance(inputs, dict) else None
        for key, value in (files.items() if isinstance(files, dict) else ()):
            if value == old_hash and Path(key).name == name:
                files[key] = new_hash
                count += 1
    return count


def describe(change: Change, check: bool) -> str:
    if not change.same:
        return f"left {change.path}: its xz layout does not read back as its gzip one did"
    verb, updated = ("would convert", "would be updated") if check else ("converted", "updated")
    line = f"{verb} {change.path}: {change.before:,} -> {change.after:,} bytes"
    return "\n".join([line, *(f"  {ledger}: its hash of {change.path.name} {updated}"
                              for ledger in change.ledgers)])


def main(argv=None) -> int:
    args = parse_args(argv)
    changes = []
    for path in gzip_results(args.folders):
        changes.append(recompress(path, args.check))
        print(describe(changes[-1], args.check), flush=True)
    done = [c for c in changes if c.same]
    before, after = sum(c.before for c in done), sum(c.after for c in done)
    print(f"{len(done)} result files {'would go' if args.check else 'went'} from gzip to xz: "
          f"{before:,} -> {after:,} bytes ({before - after:,} saved); "
          f"{len(changes) - len(done)} left as they were")
    return 1 if len(done) < len(changes) else 0


if __name__ == "__main__":
    run_main(main)
