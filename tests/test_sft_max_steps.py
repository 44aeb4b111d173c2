"""SFT's dose in optimiser steps (issue 46): --max-steps N trains exactly N updates whatever the
data's size, is recorded with the run and resumes exactly; a bad value is refused in one line;
the pipeline's sft_steps reaches the SFT command and null leaves the command as it was."""
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace

import pytest
import yaml
from conftest import ROOT
from safetensors.torch import load_file

import demo
from relrl.runtime.cli import UsageError
from relrl.runtime.stop import STOPPED_EXIT
from study import pipeline_config

SCRIPT = ROOT / "training" / "sft_qwen3_kfold.py"


def rows(n):
    """n exponential-reliability questions with worked solutions, one group each."""
    out = []
    for i in range(n):
        lam, t = 0.001 * (1 + i % 3), 100 + 50 * i
        value = f"{2.718281828 ** (-lam * t):.4g}"
        out.append({"id": f"q{i}", "group": f"g{i}", "question":
                    f"A unit has failure rate {lam} per hour. Find its reliability at {t} h.",
                    "answer": value, "answer_type": "numeric", "source": "toy",
                    "reasoning": f"R(t) = exp(-{lam} * {t}) = {value}. \\boxed{{{value}}}"})
    return out


def dataset(tmp_path, n=5):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows(n)))
    return path


def train(tmp_path, name, data, *extra, stop_at=None):
    """training/sft_qwen3_kfold.py --train-all in this process, batch 4 (5 rows: 2 steps an
    epoch); with stop_at, SIGTERM arrives during that step."""
    import importlib.util

    from relrl.finetune import sft_trainer

    spec = importlib.util.spec_from_file_location("sft_script", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    original = sft_trainer.SFTTrainer.train_step

    def step(self, examples):
        if stop_at is not None and self.step + 1 == stop_at:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, examples)

    argv = ["--model", "tiny-random", "--dataset", data, "--output-dir", tmp_path / name,
            "--train-all", "--epochs", "1", "--micro-batch", "2", "--grad-accum", "2",
            "--lora-r", "4", "--save-every", "100", "--max-length", "120", *extra]
    sft_trainer.SFTTrainer.train_step = step
    try:
        return script.main([str(a) for a in argv])
    finally:
        sft_trainer.SFTTrainer.train_step = original


def log_of(run):
    lines = (run / "all" / "train_log.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k != "t_step"} for x in lines]


def test_max_steps_trains_exactly_n_updates_past_the_epochs_and_records_them(tmp_path):
    data = dataset(tmp_path)
    assert train(tmp_path, "run", data, "--max-steps", "5") == 0  # 1 epoch would be 2 steps
    log = log_of(tmp_path / "run")
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5]
    assert [r["epoch"] for r in log] == [0.5, 1.0, 1.5, 2.0, 2.5]  # the order runs on
    stats = json.loads((tmp_path / "run" / "all" / "statistics.json").read_text())
    assert (stats["steps"], stats["total_steps"], stats["stopped_by"]) == (5, 5, "done")
    assert stats["settings"]["max_steps"] == 5 and "epochs" not in stats["settings"]
    assert yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["max_steps"] == 5
    assert log[-1]["lr"] < log[1]["lr"]  # the cosine decay spans the 5 steps


def test_max_steps_below_an_epoch_stops_there(tmp_path):
    data = dataset(tmp_path, n=9)  # 3 steps an epoch, 2 epochs would be 6
    assert train(tmp_path, "run", data, "--epochs", "2", "--max-steps", "1") == 0
    assert [r["step"] for r in log_of(tmp_path / "run")] == [1]
    assert (tmp_path / "run" / "adapters" / "all" / "adapter_model.safetensors").is_file()


def test_without_max_steps_a_run_keeps_its_epochs_and_its_fingerprint(tmp_path):
    from relrl.finetune.sft_trainer import SFTConfig

    data = dataset(tmp_path)
    assert train(tmp_path, "run", data, "--epochs", "2") == 0
    assert [r["step"] for r in log_of(tmp_path / "run")] == [1, 2, 3, 4]
    settings = SFTConfig(epochs=2).settings()
    assert "max_steps" not in settings and settings["epochs"] == 2  # recorded runs still resume


