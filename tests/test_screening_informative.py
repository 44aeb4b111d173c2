"""Screening judges a question on how many of its samples are right under the tolerance rule,
never on the shaped reward: right answers at two levels of partial credit make no "mixed"
question (the study's rule too: "not 100% correct, not 0% correct")."""
import json

from eval_helpers import FakeCompletion, one_thread, run_script  # noqa: F401 (fixture)

from relrl.data.dataset_io import load_dataset
from relrl.evaluation import runner as ev
from relrl.evaluation.results_io import read_result

ROWS = [
    # both right: exact (reward 1.0) and 0.5% off (reward 0.8)
    {"id": "partial", "question": "What is the MTBF in hours?", "answer": "100"},
    # one right, one wrong
    {"id": "mixed", "question": "What is the MTTR in hours?", "answer": "100"},
    # a reliability: 0.95 is 1.5% off 0.9355 but its failure probability is 22% off
    {"id": "reliability", "question": "What is the reliability of the system at 100 hours?",
     "answer": "0.9355", "target_kind": "probability"},
]
ANSWERS = {"partial": ("100", "100.5"), "mixed": ("100", "150"), "reliability": ("0.9355", "0.95")}


def screen(tmp_path, monkeypatch, capsys, *extra):
    def generate(rows, seeds, n):
        return [[FakeCompletion(f"So \\boxed{{{a}}}", False) for a in ANSWERS[row["id"]][:n]]
                for row in rows]

    monkeypatch.setattr(ev, "model_generator", lambda model, tok, settings: generate)
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "screen"
    code, _, err = run_script("screen_v4", ["--model", "tiny-random", "--dataset", data,
                                            "--output-dir", out, "--samples", 2, *extra], capsys)
    assert code == 0, err
    return ({r["id"] for r in load_dataset(out / "mixed.jsonl")},
            read_result(out / "screening.json"))


def test_right_answers_with_different_rewards_are_not_mixed(tmp_path, monkeypatch, capsys):
    mixed, screening = screen(tmp_path, monkeypatch, capsys)
    records = {r["id"]: r for r in screening["results"]}
    assert [c["reward"] for c in records["partial"]["completions"]] == [1.0, 0.8]
    assert records["partial"]["class"] == "all_correct"
    assert mixed == {"mixed"}  # 0.95 is right for 0.9355 under the study's rule


def test_the_tolerance_rule_decides_what_is_right(tmp_path, monkeypatch, capsys):
    mixed, _ = screen(tmp_path, monkeypatch, capsys, "--tolerance-rule", "complement")
    assert mixed == {"mixed", "reliability"}
