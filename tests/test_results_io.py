"""Result files: by default one JSON with the record lists inline (the study's
eval_$RUN_NAME.json, read with json.load), or with --records gzip the plain summary beside its
gzipped records, read back whole; the study's units; old committed files and new ones read to
the same fractions."""
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from eval_helpers import adapter, write_rows  # noqa: F401

from relrl.data.dataset_io import DatasetError, load_dataset
from relrl.evaluation.model_results import compare_models, model_result
from relrl.evaluation.results_io import pair_accuracies, read_result, records_path, write_result
from relrl.evaluation.settings import EvalSettings

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted(p for p in (ROOT / "results").glob("**/eval/*/*.json"))
OLD_PAIR = ROOT / "results" / "demo-replication" / "seed-2" / "eval" / "heldout" / "grpo_exp7_best.json"


def model(label: str, correct: list[bool], adapter: str | None = None) -> dict:
    records = [{"id": f"q{i}", "question": f"q{i}?", "target": "1", "extracted": "1", "value": 1.0,
                "correct": c, "truncated": False, "reward": float(c), "response": "\\boxed{1}",
                "pass_count": int(c), "samples": 1} for i, c in enumerate(correct)]
    return model_result(records, label=label, model_path="tiny", adapter=adapter, dataset="d",
                        fingerprint="f", settings=EvalSettings())


def pair(**kw) -> dict:
    return compare_models(model("base", [True, False, False, True]),
                          model("exp7", [True, True, False, True], adapter="runs/exp7/best"),
                          n_boot=50, **kw)


def test_by_default_the_record_lists_are_inline_as_the_study_wrote_them(tmp_path):
    result = pair()
    path = tmp_path / "eval_x.json"
    write_result(path, result)
    with open(path) as handle:
        plain = json.load(handle)
    assert plain == json.loads(json.dumps(result)) and "records" not in plain
    assert [r["id"] for r in plain["base_results"]] == ["q0", "q1", "q2", "q3"]
    assert [r["correct"] for r in plain["ft_results"]] == [True, True, False, True]
    assert not records_path(path).exists()
    assert read_result(path) == result


def test_an_inline_write_removes_the_records_an_earlier_compact_write_left(tmp_path):
    path = tmp_path / "eval_x.json"
    write_result(path, pair(), records="gzip")
    assert records_path(path).exists()
    write_result(path, pair())
    assert not records_path(path).exists() and "base_results" in json.loads(path.read_text())


def test_an_unknown_layout_is_refused(tmp_path):
    with pytest.raises(ValueError, match="records: one of inline, gzip"):
        write_result(tmp_path / "x.json", pair(), records="zip")
    assert not (tmp_path / "x.json").exists()


def test_records_go_to_a_gzip_beside_a_plain_summary_and_read_back_whole(tmp_path):
    result = pair()
    path = tmp_path / "eval_x.json"
    write_result(path, result, records="gzip")
    assert records_path(path) == tmp_path / "eval_x.records.json.gz"
    summary = json.loads(path.read_text())
    assert not {"base_results", "ft_results"} & set(summary)
    assert "results" not in summary["base"] and "results" not in summary["finetuned"]
    lists = json.loads(gzip.decompress(records_path(path).read_bytes()))
    assert summary["records"]["lists"] == list(lists) == [
        "base_results", "ft_results", "base.results", "finetuned.results"]
    assert read_result(path) == result
    before = (path.read_bytes(), records_path(path).read_bytes())
    write_result(path, read_result(path), records="gzip")  # same bytes (no gzip timestamp)
    assert (path.read_bytes(), records_path(path).read_bytes()) == before


def test_a_model_result_and_a_file_without_records_file(tmp_path):
    alone = model("base", [True, False])
    write_result(tmp_path / "m.json", alone, records="gzip")
    assert read_result(tmp_path / "m.json") == alone
    inline = tmp_path / "old.json"  # the layout written before: records inline
    inline.write_text(json.dumps(alone))
    assert read_result(inline) == alone


def test_missing_or_foreign_records_are_refused(tmp_path):
    write_result(tmp_path / "a.json", pair(), records="gzip")
    write_result(tmp_path / "b.json", model("base", [False]), records="gzip")
    records_path(tmp_path / "b.json").replace(records_path(tmp_path / "a.json"))
    with pytest.raises(DatasetError, match=r"a\.records\.json\.gz: not the records a\.json was written with"):
        read_result(tmp_path / "a.json")
    records_path(tmp_path / "a.json").unlink()
    with pytest.raises(DatasetError, match=r"a\.json: its records file a\.records\.json\.gz is missing"):
        read_result(tmp_path / "a.json")


