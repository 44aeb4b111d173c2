"""Result files: the plain summary beside its gzipped records, read back whole; the study's
eval_$RUN_NAME.json units; old committed files and new ones read to the same fractions."""
import gzip
import json
from pathlib import Path

import pytest

from relrl.data.dataset_io import DatasetError
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


def test_records_go_to_a_gzip_beside_a_plain_summary_and_read_back_whole(tmp_path):
    result = pair()
    path = tmp_path / "eval_x.json"
    write_result(path, result)
    assert records_path(path) == tmp_path / "eval_x.records.json.gz"
    summary = json.loads(path.read_text())
    assert not {"base_results", "ft_results"} & set(summary)
    assert "results" not in summary["base"] and "results" not in summary["finetuned"]
    lists = json.loads(gzip.decompress(records_path(path).read_bytes()))
    assert summary["records"]["lists"] == list(lists) == [
        "base_results", "ft_results", "base.results", "finetuned.results"]
    assert read_result(path) == result
    before = (path.read_bytes(), records_path(path).read_bytes())
    write_result(path, read_result(path))  # same records, same bytes (no gzip timestamp)
    assert (path.read_bytes(), records_path(path).read_bytes()) == before


def test_a_model_result_and_a_file_without_records_file(tmp_path):
    alone = model("base", [True, False])
    write_result(tmp_path / "m.json", alone)
    assert read_result(tmp_path / "m.json") == alone
    inline = tmp_path / "old.json"  # the layout written before: records inline
    inline.write_text(json.dumps(alone))
    assert read_result(inline) == alone


def test_missing_or_foreign_records_are_refused(tmp_path):
    write_result(tmp_path / "a.json", pair())
    write_result(tmp_path / "b.json", model("base", [False]))
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