def test_sigterm_then_resume_at_a_fixed_dose_equals_an_uninterrupted_run(tmp_path, capsys):
    data = dataset(tmp_path)
    assert train(tmp_path, "straight", data, "--max-steps", "5") == 0
    assert train(tmp_path, "killed", data, "--max-steps", "5", stop_at=4) == STOPPED_EXIT
    assert (tmp_path / "killed" / "all" / "checkpoint-4").is_dir()
    shutil.copytree(tmp_path / "killed", tmp_path / "other")
    capsys.readouterr()
    # another dose is another run: resuming with it says so, as any changed setting does
    assert train(tmp_path, "other", data, "--max-steps", "6", "--resume") == 0
    assert "(max_steps 5 -> 6)" in capsys.readouterr().err
    assert len(log_of(tmp_path / "other")) == 6
    with pytest.raises(UsageError, match="pass --resume"):  # never silently over a checkpoint
        train(tmp_path, "killed", data, "--max-steps", "5")
    assert train(tmp_path, "killed", data, "--max-steps", "5", "--resume") == 0
    assert log_of(tmp_path / "straight") == log_of(tmp_path / "killed")
    a, b = (load_file(tmp_path / r / "adapters" / "all" / "adapter_model.safetensors")
            for r in ("straight", "killed"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


def test_a_bad_max_steps_exits_2_in_one_line_before_any_work(tmp_path):
    data = dataset(tmp_path)
    out = subprocess.run([sys.executable, str(SCRIPT), "--model", "tiny-random", "--dataset",
                          str(data), "--output-dir", str(tmp_path / "o"), "--folds", "1",
                          "--train-all", "--max-steps", "0"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: sft_qwen3_kfold.py: argument --max-steps: --max-steps must be >= 1, got 0"]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value, message", [
    ("-3", "--max-steps must be >= 1, got -3"),
    ("many", "--max-steps must be an integer, got 'many'"),
])
def test_other_bad_values_are_refused_by_the_parser(tmp_path, capsys, value, message):
    with pytest.raises(SystemExit) as exc:
        train(tmp_path, "o", dataset(tmp_path), "--max-steps", value)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and message in err[0]
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------- the pipeline


def recipe_with(tmp_path, **changes):
    text = (demo.RECIPES / "replication-v2.yaml").read_text()
    path = tmp_path / "r.yaml"
    path.write_text(text + "".join(f"{k}: {v}\n" for k, v in changes.items()))
    return path


def test_sft_steps_reads_typed_and_a_bad_one_is_refused_naming_its_line(tmp_path):
    assert pipeline_config.load(recipe_with(tmp_path, sft_steps=40)).sft_steps == 40
    assert pipeline_config.load(recipe_with(tmp_path, sft_steps="null")).sft_steps is None
    for bad, message in (("0", "sft_steps: must be >= 1 or null, got 0"),
                         ("2.5", "sft_steps: expected an integer or null, got 2.5")):
        with pytest.raises(UsageError, match=message):
            pipeline_config.load(recipe_with(tmp_path, sft_steps=bad))


@pytest.fixture
def sft_command(tmp_path, monkeypatch):
    """The SFT command a Demo of the fast recipe would run, with the given settings."""
    def command(**settings):
        ran = []
        monkeypatch.setattr(demo.Demo, "run", lambda self, stage, args, done=None, work=None,
                            processes=1: ran.append((stage, [str(a) for a in args])))
        d = demo.Demo(fast=True, seed=100, work=tmp_path, out=tmp_path / "out", lanes=1,
                      settings=replace(demo.recipe("fast"), **settings))
        (tmp_path / "screen").mkdir(exist_ok=True)
        (tmp_path / "screen" / "non_mixed.jsonl").write_text(json.dumps(rows(1)[0]) + "\n")
        d.sft()
        return dict(ran)["sft"]
    return command


def test_the_recipes_sft_steps_reaches_the_sft_command(sft_command):
    args = sft_command(sft_steps=40)
    assert args[args.index("--max-steps") + 1] == "40"
    assert "--epochs" in args  # recorded beside it; the steps decide


def test_null_sft_steps_leaves_the_command_as_it_was(sft_command):
    assert "--max-steps" not in sft_command(sft_steps=None)
