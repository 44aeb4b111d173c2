"""The first demo (`make demo`, recipes/demo/first.yaml): the commands its stages would run,
without a model; the recipe checks that keep a setting from leaving a stage nothing to do; the
progress lines; and its report's numbers against a direct computation."""
import json
from fractions import Fraction

import numpy as np
import pytest

import demo
from relrl.evaluation.model_results import compare_models, model_result
from relrl.evaluation.results_io import write_result
from relrl.evaluation.settings import EvalSettings
from relrl.runtime.cli import UsageError
from study import first_report, pipeline_config, stage_progress
from study.stage_progress import Work


@pytest.fixture
def commands(tmp_path, monkeypatch):
    """A Demo of the first recipe whose `run` records each command (and its progress)."""
    ran = []
    monkeypatch.setattr(demo.Demo, "run",
                        lambda self, stage, args, done=None, work=None, processes=1:
                        ran.append((stage, [str(a) for a in args], work)))
    monkeypatch.setattr(demo.Demo, "run_side_by_side", lambda self, jobs, lanes=None:
                        [self.run(*job) for job in jobs])
    d = demo.Demo(fast=False, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1,
                  config="first", tolerance_rule="complement")
    (tmp_path / "out").mkdir()
    return d, ran


def flag(args, name):
    return args[args.index(name) + 1]


def test_training_is_grpo_exp10_alone_at_its_own_rate(commands):
    d, ran = commands
    d.train()
    assert [stage for stage, _, _ in ran] == ["grpo_exp10"]
    args = ran[0][1]
    assert args[0] == "training/grpo_exp10_nosft.py" and "--sft-adapter" not in args
    assert flag(args, "--learning-rate") == str(d.cfg.grpo_lr)
    assert flag(args, "--max-useful-steps") == str(d.cfg.grpo_steps)
    assert flag(args, "--tools") == "calculator" and flag(args, "--tolerance-rule") == "complement"
    work = ran[0][2]()  # train_log.jsonl holds one line a useful step
    assert work.total == d.cfg.grpo_steps and work.files[0].name == "train_log.jsonl"


def test_evaluation_samples_the_heldout_set_alone_and_compares_grpo_with_the_base(commands,
                                                                                 tmp_path):
    d, ran = commands
    (tmp_path / "screen_holdout").mkdir()
    (tmp_path / "screen_holdout" / "mixed.jsonl").write_text(
        "".join(json.dumps({"id": f"q{i}", "question": "?", "answer": "1"}) + "\n"
                for i in range(7)))
    d.evaluate()
    assert [stage for stage, _, _ in ran] == ["eval_heldout_grpo_exp10_best"]
    args = ran[0][1]
    assert args[0] == "evaluation/evaluate_single.py"
    assert flag(args, "--samples") == "4" and flag(args, "--label") == "GRPO exp10 best"
    assert flag(args, "--dataset") == str(tmp_path / "screen_holdout" / "mixed.jsonl")
    work = ran[0][2]()  # the base's and GRPO's progress files, a line a question each
    assert work.total == 14 and [f.name.split(".")[-3] for f in work.files] == ["base", "finetuned"]
    assert d.reported_sets() == ["heldout"]


def test_the_report_compares_the_heldout_set_and_draws_the_training_curves_there(commands,
                                                                                 tmp_path):
    d, ran = commands
    (tmp_path / "exp10").mkdir()
    (tmp_path / "exp10" / "statistics.json").write_text("{}")
    (tmp_path / "exp10" / "train_log.jsonl").write_text("{}\n")
    d.write_report = lambda: None
    d.report()
    assert [stage for stage, _, _ in ran] == ["compare_heldout"]
    assert flag(ran[0][1], "--grpo-log").startswith("exp10=")


@pytest.mark.parametrize("change, message", [
    ({"plain_grpo": True}, "plain_grpo need the SFT warm start"),
    ({"matched_arms": True, "sft_topics": "distributions"}, "sft_topics, matched_arms need"),
    ({"eval_samples": 1}, "eval_sets heldout without holdout needs eval_samples above 1"),
    ({"eval_sets": "heldout,retention"}, "eval_sets retention needs retention_min_score"),
    ({"eval_sets": "heldout,bogus"}, "unknown set bogus"),
])
def test_a_recipe_whose_settings_leave_a_stage_nothing_to_do_is_refused(tmp_path, change,
                                                                         message):
    text = (demo.RECIPES / "first.yaml").read_text()
    text += "".join(f"\n{key}: {json.dumps(value)}" for key, value in change.items()
                    if key not in ("eval_samples", "eval_sets"))
    for key in ("eval_samples", "eval_sets"):
        if key in change:
            text = "\n".join(f"{key}: {change[key]}" if line.startswith(f"{key}:") else line
                             for line in text.splitlines())
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        pipeline_config.load(path)


