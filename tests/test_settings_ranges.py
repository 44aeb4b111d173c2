"""Every numeric setting is finite and in its declared range, whichever way it arrives (a flag, a
recipe, one of the study's environment variables), checked once where settings are made: the
trainers' settings dataclasses (relrl.runtime.config.check_fields), the evaluation settings
(relrl.evaluation.settings.EvalSettings) and the scripts' numeric flags (relrl.runtime.cli
.number_type). A refused value is one line naming the flag, exit status 2, and nothing is
written. The cases come from the dataclass fields and the parsers' flags, so a new setting is
covered without a new test."""
import dataclasses
import importlib.util
import inspect
import math
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from relrl.evaluation.settings import EvalSettings, check_settings
from relrl.finetune import dpo_trainer, sft_kfold
from relrl.rl import grpo_main
from relrl.runtime import cli
from relrl.runtime.cli import UsageError, parse_range
from relrl.runtime.config import flag_of

# ---------------------------------------------------------------------------- trainers
TRAINERS = {  # name -> (its parser, its script)
    "grpo_exp7": (lambda: grpo_main.build_parser("exp7"), "training/grpo_exp7_dynamic.py"),
    "grpo_exp10": (lambda: grpo_main.build_parser("exp10"), "training/grpo_exp10_nosft.py"),
    "sft_kfold": (lambda: sft_kfold.build_parser("unsloth/Qwen3-8B-unsloth-bnb-4bit",
                                                 "outputs/sft_qwen3", "SFT"),
                  "training/sft_qwen3_kfold.py"),
    "sft_qwen25": (lambda: sft_kfold.build_parser("Qwen/Qwen2.5-7B-Instruct",
                                                  "outputs/sft_qwen25", "SFT"),
                   "training/sft_train_qwen25.py"),
    "dpo": (dpo_trainer.build_parser, "training/dpo_train.py"),
}
RECIPES = {"grpo_exp7": "grpo_exp7", "grpo_exp10": "grpo_exp10", "sft_kfold": "sft_kfold",
           "dpo": "dpo"}  # recipe name prefix -> trainer


