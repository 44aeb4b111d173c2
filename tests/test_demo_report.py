"""The demo report's sentences name the test each comparison used: McNemar's discordant counts
with one sample a question (`make demo`), the paired permutation test with K samples (the
replicated study's held-out and retention sets, whose rows have no b01/b10)."""
import json
import shutil
from pathlib import Path

from study import demo_report
from study.demo_report import _test_name, _versus_base


def write_table(out, set_name, rows):
    (out / f"compare_{set_name}.json").write_text(json.dumps({"rows": rows}))


def test_one_sample_rows_quote_mcnemars_counts(tmp_path):
    write_table(tmp_path, "ood", [
        {"model": "base", "accuracy": 0.25, "samples": 1},
        {"model": "SFT warm start", "accuracy": 0.2, "samples": 1, "delta": -0.05, "b01": 3,
         "b10": 8, "p": 0.2265625, "test": "mcnemar_exact"}])
    assert _versus_base(tmp_path, "ood", "SFT warm start") == \
        "25.0% -> 20.0% (-5.0 points, b01 3, b10 8, p = 0.227)"


def test_k_sample_rows_name_the_permutation_test(tmp_path):
    write_table(tmp_path, "heldout", [
        {"model": "base", "accuracy": 0.2, "samples": 4},
        {"model": "GRPO exp7 best", "accuracy": 0.35, "samples": 4, "delta": 0.15, "p": 0.0312,
         "test": "permutation"}])
    assert _versus_base(tmp_path, "heldout", "GRPO exp7 best") == \
        "20.0% -> 35.0% (+15.0 points, paired permutation test over 4 samples a question, p = 0.0312)"


def test_head_to_head_names_the_test_its_p_comes_from():
    assert _test_name({"test": "mcnemar_exact"}) == "McNemar"
    assert _test_name({"test": "paired_permutation"}) == "the paired permutation test"


def test_a_seed_without_holdout_or_train_sets_reports_the_sets_it_has(tmp_path):
    # the third design evaluates heldout, retention, ood and reworded only (eval_sets)
    seed = Path(__file__).resolve().parents[1] / "results" / "demo-replication-v2" / "seed-21"
    out = tmp_path / "seed-21"
    shutil.copytree(seed, out, ignore=shutil.ignore_patterns("holdout", "train", "plots"))
    for name in ("holdout", "train"):
        for path in out.glob(f"compare_{name}.*"):
            path.unlink()
    (out / "plots" / "heldout").mkdir(parents=True)
    (out / "plots" / "heldout" / "training_exp7.png").write_bytes(b"")
    text = demo_report.build_report(out, fast=False, seed=21, out_name="results/x", timings=[])
    assert "Holdout (unseen groups" not in text and "; holdout " not in text  # SFT's finding too
    assert text.index("Held-out mixed-style") < text.index("Retention") < text.index("Dynamic sampling")
    assert "![exp7 training curves](plots/heldout/training_exp7.png)" in text
