"""Settings as data (relrl.runtime.config): every recipe in recipes/ loads through the real
parsers; a flag beats the recipe, which beats the study's environment variable; bad recipes are
one line and exit 2; each run's config.yaml reruns it to the same statistics; the resume check
reads config.yaml."""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from relrl.finetune import dpo_trainer, sft_kfold
from relrl.rl import grpo_main
from relrl.rl.grpo_config import GRPOConfig
from relrl.runtime.cli import UsageError, run_main
from relrl.runtime.config import CONFIG_FILE, refuse_other_settings, saved_differences, write_config

RECIPES = ROOT / "recipes"


def sft_parser():
    return sft_kfold.build_parser("unsloth/Qwen3-8B-unsloth-bnb-4bit", "outputs/sft_qwen3", "SFT")


PARSERS = {  # recipe -> the parser of the script that runs it
    "grpo_exp7.yaml": lambda: grpo_main.build_parser("exp7"),
    "grpo_exp7_pass_rate.yaml": lambda: grpo_main.build_parser("exp7"),
    "grpo_exp10.yaml": lambda: grpo_main.build_parser("exp10"),
    "grpo_exp10_gspo.yaml": lambda: grpo_main.build_parser("exp10"),
    "grpo_exp10_cispo.yaml": lambda: grpo_main.build_parser("exp10"),
    "sft_kfold.yaml": sft_parser,
    "dpo.yaml": dpo_trainer.build_parser,
}
# what a recipe changes from the study's settings: the objectives' own clip settings
RECIPE_CHANGES = {
    "grpo_exp7_pass_rate.yaml": {"pass_rate_sampler": True},
    "grpo_exp10_gspo.yaml": {"loss": "gspo", "clip_low": 3e-4, "clip_high": 4e-4,
                             "aggregation": "seq_mean_token_mean"},
    "grpo_exp10_cispo.yaml": {"loss": "cispo", "clip_low": 1.0, "clip_high": 3.0},
}
SITE_PATHS = {"dataset", "val_dataset", "sft_adapter", "output_dir", "pairs_from"}


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_recipe_loads_through_the_real_parser(name, monkeypatch):
    for variable in ("DATASET_PATH", "OUTPUT_DIR", "LEARNING_RATE", "BETA", "MAX_USEFUL_STEPS",
                     "MAX_TOTAL_STEPS", "SFT_LORA_PATH", "FOLD"):
        monkeypatch.delenv(variable, raising=False)
    recipe = yaml.safe_load((RECIPES / name).read_text())
    cfg, _ = PARSERS[name]().parse(["--config", str(RECIPES / name)])
    cfg.check()
    assert not SITE_PATHS & set(recipe), "recipes leave site paths to flags"
    assert cfg.model == "unsloth/Qwen3-8B-unsloth-bnb-4bit"
    for key, value in recipe.items():
        assert getattr(cfg, key) == value, key
    # the study's settings are today's defaults: a recipe that drifts from them says so here
    defaults = type(cfg)()
    differs = {k: v for k, v in recipe.items() if getattr(defaults, k) != v}
    assert differs == RECIPE_CHANGES.get(name, {})


def test_recipes_hold_the_studys_settings():
    exp7 = yaml.safe_load((RECIPES / "grpo_exp7.yaml").read_text())
    assert (exp7["num_generations"], exp7["learning_rate"], exp7["grad_accum"],
            exp7["max_new_tokens"], exp7["max_grad_norm"], exp7["max_useful_steps"]) == \
        (4, 1e-5, 4, 3072, 0.1, 200)
    exp10 = yaml.safe_load((RECIPES / "grpo_exp10.yaml").read_text())
    assert (exp10["lora_r"], exp10["lora_alpha"]) == (32, 32) and "lora_r" not in exp7
    sft = yaml.safe_load((RECIPES / "sft_kfold.yaml").read_text())
    assert (sft["lora_r"], sft["lora_alpha"], sft["learning_rate"], sft["epochs"],
            sft["neftune_alpha"], sft["max_length"]) == (16, 32, 2e-4, 4, 5.0, 4096)


# ------------------------------------------------------------------ precedence
def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("parser, base", [
    (lambda: grpo_main.build_parser("exp10"), ["--dataset", "d.jsonl"]),
    (sft_parser, []),
    (dpo_trainer.build_parser, ["--pairs-from", "p.jsonl"]),
])
def test_a_flag_beats_the_recipe_which_beats_the_environment(tmp_path, monkeypatch, parser, base):
    monkeypatch.setenv("LEARNING_RATE", "3e-5")
    monkeypatch.setenv("OUTPUT_DIR", str(tmp_path / "from_env"))
    recipe = write(tmp_path / "r.yaml", "learning_rate: 2.0e-5\nseed: 7\n")
    cfg, _ = parser().parse(base)
    assert cfg.learning_rate == 3e-5 and cfg.output_dir == str(tmp_path / "from_env")
    cfg, _ = parser().parse([*base, "--config", recipe])
    assert (cfg.learning_rate, cfg.seed) == (2e-5, 7)  # the recipe beats the environment
    assert cfg.output_dir == str(tmp_path / "from_env")  # what it leaves out still comes through
    cfg, _ = parser().parse([*base, "--config", recipe, "--learning-rate", "4e-5"])
    assert (cfg.learning_rate, cfg.seed) == (4e-5, 7)  # the flag beats the recipe
    cfg, _ = parser().parse(["--learning-rate", "4e-5", *base, "--config", recipe])
    assert cfg.learning_rate == 4e-5  # wherever --config stands on the line