def test_progress_counts_finished_lines_and_projects_the_pace(tmp_path):
    log = tmp_path / "x.progress.jsonl"
    log.write_text('{"id": "__run__", "run": {}}\n{"id": "a"}\n{"id": "b"}\n{"id": "c"')
    work = Work((log, tmp_path / "missing.jsonl"), 10, "questions")
    assert work.done() == 2  # the header and the half-written line do not count
    # 2 of 10 after 60 s, none done before this attempt: 8 more at 30 s each
    assert stage_progress.line("s", work, 2, 0, 60) == \
        "s: 2/10 questions (20%), 1:00 so far, about 4:00 left"
    # resumed with 2 done: no pace until this attempt finishes one
    assert stage_progress.line("s", work, 2, 2, 61) == "s: 2/10 questions (20%), 1:01 so far"
    assert stage_progress.clock(3725) == "1:02:05"


def test_the_monitor_prints_while_the_stage_runs(tmp_path):
    lines = []
    log = tmp_path / "train_log.jsonl"
    log.write_text("{}\n")
    with stage_progress.Monitor("grpo", Work((log,), 4, "useful steps"), lines.append,
                                every=0.05):
        import time
        time.sleep(0.3)
    assert lines and all(line.startswith("grpo: 1/4 useful steps (25%)") for line in lines)


def _records(outcomes, groups, samples):
    return [{"id": f"q{i}", "question": f"question {i}", "target": "1", "extracted": "1",
             "value": 1.0, "correct": passes > 0, "truncated": False, "pass_count": passes,
             "samples": samples, "group": group, "family": "f"}
            for i, (passes, group) in enumerate(zip(outcomes, groups))]


def test_the_reported_gain_is_the_question_level_difference_with_a_group_level_test(tmp_path):
    rng = np.random.default_rng(3)
    groups = [f"g{i // 2}" for i in range(40)] + [f"h{i}" for i in range(10)]
    base = rng.integers(0, 5, size=50).tolist()
    grpo = np.clip(np.array(base) + rng.integers(-1, 3, size=50), 0, 4).tolist()
    sets = EvalSettings(samples=4)
    pair = compare_models(
        model_result(_records(base, groups, 4), label="base", model_path="m", adapter=None,
                     dataset="d", fingerprint="f", settings=sets),
        model_result(_records(grpo, groups, 4), label="GRPO exp10 best", model_path="m",
                     adapter="a", dataset="d", fingerprint="f", settings=sets), n_boot=200)
    pair["guess_baselines"] = {"best": {"guess": "family_mode", "accuracy": 0.125}}
    (tmp_path / "eval" / "heldout").mkdir(parents=True)
    write_result(tmp_path / first_report.RESULT, pair, records="gzip")
    s = first_report.summary(tmp_path)
    direct = Fraction(sum(grpo) - sum(base), 4 * 50)  # the mean over questions of pass/4
    assert s["gain"] == pytest.approx(float(direct)) and s["groups"] == 30
    assert s["grpo_accuracy"] - s["base_accuracy"] == pytest.approx(float(direct))
    assert s["gain_ci"][0] < s["gain"] < s["gain_ci"][1]
    # the test is over groups, of each group's summed difference (sum: the gain x questions),
    # against sign flips drawn at random
    by_group = {}
    for b, f, g in zip(base, grpo, groups):
        by_group.setdefault(g, []).append(Fraction(f - b, 4))
    d = [sum(v) for v in by_group.values()]
    rng = np.random.default_rng(0)
    signs = rng.choice([-1, 1], size=(200_000, len(d)))
    observed = abs(float(sum(d)))
    monte_carlo = (np.abs(signs @ np.array([float(x) for x in d])) >= observed - 1e-12).mean()
    assert s["p"] == pytest.approx(monte_carlo, abs=0.01)
    table = "\n".join(first_report.closing_table(s))
    assert "best guess (family mode)  12.5%" in table and f"{100 * s['gain']:+.1f} points" in table


@pytest.mark.parametrize("gain, p, start", [(0.05, 0.02, "GRPO gained 5.0 points, more than"),
                                            (-0.05, 0.02, "GRPO lost 5.0 points, more than"),
                                            (0.05, 0.068, "The change, +5.0 points, is within"),
                                            (-0.05, 0.05, "The change, -5.0 points, is within")])
def test_the_verdict_follows_the_test(gain, p, start):
    assert first_report.verdict({"gain": gain, "gain_ci": [-1, 1], "p": p}).startswith(start)
