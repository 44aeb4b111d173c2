"""The evaluation runner and the evaluation scripts: records, resume, shards, bad input."""
import json
import os
import signal
import subprocess
import sys

import pytest
from eval_helpers import ROOT, adapter, fake_generate, load_script, one_thread, run_script, write_rows  # noqa: F401
from waiting import wait_until

from relrl.data.dataset_io import DatasetError, load_dataset, questions_fingerprint
from relrl.evaluation.model_results import compare_models, model_result
from relrl.evaluation.results_io import pair_accuracies, read_result
from relrl.evaluation.runner import Progress, check_rows, evaluate_rows, progress_path, score_model
from relrl.evaluation.settings import EvalSettings
from relrl.evaluation.shards import merge_records, merged_model_result, shard_path, shard_rows
from relrl.evaluation.stats import mcnemar
from relrl.runtime.cli import UsageError

FAST = ["--model", "tiny-random", "--max-new-tokens", "8"]


def settings(**kw) -> EvalSettings:
    return EvalSettings(**{"max_new_tokens": 16, "micro_batch": 4, **kw})


def run_fake(rows, sets, progress=None, skill=60):
    records = evaluate_rows(rows, fake_generate(skill), sets, progress=progress)
    return model_result(records, label="m", model_path="fake", adapter=None, dataset="d.jsonl",
                        fingerprint=questions_fingerprint(rows), settings=sets)


# ---------------------------------------------------------------------------- runner


def test_records_and_totals_follow_the_schema(tmp_path):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 20))
    result = run_fake(rows, settings())
    records = result["results"]
    assert [r["id"] for r in records] == [r["id"] for r in rows]
    assert result["n"] == 20 and result["samples"] == 1
    assert result["correct"] == sum(r["correct"] for r in records) > 0
    assert result["accuracy"] == pytest.approx(result["correct"] / 20)
    assert result["truncated"] == sum(r["truncated"] for r in records) > 0
    assert result["unextracted"] == sum(r["value"] is None for r in records) == result["truncated"]
    first = records[0]
    assert {"id", "question", "target", "extracted", "value", "correct", "truncated", "reward",
            "response", "pass_count", "samples", "base_score"} <= set(first)
    assert first["target"] == rows[0]["answer"] and first["base_score"] == rows[0]["base_score"]
    for r in records:  # a right answer is graded right, a wrong one wrong
        assert r["correct"] == ("So the answer" in r["response"])
    by_score = result["by_base_score"]
    assert set(by_score) == {"0/4", "1/4", "2/4", "3/4", "4/4"}
    assert sum(v["n"] for v in by_score.values()) == 20
    assert by_score["2/4"]["correct"] == sum(r["correct"] for r in records if r["base_score"] == 2)


def test_k_samples_give_pass_counts_and_pass_at_k(tmp_path):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 12))
    result = run_fake(rows, settings(samples=4))
    for r in result["results"]:
        assert r["samples"] == 4 and len(r["completions"]) == 4
        assert r["pass_count"] == sum(c["correct"] for c in r["completions"])
        assert r["correct"] == r["completions"][0]["correct"]
    assert result["correct"] == sum(r["pass_count"] for r in result["results"])
    assert result["accuracy"] == pytest.approx(result["correct"] / 48)
    assert result["pass_at_k"]["1"] == pytest.approx(result["accuracy"])
    assert result["pass_at_k"]["4"] == pytest.approx(
        sum(r["pass_count"] > 0 for r in result["results"]) / 12)
    # the first of K samples is the sample a one-sample run draws
    single = run_fake(rows, settings())
    assert [r["correct"] for r in single["results"]] == [r["correct"] for r in result["results"]]


def test_outcomes_do_not_depend_on_batching_or_order(tmp_path):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 10))
    a = run_fake(rows, settings(micro_batch=1))["results"]
    b = run_fake(list(reversed(rows)), settings(micro_batch=16))["results"]
    assert a == list(reversed(b))


