"""Datasets in verl's RL format, for jobs that outgrow this project's trainer (slurm/verl_dapo.sh).

One parquet row per question, in the schema of verl's data preparation docs:
    data_source   names the reward function's data source (ours ignores it)
    prompt        the chat: this project's system prompt and the question (relrl.data.prompting)
    ability       "math": a numeric answer, as verl's math sets
    reward_model  {"style": "rule", "ground_truth": the answer string}
    extra_info    {"index", "split", "id", "group", "family", "topic", "answer_type",
                   "target_kind"}
The reward is relrl.grading.rewards.compute_score, the study's tiered grader, named in verl's
custom_reward_function.path / .name; it reads the target kind from extra_info, and the
tolerance rule from custom_reward_function.reward_kwargs.tolerance_rule (study when unset).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from relrl.data.prompting import chat_messages
from relrl.grading.target_kind import target_kind_of

DATA_SOURCE = "relrl/reliability"
ABILITY = "math"


def verl_record(row: dict, index: int, split: str, data_source: str = DATA_SOURCE) -> dict:
    """The verl row of one dataset row (as relrl.data.dataset_io.load_dataset returns it)."""
    def text(key):
        value = row.get(key)
        return None if value is None else str(value)

    return {
        "data_source": data_source,
        "prompt": chat_messages(row["question"]),
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": str(row["answer"])},
        "extra_info": {"index": index, "split": split, "id": str(row["id"]),
                       "group": text("group"), "family": text("family"),
                       "topic": text("topic"), "answer_type": text("answer_type"),
                       "target_kind": target_kind_of(row)},
    }


def write_parquet(path: str | os.PathLike, records: list[dict]) -> None:
    """Write records to a parquet file atomically (temporary file beside it, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(records)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
