"""--report-to: the trainers' curves in TensorBoard (read back with tensorboard's own reader)
and Weights & Biases (offline), and the one-line error when the package is missing."""
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from relrl.rl.grpo_main import main as grpo_main
from relrl.runtime import tracking
from relrl.runtime.cli import UsageError

ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"id": f"q{i}", "question": f"What is {i} plus {i + 1}?", "answer": str(2 * i + 1)}
        for i in range(4)]
SHORT = ["--model", "tiny-random", "--max-new-tokens", "8", "--max-useful-steps", "4",
         "--grad-accum", "2", "--save-every", "4", "--max-total-steps", "60",
         "--reward", "digit-share", "--val-every", "2"]


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def grpo(tmp_path, *extra):
    data = write_rows(tmp_path / "train.jsonl", ROWS)
    out = tmp_path / "exp10"
    assert grpo_main("exp10", [*SHORT, "--dataset", data, "--val-dataset", data,
                               "--output-dir", str(out), *extra]) == 0
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    return out, log


def event_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """{tag: {step: value}} as TensorBoard itself reads the event files."""
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


def test_a_grpo_run_writes_every_step_to_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    out, log = grpo(tmp_path, "--report-to", "tensorboard")
    scalars = event_scalars(out / "tensorboard")
    steps = [x["step"] for x in log]
    assert steps == [1, 2, 3, 4]
    for tag in ("reward_mean", "loss", "reward_std", "lr", "entropy", "clip_frac", "n_correct",
                "mean_length", "waste_rate", "total_attempts", "waste/all_wrong"):
        assert sorted(scalars[tag]) == steps, tag
    for x in log:  # the very numbers of train_log.jsonl (TensorBoard keeps float32)
        assert scalars["reward_mean"][x["step"]] == pytest.approx(x["reward_mean"], rel=1e-6)
        assert scalars["loss"][x["step"]] == pytest.approx(x["loss"], rel=1e-5, abs=1e-7)
        assert scalars["lr"][x["step"]] == pytest.approx(x["lr"], rel=1e-6)
        assert scalars["waste/all_correct"][x["step"]] == x["waste"]["all_correct"]
    stats = json.loads((out / "statistics.json").read_text())
    assert scalars["val_accuracy"] == {v["step"]: pytest.approx(v["accuracy"])
                                       for v in stats["val_history"]}
    assert sorted(scalars["val_accuracy"]) == [2, 4]
    assert "rewards" not in scalars and "question_id" not in scalars  # lists and text


def test_without_report_to_nothing_is_tracked(tmp_path):
    out, _ = grpo(tmp_path)
    assert not (out / "tensorboard").exists() and not (out / "wandb").exists()


@pytest.mark.parametrize("package, blocked", [("tensorboard", "torch.utils.tensorboard"),
                                              ("wandb", "wandb")])
def test_a_missing_package_is_one_line_before_the_model_loads(tmp_path, monkeypatch, package,
                                                              blocked):
    monkeypatch.setitem(sys.modules, blocked, None)  # import now raises ImportError
    data = write_rows(tmp_path / "train.jsonl", ROWS)
    out = tmp_path / "run"
    with pytest.raises(UsageError) as error:
        grpo_main("exp10", [*SHORT, "--dataset", data, "--output-dir", str(out),
                            "--report-to", package])
    assert str(error.value) == (f"--report-to {package}: the {package} package is not "
                                f"installed (pip install {package})")
    assert not out.exists() or not any(out.iterdir())


class FakeWandb(types.ModuleType):
    """Records what the tracker asks of wandb, reading WANDB_MODE the way wandb.init does."""

    def __init__(self):
        super().__init__("wandb")
        self.inits, self.logged, self.metrics, self.finished = [], [], [], 0

    def init(self, **kwargs):
        import os

        self.inits.append({**kwargs, "mode_seen": kwargs.get("mode") or os.environ.get("WANDB_MODE")})
        fake = self

        class Run:
            def define_metric(self, name, **kw):
                fake.metrics.append((name, kw))

            def log(self, data, **kw):
                assert not kw, "the step is a logged value, not W&B's call counter"
                fake.logged.append(dict(data))

            def finish(self):
                fake.finished += 1

        return Run()


def test_wandb_gets_every_step_and_keeps_offline_mode(tmp_path, monkeypatch):
    fake = FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_PROJECT", "reliability")
    out, log = grpo(tmp_path, "--report-to", "wandb")
    (init,) = fake.inits
    assert init["mode_seen"] == "offline" and "mode" not in init  # W&B's own switch, untouched
    assert init["project"] == "reliability" and init["dir"] == str(out)
    assert init["config"]["learning_rate"] == 1e-5 and init["name"] == "exp10"
    assert ("*", {"step_metric": "step"}) in fake.metrics
    steps = [x for x in fake.logged if "reward_mean" in x]
    assert [x["step"] for x in steps] == [1, 2, 3, 4]
    assert [x["loss"] for x in steps] == [x["loss"] for x in log]
    assert [x["step"] for x in fake.logged if "val_accuracy" in x] == [2, 4]
    assert fake.finished == 1


def test_wandb_offline_writes_a_local_run(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    tracker = tracking.open_tracker("wandb", tmp_path, run_name="t", config={"lr": 0.1})
    for step in (1, 2, 3):
        tracker.log({"loss": 1.0 / step, "waste": {"all_wrong": step}}, step)
    tracker.close()
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("run-*.wandb"))


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "training" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sft_and_dpo_curves_in_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    rows = [{"question": f"A unit has failure rate 0.00{i + 1} per hour. Find R(100 h).",
             "answer": f"{2.718281828 ** (-0.1 * (i + 1)):.4g}", "group": f"g{i}"}
            for i in range(4)]
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sft_out = tmp_path / "sft"
    assert load_script("sft_qwen3_kfold").main([
        "--model", "tiny-random", "--dataset", str(data), "--output-dir", str(sft_out),
        "--train-all", "--folds", "1", "--epochs", "2", "--micro-batch", "2", "--grad-accum",
        "1", "--lora-r", "4", "--max-length", "96", "--report-to", "tensorboard"]) == 0
    log = [json.loads(x) for x in (sft_out / "all" / "train_log.jsonl").read_text().splitlines()]
    scalars = event_scalars(sft_out / "all" / "tensorboard")
    assert sorted(scalars["loss"]) == [x["step"] for x in log] == [1, 2, 3, 4]
    assert scalars["lr"][1] == pytest.approx(log[0]["lr"]) and "grad_norm" in scalars

    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text("".join(json.dumps({"question": f"What is {i} plus {i}?",
                                         "chosen": f"\\boxed{{{2 * i}}}",
                                         "rejected": f"\\boxed{{{2 * i + 1}}}"}) + "\n"
                             for i in range(4)))
    dpo_out = tmp_path / "dpo"
    assert load_script("dpo_train").main([
        "--model", "tiny-random", "--pairs-from", str(prefs), "--output-dir", str(dpo_out),
        "--epochs", "2", "--micro-batch", "2", "--grad-accum", "1", "--lora-r", "4",
        "--report-to", "tensorboard"]) == 0
    log = [json.loads(x) for x in (dpo_out / "train_log.jsonl").read_text().splitlines()]
    scalars = event_scalars(dpo_out / "tensorboard")
    for tag in ("loss", "margin", "accuracy", "chosen_reward", "lr"):
        assert sorted(scalars[tag]) == [x["step"] for x in log] == [1, 2, 3, 4], tag