def test_resume_after_a_crash_equals_an_uninterrupted_run(tmp_path):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 10))
    sets = settings(micro_batch=2)
    run = {"model": "m", "settings": sets.signature()}
    progress_file = tmp_path / "p.jsonl"
    calls: list = []
    with pytest.raises(KeyboardInterrupt):
        evaluate_rows(rows, fake_generate(calls=calls, fail_after=2), sets,
                      progress=Progress(progress_file, run))
    assert len(progress_file.read_text().splitlines()) == 1 + 4  # header + two calls of 2
    with open(progress_file, "a") as handle:  # the write the kill interrupted
        handle.write('{"id": "q12345", "question": "cut he')
    resumed_calls: list = []
    records = evaluate_rows(rows, fake_generate(calls=resumed_calls), sets,
                            progress=Progress(progress_file, run))
    assert sum(len(c) for c in resumed_calls) == 6  # only the unfinished questions
    assert records == evaluate_rows(rows, fake_generate(), sets)


def test_corrupt_or_foreign_progress_is_refused_before_work(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "__run__", "run": {}}\nnot json\n{"id": "a"}\n')
    with pytest.raises(DatasetError, match=r"p.jsonl:2: corrupt progress line"):
        Progress(path, {})
    path.write_text('{"id": "__run__", "run": {"seed": 0}}\n')
    with pytest.raises(UsageError, match="different run.*seed"):
        Progress(path, {"seed": 1})
    path.write_text('{"id": "a", "correct": true}\n')
    with pytest.raises(DatasetError, match="no run header"):
        Progress(path, {})


def test_duplicate_ids_are_refused():
    with pytest.raises(DatasetError, match="rows 1 and 3 share the id 'x'"):
        check_rows([{"id": "x"}, {"id": "y"}, {"id": "x"}], "d.jsonl")


def test_shards_merged_equal_the_unsharded_result(tmp_path):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 11))
    sets = settings(samples=2)
    whole = run_fake(rows, sets)
    parts = [run_fake(shard_rows(rows, i, 3), sets) for i in range(3)]
    assert sorted(len(p["results"]) for p in parts) == [3, 4, 4]
    merged = merged_model_result(rows, parts, "m")
    assert json.dumps(merged) == json.dumps(whole)
    with pytest.raises(UsageError, match="cover 8 of 11"):
        merge_records(rows, [parts[0]["results"], parts[1]["results"]])


def test_compare_models_reports_the_studys_fields(tmp_path):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 54, base_score=False))
    base, ft = run_fake(rows, settings()), run_fake(rows, settings(), skill=30)
    pair = compare_models(base, ft, n_boot=2000)
    b = [r["correct"] for r in base["results"]]
    f = [r["correct"] for r in ft["results"]]
    b01 = sum(not x and y for x, y in zip(b, f))
    b10 = sum(x and not y for x, y in zip(b, f))
    assert (pair["mcnemar_b01"], pair["mcnemar_b10"]) == (b01, b10)
    assert pair["mcnemar_p"] == mcnemar(b01, b10)["exact_p"] == pair["p_value"]
    assert ft["accuracy"] != base["accuracy"]
    assert pair["delta"] == round(100 * ft["accuracy"] - 100 * base["accuracy"], 1)  # points
    assert pair_accuracies(pair) == (base["accuracy"], ft["accuracy"], ft["accuracy"] - base["accuracy"])
    assert pair["bootstrap_ci"]["low"] <= pair_accuracies(pair)[2] <= pair["bootstrap_ci"]["high"]
    assert pair["base_results"][0]["correct"] == b[0] and "response" not in pair["base_results"][0]
    assert pair["base"] == base and pair["finetuned"] == ft
    other = run_fake(rows[:-1], settings())
    with pytest.raises(UsageError, match="different questions"):
        compare_models(other, ft)


def test_score_model_on_tiny_random_is_reproducible_per_question(tmp_path):
    from relrl.models.by_name import load_model

    model, tokenizer = load_model("tiny-random")
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 6))
    kw = dict(label="tiny-random", model_path="tiny-random", adapter=None, dataset="d")
    full = score_model(model, tokenizer, rows, settings(max_new_tokens=8), **kw)
    alone = score_model(model, tokenizer, rows[3:4], settings(max_new_tokens=8, micro_batch=1), **kw)
    assert alone["results"][0] == full["results"][3]
    assert full["truncated"] + sum(not r["truncated"] for r in full["results"]) == 6


