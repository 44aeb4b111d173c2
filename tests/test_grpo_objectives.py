"""--loss grpo|gspo|cispo and --tis-mode token|sequence-mask on the GRPO scripts: the flags and
recipes reach the loss, bad combinations are one line and exit 2, the choice is recorded in the
statistics and the fingerprint, and each objective trains on tiny-random with two optimiser
steps per batch (so the ratio differs from 1 and the objectives differ)."""
import json
import math

import pytest
import torch
from test_grpo_trainer import ROOT, ROWS, bad, trainer, write_rows

from relrl.rl.grpo_config import GRPOConfig
from relrl.rl.grpo_loss import LossConfig
from relrl.rl.grpo_main import build_parser, main
from relrl.runtime.cli import UsageError

RECIPE = {"grpo": "grpo_exp10.yaml", "gspo": "grpo_exp10_gspo.yaml",
          "cispo": "grpo_exp10_cispo.yaml"}
# the recipes' settings on tiny-random, sized to a few seconds: two passes per batch, and a
# step large enough that the second pass's ratios leave grpo's clip range
SMALL = ["--model", "tiny-random", "--reward", "digit-share", "--max-new-tokens", "8",
         "--max-useful-steps", "4", "--grad-accum", "2", "--num-iterations", "2",
         "--learning-rate", "0.05", "--max-grad-norm", "1.0", "--warmup-ratio", "0",
         "--save-every", "2", "--max-total-steps", "60", "--sampling-mode", "step",
         "--rollout-engine", "hf"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One short exp10 run per objective, from its recipe: {loss: (output folder, stats)}."""
    folder = tmp_path_factory.mktemp("objectives")
    data = write_rows(folder / "train.jsonl", ROWS)
    out = {}
    for loss, recipe in RECIPE.items():
        target = folder / loss
        assert main("exp10", ["--config", str(ROOT / "recipes" / recipe), *SMALL,
                              "--dataset", data, "--output-dir", str(target)]) == 0
        out[loss] = target, json.loads((target / "statistics.json").read_text())
    return out


def test_each_objective_trains_and_its_statistics_say_which(runs):
    for loss, (folder, stats) in runs.items():
        assert stats["loss"] == loss and stats["tis_mode"] == "token"
        assert stats["useful_steps"] == 4 and stats["optimizer_updates"] == 4  # 2 batches x 2
        assert len(stats["losses"]) == 4 and all(math.isfinite(x) for x in stats["losses"])
        assert stats["stopped_by"] == "max_useful_steps"
        # the settings (and so the fingerprint) name a non-default objective; grpo's old runs
        # keep theirs
        assert stats["settings"].get("loss") == (None if loss == "grpo" else loss)
        log = [json.loads(x) for x in (folder / "train_log.jsonl").read_text().splitlines()]
        assert all(math.isfinite(x["loss"]) for x in log)
    losses = {loss: stats["losses"] for loss, (_, stats) in runs.items()}
    # the same seed draws the same first batch: the objectives part on their second passes
    assert losses["grpo"] != pytest.approx(losses["cispo"], rel=1e-4)
    assert losses["grpo"] != pytest.approx(losses["gspo"], rel=1e-4)
    assert losses["gspo"] != pytest.approx(losses["cispo"], rel=1e-4)
    # gspo's narrow range clips whole completions once the ratio moves on the second pass
    gspo_log = [json.loads(x) for x in (runs["gspo"][0] / "train_log.jsonl").read_text().splitlines()]
    assert max(x["clip_frac"] for x in gspo_log) > 0


def test_a_changed_objective_is_another_run(runs, tmp_path):
    """A gspo run started in a grpo run's folder is refused, naming the setting; with --resume
    it is warned about (as any other changed loss setting is)."""
    folder, _ = runs["grpo"]
    data = write_rows(tmp_path / "train.jsonl", ROWS)
    argv = ["--config", str(ROOT / "recipes" / RECIPE["grpo"]), *SMALL, "--dataset", data,
            "--output-dir", str(folder), "--loss", "gspo"]
    with pytest.raises(UsageError, match="other settings .*loss 'grpo' -> 'gspo'"):
        main("exp10", argv)
    base = GRPOConfig(model="tiny-random", dataset="d.jsonl")
    assert "loss" not in base.settings() and "tis_mode" not in base.settings()
    changed = GRPOConfig(model="tiny-random", dataset="d.jsonl", loss="cispo",
                         tis_mode="sequence-mask").settings()
    assert (changed["loss"], changed["tis_mode"]) == ("cispo", "sequence-mask")


def test_flags_reach_the_loss_and_the_importance_weights(tmp_path):
    cfg, _ = build_parser("exp10").parse(["--model", "tiny-random", "--dataset", "d.jsonl",
                                          "--loss", "cispo", "--clip-low", "1",
                                          "--tis-mode", "sequence-mask", "--tis-cap", "10"])
    cfg.check()
    assert (cfg.loss, cfg.clip_low, cfg.tis_mode) == ("cispo", 1.0, "sequence-mask")
    t = trainer(tmp_path, loss="cispo", clip_low=1.0, tis_mode="sequence-mask", tis_cap=10.0)
    assert t.loss_cfg == LossConfig(clip_low=1.0, clip_high=0.28, loss="cispo",
                                    tis_mode="sequence-mask", constant=8)
    old = torch.log(torch.tensor([[0.5, 0.5, 0.5], [0.9, 0.1, 0.2]]))
    sampler = torch.log(torch.tensor([[0.5, 0.1, 0.4], [0.3, 0.1, 0.05]]))
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    # completion ratios 1 * 5 * 1.25 = 6.25 and 3 * 1 = 3, both under the cap of 10
    w, rows = t.importance_weights(old, sampler, mask)
    assert w.flatten().tolist() == pytest.approx([6.25, 6.25, 6.25, 3.0, 3.0, 0.0])
    t.cfg.tis_cap = 5.0  # the first completion's ratio is over it: dropped whole
    w, rows = t.importance_weights(old, sampler, mask)
    assert w.flatten().tolist() == pytest.approx([0.0, 0.0, 0.0, 3.0, 3.0, 0.0])
    assert rows["tis_capped"].tolist() == [3.0, 0.0]


def test_bad_objective_settings_are_one_line_and_exit_2(tmp_path, capsys):
    good = write_rows(tmp_path / "good.jsonl", ROWS)
    common = ["--model", "tiny-random", "--output-dir", tmp_path / "out", "--dataset", good]
    assert "--loss" in bad(capsys, "exp10", *common, "--loss", "ppo")
    assert "--tis-mode" in bad(capsys, "exp10", *common, "--tis-mode", "sequence")
    err = bad(capsys, "exp10", *common, "--clip-low", "1")
    assert err.startswith("error: --clip-low") and "--loss cispo only" in err
    err = bad(capsys, "exp10", *common, "--loss", "cispo", "--clip-low", "1.5")
    assert err.startswith("error: --clip-low") and "[0, 1]" in err
    err = bad(capsys, "exp10", *common, "--tis-mode", "sequence-mask", "--tis-cap", "0")
    assert err.startswith("error: --tis-mode") and "--tis-cap > 0" in err
