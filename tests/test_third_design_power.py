"""evaluation/third_design_power.py: the seeds each goal of the third design needs, from the
development seeds' figures, checked by hand on the fake seeds of test_replication_v3_report."""
import importlib.util
import json
import math
from pathlib import Path

import pytest
from test_replication_v3_report import SEEDS, write_seed

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("third_design_power",
                                               ROOT / "evaluation" / "third_design_power.py")
power = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(power)


@pytest.mark.parametrize("figure, seeds, expected", [
    (0.05, 3, 3), (0.10, 1, 4), (0.0707, 2, 4), (0.02, 3, 1), (0.0, 2, 1)])
def test_seeds_needed_scales_with_the_square_of_the_figure(figure, seeds, expected):
    assert power.seeds_needed(figure, 0.05, seeds) == expected


def test_the_table_from_development_seeds(tmp_path, capsys):
    for seed in SEEDS:
        write_seed(tmp_path / f"seed-{seed}", seed)
    assert power.main(["--results", str(tmp_path), "--seeds", "100,101",
                       "--json", str(tmp_path / "power.json")]) == 0
    rows = {r["goal"].split(":")[0]: r for r in json.loads((tmp_path / "power.json").read_text())["rows"]}
    sft = rows["SFT alone makes the model forget what it knew"]
    # 30.7 points at 2 seeds (test_replication_v3_report): 2 (30.7 / 5)^2 = 75.4 -> 76 seeds
    assert sft["figure"] == pytest.approx(0.3069, abs=1e-4) and sft["seeds_needed"] == 76
    assert rows["GRPO keeps what the model knew"]["seeds_needed"] == 1
    assert "| SFT alone makes the model forget what it knew: smallest detectable difference " \
           "(alpha 0.01) | 30.7 | 5 | 76 |" in capsys.readouterr().out


def test_a_seed_without_results_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        power.run_main(lambda: power.main(["--results", str(tmp_path), "--seeds", "7"]))
    assert stop.value.code == 2
    assert f"--seeds: {tmp_path}/seed-7 has no eval/ folder" in capsys.readouterr().err