# ---------------------------------------------------------------------------- scripts


def test_evaluate_single_writes_the_pair_file(tmp_path, adapter, capsys):
    data = write_rows(tmp_path / "d.jsonl", 5)
    out = tmp_path / "pair.json"
    code, stdout, _ = run_script("evaluate_single", [*FAST, "--adapter", adapter, "--dataset", data,
                                                     "--output", out], capsys)
    assert code == 0 and "mcnemar_exact p=" in stdout
    pair = read_result(out)
    for key in ("base_accuracy", "ft_accuracy", "delta", "mcnemar_b01", "mcnemar_b10", "mcnemar_p",
                "base_results", "ft_results", "mcnemar_chi2_p", "bootstrap_ci"):
        assert key in pair
    assert pair["finetuned"]["model"] == "exp7/checkpoint-80" and pair["base"]["model"] == "tiny-random"
    assert pair["finetuned"]["adapter"] == str(adapter) and pair["base"]["adapter"] is None
    assert pair["base"]["fingerprint"] == questions_fingerprint(load_dataset(data))
    # the adapter changes the answers: the base side is really the adapter switched off
    assert [r["response"] for r in pair["base"]["results"]] != \
        [r["response"] for r in pair["finetuned"]["results"]]


def test_three_shards_and_merge_equal_one_run(tmp_path, adapter, capsys):
    data = write_rows(tmp_path / "d.jsonl", 7)
    common = [*FAST, "--adapter", adapter, "--dataset", data, "--micro-batch", "3"]
    whole, merged = tmp_path / "whole.json", tmp_path / "merged.json"
    assert run_script("evaluate_single", [*common, "--output", whole], capsys)[0] == 0
    for i in range(3):
        assert run_script("evaluate_single", [*common, "--output", merged, "--shard", f"{i}/3"],
                          capsys)[0] == 0
        assert shard_path(merged, i, 3).exists()
    assert not merged.exists()
    assert run_script("evaluate_single", [*common, "--output", merged, "--merge"], capsys)[0] == 0
    a, b = read_result(whole), read_result(merged)
    for side in ("base", "finetuned"):
        for x, y in zip(a[side]["results"], b[side]["results"], strict=True):
            assert x == y  # question by question
    assert whole.read_text() == merged.read_text()


def test_slurm_array_variables_select_the_shard(tmp_path, adapter, capsys, monkeypatch):
    data = write_rows(tmp_path / "d.jsonl", 4)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    out = tmp_path / "o.json"
    assert run_script("evaluate_single", [*FAST, "--adapter", adapter, "--dataset", data,
                                          "--output", out], capsys)[0] == 0
    shard = json.loads(shard_path(out, 1, 2).read_text())
    assert shard["shard"]["index"] == 1 and shard["n"] == 2


