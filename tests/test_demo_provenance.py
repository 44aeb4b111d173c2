"""A demo stage is done only when its result was made from the same inputs (study.stage_inputs):
a retrained adapter is evaluated afresh, a committed result with no record is remade, an
unchanged stage is skipped, and a stage stopped part-way on the same inputs resumes."""
import json
import shutil

import pytest

import demo
from study import stage_inputs

# Stands in for an evaluation script: writes the adapter's weights into its result, and counts
# the questions its progress file says were done already (a resumed evaluation reuses them).
EVAL = """
import pathlib, sys
adapter, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
progress = out.with_name(out.name + ".finetuned.progress.jsonl")
reused = len(progress.read_text().splitlines()) if progress.exists() else 0
out.write_text((adapter / "adapter_model.safetensors").read_text() + f" reused={reused}")
"""

# Stands in for a training script: an adapter folder with the given weights.
TRAIN = """
import pathlib, sys
folder = pathlib.Path(sys.argv[1])
folder.mkdir(parents=True, exist_ok=True)
(folder / "adapter_config.json").write_text('{"r": 8}')
(folder / "adapter_model.safetensors").write_text(sys.argv[2])
"""


def write_adapter(folder, weights):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text('{"r": 8}')
    (folder / "adapter_model.safetensors").write_text(weights)


@pytest.fixture
def stub_demo(monkeypatch, tmp_path):
    """`train` writes an adapter whose weights are the test's current `weights`, `evaluate`
    runs EVAL on it into the results folder; the other stages do nothing."""
    weights = {"now": "checkpoint A"}
    for name in demo.STAGES:
        monkeypatch.setattr(demo.Demo, name, lambda self: None)

    def train(self):
        adapter = self.work / "exp7" / "best"
        self.run("train", ["-c", TRAIN, adapter, weights["now"]], done=adapter)

    def evaluate(self):
        target = self.out / "eval" / "holdout" / "grpo_exp7_best.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        self.run("eval_holdout_grpo_exp7_best",
                 ["-c", EVAL, self.work / "exp7" / "best", target], done=target)

    monkeypatch.setattr(demo.Demo, "train", train)
    monkeypatch.setattr(demo.Demo, "evaluate", evaluate)
    work, results = tmp_path / "runs", tmp_path / "results"
    argv = ["--work-dir", str(work), "--results-dir", str(results)]
    return weights, argv, work, results / "eval" / "holdout" / "grpo_exp7_best.json"


def test_a_retrained_adapter_is_evaluated_again_and_an_unchanged_one_is_not(stub_demo, capsys):
    weights, argv, work, result = stub_demo
    assert demo.main(argv) == 0
    assert result.read_text() == "checkpoint A reused=0"
    result.write_text("checkpoint A, first evaluation")  # a rerun that evaluated would rewrite it
    capsys.readouterr()

    assert demo.main(argv) == 0  # nothing changed: both stages skipped
    printed = capsys.readouterr().out
    assert "[demo] train: done already" in printed
    assert "[demo] eval_holdout_grpo_exp7_best: done already" in printed
    assert result.read_text() == "checkpoint A, first evaluation"

    # A fresh clone: the work folder is gone, the committed result and its ledger are not.
    # Training runs again and writes another checkpoint; the old evaluation must not stand.
    shutil.rmtree(work)
    weights["now"] = "checkpoint B"
    assert demo.main(argv) == 0
    assert result.read_text() == "checkpoint B reused=0"
    assert "eval_holdout_grpo_exp7_best: its inputs changed" in capsys.readouterr().out
    ledger = json.loads((result.parents[2] / stage_inputs.FILE_NAME).read_text())
    entry = ledger["eval_holdout_grpo_exp7_best"]
    assert entry["finished"] is True and entry["code"]
    assert entry["inputs"]["files"] == {str(work / "exp7" / "best"):
                                        stage_inputs.digest(work / "exp7" / "best")}