def test_study_environment_and_recipe_keys_by_flag_name(tmp_path, monkeypatch):
    monkeypatch.setenv("DATASET_PATH", "env.jsonl")
    monkeypatch.setenv("MAX_TOTAL_STEPS", "77")
    cfg, _ = grpo_main.build_parser("exp10").parse([])
    assert (cfg.dataset, cfg.max_total_attempts) == ("env.jsonl", 77)
    recipe = write(tmp_path / "r.yaml", "dataset: recipe.jsonl\nmax_total_steps: 88\n"
                   "load_in_4bit: no\n")
    cfg, _ = grpo_main.build_parser("exp10").parse(["--config", recipe])
    assert (cfg.dataset, cfg.max_total_attempts, cfg.load_in_4bit) == ("recipe.jsonl", 88, False)
    cfg, _ = dpo_trainer.build_parser().parse(["--config", write(tmp_path / "d.yaml", "loss: ipo\n")])
    assert cfg.loss_type == "ipo"


# ------------------------------------------------------------------ bad recipes
def script(name, *args, env=None):
    return subprocess.run([sys.executable, str(ROOT / "training" / name), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, **(env or {})})


def one_line_exit_2(run) -> str:
    err = run.stderr.strip()
    assert run.returncode == 2 and err.startswith("error: ") and "\n" not in err, run.stderr
    return err


def test_bad_grpo_recipes_are_one_line_and_exit_2(tmp_path):
    unknown = write(tmp_path / "unknown.yaml", "learning_rate: 1.0e-5\nlerning_rate: 2.0e-5\n")
    err = one_line_exit_2(script("grpo_exp10_nosft.py", "--config", unknown))
    assert unknown in err and "'lerning_rate'" in err
    broken = write(tmp_path / "broken.yaml", "seed: 1\nclip_low: [0.2\n")
    err = one_line_exit_2(script("grpo_exp10_nosft.py", "--config", broken))
    assert f"{broken}:3: not valid YAML" in err
    wrong = write(tmp_path / "wrong.yaml", "num_generations: four\n")
    err = one_line_exit_2(script("grpo_exp10_nosft.py", "--config", wrong))
    assert f"{wrong}: num_generations: expected an integer" in err
    # a key the variant does not take is unknown to it: exp7's adapter brings its own rank
    lora = write(tmp_path / "lora.yaml", "lora_r: 8\n")
    assert "'lora_r'" in one_line_exit_2(script("grpo_exp7_dynamic.py", "--config", lora))
    assert "no such file" in one_line_exit_2(script("grpo_exp10_nosft.py", "--config",
                                                    tmp_path / "missing.yaml"))


