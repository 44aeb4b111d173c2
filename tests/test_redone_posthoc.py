"""evaluation/redone_posthoc.py: the SFT dose, tool-use shares and plain GRPO's flat updates are
what the files hold, and the committed post hoc tables are what the committed results give."""
import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from relrl.runtime.cli import run_main

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("redone_posthoc", ROOT / "evaluation" / "redone_posthoc.py")
posthoc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(posthoc)

QUESTION = "Gamma prior alpha = 1.5, beta = 4,100 h; 7 failures in 21000 h. Posterior mean?"


def call(expression: str) -> str:
    body = json.dumps({"name": "calculator", "arguments": {"expression": expression}})
    return f"<tool_call>\n{body}\n</tool_call>\nuser\n<tool_response>\n1\n</tool_response>"


def sample(transcript: str, correct: bool) -> dict:
    return {"transcript": transcript, "correct": correct}


def record(qid: str, samples: list[dict]) -> dict:
    out = {"id": qid, "question": QUESTION, "group": qid, **samples[0]}
    return {**out, "completions": samples} if len(samples) > 1 else out


@pytest.fixture
def folder(tmp_path):
    """A confirmatory seed 5: retention records of the base and SFT, SFT's log, plain GRPO's."""
    root = tmp_path / "v2"
    right = "x1 = 1.5; x2 = 4100; x3 = 7; x4 = 21000; (x1 + x3)/(x2 + x4)"
    base = [record("q1", [sample(call(right), True)]),
            record("q2", [sample("Answer: \\boxed{0.5}", False)])]
    sft = [record("q1", [sample(call(right.replace("4100", "41000")), False)]),
           record("q2", [sample(call(right), True), sample(call(right.replace("+ x3", "- x3")), False)])]
    evals = root / "seed-5" / "eval" / "retention"
    evals.mkdir(parents=True)
    (evals / "sft_warm_start.json").write_text(json.dumps(
        {"base": {"results": base}, "finetuned": {"results": sft}}))
    sft_dir = root / "work" / "seed-5" / "sft" / "all"
    sft_dir.mkdir(parents=True)
    losses = [10.0, 9.0] + [8.0] * 16 + [6.0, 5.0]  # 20 steps: the first and last 2 averaged
    (sft_dir / "statistics.json").write_text(json.dumps(
        {"items": 80, "steps": 20, "losses": losses, "settings": {"epochs": 2, "learning_rate": 2e-4}}))
    plain = root / "seed-5" / "grpo_exp7_plain"
    plain.mkdir()
    (plain / "train_log.jsonl.gz").write_bytes(gzip.compress("".join(
        json.dumps({"step": i + 1, "reward_std": std}) + "\n"
        for i, std in enumerate([0.5, 0.0, 0.4, 0.0])).encode()))
    (plain / "statistics.json").write_text(json.dumps({"total_attempts": 6, "wasted_steps": 3}))
    dose = root / "posthoc" / "sft-dose" / "one_epoch"  # a variant of sft_dose.sh
    dose.mkdir(parents=True)
    (dose / "retention.json").write_text(json.dumps(
        {"base": {"results": base}, "finetuned": {"results": base[:1]}}))
    (dose / "sft_statistics.json").write_text(json.dumps(
        {"items": 80, "steps": 10, "losses": [9.0] * 9 + [7.0], "settings": {"epochs": 1}}))
    return root


def run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        run_main(lambda: posthoc.main([str(a) for a in argv]))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_shares_and_dose_are_counted_from_the_files(folder, tmp_path, capsys):
    code, out, err = run(["--results-dir", folder, "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    seed = json.loads((tmp_path / "out" / "posthoc.json").read_text())["seeds"]["5"]
    assert seed["sft"] == {"examples": 80, "steps": 20, "epochs": 2, "learning_rate": 2e-4,
                           "loss_first": 9.5, "loss_last": 5.5}
    use = seed["tool_use"]["retention"]
    # base: one call of two samples, its numbers copied (4,100 read as 4100) and right
    assert use["base"] == {"samples": 2, "accuracy": 0.5, "calls": 0.5, "calls_assigning": 1,
                           "copied": 1.0, "correct_when_copied": 1.0}
    # SFT: three samples (q2 has two) all call; 41000 is a miscopy; one copied call is wrong
    assert use["SFT warm start"] == {"samples": 3, "accuracy": pytest.approx(1 / 3), "calls": 1.0,
                                     "calls_assigning": 3, "copied": pytest.approx(2 / 3),
                                     "correct_when_copied": 0.5}
    assert "GRPO exp7 best" not in use  # not evaluated in this folder
    assert seed["plain_grpo"] == {"updates": 4, "updates_without_signal": 2, "share": 0.5,
                                  "generated": 6, "generated_without_signal": 3}
    check = json.loads((tmp_path / "out" / "posthoc.json").read_text())["sft_dose_check"]
    assert check["one_epoch"]["sft"]["loss_last"] == 7.0 and check["one_epoch"]["sft"]["steps"] == 10
    assert check["one_epoch"]["retention"]["accuracy"] == 1.0
    assert "| one_epoch | 80 | 1 | 10 | 7.00 | 100.0% / 100.0% / 100.0% / 100.0% |" in out
    assert "| 5 | 80 | 2 | 20 | 0.0002 | 9.50 | 5.50 |" in out
    assert "| 5 | 4 | 2 | 50.0% | 6 | 3 |" in out
    assert (tmp_path / "out" / "posthoc.md").read_text() == out


def test_a_missing_seed_or_a_log_without_losses_is_one_line_and_writes_nothing(folder, tmp_path, capsys):
    out = tmp_path / "out"
    code, _, err = run(["--results-dir", folder, "--seeds", "5,9", "--output-dir", out], capsys)
    assert code == 2 and "--seeds: no seed folder for 9" in err
    stats = folder / "work" / "seed-5" / "sft" / "all" / "statistics.json"
    stats.write_text(json.dumps({"items": 80, "steps": 20, "losses": []}))
    code, _, err = run(["--results-dir", folder, "--output-dir", out], capsys)
    assert code == 2 and f"{stats}: no losses" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_committed_posthoc_tables_are_what_the_committed_results_give(tmp_path, capsys):
    committed = ROOT / "results" / "demo-replication-v2" / "posthoc"
    saved = json.loads((committed / "posthoc.json").read_text())
    seeds = ",".join(saved["seeds"])
    code, out, err = run(["--seeds", seeds, "--output-dir", tmp_path], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "posthoc.json").read_text()) == saved
    assert out == (committed / "posthoc.md").read_text()
