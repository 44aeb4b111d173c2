"""Splitting an evaluation into shards (one SLURM array task each) and merging their files:
rows go round-robin to shards, each shard writes OUT.shard-i-of-n.json, and --merge checks the
set is complete and from one run before it rebuilds the whole result."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from relrl.data.dataset_io import DatasetError
from relrl.evaluation import results_io
from relrl.evaluation.model_results import with_records
from relrl.runtime.cli import UsageError, env_default, parse_shard


def shard_rows(rows: Sequence[dict], index: int, count: int) -> list[dict]:
    """Round-robin: shard i gets rows i, i+n, ... so families spread over shards."""
    return list(rows[index::count])


def shard_path(output: str | Path, index: int, count: int) -> Path:
    output = Path(output)
    return output.with_name(f"{output.stem}.shard-{index}-of-{count}{output.suffix}")


def resolve_shard(spec: str | None) -> tuple[int, int]:
    """--shard, else the study's CHUNK_INDEX / N_CHUNKS, else SLURM array variables."""
    if spec is None:
        index, count = env_default("CHUNK_INDEX", None), env_default("N_CHUNKS", None)
        if index is not None and count is not None:
            spec = f"{index}/{count}"
    return parse_shard(spec)


def load_shards(output: str | Path, fingerprint: str) -> list[dict]:
    """All shard files of `output`, checked to be one complete set for this dataset."""
    output = Path(output)
    found = sorted(output.parent.glob(f"{output.stem}.shard-*-of-*{output.suffix}"))
    if not found:
        raise UsageError(f"--merge: no shard files {output.stem}.shard-I-of-N{output.suffix} "
                         f"in {output.parent}")
    counts = {int(p.stem.rsplit("-of-", 1)[1]) for p in found}
    if len(counts) != 1:
        raise UsageError(f"--merge: shard files of different shard counts {sorted(counts)} "
                         f"in {output.parent}; remove the stale ones")
    count = counts.pop()
    shards = []
    for index in range(count):
        path = shard_path(output, index, count)
        if not path.exists():
            raise UsageError(f"--merge: {path} is missing (run shard {index}/{count} first)")
        data = results_io.read_result(path)
        info = data.get("shard") if isinstance(data, dict) else None
        if not info or info.get("index") != index or info.get("count") != count:
            raise DatasetError(f"{path}: not shard {index}/{count} of a run")
        if info.get("dataset_fingerprint") != fingerprint:
            raise UsageError(f"--merge: {path} was run on another dataset than --dataset")
        shards.append(data)
    return shards


def merge_records(rows: Sequence[dict], parts: Sequence[Sequence[dict]]) -> list[dict]:
    """Records from all shards, in dataset order; every question exactly once."""
    by_id: dict[str, dict] = {}
    for part in parts:
        for record in part:
            if str(record["id"]) in by_id:
                raise UsageError(f"--merge: question {record['id']} appears in two shards")
            by_id[str(record["id"])] = record
    missing = [row["id"] for row in rows if str(row["id"]) not in by_id]
    if missing or len(by_id) != len(rows):
        raise UsageError(f"--merge: shards cover {len(by_id)} of {len(rows)} questions "
                         f"(missing e.g. {missing[:3]})")
    return [by_id[str(row["id"])] for row in rows]


def same_meta(results: Sequence[dict], what: str) -> None:
    """Refuse to merge one model's shard results that come from different runs."""
    keys = ("model", "model_path", "adapter", "dataset", "settings")
    first = {k: results[0][k] for k in keys}
    for other in results[1:]:
        if {k: other[k] for k in keys} != first:
            raise UsageError(f"--merge: the {what} shards come from different runs")


def merged_model_result(rows: Sequence[dict], shard_results: Sequence[dict], what: str) -> dict:
    same_meta(shard_results, what)
    return with_records(shard_results[0], merge_records(rows, [s["results"] for s in shard_results]))


def write_result(path: str | Path, result: dict, shard: tuple[int, int] | None = None,
                 fingerprint: str | None = None, *, records: str = "inline") -> Path:
    """Write the final result, or a shard file carrying what --merge checks, in the `records`
    layout (results_io.write_result: "inline" or "gzip")."""
    path = Path(path)
    if shard is not None and shard[1] > 1:
        result = {**result, "shard": {"index": shard[0], "count": shard[1],
                                      "dataset_fingerprint": fingerprint}}
        path = shard_path(path, *shard)
    results_io.write_result(path, result, records=records)
    return path
