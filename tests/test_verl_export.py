"""The verl export: parquet in verl's RL schema that round-trips through pyarrow and datasets,
whose rows each score 1.0 for their own worked solution under relrl.grading.rewards.compute_score, and
whose reward function verl's own loader accepts (when verl is installed)."""
import importlib.util
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from conftest import ROOT

from relrl.data.prompting import SYSTEM_PROMPT
from relrl.grading.rewards import compute_score
from relrl.grading.scoring import TOLERANCE_RULES
from relrl.grading.target_kind import target_kind_of
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import FAMILIES

BUILD = ROOT / "generators" / "build_dataset.py"


def export(tmp_path, *extra):
    rows = generate_rows(list(FAMILIES.values()), 40, seed=11, paraphrases=1)
    train, val = rows[:30], rows[30:]
    for name, part in (("train", train), ("val", val)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    out = tmp_path / "verl"
    out.mkdir()
    run = subprocess.run([sys.executable, str(BUILD), "export-verl", "--train",
                          str(tmp_path / "train.jsonl"), "--val", str(tmp_path / "val.jsonl"),
                          "--out-dir", str(out), *extra], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    return out, train, val, run


def test_export_round_trips_and_every_worked_solution_scores_one(tmp_path):
    from datasets import load_dataset

    out, train, val, run = export(tmp_path)
    assert json.loads(run.stdout) == {
        "train": {"rows": 30, "file": str(out / "train.parquet")},
        "validation": {"rows": 10, "file": str(out / "validation.parquet")}}
    for split, rows in (("train", train), ("validation", val)):
        table = pq.read_table(out / f"{split}.parquet").to_pylist()
        loaded = load_dataset("parquet", data_files=str(out / f"{split}.parquet"),
                              split="train")
        assert loaded.to_list() == table and len(table) == len(rows)
        assert set(table[0]) == {"data_source", "prompt", "ability", "reward_model",
                                 "extra_info"}
        for i, (record, row) in enumerate(zip(table, rows)):
            assert record["data_source"] == "relrl/reliability"
            assert record["prompt"] == [{"role": "system", "content": SYSTEM_PROMPT},
                                        {"role": "user", "content": row["question"].strip()}]
            assert record["reward_model"] == {"style": "rule", "ground_truth": row["answer"]}
            info = record["extra_info"]
            assert (info["index"], info["split"], info["id"], info["group"], info["family"]) \
                == (i, split, row["id"], row["group"], row["family"])
            assert info["target_kind"] == target_kind_of(row)
            for rule in TOLERANCE_RULES:
                score = compute_score(record["data_source"], row["reasoning"],
                                      record["reward_model"]["ground_truth"], info,
                                      tolerance_rule=rule)
                assert score == 1.0, (row["id"], row["reasoning"][-80:], row["answer"], rule)
            assert compute_score(record["data_source"], "\\boxed{-12345}",
                                 record["reward_model"]["ground_truth"]) < 0.5


def test_export_refuses_a_bad_row_before_writing(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"question": "q with no answer"}\n')
    out = tmp_path / "verl"
    out.mkdir()
    run = subprocess.run([sys.executable, str(BUILD), "export-verl", "--train",
                          str(tmp_path / "bad.jsonl"), "--out-dir", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 2 and "bad.jsonl:1" in run.stderr
    assert run.stderr.count("\n") == 1 and not list(out.iterdir())


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed")
def test_verl_loads_the_custom_reward_function():
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = OmegaConf.create({"custom_reward_function": {
        "path": str(ROOT / "relrl" / "grading" / "rewards.py"), "name": "compute_score",
        "reward_kwargs": {}}})
    fn = get_custom_reward_fn(config)
    assert fn(data_source="relrl/reliability", solution_str="so \\boxed{0.25}",
              ground_truth="0.25", extra_info={}) == 1.0
