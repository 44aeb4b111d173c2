"""evaluation/grade_responses.py run as a user runs it: a subprocess, output lines, summary."""
import json
import subprocess
import sys

import pytest
from conftest import ROOT, SEED_DATA

SCRIPT = ROOT / "evaluation" / "grade_responses.py"
FRONTIER = SEED_DATA / "frontier_holdout_54q" / "o3-mini_results.json"

ROWS = [
    {"response": "so \\boxed{0.9944}", "answer": "0.9945"},
    {"response": "\\boxed{0.5}", "answer": "0.9945"},
    {"response": "FINAL ANSWER: 870 hours", "answer": "870"},
    {"response": None, "answer": "3"},
    {"response": "\\boxed{1}", "answer": "0.9-0.95"},  # a range is not a target
]


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_jsonl_to_stdout(tmp_path):
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    done = run(path)
    assert done.returncode == 0, done.stderr
    *lines, summary = [json.loads(line) for line in done.stdout.splitlines()]
    assert summary == {"n": 5, "correct": 1, "accuracy": 0.2, "unextracted": 2,
                       "bad_targets": 1, "tolerance_rule": "study"}
    assert [line["index"] for line in lines] == [0, 1, 2, 3, 4]
    assert [line["correct"] for line in lines] == [True, False, False, False, False]
    assert [line["reward"] for line in lines] == [1.0, 0.01, 0.0, 0.0, 0.0]
    assert lines[2]["reason"] == "no boxed answer"  # plain answers need --allow-plain
    assert lines[3]["reason"] == "empty response"
    assert "several values" in lines[4]["reason"]


def test_a_truncated_row_is_never_credited_a_stray_number(tmp_path):
    path = tmp_path / "responses.jsonl"
    rows = [{"response": "Using t = 250 h we get λt = 0.5.", "answer": "0.5", "cut": flag}
            for flag in (False, True)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    done = run(path, "--allow-plain", "--truncated-field", "cut")
    assert done.returncode == 0, done.stderr
    first, second, _ = [json.loads(line) for line in done.stdout.splitlines()]
    assert first["correct"] and not second["correct"]
    assert "cut off at the token limit" in second["reason"]


def test_json_array_with_fields_allow_plain_and_output(tmp_path):
    path = tmp_path / "responses.json"
    path.write_text(json.dumps([{"text": r["response"], "truth": r["answer"]} for r in ROWS]),
                    encoding="utf-8")
    out = tmp_path / "graded.jsonl"
    done = run(path, "--response-field", "text", "--answer-field", "truth", "--allow-plain",
               "--tolerance", "0.01", "--output", out)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "n": 5, "correct": 2, "accuracy": 0.4, "unextracted": 1, "bad_targets": 1,
        "tolerance_rule": "study"}
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 5 and lines[2]["extracted"] == "870" and lines[2]["correct"]
    assert set(lines[0]) >= {"index", "extracted", "correct", "reward", "reason"}


@pytest.mark.skipif(not FRONTIER.exists(), reason="seed data not here")
def test_frontier_seed_file(tmp_path):
    out = tmp_path / "o3.jsonl"
    done = run(FRONTIER, "--response-field", "model_response", "--answer-field",
               "ground_truth", "--allow-plain", "--output", out)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    # 6 without an answer: row 17 stops at "Step 4. Compute", whose 4 is a label, not a value
    assert summary == {"n": 54, "correct": 39, "accuracy": round(39 / 54, 6),
                       "unextracted": 6, "bad_targets": 0, "tolerance_rule": "study"}
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {"index": 0, "extracted": "870", "value": 870.0, "target": 870.0,
                        "correct": True, "reward": 1.0, "reason": "within 0.1%"}


def test_complement_rule_reads_each_rows_target_kind(tmp_path):
    path = tmp_path / "responses.jsonl"
    rows = [{"response": "\\boxed{0.95}", "answer": "0.9355", "question": q, **kind}
            for q, kind in (("Determine the reliability of the pump.", {}),
                            ("Determine the reliability of the pump.", {"kind": "value"}),
                            ("What is the optimal replacement interval?", {}))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    study = run(path, "--target-kind-field", "kind")
    complement = run(path, "--target-kind-field", "kind", "--tolerance-rule", "complement")
    assert study.returncode == complement.returncode == 0, complement.stderr
    assert [json.loads(line)["correct"] for line in study.stdout.splitlines()[:-1]] == [True] * 3
    *lines, summary = [json.loads(line) for line in complement.stdout.splitlines()]
    assert [line["correct"] for line in lines] == [False, True, True]
    assert (summary["correct"], summary["tolerance_rule"]) == (2, "complement")


@pytest.mark.parametrize("args, message", [
    (["--tolerance", "-1"], "--tolerance must be in [0, 1], got -1.0"),
    (["--tolerance", "inf"], "--tolerance must be finite and in [0, 1], got inf"),
    (["--response-field", "missing"], "responses.jsonl:1: no field 'missing'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--tolerance-rule", "relative"], "argument --tolerance-rule: invalid choice: 'relative'"),
    (["--target-kind-field", "answer"], "responses.jsonl:1: 'answer': target_kind must be one of "
                                        "probability, value, got '0.9945'"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n", encoding="utf-8")
    done = run(path, *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_malformed_input_names_its_line(tmp_path):
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n{oops\n", encoding="utf-8")
    done = run(path)
    assert done.returncode == 2 and "responses.jsonl:2: malformed JSON" in done.stderr