def test_the_study_fields_in_the_studys_units(tmp_path):
    write_result(tmp_path / "eval_run.json", pair(run_name="exp7_ckpt80"))
    plain = json.loads((tmp_path / "eval_run.json").read_text())
    assert {k: plain[k] for k in ("schema_version", "base_accuracy", "ft_accuracy", "delta",
                                  "n_questions", "run_name", "lora_path")} == {
        "schema_version": 2, "base_accuracy": 50.0, "ft_accuracy": 75.0, "delta": 25.0,
        "n_questions": 4, "run_name": "exp7_ckpt80", "lora_path": "runs/exp7/best"}
    assert pair()["run_name"] == "exp7"  # no run name: the fine-tuned model's label
    assert pair_accuracies(plain) == (0.5, 0.75, 0.25)


def test_percent_is_rounded_to_a_tenth_and_delta_taken_before_rounding():
    p = compare_models(model("base", [True] + [False] * 5), model("ft", [True] * 2 + [False] * 4),
                       n_boot=50)
    assert (p["base_accuracy"], p["ft_accuracy"], p["delta"]) == (16.7, 33.3, 16.7)


def test_an_old_committed_pair_and_a_new_one_read_to_the_same_fractions(tmp_path):
    old = read_result(OLD_PAIR)
    assert "schema_version" not in old and 0 < old["base_accuracy"] < 1  # fractions
    new_path = tmp_path / "new.json"
    write_result(new_path, compare_models(old["base"], old["finetuned"], n_boot=50))
    new = read_result(new_path)
    assert new["base_accuracy"] == round(100 * old["base_accuracy"], 1)
    assert pair_accuracies(new) == pair_accuracies(old) == (
        old["base"]["accuracy"], old["finetuned"]["accuracy"], old["delta"])


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT / "results")))
def test_every_committed_evaluation_reads_with_all_its_records(path):
    data = read_result(path)
    assert "records" not in data
    for side in ("base", "finetuned"):
        assert len(data[side]["results"]) == data[side]["n"] == data["n"]
    assert [r["id"] for r in data["base_results"]] == [r["id"] for r in data["base"]["results"]]
    assert len(data["ft_results"]) == data["n"]


# ------------------------------------------------------------- the scripts, as a user runs them

def evaluate(script: str, out: Path, *args) -> None:
    cmd = [sys.executable, str(ROOT / "evaluation" / f"{script}.py"), "--model", "tiny-random",
           "--max-new-tokens", "8", *map(str, args), "--output", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_a_fresh_evaluation_is_the_studys_json_and_gzip_is_the_compact_layout(tmp_path, adapter):
    """The study's eval_$RUN_NAME.json: json.load gives base_results and ft_results; --records
    gzip writes the compact layout instead, and read_result reads both to the same records."""
    data = write_rows(tmp_path / "d.jsonl", 3)
    common = ["--adapter", adapter, "--dataset", data]
    inline, compact = tmp_path / "eval_inline.json", tmp_path / "eval_compact.json"
    evaluate("evaluate_single", inline, *common)
    evaluate("evaluate_single", compact, *common, "--records", "gzip")

    with open(inline) as handle:
        study = json.load(handle)
    ids = [row["id"] for row in load_dataset(data)]
    assert [r["id"] for r in study["base_results"]] == [r["id"] for r in study["ft_results"]] == ids
    assert {"correct", "extracted", "target"} <= set(study["ft_results"][0])
    assert len(study["base"]["results"]) == len(study["finetuned"]["results"]) == 3
    assert not records_path(inline).exists()

    summary = json.loads(compact.read_text())
    assert "base_results" not in summary and "ft_results" not in summary
    assert summary["records"]["lists"] == ["base_results", "ft_results", "base.results",
                                           "finetuned.results"]
    whole = read_result(compact)
    assert whole == read_result(inline) == study

    # the adapter against those base results: its own ft_results inline too
    only = tmp_path / "eval_only.json"
    evaluate("evaluate_finetuned_only", only, *common, "--base-results", compact)
    with open(only) as handle:
        again = json.load(handle)
    assert again["ft_results"] == study["ft_results"] and again["base_results"] == study["base_results"]