def test_a_killed_evaluation_resumes_to_the_same_json(tmp_path, adapter, capsys):
    data = write_rows(tmp_path / "d.jsonl", 30)
    common = [*FAST, "--max-new-tokens", "6", "--adapter", adapter, "--dataset", data,
              "--micro-batch", "1"]
    out = tmp_path / "killed.json"
    progress = progress_path(out, "base")
    cmd = [sys.executable, str(ROOT / "evaluation" / "evaluate_single.py"),
           *[str(a) for a in common], "--output", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_until(lambda: proc.poll() is not None or (
            progress.exists() and len(progress.read_bytes().splitlines()) >= 4),
            timeout=600, what="the evaluation's progress file reaching 3 answers")
        assert proc.poll() is None, "the evaluation finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    done_before = len(progress.read_bytes().splitlines()) - 1
    assert proc.returncode == -signal.SIGKILL and 3 <= done_before < 30
    assert not out.exists()
    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert rerun.returncode == 0, rerun.stderr
    reference = tmp_path / "uninterrupted.json"
    assert run_script("evaluate_single", [*common, "--output", reference], capsys)[0] == 0
    assert out.read_text() == reference.read_text()


def test_finetuned_only_reuses_base_results(tmp_path, adapter, capsys):
    data = write_rows(tmp_path / "d.jsonl", 5)
    pair_path, only = tmp_path / "pair.json", tmp_path / "only.json"
    common = [*FAST, "--adapter", adapter, "--dataset", data]
    assert run_script("evaluate_single", [*common, "--output", pair_path], capsys)[0] == 0
    code, _, _ = run_script("evaluate_finetuned_only", [*common, "--base-results", pair_path,
                                                        "--output", only], capsys)
    assert code == 0
    pair, again = read_result(pair_path), read_result(only)
    assert again["finetuned"]["results"] == pair["finetuned"]["results"]
    assert again["base"]["results"] == pair["base"]["results"]
    assert again["mcnemar_p"] == pair["mcnemar_p"]


def test_gsm8k_local_jsonl_and_parquet(tmp_path, adapter, capsys):
    import pandas as pd

    gsm = load_script("evaluate_gsm8k")
    sample = ROOT / "tests" / "data" / "gsm8k_sample.jsonl"
    rows = gsm.to_rows(gsm.read_local(str(sample)), str(sample))
    assert [r["answer"] for r in rows] == ["2700", "6", "6.5", "-7", "187"]
    assert rows[0]["reasoning"].endswith("2700 litres.")
    parquet = tmp_path / "gsm.parquet"
    pd.DataFrame([json.loads(line) for line in sample.read_text().splitlines()]).to_parquet(parquet)
    assert gsm.to_rows(gsm.read_local(str(parquet)), str(parquet)) == rows
    out = tmp_path / "gsm.json"
    code, _, _ = run_script("evaluate_gsm8k", [*FAST, "--dataset", sample, "--adapter", adapter,
                                               "--output", out], capsys)
    assert code == 0
    pair = read_result(out)
    assert pair["n"] == 5 and pair["base"]["tolerance"] == 0.0
    assert [r["target"] for r in pair["base"]["results"]] == ["2700", "6", "6.5", "-7", "187"]
    base_only = tmp_path / "gsm_base.json"
    assert run_script("evaluate_gsm8k", [*FAST, "--dataset", sample, "--output", base_only],
                      capsys)[0] == 0
    assert read_result(base_only)["results"] == pair["base"]["results"]


def test_baseline_per_fold_matches_the_group_split(tmp_path, capsys):
    from relrl.data.folds import kfold_by_group

    data = write_rows(tmp_path / "d.jsonl", 12, groups=6)
    out = tmp_path / "folds"
    out.mkdir()
    code, stdout, _ = run_script("evaluate_qwen25_base", [*FAST, "--dataset", data, "--output-dir", out,
                                                          "--folds", "3"], capsys)
    assert code == 0 and "mean accuracy over 3 folds" in stdout
    rows = load_dataset(data)
    split = kfold_by_group(rows, 3, 0)
    summary = json.loads((out / "summary.json").read_text())
    for k in range(3):
        fold = read_result(out / f"fold_{k}.json")
        assert [r["id"] for r in fold["results"]] == [rows[i]["id"] for i in split[k]]
        assert summary["per_fold"][k] == {"fold": k, "n": fold["n"], "correct": fold["correct"],
                                          "accuracy": fold["accuracy"]}
    assert summary["pooled"]["n"] == 12


# ---------------------------------------------------------------------------- bad input


def _one_line_error(code, err, text):
    assert code == 2
    assert err.startswith("error: ") and err.strip().count("\n") == 0, err
    assert text in err


def test_bad_input_is_one_line_exit_2_and_overwrites_nothing(tmp_path, adapter, capsys):
    data = write_rows(tmp_path / "d.jsonl", 4)
    out = tmp_path / "out.json"
    out.write_text("previous result\n")
    common = [*FAST, "--output", out]

    bad = tmp_path / "bad.jsonl"
    bad.write_text(data.read_text() + '{"question": "no answer here"}\n')
    code, _, err = run_script("evaluate_single", [*common, "--adapter", adapter, "--dataset", bad], capsys)
    _one_line_error(code, err, "bad.jsonl:5: missing 'answer'")

    empty_adapter = tmp_path / "not_an_adapter"
    empty_adapter.mkdir()
    code, _, err = run_script("evaluate_single", [*common, "--adapter", empty_adapter, "--dataset", data],
                              capsys)
    _one_line_error(code, err, "has no adapter_config.json")

    code, _, err = run_script("evaluate_single", [*common, "--adapter", adapter, "--dataset", data,
                                                  "--shard", "4/3"], capsys)
    _one_line_error(code, err, "--shard")

    other = tmp_path / "other.json"
    other_rows = load_dataset(write_rows(tmp_path / "o.jsonl", 3))
    other.write_text(json.dumps(run_fake(other_rows, settings())))
    code, _, err = run_script("evaluate_finetuned_only", [*common, "--adapter", adapter, "--dataset", data,
                                                          "--base-results", other], capsys)
    _one_line_error(code, err, "is for other questions")

    progress = progress_path(out, "base")
    progress.write_text('{"id": "__run__", "run": {}}\n{"id": "a", broken\n{"id": "b"}\n')
    before = progress.read_text()
    code, _, err = run_script("evaluate_single", [*common, "--adapter", adapter, "--dataset", data], capsys)
    _one_line_error(code, err, "corrupt progress line")
    assert progress.read_text() == before

    progress.unlink()
    code, _, err = run_script("evaluate_single", [*common, "--adapter", adapter, "--dataset", data,
                                                  "--merge"], capsys)
    _one_line_error(code, err, "no shard files")

    code, _, err = run_script("evaluate_single", [*common, "--adapter", adapter, "--dataset", data,
                                                  "--temperature", "0"], capsys)
    _one_line_error(code, err, "--temperature")

    gsm_bad = tmp_path / "gsm_bad.jsonl"
    gsm_bad.write_text('{"question": "How many?", "answer": "About 3 of them"}\n')
    code, _, err = run_script("evaluate_gsm8k", [*common, "--dataset", gsm_bad], capsys)
    _one_line_error(code, err, "gsm_bad.jsonl:1: answer has no '#### number' line")

    assert out.read_text() == "previous result\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out")) == ["out.json"]