def in_process(capsys, main, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        run_main(lambda: main(argv))
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.startswith("error: ") and "\n" not in err, err
    return err


def test_bad_sft_and_dpo_recipes_are_one_line_and_exit_2(tmp_path, capsys):
    unknown = write(tmp_path / "unknown.yaml", "epochs: 2\nepoch: 3\n")
    err = in_process(capsys, lambda argv: sft_kfold.main(
        argv, default_model="tiny-random", default_output=str(tmp_path / "o"), about="SFT"),
        ["--config", unknown])
    assert unknown in err and "'epoch'" in err
    broken = write(tmp_path / "broken.yaml", "beta: 0.1\n  loss: ipo\n")
    err = in_process(capsys, dpo_trainer.main, ["--config", broken])
    assert f"{broken}:2: not valid YAML" in err
    bad_choice = write(tmp_path / "choice.yaml", "loss_type: hinge\n")
    err = in_process(capsys, dpo_trainer.main, ["--config", bad_choice, "--pairs-from", "p"])
    assert "loss_type: sigmoid or ipo, got 'hinge'" in err
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ config.yaml
ROWS = [{"id": f"q{i}", "question": f"What is {i} plus {i + 1}?", "answer": str(2 * i + 1)}
        for i in range(4)]
SMALL = ["--model", "tiny-random", "--reward", "digit-share", "--max-new-tokens", "8",
         "--max-useful-steps", "2", "--grad-accum", "2", "--save-every", "2",
         "--max-total-steps", "40"]


def same_apart_from(a: Path, b: Path, name: str, old: Path, new: Path) -> None:
    assert (a / name).read_text().replace(str(old), str(new)) == (b / name).read_text()


def test_grpo_config_yaml_reruns_the_run_and_a_flag_beats_the_recipe(tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    first, second = tmp_path / "first", tmp_path / "second"
    run = script("grpo_exp10_nosft.py", "--config", RECIPES / "grpo_exp10.yaml", *SMALL,
                 "--dataset", data, "--output-dir", first)
    assert run.returncode == 0, run.stderr[-2000:]
    saved = yaml.safe_load((first / CONFIG_FILE).read_text())
    # the flags beat the recipe's 3072 tokens and 4 groups per update; the rest is the recipe's
    assert (saved["max_new_tokens"], saved["grad_accum"], saved["lora_r"]) == (8, 2, 32)
    assert (saved["reward"], saved["informative_by"]) == ("digit-share", "reward")
    assert saved["output_dir"] == str(first) and saved["dataset"] == str(data)
    assert "sft_adapter" not in saved  # exp10 takes none
    run = script("grpo_exp10_nosft.py", "--config", first / CONFIG_FILE, "--output-dir", second)
    assert run.returncode == 0, run.stderr[-2000:]
    same_apart_from(first, second, "statistics.json", first, second)
    same_apart_from(first, second, CONFIG_FILE, first, second)
    # the same settings into the same folder: the run is there already
    run = script("grpo_exp10_nosft.py", "--config", first / CONFIG_FILE)
    assert "already holds this run's checkpoints" in one_line_exit_2(run)
    run = script("grpo_exp10_nosft.py", "--config", first / CONFIG_FILE, "--learning-rate", "2e-5")
    assert "learning_rate 1e-05 -> 2e-05" in one_line_exit_2(run)


def test_dpo_config_yaml_reruns_the_run(tmp_path):
    rows = [{"question": f"What is {i} plus {i}?", "chosen": f"{2 * i}. \\boxed{{{2 * i}}}",
             "rejected": f"{2 * i + 1}. \\boxed{{{2 * i + 1}}}"} for i in range(4)]
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    first, second = tmp_path / "first", tmp_path / "second"
    assert dpo_trainer.main(["--config", str(RECIPES / "dpo.yaml"), "--model", "tiny-random",
                             "--pairs-from", str(prefs), "--output-dir", str(first),
                             "--learning-rate", "1e-3", "--lora-r", "4"]) == 0
    saved = yaml.safe_load((first / CONFIG_FILE).read_text())
    assert (saved["pairs_from"], saved["learning_rate"], saved["beta"]) == ([str(prefs)], 1e-3, 0.1)
    assert dpo_trainer.main(["--config", str(first / CONFIG_FILE), "--output-dir",
                             str(second)]) == 0
    same_apart_from(first, second, "statistics.json", first, second)


def test_sft_config_yaml_reruns_the_run(tmp_path, monkeypatch):
    from test_sft import toy_rows, write_jsonl

    monkeypatch.delenv("FOLD", raising=False)
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    data = write_jsonl(tmp_path / "d.jsonl", toy_rows(4, 2))
    first, second = tmp_path / "first", tmp_path / "second"

    def main(argv):
        return sft_kfold.main([str(a) for a in argv], default_model="tiny-random",
                              default_output="unused", about="SFT")

    assert main(["--config", RECIPES / "sft_kfold.yaml", "--model", "tiny-random", "--dataset",
                 data, "--output-dir", first, "--train-all", "--epochs", "1", "--lora-r", "4",
                 "--max-length", "120"]) == 0
    saved = yaml.safe_load((first / CONFIG_FILE).read_text())
    assert (saved["folds"], saved["train_all"], saved["epochs"], saved["lora_alpha"]) == \
        (1, True, 1, 32)
    assert main(["--config", first / CONFIG_FILE, "--output-dir", second]) == 0
    same_apart_from(first / "all", second / "all", "statistics.json", first, second)


# ------------------------------------------------------------------ the resume check
def fake_checkpoint(folder: Path, fingerprint="f") -> None:
    (folder / "checkpoint-2").mkdir(parents=True)
    (folder / "checkpoint-2" / "trainer_state.json").write_text(json.dumps({"fingerprint": fingerprint}))


def test_the_resume_check_reads_config_yaml(tmp_path, capsys):
    out = tmp_path / "run"
    fake_checkpoint(out)
    ran = GRPOConfig(model="tiny-random", output_dir=str(out))
    write_config(ran, out)
    assert saved_differences(ran, out) == []
    # speed-only settings are not the run's: another micro-batch is the same run
    assert saved_differences(dataclasses.replace(ran, train_micro_batch=1), out) == []
    other = dataclasses.replace(ran, learning_rate=3e-5, seed=1)
    assert saved_differences(other, out) == ["seed 0 -> 1", "learning_rate 1e-05 -> 3e-05"]
    with pytest.raises(UsageError, match="other settings .*seed 0 -> 1.*--resume"):
        refuse_other_settings(other, out, [out])
    refuse_other_settings(other, out, [out], resume=True)  # a warning: resuming is allowed
    assert "warning: resuming with settings other than" in capsys.readouterr().err
    refuse_other_settings(other, out, [out], overwrite=True)
    (out / CONFIG_FILE).unlink()  # a folder from before config.yaml: its fingerprint decides
    refuse_other_settings(other, out, [out])
    assert saved_differences(other, out) == []
