"""--dynamic-sampling off: plain GRPO, every group generated trains (issue 30's arm for the
study's dynamic-sampling comparison). The flag and a recipe reach the sampler, the run's
fingerprint names it only when off, and a run generates exactly its useful steps."""
import json

import pytest
import yaml
from test_grpo_objectives import SMALL
from test_grpo_trainer import ROWS, write_rows

from relrl.rl.grpo_config import GRPOConfig
from relrl.rl.grpo_main import build_parser, main
from relrl.runtime.cli import UsageError


def test_off_trains_on_every_group_generated(tmp_path):
    data = write_rows(tmp_path / "train.jsonl", ROWS)
    out = tmp_path / "plain"
    assert main("exp10", [*SMALL, "--dataset", data, "--output-dir", str(out),
                          "--dynamic-sampling", "off"]) == 0
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["useful_steps"] == stats["total_attempts"] == 4
    assert stats["resample_events"] == 0 and stats["settings"]["dynamic_sampling"] is False
    assert stats["wasted_steps"] == sum(stats["waste_by_kind"].values())  # still counted
    assert yaml.safe_load((out / "config.yaml").read_text())["dynamic_sampling"] is False


def test_the_setting_from_flags_and_recipes_and_in_the_fingerprint_only_when_off(tmp_path):
    recipe = tmp_path / "plain.yaml"
    recipe.write_text("dynamic_sampling: off\n")  # YAML reads off as false
    for argv in (["--dynamic-sampling", "off"], ["--config", str(recipe)]):
        cfg, _ = build_parser("exp10").parse(["--model", "tiny-random", "--dataset", "d.jsonl",
                                              *argv])
        assert cfg.dynamic_sampling is False
    assert "dynamic_sampling" not in GRPOConfig(model="m", dataset="d.jsonl").settings()
    with pytest.raises(SystemExit) as exit_info:
        build_parser("exp10").parse(["--model", "m", "--dataset", "d", "--dynamic-sampling", "no"])
    assert exit_info.value.code == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("dynamic_sampling: sometimes\n")
    with pytest.raises(UsageError, match="dynamic"):
        build_parser("exp10").parse(["--model", "m", "--dataset", "d", "--config", str(bad)])