def test_progress_of_another_run_is_refused(tmp_path, adapter, capsys):
    data = write_rows(tmp_path / "d.jsonl", 3)
    out = tmp_path / "out.json"
    common = [*FAST, "--adapter", adapter, "--dataset", data, "--output", out]
    assert run_script("evaluate_single", common, capsys)[0] == 0
    out.unlink()
    code, _, err = run_script("evaluate_single", [*common, "--seed", "5"], capsys)
    _one_line_error(code, err, "progress of a different run (differs in settings)")
    assert not out.exists()


def test_group_aware_folds():
    from relrl.data.folds import fold_rows, kfold_by_group

    sizes = [5, 1, 3, 3, 2, 1, 1, 4, 2, 1]  # paraphrase groups of uneven size
    rows = [{"id": f"q{g}-{j}", "group": f"g{g}"} for g, size in enumerate(sizes) for j in range(size)]
    rows += [{"id": "loner-1"}, {"id": "loner-2"}]  # no group: each is its own
    folds = kfold_by_group(rows, 4, seed=0)
    assert sorted(i for fold in folds for i in fold) == list(range(len(rows)))
    for fold in folds:
        assert fold == sorted(fold)
    fold_of = {}
    for k, fold in enumerate(folds):
        for i in fold:
            assert fold_of.setdefault(rows[i].get("group", rows[i]["id"]), k) == k  # never split
    lengths = [len(f) for f in folds]
    assert max(lengths) - min(lengths) <= max(sizes)
    assert kfold_by_group(rows, 4, seed=0) == folds
    assert kfold_by_group(rows, 4, seed=1) != folds
    train, test = fold_rows(rows, 4, 2, seed=0)
    assert [r["id"] for r in test] == [rows[i]["id"] for i in folds[2]]
    assert len(train) + len(test) == len(rows) and not {r["id"] for r in train} & {r["id"] for r in test}
    with pytest.raises(UsageError, match="12 question groups cannot fill 13 folds"):
        kfold_by_group(rows, 13)
    with pytest.raises(UsageError, match="--fold"):
        fold_rows(rows, 4, 4)


# ---------------------------------------------------------------------------- the study's variables


STUDY_FIELDS = ("base_accuracy", "ft_accuracy", "delta", "mcnemar_b01", "mcnemar_b10",
                "mcnemar_p", "base_results", "ft_results")
