"""Unsloth's max_seq_length is each script's own length budget, not a fixed 4,096: SFT's and
DPO's --max-length (a training example, prompt and tool turns included), or SFT's scoring budget
(a prompt, the scoring's new tokens and tool turns) where that is longer. What the scripts ask
load_model for is recorded, and load_model's rule is checked with a fake Unsloth."""
import importlib.util
import json
import sys
import types

# peft imports bitsandbytes, which picks its CUDA backend if imported under the fake CUDA below
import peft  # noqa: F401
import pytest
import torch
from conftest import ROOT
from test_sft import toy_rows, write_jsonl

from relrl.models import by_name


class Loaded(Exception):
    """Raised by the recording load_model: the test needs nothing after it."""


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "training" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recording(monkeypatch, module) -> dict:
    seen = {}

    def load_model(name, **kwargs):
        seen.update(kwargs, name=name)
        raise Loaded
    monkeypatch.setattr(module, "load_model", load_model)
    return seen


def test_sft_asks_for_its_example_length_and_scoring_budget(tmp_path, monkeypatch):
    from relrl.finetune import sft_kfold

    seen = recording(monkeypatch, sft_kfold)
    data = write_jsonl(tmp_path / "d.jsonl", toy_rows(6, 2))
    with pytest.raises(Loaded):
        script("sft_qwen3_kfold").main(["--model", "tiny-random", "--dataset", str(data),
                                        "--output-dir", str(tmp_path / "o"), "--folds", "2",
                                        "--fold", "0", "--max-length", "1234", "--tools",
                                        "calculator", "--eval-max-new-tokens", "300",
                                        "--eval-max-tool-calls", "3"])
    assert (seen["max_seq_length"], seen["max_new_tokens"]) == (1234, 300)
    assert (seen["tools"], seen["max_tool_calls"]) == ("calculator", 3)


def test_dpo_asks_for_its_pair_length(tmp_path, monkeypatch):
    from relrl.finetune import dpo_trainer

    seen = recording(monkeypatch, dpo_trainer)
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text(json.dumps({"question": "2 + 2?", "chosen": "\\boxed{4}",
                                 "rejected": "\\boxed{5}"}) + "\n")
    with pytest.raises(Loaded):
        script("dpo_train").main(["--model", "tiny-random", "--pairs-from", str(prefs),
                                  "--output-dir", str(tmp_path / "dpo"), "--max-length", "777"])
    assert seen["max_seq_length"] == 777 and seen.get("max_new_tokens") is None


def test_unsloths_length_is_the_longer_of_training_and_generation(tmp_path, monkeypatch):
    """load_model gives Unsloth the training length, or the generation budget where longer."""
    model, tok = by_name.load_builtin("tiny-random")
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    seen = {}

    class FastLanguageModel:
        @staticmethod
        def from_pretrained(**kwargs):
            seen.update(kwargs)
            return by_name.load_builtin("tiny-random")
    monkeypatch.setitem(sys.modules, "unsloth", types.SimpleNamespace(FastLanguageModel=FastLanguageModel))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    folder = str(tmp_path / "m")
    by_name.load_model(folder, use_unsloth=True, max_seq_length=9000)
    assert seen["max_seq_length"] == 9000
    by_name.load_model(folder, use_unsloth=True, max_seq_length=9000, max_new_tokens=300)
    assert seen["max_seq_length"] == 9000
    by_name.load_model(folder, use_unsloth=True, max_seq_length=1000, max_new_tokens=3000)
    assert seen["max_seq_length"] == by_name.PROMPT_TOKENS + 3000
