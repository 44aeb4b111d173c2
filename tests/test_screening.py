"""screen_v4.py: pass counts, classes, the mixed / non-mixed files, shards and resume."""
import json

import pytest
from eval_helpers import fake_generate, one_thread, run_script, write_rows  # noqa: F401 (fixture)

from relrl.data.dataset_io import load_dataset
from relrl.evaluation import runner as ev
from relrl.evaluation.results_io import read_result


@pytest.fixture
def fake_model(monkeypatch):
    """Screen with the fake sampler (half the samples right) instead of tiny-random's noise."""
    calls: list = []
    monkeypatch.setattr(ev, "model_generator", lambda model, tok, s: fake_generate(50, calls=calls))
    return calls


def screen(tmp_path, data, capsys, *extra, name="screen", model="tiny-random"):
    out = tmp_path / name
    out.mkdir(exist_ok=True)
    code, stdout, err = run_script("screen_v4", ["--model", model, "--dataset", data,
                                                 "--output-dir", out, *extra], capsys)
    return code, out, stdout, err


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_screening_splits_mixed_from_non_mixed(tmp_path, capsys, fake_model):
    data = write_rows(tmp_path / "d.jsonl", 16, base_score=False, groups=8)
    code, out, stdout, _ = screen(tmp_path, data, capsys)
    assert code == 0
    summary = read_result(out / "screening.json")
    assert summary["kind"] == "screening" and summary["samples"] == 4
    assert summary["settings"]["temperature"] == 0.8  # the study's screening temperature
    records = {r["id"]: r for r in summary["results"]}
    mixed, non_mixed = read_jsonl(out / "mixed.jsonl"), read_jsonl(out / "non_mixed.jsonl")
    rows = load_dataset(data)
    assert sorted(r["id"] for r in mixed + non_mixed) == sorted(r["id"] for r in rows)
    for row in mixed + non_mixed:
        record = records[row["id"]]
        assert row["base_score"] == record["pass_count"] == sum(c["correct"] for c in record["completions"])
        assert row["base_samples"] == 4 and row["group"].startswith("g")  # original fields kept
    assert all(0 < r["base_score"] < 4 for r in mixed)
    assert all(r["base_score"] in (0, 4) for r in non_mixed)
    assert mixed and non_mixed
    classes = summary["classes"]
    assert classes["mixed"] == len(mixed)
    assert classes["all_correct"] == sum(r["base_score"] == 4 for r in non_mixed)
    assert classes["all_wrong"] == sum(r["base_score"] == 0 for r in non_mixed)
    assert summary["pass_count_histogram"] == {
        str(k): sum(r["pass_count"] == k for r in records.values()) for k in range(5)}
    assert f"{classes['mixed']} mixed" in stdout
    # the mixed file is a dataset the GRPO trainer and the evaluators can read
    assert len(load_dataset(out / "mixed.jsonl")) == len(mixed)


def test_screening_shards_merge_to_the_unsharded_files(tmp_path, capsys, fake_model):
    data = write_rows(tmp_path / "d.jsonl", 10, base_score=False)
    assert screen(tmp_path, data, capsys, name="whole")[0] == 0
    for i in range(3):
        code, out, _, _ = screen(tmp_path, data, capsys, "--shard", f"{i}/3", name="sharded")
        assert code == 0
    assert not (out / "screening.json").exists()
    assert screen(tmp_path, data, capsys, "--merge", name="sharded")[0] == 0
    for name in ("mixed.jsonl", "non_mixed.jsonl", "screening.json"):
        assert (tmp_path / "sharded" / name).read_text() == (tmp_path / "whole" / name).read_text()


def test_interrupted_screening_resumes(tmp_path, capsys, monkeypatch):
    data = write_rows(tmp_path / "d.jsonl", 9, base_score=False)
    calls: list = []
    monkeypatch.setattr(ev, "model_generator",
                        lambda model, tok, s: fake_generate(50, calls=calls, fail_after=2))
    code, out, _, err = screen(tmp_path, data, capsys, "--micro-batch", "8", name="resumed")
    assert code == 130 and "interrupted" in err  # two questions per call, two calls done
    assert not (out / "screening.json").exists()
    monkeypatch.setattr(ev, "model_generator", lambda model, tok, s: fake_generate(50, calls=calls))
    calls.clear()
    assert screen(tmp_path, data, capsys, "--micro-batch", "8", name="resumed")[0] == 0
    assert sum(len(c) for c in calls) == 5
    assert screen(tmp_path, data, capsys, name="direct")[0] == 0
    assert (tmp_path / "resumed" / "screening.json").read_text() == \
        (tmp_path / "direct" / "screening.json").read_text()


def test_screening_with_tiny_random(tmp_path, capsys):
    data = write_rows(tmp_path / "d.jsonl", 4, base_score=False)
    code, out, _, _ = screen(tmp_path, data, capsys, "--max-new-tokens", "8")
    assert code == 0
    non_mixed = read_jsonl(out / "non_mixed.jsonl")
    # random weights never box the right number: every question is all-wrong
    assert [r["base_score"] for r in non_mixed] == [0, 0, 0, 0]
    assert (out / "mixed.jsonl").read_text() == ""
    summary = json.loads((out / "screening.json").read_text())
    assert summary["model"] == "tiny-random" and summary["classes"]["all_wrong"] == 4


@pytest.mark.parametrize("extra,message", [
    (["--samples", "1"], "--samples"),
    (["--shard", "4/3"], "--shard"),
    (["--merge"], "no shard files"),
])
def test_screening_bad_flags(tmp_path, capsys, extra, message):
    data = write_rows(tmp_path / "d.jsonl", 3)
    code, out, _, err = screen(tmp_path, data, capsys, *extra)
    assert code == 2 and err.startswith("error: ") and err.strip().count("\n") == 0
    assert message in err
    assert list(out.iterdir()) == []


def test_screening_output_dir_in_a_missing_folder(tmp_path, capsys):
    data = write_rows(tmp_path / "d.jsonl", 3)
    code, _, err = run_script("screen_v4", ["--model", "tiny-random", "--dataset", data,
                                            "--output-dir", tmp_path / "nope" / "deeper"], capsys)
    assert code == 2 and "--output-dir" in err
    assert not (tmp_path / "nope").exists()


def test_screening_makes_its_output_folder_only_after_the_input_checks(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n')
    code, _, err = run_script("screen_v4", ["--model", "tiny-random", "--dataset", bad,
                                            "--output-dir", tmp_path / "out"], capsys)
    assert code == 2 and "bad.jsonl:1" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_screening_generated_problems_with_tiny(tmp_path, capsys):
    """The demo's regime: the trained miniature model on generated problems gets some right."""
    import subprocess
    import sys

    from eval_helpers import ROOT

    data = tmp_path / "gen.jsonl"
    subprocess.run([sys.executable, str(ROOT / "generators" / "build_dataset.py"), "generate",
                    "--n", "24", "--seed", "3", "--paraphrases", "0", "--out", str(data)], check=True)
    code, out, _, _ = screen(tmp_path, data, capsys, "--max-new-tokens", "320", model="tiny")
    assert code == 0
    summary = json.loads((out / "screening.json").read_text())
    assert summary["n"] == 24 and summary["correct"] > 0
    assert sum(summary["classes"].values()) == 24