def numeric_kind(cls, field) -> type | None:
    """int or float for a numeric field (Optional too), else None."""
    hint = typing.get_type_hints(cls)[field.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    kind = args[0]
    return kind if kind in (int, float) and not isinstance(field.metadata.get("choices"),
                                                           dict) else None


def numeric_fields(parser) -> list:
    return [f for f in parser.fields if numeric_kind(parser.cls, f)]


def out_of_range(spec: str, kind: type) -> list:
    """Finite values just outside the range, then inf, nan and -inf (for an integer setting
    too: a recipe's .inf, an environment's "nan")."""
    low, low_in, high, high_in = parse_range(spec)
    step = 1 if kind is int else 0.5
    values = []
    if math.isfinite(low):
        values.append(low - step if low_in else low)
    if math.isfinite(high):
        values.append(high + step if high_in else high)
    return [kind(v) for v in values] + [math.inf, math.nan, -math.inf]


def cases():
    for name, (make, _) in TRAINERS.items():
        parser = make()
        for field in numeric_fields(parser):
            for value in out_of_range(field.metadata["range"], numeric_kind(parser.cls, field)):
                yield pytest.param(name, field.name, value, id=f"{name}-{field.name}-{value}")


def refused(parse, argv, capsys) -> str:
    """The one-line message a parse refuses with (UsageError, or argparse's exit 2)."""
    try:
        parse(argv)
    except UsageError as exc:
        message = str(exc)
    except SystemExit as exc:
        assert exc.code == 2
        message = capsys.readouterr().err.strip()
    else:
        raise AssertionError(f"accepted {argv}")
    assert "\n" not in message and "Traceback" not in message, message
    return message


@pytest.fixture
def clean_environment(monkeypatch):
    """No study variable of the caller's shell leaks into a parse."""
    for name in ("DATASET_PATH", "OUTPUT_DIR", "SFT_LORA_PATH", "FOLD", "LORA_PATH", "RUN_NAME",
                 "MAX_USEFUL_STEPS", "MAX_TOTAL_STEPS", "LEARNING_RATE", "BETA", "CHUNK_INDEX",
                 "N_CHUNKS", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "RELRL_STOP_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_every_numeric_setting_declares_its_range(name):
    parser = TRAINERS[name][0]()
    undeclared = [f.name for f in numeric_fields(parser) if not f.metadata.get("range")]
    assert not undeclared, f"{name}: declare range= for {undeclared} (relrl.runtime.config.setting)"
    assert len(numeric_fields(parser)) >= 10


@pytest.mark.parametrize("name, field, value", list(cases()))
def test_a_bad_number_is_refused_from_a_flag_a_recipe_and_the_environment(
        name, field, value, tmp_path, monkeypatch, capsys, clean_environment):
    parser = TRAINERS[name][0]()
    meta = next(f for f in parser.fields if f.name == field).metadata
    flag = flag_of(parser.cls, field)
    text = repr(value) if isinstance(value, float) and math.isfinite(value) else str(value)
    # from a flag (an integer flag given "inf": argparse's "invalid int value", naming it)
    message = refused(parser.parse, [f"{flag}={text}"], capsys)  # --x=-inf: not an option
    assert flag in message and ("must be" in message or "invalid int" in message), message
    # from a recipe (YAML writes .inf and .nan)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({field: value}))
    message = refused(TRAINERS[name][0]().parse, ["--config", str(recipe)], capsys)
    assert flag in message and str(recipe) in message, message
    # from the study's environment variable, where the setting has one
    if meta.get("env"):
        monkeypatch.setenv(meta["env"], text)
        message = refused(TRAINERS[name][0]().parse, [], capsys)
        assert flag in message and meta["env"] in message, message


@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_the_study_defaults_and_recipes_are_accepted(name, clean_environment):
    parser = TRAINERS[name][0]()
    cfg, _ = parser.parse([])
    cfg.check()
    for recipe in sorted((ROOT / "recipes").glob("*.yaml")):
        if any(recipe.stem.startswith(prefix) and trainer == name
               for prefix, trainer in RECIPES.items()):
            TRAINERS[name][0]().parse(["--config", str(recipe)])[0].check()


@pytest.mark.parametrize("env, value", [("BETA", "0.04"), ("LEARNING_RATE", "3e-6"),
                                        ("MAX_USEFUL_STEPS", "50")])
def test_a_good_environment_value_still_works(env, value, monkeypatch, clean_environment):
    monkeypatch.setenv(env, value)
    cfg, _ = TRAINERS["grpo_exp10"][0]().parse([])
    assert getattr(cfg, env.lower()) == type(getattr(cfg, env.lower()))(value)


# ---------------------------------------------------------------------------- evaluation scripts
EVAL_SCRIPTS = ["evaluate_single", "evaluate_finetuned_only", "evaluate_gsm8k",
                "evaluate_qwen25_base", "screen_v4", "grade_responses", "compare_results",
                "benchmark_api_models"]
PLAIN_SCRIPTS = {"build_dataset": ROOT / "generators" / "build_dataset.py",
                 **{name: ROOT / "evaluation" / f"{name}.py" for name in EVAL_SCRIPTS}}


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Captured(Exception):
    def __init__(self, parser):
        self.parser = parser


def parser_of(name: str, monkeypatch):
    """The script's own argparse parser, caught as its parse_args/main starts parsing."""
    module = load(PLAIN_SCRIPTS[name])

    def capture(self, *args, **kwargs):
        raise Captured(self)

    monkeypatch.setattr(cli.ArgumentParser, "parse_args", capture)
    try:
        start = getattr(module, "parse_args", None) or module.main
        start(*([[]] if inspect.signature(start).parameters else []))
    except Captured as caught:
        return caught.parser
    finally:
        monkeypatch.undo()
    raise AssertionError(f"{name} parsed nothing")


def numeric_actions(parser):
    """(the parser that owns it, action) for every flag that takes a number, sub-commands too."""
    for action in parser._actions:
        if action.choices and isinstance(action.choices, dict):  # sub-commands
            for sub in action.choices.values():
                yield from numeric_actions(sub)
        elif action.type in (int, float) or hasattr(action.type, "range"):
            yield parser, action


def eval_cases():
    mp = pytest.MonkeyPatch()
    try:
        for name in sorted(PLAIN_SCRIPTS):
            for _, action in numeric_actions(parser_of(name, mp)):
                yield pytest.param(name, action.option_strings[0], id=f"{name}{action.option_strings[0]}")
    finally:
        mp.undo()


def test_every_evaluation_setting_declares_its_range():
    numeric = [f for f in dataclasses.fields(EvalSettings) if numeric_kind(EvalSettings, f)]
    assert len(numeric) >= 7 and all(f.metadata.get("range") for f in numeric)


@pytest.mark.parametrize("name", sorted(PLAIN_SCRIPTS))
def test_every_numeric_flag_checks_its_range(name, monkeypatch):
    """No bare type=float/int: each numeric flag is a number_type, with a declared range."""
    bare = [a.option_strings for _, a in numeric_actions(parser_of(name, monkeypatch))
            if a.type in (int, float)]
    assert not bare, f"{name}: {bare} take any number (use relrl.runtime.cli.number_type)"


@pytest.mark.parametrize("name, flag", list(eval_cases()))
def test_an_evaluation_flag_refuses_bad_numbers(name, flag, monkeypatch, capsys):
    owner, action = next((p, a) for p, a in numeric_actions(parser_of(name, monkeypatch))
                         if a.option_strings[0] == flag)
    kind = action.type.kind
    for value in out_of_range(action.type.range, kind) + ["inf", "nan", "-inf", "1e400"]:
        text = repr(value) if isinstance(value, float) and math.isfinite(value) else str(value)
        message = refused(owner.parse_known_args, [f"{flag}={text}"], capsys)
        assert flag in message and "must be" in message, message


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(EvalSettings)
                                   if numeric_kind(EvalSettings, f)])
