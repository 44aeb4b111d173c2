"""The comparison figures: legends name models and runs, intervals come from the recorded counts."""
import json

import pytest
from eval_helpers import fake_generate, run_script, write_rows

from relrl.data.dataset_io import load_dataset, questions_fingerprint
from relrl.evaluation.model_results import model_result
from relrl.evaluation.runner import evaluate_rows
from relrl.evaluation.settings import EvalSettings
from study.result_plots import compact_png, plot_run, plot_set, validation_points

PNG = b"\x89PNG\r\n\x1a\n"


def test_set_chart_legend_names_each_model_and_the_best_guess(tmp_path):
    rows = [{"model": name, "accuracy": acc, "ci_low": acc - 0.05, "ci_high": acc + 0.05}
            for name, acc in (("base", 0.29), ("SFT", 0.25), ("exp7", 0.38))]
    path = tmp_path / "accuracy.png"
    labels = plot_set(rows, path, best_guess={"label": "best guess: one constant answer",
                                              "accuracy": 0.57})
    assert sorted(labels) == sorted(["base", "SFT", "exp7", "best guess: one constant answer (57.0%)"])
    assert path.read_bytes()[:8] == PNG


def test_compact_png_keeps_the_picture_at_fewer_bytes(tmp_path):
    """A chart through compact_png: the same size, every pixel within a few levels of the
    figure matplotlib drew, in a 256-colour palette of fewer bytes."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image

    fig, ax = plt.subplots(figsize=(5, 3))
    for k in range(6):
        ax.plot(np.sin(np.linspace(0, 6, 200) + k), label=f"run {k}")
    ax.legend()
    raw = io.BytesIO()
    fig.savefig(raw, format="png", dpi=120)
    plt.close(fig)
    small = compact_png(raw.getvalue())
    before = np.asarray(Image.open(raw).convert("RGB"), dtype=int)
    after_image = Image.open(io.BytesIO(small))
    after = np.asarray(after_image.convert("RGB"), dtype=int)
    assert after_image.mode == "P" and after.shape == before.shape
    assert len(small) < 0.8 * len(raw.getvalue())
    assert np.abs(after - before).mean() < 1.0  # mean absolute change, of 255 levels
    assert np.abs(after - before).max() < 64  # no pixel far off (anti-aliasing edges)


def test_validation_interval_resamples_groups():
    history = [{"step": 50, "accuracy": 0.5, "group_passes": {"g1": [2, 2], "g2": [0, 0]}},
               {"step": 100, "accuracy": 0.25, "group_passes": {"g1": [1, 0], "g2": [0, 1]}},
               {"step": 150, "accuracy": 0.4}]
    points = validation_points(history, val_samples=2)
    # two groups: a resample holds g1 twice (1.0), g2 twice (0.0) or both (0.5)
    assert points[0] == (50, 0.5, 0.0, 1.0)
    assert points[1] == (100, 0.25, 0.25, 0.25)  # both groups score 1 of 4: no spread
    assert points[2] == (150, 0.4, None, None)  # counts not recorded: no interval


def test_run_figure_names_the_run_in_every_legend(tmp_path):
    log = [{"step": s, "reward_mean": 0.1 * s, "entropy": 1 - 0.01 * s, "waste_rate": 0.3,
            "truncated": s % 2, "rewards": [0, 0, 1, 1]} for s in range(1, 31)]
    history = [{"step": 10, "accuracy": 0.5, "group_passes": {"g1": [1], "g2": [0]}},
               {"step": 20, "accuracy": 0.5, "group_passes": {"g1": [0], "g2": [1]}}]
    path = tmp_path / "training_exp7.png"
    labels = plot_run("exp7", log, path, val_history=history)
    assert labels == ["exp7, per step", "exp7, 20-step mean",
                      "exp7 (95% CI over validation groups)",
                      "exp7, per step", "exp7, 20-step mean", "exp7",
                      "exp7, per step", "exp7, 20-step mean"]
    assert path.read_bytes()[:8] == PNG


def fake_file(path, rows, label, skill):
    sets = EvalSettings(max_new_tokens=16)
    result = model_result(evaluate_rows(rows, fake_generate(skill), sets), label=label,
                          model_path="fake", adapter=None, dataset="d.jsonl",
                          fingerprint=questions_fingerprint(rows), settings=sets)
    path.write_text(json.dumps(result))
    return result


def test_compare_results_prints_the_guesses_and_each_models_margin(tmp_path, capsys):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 20))
    base = fake_file(tmp_path / "base.json", rows, "base", 30)
    exp7 = fake_file(tmp_path / "exp7.json", rows, "exp7", 70)
    train = tmp_path / "train.jsonl"  # the third question's target, 12e-4, twice
    train.write_text('{"question": "Q1", "answer": "12e-4"}\n{"question": "Q2", "answer": "0.0012"}\n')
    log = tmp_path / "runs" / "exp7" / "train_log.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps({"step": s, "reward_mean": 0.1, "waste_rate": 0.2}) + "\n"
                           for s in range(1, 4)))
    (tmp_path / "plots").mkdir()
    code, stdout, _ = run_script("compare_results", [
        tmp_path / "base.json", tmp_path / "exp7.json", "--base", "base", "--baseline-train", train,
        "--output-json", tmp_path / "t.json", "--plots-dir", tmp_path / "plots",
        "--grpo-log", f"exp7 uniform={log}"], capsys)
    assert code == 0
    table = json.loads((tmp_path / "t.json").read_text())
    assert table["guess_baselines"]["constant"]["correct"] == 1
    margins = {r["model"]: r["margin"] for r in table["rows"]}
    assert margins == {"base": pytest.approx(base["accuracy"] - 1 / 20),
                       "exp7": pytest.approx(exp7["accuracy"] - 1 / 20)}
    assert f"| {100 * margins['exp7']:+.1f}pp |" in stdout
    assert "| one constant answer (best) | 0.0012 | 1/20 |" in stdout
    for name in ("accuracy.png", "training.png", "training_exp7 uniform.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:8] == PNG
