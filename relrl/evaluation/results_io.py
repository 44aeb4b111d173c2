"""Result files on disk, in one of two layouts (`write_result(..., records=...)`, the scripts'
`--records` flag):

- inline (the default): one JSON file holding everything, the per-question record lists
  included, as the study's `eval_$RUN_NAME.json` had them (`json.load(f)["base_results"]`).
- gzip (the compact layout the repository commits): `X.json` holds everything but the record
  lists (what people, diffs and the study's table scripts read); `X.records.json.gz` holds the
  lists, keyed by where they sit ("results", "base_results", "base.results", ...). The
  summary's "records" entry names those places and the gzip's SHA-256, so a summary never
  pairs with records another run wrote, and two runs that agree write the same bytes whatever
  the file is called.

`read_result` gives back the whole object from either layout.

Pair files also carry the study's `eval_$RUN_NAME.json` fields in the study's units (percent
rounded to 0.1, delta in points) from schema version 2 on; files without `schema_version` hold
fractions under those keys. `pair_accuracies` reads either as fractions.
"""
from __future__ import annotations

import gzip
import hashlib
import json
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
# --records: the lists inside the JSON (the study's layout), or in a gzip beside a summary
RECORDS_LAYOUTS = ("inline", "gzip")


def add_records_arg(parser) -> None:
    """--records, the layout a script writes its result files in (write_result)."""
    parser.add_argument("--records", choices=RECORDS_LAYOUTS, default="inline",
                        help="inline: the per-question record lists (base_results, ft_results, "
                        "results) inside the result JSON, as the study's eval_$RUN_NAME.json had "
                        "them (default); gzip: the compact layout results/ commits, a JSON summary "
                        "beside X.records.json.gz, whose SHA-256 it names")


def records_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path.with_name(f"{path.name.removesuffix('.json')}.records.json.gz")


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
    study's layout), or as X.json plus X.records.json.gz (`records="gzip"`; the summary last,
    so a summary on disk always names records already written; same records, same bytes: no
    timestamp in the gzip). A records file that an earlier compact write left beside an inline
    one is removed, so no stale records sit beside a result."""
    if records not in RECORDS_LAYOUTS:
        raise ValueError(f"records: one of {', '.join(RECORDS_LAYOUTS)}, got {records!r}")
    if records == "inline":
        whole = {key: value for key, value in result.items() if key != RECORDS_KEY}
        atomic_write_json(path, whole)
        records_path(path).unlink(missing_ok=True)
        return
    summary, lists = _split(result)
    summary.pop(RECORDS_KEY, None)
    if lists:
        target = records_path(path)
        blob = gzip.compress(json.dumps(lists, ensure_ascii=False).encode("utf-8"),
                             compresslevel=9, mtime=0)
        atomic_write_bytes(target, blob)
        summary[RECORDS_KEY] = {"lists": list(lists), "sha256": hashlib.sha256(blob).hexdigest()}
    atomic_write_json(path, summary)


def read_result(path: str | os.PathLike):
    """A result file with its records put back, or any other JSON file as it is."""
    data = read_json(path)
    ref = data.get(RECORDS_KEY) if isinstance(data, dict) else None
    if not isinstance(ref, dict) or "sha256" not in ref:
        return data
    file = records_path(path)
    try:
        blob = file.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{path}: its records file {file.name} is missing") from None
    if hashlib.sha256(blob).hexdigest() != ref.get("sha256"):
        raise DatasetError(f"{file}: not the records {Path(path).name} was written with "
                           "(checksum differs); rewrite both from one run")
    try:  # bounded: a gzip that inflates past MAX_BYTES is refused, not read into memory
        inflate = zlib.decompressobj(wbits=31)
        raw = inflate.decompress(blob, MAX_BYTES + 1)
        if len(raw) > MAX_BYTES or inflate.unconsumed_tail:
            raise DatasetError(f"{file}: inflates past the {MAX_BYTES} bytes allowed")
        text = raw.decode("utf-8")
    except (zlib.error, UnicodeDecodeError) as exc:
        raise DatasetError(f"{file}: unreadable gzipped JSON ({type(exc).__name__})") from None
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