def test_the_evaluation_flags_take_the_ranges_evaluation_settings_declare(field, monkeypatch):
    """The flags of add_eval_args and the settings they make share one declaration."""
    parser = parser_of("evaluate_single", monkeypatch)
    flag = "--" + field.replace("_", "-")
    (action,) = [a for a in parser._actions if flag in a.option_strings]
    spec = next(f for f in dataclasses.fields(EvalSettings) if f.name == field).metadata["range"]
    assert action.type.range == spec
    with pytest.raises(UsageError, match=f"^{flag}: must be finite"):
        check_settings(EvalSettings(**{field: math.inf}))


# ---------------------------------------------------------------------------- whole scripts
def run(script, *args, env=None, cwd=ROOT):
    environment = {k: v for k, v in os.environ.items()
                   if k not in {"DATASET_PATH", "OUTPUT_DIR", "BETA", "LEARNING_RATE", "FOLD",
                                "MAX_USEFUL_STEPS", "LORA_PATH", "SLURM_ARRAY_TASK_ID"}}
    environment.update(env or {})
    return subprocess.run([sys.executable, str(ROOT / script), *map(str, args)], cwd=cwd,
                          env=environment, capture_output=True, text=True, timeout=300)


def one_line_exit_2(result, flag: str) -> str:
    assert result.returncode == 2, result.stderr[-2000:]
    err = result.stderr.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and flag in err, err
    return err


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "rows.jsonl"
    path.write_text('{"id": "q1", "question": "What is 2 + 2?", "answer": "4", '
                    '"answer_type": "numeric", "source": "toy"}\n')
    return path


@pytest.mark.parametrize("name, how, flag", [
    ("grpo_exp7", "flag", "--beta"), ("grpo_exp10", "env", "--beta"),
    ("grpo_exp10", "recipe", "--tolerance"), ("sft_kfold", "env", "--learning-rate"),
    ("sft_qwen25", "flag", "--warmup-ratio"), ("dpo", "env", "--beta")])
def test_a_trainer_refuses_before_it_writes_a_run_folder(name, how, flag, rows, tmp_path):
    out = tmp_path / "run"
    value = {"--warmup-ratio": "nan"}.get(flag, "inf")
    args = ["--model", "tiny-random", "--output-dir", out]
    args += ["--pairs-from", rows] if name == "dpo" else ["--dataset", rows]
    env = {}
    if how == "flag":
        args += [flag, value]
    elif how == "env":
        env[{"--beta": "BETA", "--learning-rate": "LEARNING_RATE"}[flag]] = value
    else:
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(f"{flag.lstrip('-').replace('-', '_')}: .inf\n")
        args += ["--config", recipe]
    err = one_line_exit_2(run(TRAINERS[name][1], *args, env=env), flag)
    assert "must be finite" in err
    assert not out.exists()


def test_evaluation_scripts_refuse_before_they_write(rows, tmp_path):
    """One run of each script with a bad number: exit 2, one line naming the flag, nothing
    written (the study's default output folder is not even made)."""
    out = tmp_path / "out"
    adapter = tmp_path / "adapter"
    common = ["--model", "tiny-random", "--dataset", rows]
    checks = [
        ("evaluation/evaluate_single.py", [*common, "--adapter", adapter, "--tolerance", "inf"],
         {"OUTPUT_DIR": str(out)}, "--tolerance"),
        ("evaluation/evaluate_finetuned_only.py", [*common, "--adapter", adapter, "--base-results",
                                                   rows, "--temperature", "nan"],
         {"OUTPUT_DIR": str(out)}, "--temperature"),
        ("evaluation/evaluate_gsm8k.py", [*common, "--output", out / "g.json", "--top-p", "inf"],
         {}, "--top-p"),
        ("evaluation/evaluate_qwen25_base.py", [*common, "--output-dir", out], {"FOLD": "-1"},
         "--fold"),
        ("evaluation/screen_v4.py", [*common, "--output-dir", out, "--max-tool-calls", "-1"], {},
         "--max-tool-calls"),
        ("evaluation/grade_responses.py", [rows, "--output", out / "g.jsonl", "--tolerance",
                                           "-inf"], {}, "--tolerance"),
        ("evaluation/benchmark_api_models.py", ["--models", "m", "--dataset", rows, "--output-dir",
                                                out, "--timeout", "inf", "--api-key-env", "none"],
         {}, "--timeout"),
        ("generators/build_dataset.py", ["split", rows, "--out-dir", out, "--val-frac", "nan"], {},
         "--val-frac"),
    ]
    for script, args, env, flag in checks:
        one_line_exit_2(run(script, *args, env=env), flag)
        assert not out.exists(), script
