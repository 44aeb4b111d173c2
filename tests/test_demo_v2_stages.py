"""demo.py's settings for the redone replication (issue 30), checked on the commands its stages
would run, without running a model: the model every stage starts from, the families the data is
drawn from, SFT on some topics only (so forgetting can show on the others), and plain GRPO
matched to exp7's sampling, exp10 matched to exp7 but for the warm start."""
import json
from dataclasses import replace

import pytest

import demo

V2 = dict(model="tiny-tool", tools="calculator", families="tiny-tool", ood_topics="growth",
          sft_topics="distributions,stress_strength", plain_grpo=True, matched_arms=True)


def recording_demo(tmp_path, monkeypatch, settings: dict):
    """(a Demo of the fast recipe with `settings` whose `run` records each command, the
    record: (stage, args) pairs)."""
    ran = []
    monkeypatch.setattr(demo.Demo, "run", lambda self, stage, args, done=None, work=None, processes=1:
                        ran.append((stage, [str(a) for a in args])))
    monkeypatch.setattr(demo.Demo, "run_side_by_side", lambda self, jobs, lanes=None:
                        [self.run(*job) for job in jobs])
    return demo.Demo(fast=True, seed=100, work=tmp_path, out=tmp_path / "out", lanes=1,
                     settings=replace(demo.recipe("fast"), **settings)), ran


@pytest.fixture
def commands(tmp_path, monkeypatch):
    """A Demo with issue 30's settings whose `run` records each command."""
    d, ran = recording_demo(tmp_path, monkeypatch, V2)
    (tmp_path / "data").mkdir()
    (tmp_path / "screen").mkdir()
    rows = [{"id": f"q{i}", "topic": topic, "question": "?", "answer": "1", "expression": "1"}
            for i, topic in enumerate(["distributions", "basic", "stress_strength", "growth"])]
    (tmp_path / "screen" / "non_mixed.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows))
    adapter = d.sft_adapter
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 16, "lora_alpha": 32}))
    (tmp_path / "exp7").mkdir()
    (tmp_path / "exp7" / "statistics.json").write_text(json.dumps({"total_attempts": 37,
                                                                      "useful_steps": 4}))
    return d, ran


def flag(args, name):
    return args[args.index(name) + 1]


def test_every_stage_starts_from_the_pipelines_model_with_the_calculator(commands):
    d, ran = commands
    d.data()
    d.tiny()
    d.train()
    stages = dict(ran)
    assert flag(stages["generate"], "--families") == "tiny-tool"
    assert stages["tiny-tool"] == ["-m", "relrl.models.tiny_tool_build"]
    for stage in ("sft", "grpo_exp7", "grpo_exp10", "grpo_exp7_passrate", "grpo_exp7_plain"):
        assert flag(stages[stage], "--model") == "tiny-tool"
        assert flag(stages[stage], "--tools") == "calculator"


def test_matched_arms_give_exp10_the_sft_adapters_shape_and_the_warm_learning_rate(commands):
    d, ran = commands
    d.train()
    exp10, exp7 = dict(ran)["grpo_exp10"], dict(ran)["grpo_exp7"]
    assert (flag(exp10, "--lora-r"), flag(exp10, "--lora-alpha")) == ("16", "32")
    assert flag(exp10, "--learning-rate") == flag(exp7, "--learning-rate") == str(d.cfg.grpo_warm_lr)


def test_sft_trains_on_its_topics_non_mixed_questions_only(commands, tmp_path):
    d, ran = commands
    d.train()
    sft = dict(ran)["sft"]
    assert flag(sft, "--dataset") == str(tmp_path / "data" / "sft_non_mixed.jsonl")
    kept = [json.loads(line) for line in (tmp_path / "data" / "sft_non_mixed.jsonl").open()]
    assert [r["id"] for r in kept] == ["q0", "q2"]
    assert all(r["expression"] == "1" for r in kept)  # tool form: the calculator solutions


def test_prose_sft_trains_on_the_written_out_solutions(commands, tmp_path):
    d, ran = commands
    d.cfg = replace(d.cfg, sft_form="prose")
    d.train()
    kept = [json.loads(line) for line in (tmp_path / "data" / "sft_non_mixed.jsonl").open()]
    assert [r["id"] for r in kept] == ["q0", "q2"] and not any("expression" in r for r in kept)


def test_plain_grpo_generates_as_many_groups_as_exp7_and_validates_as_often(commands):
    d, ran = commands
    d.train()
    stages = dict(ran)
    assert [s for s, _ in ran][-1] == "grpo_exp7_plain"  # after exp7, whose count it reads
    plain, exp7 = stages["grpo_exp7_plain"], stages["grpo_exp7"]
    assert flag(plain, "--dynamic-sampling") == "off" and "--dynamic-sampling" not in exp7
    assert flag(plain, "--max-useful-steps") == "37"  # exp7's total_attempts
    # fast: 4 steps validated every 2 -> two validations over 37 groups
    assert flag(plain, "--val-every") == flag(plain, "--save-every") == "19"
    assert flag(plain, "--sft-adapter") == flag(exp7, "--sft-adapter")
    assert d.models()["GRPO exp7 plain best"] == d.work / "exp7_plain" / "best"


def test_sft_without_a_question_of_its_topics_stops_the_demo(commands, tmp_path):
    d, _ = commands
    d.cfg = replace(d.cfg, sft_topics="bayesian")
    with pytest.raises(SystemExit, match="no non-mixed question of sft_topics bayesian"):
        d.train()