STUDY_SUMMARY = ("base_accuracy", "ft_accuracy", "delta", "n_questions", "run_name", "lora_path")


def study_env(monkeypatch, **values):
    for name in ("LORA_PATH", "DATASET_PATH", "OUTPUT_DIR", "RUN_NAME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))


def test_the_studys_environment_variables_write_eval_run_name_json(tmp_path, adapter, capsys,
                                                                    monkeypatch):
    data = write_rows(tmp_path / "d.jsonl", 4)
    out_dir = tmp_path / "study_results"  # created: the study's script made it too
    study_env(monkeypatch, LORA_PATH=adapter, DATASET_PATH=data, OUTPUT_DIR=out_dir,
              RUN_NAME="exp7_ckpt80")
    code, stdout, err = run_script("evaluate_single", FAST, capsys)
    assert code == 0, err
    written = out_dir / "eval_exp7_ckpt80.json"
    assert f"wrote {written}" in stdout and sorted(p.name for p in out_dir.iterdir() if
                                                  p.suffix == ".json") == [written.name]
    pair = read_result(written)
    assert all(key in pair for key in STUDY_FIELDS)
    assert len(pair["base_results"]) == len(pair["ft_results"]) == 4
    assert pair["finetuned"]["adapter"] == str(adapter)
    # the plain file as a study user's table script reads it: percent to 0.1, delta in points
    plain = json.loads(written.read_text())
    base, ft = pair["base"]["accuracy"], pair["finetuned"]["accuracy"]
    assert {k: plain[k] for k in STUDY_SUMMARY} == {
        "base_accuracy": round(100 * base, 1), "ft_accuracy": round(100 * ft, 1),
        "delta": round(100 * ft - 100 * base, 1), "n_questions": 4, "run_name": "exp7_ckpt80",
        "lora_path": str(adapter)}
    assert plain["schema_version"] == 2 and pair_accuracies(plain) == (base, ft, ft - base)

    # evaluate_finetuned_only with the same variables and the base from that file
    study_env(monkeypatch, LORA_PATH=adapter, DATASET_PATH=data, OUTPUT_DIR=out_dir,
              RUN_NAME="exp7_ckpt80_ft")
    code, _, err = run_script("evaluate_finetuned_only", [*FAST, "--base-results", written], capsys)
    assert code == 0, err
    again = read_result(out_dir / "eval_exp7_ckpt80_ft.json")
    assert all(key in again for key in STUDY_FIELDS) and again["mcnemar_p"] == pair["mcnemar_p"]


def test_without_output_dir_and_run_name_the_studys_defaults(tmp_path, adapter, capsys,
                                                            monkeypatch):
    data = write_rows(tmp_path / "d.jsonl", 2)
    monkeypatch.chdir(tmp_path)
    study_env(monkeypatch, LORA_PATH=adapter, DATASET_PATH=data)
    assert run_script("evaluate_single", FAST, capsys)[0] == 0
    assert (tmp_path / "results" / "eval_eval.json").is_file()
    out = tmp_path / "mine.json"  # a flag still wins over the variables
    study_env(monkeypatch, LORA_PATH=adapter, DATASET_PATH=data, RUN_NAME="ignored")
    assert run_script("evaluate_single", [*FAST, "--output", out], capsys)[0] == 0
    assert out.is_file() and not (tmp_path / "results" / "eval_ignored.json").exists()


def test_a_bad_dataset_row_is_reported_first(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "0.5"}) + "\n"
                   + json.dumps({"question": "no answer"}) + "\n")
    out_dir = tmp_path / "never"
    # no adapter anywhere: the dataset's line is still what is reported, nothing is created
    study_env(monkeypatch, DATASET_PATH=bad, OUTPUT_DIR=out_dir, RUN_NAME="x")
    for script in ("evaluate_single", "evaluate_finetuned_only"):
        extra = ["--base-results", tmp_path / "absent.json"] if script.endswith("only") else []
        code, _, err = run_script(script, [*FAST, *extra], capsys)
        _one_line_error(code, err, "bad.jsonl:2: missing 'answer'")
    assert not out_dir.exists()
