"""Result files on disk, in one of two layouts (`write_result(..., records=...)`, the scripts'
`--records` flag):

- inline (the default): one JSON file holding everything, the per-question record lists
  included, as the study's `eval_$RUN_NAME.json` had them (`json.load(f)["base_results"]`).
- gzip (the compact layout): `X.json` holds everything but the record lists (what people,
  diffs and the study's table scripts read); `X.records.json.gz` holds the lists, keyed by
  where they sit ("results", "base_results", "base.results", ...). The summary's "records"
  entry names those places and the records file's SHA-256, so a summary never pairs with
  records another run wrote, and two runs that agree write the same bytes whatever the file is
  called.
- xz (the layout results/ commits): the same, with the lists in `X.records.json.xz` and
  "format": "xz" in the summary's "records" entry (an entry without "format" is gzip). Under half
  of gzip's size (results/: 26.7 MB of gzip, 11.9 MB of xz): each record repeats its completion
  (`response`, `transcript`) farther apart than gzip's 32 kB window.

`read_result` gives back the whole object from any layout.

Pair files also carry the study's `eval_$RUN_NAME.json` fields in the study's units (percent
rounded to 0.1, delta in points) from schema version 2 on; files without `schema_version` hold
fractions under those keys. `pair_accuracies` reads either as fractions.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import zlib
from pathlib import Path

from relrl.data.dataset_io import (DatasetError, atomic_write_bytes, atomic_write_json, parse_json,
                                   read_json)
from relrl.untrusted import MAX_BYTES

PAIR_SCHEMA_VERSION = 2
RECORDS_KEY = "records"
# where a model result, a screening result or a pair file keeps its record lists
RECORD_LISTS = ("results", "base_results", "ft_results", "base.results", "finetuned.results")
# --records: the lists inside the JSON (the study's layout), or in a file beside a summary
RECORDS_LAYOUTS = ("inline", "gzip", "xz")
# the compact layouts: the records file beside X.json, and the word an error calls it by
RECORDS_SUFFIXES = {"gzip": ".records.json.gz", "xz": ".records.json.xz"}
PACKED = {"gzip": "gzipped", "xz": "xz-compressed"}
# 9 | extreme: on six committed records files 543,860 bytes against plain 9's 585,572 (gzip's
# 1,287,060) for 1.9 times the time (260 s against 141 s on two shared cores); results are
# compressed once and committed for good. Fixed, so the same records give the same bytes.
XZ_PRESET = 9 | lzma.PRESET_EXTREME
# preset 9 decodes within 65 MiB: a blob declaring a larger dictionary is refused, not allocated
XZ_MEMLIMIT = 1 << 27


def add_records_arg(parser) -> None:
    """--records, the layout a script writes its result files in (write_result)."""
    parser.add_argument("--records", choices=RECORDS_LAYOUTS, default="inline",
                        help="inline: the per-question record lists (base_results, ft_results, "
                        "results) inside the result JSON, as the study's eval_$RUN_NAME.json had "
                        "them (default); gzip: a JSON summary beside X.records.json.gz, whose "
                        "SHA-256 it names; xz: the same beside X.records.json.xz, under half the "
                        "gzip's size (the layout results/ commits)")


def records_path(path: str | os.PathLike, layout: str = "gzip") -> Path:
    """The records file of result `path` in a compact layout ("gzip" or "xz")."""
    path = Path(path)
    return path.with_name(f"{path.name.removesuffix('.json')}{RECORDS_SUFFIXES[layout]}")


def records_paths(path: str | os.PathLike) -> tuple[Path, ...]:
    """Every records file result `path` may have beside it, one a compact layout."""
    return tuple(records_path(path, layout) for layout in RECORDS_SUFFIXES)


def records_layout(data) -> str:
    """The layout a result file read as JSON (read_json) is in: "inline", or the compact
    layout its "records" entry names (no "format": gzip, as written before xz)."""
    ref = data.get(RECORDS_KEY) if isinstance(data, dict) else None
    if not isinstance(ref, dict) or "sha256" not in ref:
        return "inline"
    return ref.get("format", "gzip")


def _split(result: dict) -> tuple[dict, dict]:
    """(summary, record lists): the summary copies only the dicts it changes."""
    summary, lists = dict(result), {}
    for where in RECORD_LISTS:
        *parents, leaf = where.split(".")
        holder = summary
        for key in parents:
            if not isinstance(holder.get(key), dict):
                break
            holder[key] = dict(holder[key])
            holder = holder[key]
        else:
            if isinstance(holder.get(leaf), list):
                lists[where] = holder.pop(leaf)
    return summary, lists


def write_result(path: str | os.PathLike, result: dict, *, records: str = "inline") -> None:
    """Write `result` as one JSON file with its record lists inline (`records="inline"`, the
    study's layout), or as X.json plus X.records.json.gz (`records="gzip"`) or
    X.records.json.xz (`records="xz"`): the records first, then the summary, then the records
    file of any other layout is removed, so a summary on disk always names records already
    written and no stale records sit beside a result. Same records, same bytes: no timestamp
    in the gzip, a fixed xz preset."""
    if records not in RECORDS_LAYOUTS:
        raise ValueError(f"records: one of {', '.join(RECORDS_LAYOUTS)}, got {records!r}")
    if records == "inline":
        whole = {key: value for key, value in result.items() if key != RECORDS_KEY}
        atomic_write_json(path, whole)
        _remove_records_but(path, None)
        return
    summary, lists = _split(result)
    summary.pop(RECORDS_KEY, None)
    kept = None
    if lists:
        kept = records_path(path, records)
        blob = _pack(json.dumps(lists, ensure_ascii=False).encode("utf-8"), records)
        atomic_write_bytes(kept, blob)
        summary[RECORDS_KEY] = {"lists": list(lists), "sha256": hashlib.sha256(blob).hexdigest()}
        if records != "gzip":  # without it an entry means gzip: the files written before xz
            summary[RECORDS_KEY]["format"] = records
    atomic_write_json(path, summary)
    _remove_records_but(path, kept)


def _pack(raw: bytes, layout: str) -> bytes:
    if layout == "gzip":
        return gzip.compress(raw, compresslevel=9, mtime=0)
    return lzma.compress(raw, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=XZ_PRESET)


def _remove_records_but(path: str | os.PathLike, kept: Path | None) -> None:
    for stale in records_paths(path):
        if stale != kept:
            stale.unlink(missing_ok=True)


def read_result(path: str | os.PathLike):
    """A result file with its records put back, or any other JSON file as it is."""
    data = read_json(path)
    layout = records_layout(data)
    if layout == "inline":
        return data
    if layout not in RECORDS_SUFFIXES:
        raise DatasetError(f"{path}: its records are in an unknown format {str(layout)[:40]!r} "
                           f"(known: {', '.join(RECORDS_SUFFIXES)})")
    file = records_path(path, layout)
    try:
        blob = file.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{path}: its records file {file.name} is missing") from None
    if hashlib.sha256(blob).hexdigest() != data[RECORDS_KEY].get("sha256"):
        raise DatasetError(f"{file}: not the records {Path(path).name} was written with "
                           "(checksum differs); rewrite both from one run")
    raw = _gunzip(blob, file) if layout == "gzip" else _unxz(blob, file)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{file}: unreadable {PACKED[layout]} JSON ({type(exc).__name__})") \
            from None
    lists = parse_json(text, file)  # relrl.untrusted: nesting and integers bounded
    if not isinstance(lists, dict):
        raise DatasetError(f"{file}: expected an object of record lists")
    data.pop(RECORDS_KEY)
    for where, records in lists.items():
        *parents, leaf = where.split(".")
        holder = data
        try:
            for key in parents:
                holder = holder[key]
            holder[leaf] = records
        except (KeyError, TypeError, IndexError):
            raise DatasetError(f"{file}: records for {where[:60]!r}, which {Path(path).name} "
                               "does not have") from None
    return data


def _gunzip(blob: bytes, file: Path) -> bytes:
    """Bounded: a gzip that inflates past MAX_BYTES is refused, not read into memory."""
    try:
        inflate = zlib.decompressobj(wbits=31)
        raw = inflate.decompress(blob, MAX_BYTES + 1)
    except zlib.error as exc:
        raise DatasetError(f"{file}: unreadable gzipped JSON ({type(exc).__name__})") from None
    if len(raw) > MAX_BYTES or inflate.unconsumed_tail:
        raise DatasetError(f"{file}: inflates past the {MAX_BYTES} bytes allowed")
    return raw


def _unxz(blob: bytes, file: Path) -> bytes:
    """Bounded as _gunzip, and in memory (XZ_MEMLIMIT); one whole xz stream, nothing after it."""
    unxz = lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=XZ_MEMLIMIT)
    try:
        raw = unxz.decompress(blob, max_length=MAX_BYTES + 1)
    except lzma.LZMAError as exc:
        raise DatasetError(f"{file}: unreadable xz-compressed JSON ({exc})") from None
    if len(raw) > MAX_BYTES:
        raise DatasetError(f"{file}: inflates past the {MAX_BYTES} bytes allowed")
    if not unxz.eof:
        raise DatasetError(f"{file}: unreadable xz-compressed JSON (it ends mid-stream)")
    if unxz.unused_data:
        raise DatasetError(f"{file}: unreadable xz-compressed JSON (bytes after its stream)")
    return raw


def study_fields(base_accuracy: float, ft_accuracy: float, *, n: int, run_name: str | None,
                 lora_path: str | None) -> dict:
    """The study's eval_$RUN_NAME.json fields in its units: percent rounded to 0.1, delta in
    points (from the unrounded accuracies)."""
    return {"schema_version": PAIR_SCHEMA_VERSION,
            "base_accuracy": round(100 * base_accuracy, 1), "ft_accuracy": round(100 * ft_accuracy, 1),
            "delta": round(100 * ft_accuracy - 100 * base_accuracy, 1),
            "n_questions": n, "run_name": run_name, "lora_path": lora_path}


def pair_accuracies(pair: dict) -> tuple[float, float, float]:
    """(base, fine-tuned, fine-tuned minus base) as fractions, from a pair file of any version:
    before version 2 the study's keys held fractions; from 2 the exact values are the two
    model results' own accuracies."""
    if pair.get("schema_version", 1) < 2:
        return pair["base_accuracy"], pair["ft_accuracy"], pair["delta"]
    base, ft = pair["base"]["accuracy"], pair["finetuned"]["accuracy"]
    return base, ft, ft - base