def test_a_result_with_no_record_of_its_inputs_is_made_again(stub_demo, capsys):
    """The results committed before the ledger existed: present in every clone, unproven."""
    _, argv, _, result = stub_demo
    result.parent.mkdir(parents=True)
    result.write_text("an evaluation of some older checkpoint")
    assert demo.main(argv) == 0
    assert result.read_text() == "checkpoint A reused=0"
    assert "grpo_exp7_best.json exists, but nothing records what made it" in capsys.readouterr().out


def test_a_stage_stopped_on_the_same_inputs_resumes_and_on_other_inputs_starts_afresh(tmp_path):
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    (tmp_path / "logs").mkdir()
    adapter, target = tmp_path / "best", tmp_path / "out" / "result.json"
    target.parent.mkdir()
    write_adapter(adapter, "checkpoint A")
    progress = target.with_name(target.name + ".finetuned.progress.jsonl")
    args = ["-c", EVAL, adapter, target]
    inputs = stage_inputs.inputs_of(args, target, demo.shown)
    d.record("eval", inputs, finished=False, code="x")  # begun, then killed with 2 done
    progress.write_text("header\nq1\n")
    d.run("eval", args, done=target)
    assert target.read_text() == "checkpoint A reused=2"

    write_adapter(adapter, "checkpoint B")  # retrained while the old evaluation was half done
    d.record("eval", inputs, finished=False, code="x")
    progress.write_text("header\nq1\n")
    d.run("eval", args, done=target)
    assert target.read_text() == "checkpoint B reused=0" and not progress.exists()


def test_training_begun_on_other_inputs_starts_again_with_overwrite(tmp_path):
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    done, data = tmp_path / "statistics.json", tmp_path / "mixed.jsonl"
    data.write_text("old questions\n")
    args = ["-c", "pass", "--resume", "--dataset", data]
    d.record("grpo", stage_inputs.inputs_of(args, done, str), finished=True, code="x")
    done.write_text("{}")
    assert d.command_for("grpo", args, done, stage_inputs.inputs_of(args, done, str)) is None
    data.write_text("new questions\n")
    assert d.command_for("grpo", args, done, stage_inputs.inputs_of(args, done, str)) == \
        ["-c", "pass", "--overwrite", "--dataset", data]


def test_digest_of_an_adapter_folder_reads_its_config_and_weights_only(tmp_path):
    write_adapter(tmp_path / "ckpt", "weights")
    before = stage_inputs.digest(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "trainer_state.json").write_text('{"t_sample": 1.5}')
    assert stage_inputs.digest(tmp_path / "ckpt") == before
    (tmp_path / "ckpt" / "adapter_model.safetensors").write_text("other weights")
    assert stage_inputs.digest(tmp_path / "ckpt") != before
    assert stage_inputs.digest(tmp_path / "missing") is None


def test_asking_for_another_layout_of_a_finished_result_does_not_make_it_again(tmp_path):
    """Results the demo evaluated before it asked for --records gzip (the compact layout, the
    scripts' default then) stay done: the layout is not an input of a result."""
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=1)
    done, data = tmp_path / "eval.json", tmp_path / "holdout.jsonl"
    data.write_text("questions\n")
    before = ["evaluation/evaluate_single.py", "--dataset", data, "--output", done]
    d.record("eval", stage_inputs.inputs_of(before, done, str), finished=True, code="x")
    done.write_text("{}")
    now = [*before[:-2], "--records", "gzip", *before[-2:]]
    assert d.command_for("eval", now, done, stage_inputs.inputs_of(now, done, str)) is None
    other = [*before[:-2], "--seed", "1", *before[-2:]]  # a flag that changes the result does
    assert d.command_for("eval", other, done, stage_inputs.inputs_of(other, done, str)) == other
    assert stage_inputs.changed(stage_inputs.inputs_of(before, done, str),
                                stage_inputs.inputs_of(other, done, str)) == ["command"]
