"""Guess baselines: fitted on training rows only, scored with the evaluation's rule."""
import pytest

from relrl.evaluation import guess_baselines as gb


def row(answer, family="f", question="What is the value?", kind="value", **extra):
    return {"question": question, "answer": str(answer), "family": family,
            "target_kind": kind, **extra}


def test_the_constant_is_fitted_on_training_rows_not_on_the_scored_rows():
    train = [row(200), row(201), row(199), row(7)]
    scored = [row(7), row(7.1), row(6.9), row(200)]
    # on the scored rows alone the best constant would be about 7 (three of four right) ...
    assert gb.fit_constant(scored)[0] == pytest.approx(7, rel=0.05)
    block = gb.score_baselines(scored, train)
    # ... but the baseline is the training rows' best answer, right on one scored row of four
    assert block["constant"]["answer"] == pytest.approx(200, rel=0.05)
    assert block["constant"]["train_accuracy"] == 3 / 4
    assert (block["constant"]["correct"], block["constant"]["accuracy"]) == (1, 1 / 4)
    assert block["train"]["rows"] == 4


def test_ties_go_to_the_smallest_candidate_and_no_hit_means_no_constant():
    # no answer is within 5% of both 10 and 20: 10 and 20 tie, the smaller is chosen
    assert gb.fit_constant([row(20), row(10)]) == (10, 0.5)
    assert gb.fit_constant([]) == (None, 0.0)
    assert gb.fit_constant([row("31, 521")]) == (None, 0.0)  # several values: no constant meets it


def test_family_answers_and_the_fallback_for_unseen_families():
    train = [row(10, "a"), row(10.2, "a"), row(0.5, "b"), row(0.5, "b"), row(0.51, "b")]
    fitted = gb.fit_guesses(train)
    assert fitted.family_answers["a"] == pytest.approx(10, rel=0.05)
    assert fitted.family_answers["b"] == pytest.approx(0.5, rel=0.05)
    assert fitted.constant == fitted.family_answers["b"]  # 0.5 is the most common overall
    scored = [row(10, "a"), row(0.5, "b"), row(10, "unseen"), row(10, None)]
    answers = [gb.guess_answers(r, fitted)["family_mode"] for r in scored]
    assert answers == [fitted.family_answers["a"], fitted.family_answers["b"],
                       fitted.constant, fitted.constant]
    block = gb.score_fitted(scored, fitted)
    assert (block["family_mode"]["correct"], block["constant"]["correct"]) == (2, 1)
    assert block["best"] == {"guess": "family_mode", "accuracy": 0.5}


def test_the_copy_answer_is_the_last_number_in_the_question():
    assert gb.copy_answer("3 pumps, each with reliability 0.9, run for 100 hours.") == 100
    assert gb.copy_answer("What share is above 95%?") == pytest.approx(0.95)
    assert gb.copy_answer("Find $R_{10}$ when $\\lambda = 2 \\times 10^{-4}$") == pytest.approx(2e-4)
    assert gb.copy_answer("No numbers here.") is None
    scored = [row(0.95, question="A pump has R = 0.95. What is R?"),
              row(0.5, question="A pump has R = 0.95. What is R?"),
              row(1, question="No numbers.")]
    block = gb.score_fitted(scored, gb.Fitted(None, 0.0))
    assert (block["copy"]["correct"], block["copy"]["rule"]) == (1, gb.COPY_RULE)
    assert block["constant"]["correct"] == block["family_mode"]["correct"] == 0


def test_guesses_are_graded_with_the_given_rule_and_each_rows_target_kind():
    train = [row(0.95, kind="probability")] * 3
    scored = [row(0.9355, kind="probability"), row(0.9355, kind="value")]
    study = gb.score_baselines(scored, train, rule="study")
    complement = gb.score_baselines(scored, train, rule="complement")
    assert study["constant"]["answer"] == complement["constant"]["answer"] == 0.95
    assert study["constant"]["correct"] == 2  # 1.5% off
    # the probability row is judged on its failure probability: 0.05 against 0.0645 is wrong
    assert complement["constant"]["correct"] == 1
    assert complement["tolerance_rule"] == "complement"


def test_margins_are_model_accuracy_minus_the_best_guess():
    scored = [row(0.95), row(0.95), row(3), row(4)]
    block = gb.score_baselines(scored, [row(0.95)])
    assert block["best"] == {"guess": "constant", "accuracy": 0.5}
    pair = {"kind": "pair_result", "base": {"model": "base", "accuracy": 0.25},
            "finetuned": {"model": "exp7", "accuracy": 0.875}}
    out = gb.with_baselines(pair, block)
    assert out["guess_baselines"]["margins"] == {"base": -0.25, "exp7": 0.375}
    assert gb.with_baselines({"model": "sft", "accuracy": 0.5},
                             block)["guess_baselines"]["margins"] == {"sft": 0.0}


def test_a_recorded_block_rescored_on_a_subset_keeps_its_fitted_answers():
    train = [row(200), row(201), row(0.5, "b"), row(0.5, "b"), row(0.5, "b")]
    records = [{"id": i, "question": "Q 3", "target": t, "family": f, "target_kind": "value"}
               for i, (t, f) in enumerate([("200", "f"), ("0.5", "b"), ("3", "x")])]
    block = gb.score_baselines(records, train)
    sub = gb.rescore(block, records[:1])
    assert sub["constant"]["answer"] == block["constant"]["answer"] == pytest.approx(0.5, rel=0.05)
    assert sub["family_mode"]["answers"] == block["family_mode"]["answers"]
    assert (sub["n"], sub["family_mode"]["correct"], sub["constant"]["correct"]) == (1, 1, 0)
    assert block["copy"]["correct"] == 1 and sub["train"] == block["train"]


