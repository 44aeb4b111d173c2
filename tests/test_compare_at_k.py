"""mean@k and pass@k with intervals over paraphrase groups: in every evaluation JSON, and in
compare_results' table, checked against values computed by hand on a hand-made result file."""
import json

import pytest
from eval_helpers import run_script, write_rows
from test_compare_results import fake_result, table

from relrl.data.dataset_io import load_dataset
from relrl.evaluation.clustered_stats import at_k_interval
from relrl.evaluation.model_results import AT_K_BOOT


def record(qid, group, passes, samples=4):
    return {"id": qid, "group": group, "correct": passes > 0, "pass_count": passes,
            "samples": samples, "truncated": False}


def result(label, passes):
    """Four questions in two paraphrase groups of two (g1: q1, q2; g2: q3, q4), K = 4."""
    records = [record(f"q{i + 1}", "g1" if i < 2 else "g2", c) for i, c in enumerate(passes)]
    return {"kind": "model_result", "model": label, "fingerprint": "f", "samples": 4, "n": 4,
            "correct": sum(passes), "adapter": None, "dataset": "d.jsonl", "results": records}


def test_the_report_shows_mean_and_pass_at_k_with_group_intervals_computed_by_hand(tmp_path, capsys):
    # base: per question c/4 = 1, 1/2, 0, 1/2 -> groups 3/4 and 1/4 -> mean@k 1/2; pass@4 is
    # 1 for every question with a correct sample -> groups 1 and 1/2 -> 3/4.
    # ft: 1, 1, 1, 0 -> groups 1 and 1/2 for both metrics -> 3/4.
    # Two equal groups resampled: the mean of two draws is g1, their midpoint or g2 with
    # chances 1/4, 1/2, 1/4, so the 2.5% and 97.5% percentiles are the two group values.
    (tmp_path / "base.json").write_text(json.dumps(result("base", [4, 2, 0, 2])))
    (tmp_path / "ft.json").write_text(json.dumps(result("ft", [4, 4, 4, 0])))
    code, stdout, _ = run_script("compare_results", [
        tmp_path / "base.json", tmp_path / "ft.json", "--base", "base",
        "--output-json", tmp_path / "table.json"], capsys)
    assert code == 0
    assert table(stdout, "| Model | Groups") == [
        ["base", "2", "50.0% (25.0%-75.0%)", "75.0% (50.0%-100.0%)"],
        ["ft", "2", "75.0% (50.0%-100.0%)", "75.0% (50.0%-100.0%)"]]
    assert "| Model | Groups | mean@k | pass@4 |" in stdout
    rows = json.loads((tmp_path / "table.json").read_text())["rows"]
    assert rows[0]["at_k"] == {
        "mean@k": {"value": 0.5, "low": 0.25, "high": 0.75, "groups": 2},
        "pass@4": {"value": 0.75, "low": 0.5, "high": 1.0, "groups": 2}}


def test_one_sample_per_question_shows_mean_at_k_alone(tmp_path, capsys):
    one = {**result("base", [1, 1, 0, 1]), "samples": 1}
    one["results"] = [{**r, "samples": 1} for r in one["results"]]
    (tmp_path / "base.json").write_text(json.dumps(one))
    code, stdout, _ = run_script("compare_results", [tmp_path / "base.json"], capsys)
    assert code == 0
    # groups 1 and 1/2 -> 3/4, interval the two group values
    assert table(stdout, "| Model | Groups") == [["base", "2", "75.0% (50.0%-100.0%)"]]


def test_every_evaluation_json_gains_mean_at_k_and_intervals(tmp_path):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 12))
    res = fake_result(rows, "m", 60, samples=4)
    records = res["results"]
    groups = {str(r.get("group") or r["id"]) for r in records}
    assert res["mean_at_k"] == {k: pytest.approx(res["accuracy"]) for k in ("1", "2", "4")}
    ci = res["at_k_ci"]
    assert (ci["confidence"], ci["n_boot"], ci["seed"], ci["groups"]) == (0.95, AT_K_BOOT, 0,
                                                                          len(groups))
    for k in (1, 2, 4):
        want = at_k_interval(records, k, "pass", n_boot=AT_K_BOOT, seed=0)
        assert want["value"] == pytest.approx(res["pass_at_k"][str(k)])
        assert ci["pass"][str(k)] == [want["low"], want["high"]]
        assert want["low"] <= res["pass_at_k"][str(k)] <= want["high"]
    mean = at_k_interval(records, 1, "mean", n_boot=AT_K_BOOT, seed=0)
    assert ci["mean"] == {k: [mean["low"], mean["high"]] for k in ("1", "2", "4")}
