"""The post hoc re-analysis: regrading stored answers under both rules, guesses fitted away from
the scored set, group-level pooling, and the committed output quoted in RESULTS.md."""
import importlib.util
import json
from pathlib import Path

import pytest

from relrl.data.dataset_io import read_json
from relrl.runtime.cli import run_main
from study.demo_report import splice_results_md
from study.reanalysis import MODELS, fitting_rows, reanalyse, regrade, render

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "reanalysis"
START, END = "<!-- reanalysis:start -->", "<!-- reanalysis:end -->"
RELIABILITY = "A pump has a constant failure rate. What is its reliability at 910 hours?"


def completion(value, correct, response=""):
    return {"value": value, "correct": correct, "truncated": False, "response": response}


def tally():
    return {"records": 0, "probability_targets": 0, "completions": 0, "from_text": 0,
            "study_value_disagrees": 0}


def test_a_reliability_near_one_is_judged_on_its_failure_probability():
    record = {"id": "q", "question": RELIABILITY, "target": "0.9355", "pass_count": 2,
              "samples": 3, "correct": True,
              "completions": [completion(0.95, True), completion(0.9355, True),
                              completion(None, False)]}
    counts = tally()
    study, complement = (regrade(record, rule, 0.05, counts) for rule in ("study", "complement"))
    assert [c["correct"] for c in study["completions"]] == [True, True, False]
    assert [c["correct"] for c in complement["completions"]] == [False, True, False]
    assert (study["pass_count"], complement["pass_count"]) == (2, 1)
    assert complement["correct"] is False  # the first sample's grade
    assert counts["probability_targets"] == 2 and counts["from_text"] == 0


def test_a_value_that_does_not_reproduce_the_stored_grade_is_regraded_from_its_text():
    # a percent answer: the stored value 0.052 misses the target 5.2 unless read as percent
    record = {"id": "q", "question": "What percentage of units fail?", "target": "5.2",
              "pass_count": 1, "samples": 1, "correct": True, "value": 0.052,
              "response": "Answer: \\boxed{5.2\\%}", "truncated": False}
    counts = tally()
    assert regrade(record, "complement", 0.05, counts)["pass_count"] == 1
    assert counts["from_text"] == 1
    assert regrade(record, "study", 0.05, counts)["pass_count"] == 1  # the stored grade
    assert counts["study_value_disagrees"] == 1


def test_the_scored_sets_groups_are_left_out_of_the_fit():
    train = [{"id": f"t{i}", "group": f"g{i // 2}"} for i in range(6)]
    assert [r["id"] for r in fitting_rows(train, [{"id": "x", "group": "g1"}])] == \
        ["t0", "t1", "t4", "t5"]
    assert len(fitting_rows(train, [{"id": "x", "group": "h"}])) == 6


def _records(targets_and_passes, family="f"):
    return [{"id": f"q{i}", "group": group, "question": RELIABILITY, "target": str(t),
             "family": family, "pass_count": p, "samples": 2, "correct": p > 0,
             "completions": [completion(t if k < p else 0.1, k < p) for k in range(2)]}
            for i, (group, t, p) in enumerate(targets_and_passes)]


def test_pooled_group_accuracy_and_a_constant_fitted_on_training_rows_only():
    # two paraphrases in group a (both right), one question in group b (half right): group
    # level 75%, question level 83%
    scored = [("a", 0.96, 2), ("a", 0.96, 2), ("b", 0.97, 1)]
    train = [{"id": f"t{i}", "group": f"t{i}", "question": RELIABILITY, "answer": "0.5",
              "family": "f"} for i in range(4)]
    seeds = {0: {"sets": {"heldout": {m: _records(scored) for m in MODELS}}, "train_rows": train}}
    out = reanalyse(seeds)["heldout"]["rules"]["study"]
    assert out["groups"] == 2
    assert out["accuracy"]["base"] == pytest.approx(0.75)
    # fitted on the scored set, 0.96 would be right everywhere; fitted on training rows it is 0.5
    assert out["fitted"]["0"]["constant"] == 0.5
    assert out["guesses"]["constant"] == 0.0
    assert out["guesses"]["constant_check"] == pytest.approx(1.0)  # 0.95 is within 5%
    assert out["margin_over_best_guess"]["base"] == pytest.approx(0.75)


def test_results_md_quotes_the_committed_reanalysis_which_its_json_renders(tmp_path):
    saved = read_json(OUT / "reanalysis.json.gz")
    text = (OUT / "reanalysis.md").read_text()
    assert render(saved) == text
    results_md = (ROOT / "RESULTS.md").read_text()
    copy = tmp_path / "RESULTS.md"
    copy.write_text(results_md)
    splice_results_md(copy, text, START, END)
    assert copy.read_text() == results_md


def test_the_committed_reanalysis_reproduces_the_measured_and_quoted_figures():
    folder = read_json(OUT / "reanalysis.json.gz")["folders"]["demo-replication"]
    held = folder["sets"]["heldout"]["rules"]["study"]
    # the pre-registered report's group-level accuracies, and the constant 0.95
    assert round(100 * held["accuracy"]["base"], 1) == 28.8
    assert round(100 * held["accuracy"]["GRPO exp7 best"], 1) == 37.8
    assert round(100 * held["guesses"]["constant_check"], 1) == 57.0
    assert round(100 * folder["sets"]["retention"]["rules"]["study"]["guesses"]["constant_check"],
                 1) == 81.7
    assert round(100 * folder["sets"]["holdout"]["rules"]["study"]["guesses"]["constant_check"],
                 1) == 29.2


def _build_tables(argv, capsys):
    spec = importlib.util.spec_from_file_location("build_tables",
                                                  ROOT / "paper" / "build_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as exc:
        run_main(lambda: module.main([str(a) for a in argv]))
    return exc.value.code, capsys.readouterr().err


def test_the_papers_reanalysis_table_is_the_committed_json(tmp_path, capsys):
    code, err = _build_tables(["--results-dir", tmp_path / "none", "--out", tmp_path / "t"], capsys)
    assert code == 0, err
    rows = [line.rstrip("\\").split(" & ") for line in
            (tmp_path / "t" / "reanalysis.tex").read_text().splitlines() if line.count(" & ") == 8]
    held = read_json(OUT / "reanalysis.json.gz")[
        "folders"]["demo-replication"]["sets"]["heldout"]["rules"]["complement"]
    row = next(r for r in rows if r[:2] == ["heldout", "complement"])
    assert row[2] == f"{100 * held['accuracy']['base']:.1f}"
    gain = f"{100 * held['gain_over_base']['GRPO exp7 best']:+.1f}"
    assert row[6] == gain.replace("-", "$-$")


def test_a_malformed_reanalysis_is_an_error_and_a_missing_one_a_placeholder(tmp_path, capsys):
    bad = tmp_path / "reanalysis.json"
    bad.write_text(json.dumps({"kind": "reanalysis", "folders": {}}))
    code, err = _build_tables(["--reanalysis", bad, "--out", tmp_path / "t"], capsys)
    assert code == 2 and str(bad) in err and not (tmp_path / "t").exists()
    code, err = _build_tables(["--reanalysis", tmp_path / "no.json", "--out", tmp_path / "t"],
                              capsys)
    assert code == 0, err
    assert r"evaluation/reanalyse\_results.py" in (tmp_path / "t" / "reanalysis.tex").read_text()