def test_evaluation_records_the_baselines_fitted_on_baseline_train(tmp_path, capsys):
    import json

    from eval_helpers import fake_generate, run_script, write_rows

    from relrl.data.dataset_io import load_dataset, questions_fingerprint
    from relrl.evaluation.model_results import compare_models, model_result
    from relrl.evaluation.runner import evaluate_rows
    from relrl.evaluation.settings import EvalSettings
    from relrl.evaluation.shards import shard_rows, write_result

    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 12))
    train = tmp_path / "train.jsonl"
    train.write_text("".join(f'{{"question": "Q{i}", "answer": "{t}", "target_kind": "value"}}\n'
                             for i, t in enumerate(["12e-4", "12e-4", "30e-4"])))
    sets = EvalSettings(max_new_tokens=16)
    out = tmp_path / "out.json"
    for i in range(2):  # two finished shards of a paired run; --merge needs no model
        part = shard_rows(rows, i, 2)
        results = [model_result(evaluate_rows(part, fake_generate(skill), sets), label=label,
                                model_path="tiny-random", adapter=adapter, dataset=str(tmp_path / "d.jsonl"),
                                fingerprint=questions_fingerprint(part), settings=sets)
                   for label, adapter, skill in (("base", None, 30), ("exp7", "a", 60))]
        write_result(out, compare_models(*results, n_boot=100), (i, 2), questions_fingerprint(rows))
    common = ["--model", "tiny-random", "--adapter", tmp_path / "a", "--dataset", tmp_path / "d.jsonl",
              "--output", out, "--max-new-tokens", 16, "--merge"]
    code, stdout, _ = run_script("evaluate_single", [*common, "--baseline-train", train], capsys)
    assert code == 0
    result = json.loads(out.read_text())  # the block and the sides' accuracies stay in the main file
    block = result["guess_baselines"]
    # 12e-4 (two training rows of three) is the second question's target: one of 12 right
    assert block["constant"]["answer"] == pytest.approx(12e-4)
    assert (block["n"], block["constant"]["correct"], block["train"]["rows"]) == (12, 1, 3)
    assert block["train_file"] == str(train)
    sides = [result["base"], result["finetuned"]]
    assert block["margins"] == {m["model"]: pytest.approx(m["accuracy"] - 1 / 12) for m in sides}
    assert "best guess: constant 0.0012, 1/12 correct" in stdout

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "Q"}\n')
    code, _, err = run_script("evaluate_single", [*common, "--baseline-train", bad], capsys)
    assert code == 2 and "bad.jsonl:1" in err and len(err.strip().splitlines()) == 1


def test_replication_report_pools_each_seeds_guesses_by_group(tmp_path):
    import json

    from study.replication.baselines import guess_baselines
    from study.replication.design import FIRST
    from study.replication.sections import guess_table
    from study.replication.seed_files import seed_dirs, slug

    def rec(i, group, target, passes=0):
        return {"id": f"{group}-{i}", "group": group, "question": "Which value?", "target": target,
                "target_kind": "value", "samples": 4, "pass_count": passes}

    targets = {2: [("g0", "0.95"), ("g0", "0.5"), ("g1", "0.95")], 3: [("h0", "0.3")]}
    block = gb.score_fitted([], gb.Fitted(0.95, 0.6))
    for seed, rows in targets.items():
        folder = tmp_path / f"seed-{seed}" / "eval" / "heldout"
        folder.mkdir(parents=True)
        base = [rec(i, g, t) for i, (g, t) in enumerate(rows)]
        for k, model in enumerate(FIRST.models[1:]):
            ft = [{**r, "pass_count": 4 if k == 0 else 1} for r in base]
            (folder / f"{slug(model)}.json").write_text(json.dumps(
                {"kind": "pair_result", "base": {"results": base}, "finetuned": {"results": ft},
                 "guess_baselines": block}))
    out = guess_baselines(seed_dirs(tmp_path, [2, 3]), FIRST.guess_sets, FIRST.models)
    assert list(out) == ["heldout"]  # the other sets have no result files
    g = out["heldout"]
    # the constant 0.95 by group: g0 half right, g1 right, h0 wrong -> (0.5 + 1 + 0) / 3
    assert g["accuracy"] == {"constant": 0.5, "family_mode": 0.5, "copy": 0.0}
    assert g["best"] == "constant"
    assert g["margins"] == {"base": -0.5, "SFT warm start": 0.5, "GRPO exp7 best": -0.25,
                            "GRPO exp7 final": -0.25, "GRPO exp10 best": -0.25}
    table = guess_table(out)
    assert "| heldout | constant (study rule) | 50.0% | -50.0 | +50.0 | -25.0 | -25.0 | -25.0 |" in table


def test_demo_report_lists_the_best_guess_and_margins_per_set(tmp_path):
    import json

    from study.demo_report import guess_lines

    block = {"best": {"guess": "constant", "accuracy": 0.57}, "tolerance_rule": "study"}
    (tmp_path / "compare_heldout.json").write_text(json.dumps({"guess_baselines": block, "rows": [
        {"model": "base", "margin": 0.288 - 0.57}, {"model": "GRPO exp7 best", "margin": 0.378 - 0.57}]}))
    (tmp_path / "compare_ood.json").write_text(json.dumps({"rows": [{"model": "base"}]}))
    assert guess_lines(tmp_path)[4:7] == [
        "| Set | Best guess | Its accuracy | base | GRPO exp7 best |", "|---|---|---|---|---|",
        "| heldout | constant (study rule) | 57.0% | -28.2 | -19.2 |"]
    (tmp_path / "compare_heldout.json").unlink()
    assert guess_lines(tmp_path) == []  # no set carries baselines: no section
