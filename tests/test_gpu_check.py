"""benchmarks/gpu_check.py runs end to end on the CPU with the scaled-down config, so the
prepared GPU check cannot rot before a GPU runs it."""
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_small_config_runs_every_step_and_writes_the_json(gpu_check, tmp_path, capsys):
    assert gpu_check.main(["--config", "small", "--work-dir", str(tmp_path / "work"),
                           "--output-dir", str(tmp_path / "out"), "--skip-vllm"]) == 0
    files = list((tmp_path / "out").glob("*.json"))
    assert len(files) == 1 and not list((tmp_path / "out").glob("*.tmp*"))
    result = json.loads(files[0].read_text())
    assert result["config"] == "small" and result["G"] == 4 and result["groups"] == 4
    hf = result["transformers"]
    assert hf["checkpointing_after_rollout"] is True
    assert hf["logprobs_agree"]["batched_vs_alone"] <= 1e-4
    assert hf["logprobs_agree"]["train_vs_eval"] <= 1e-4
    shapes = result["shapes"]
    assert hf["grpo_update_shape"] == {"sequences": 16,
                                       "tokens_per_sequence": shapes["prompt"] + shapes["completion"]}
    assert hf["sft_step_shape"]["tokens_per_sequence"] == shapes["sft_tokens"]
    assert hf["rollout_hf"]["sequences"] == 16 and hf["rollout_hf"]["tokens_per_s"] > 0
    assert hf["grpo_update"]["seconds"] > 0 and hf["sft_step"]["seconds"] > 0
    assert hf["rollout_vllm"] == {"skipped": "--skip-vllm"}
    assert "skipped" in result["unsloth"]  # no CUDA here
    # Qwen3-8B's architecture, scaled down in width, depth and vocabulary.
    config = json.loads((tmp_path / "work" / "small" / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["num_hidden_layers"] == 2
    assert "all checks passed" in capsys.readouterr().out


def test_the_kept_config_is_qwen3_8b(gpu_check):
    config = gpu_check.model_config("qwen3-8b")
    assert (config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]) == (4096, 36, 12288)
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (32, 8, 128)
    assert config["vocab_size"] == 151_936 and config["tie_word_embeddings"] is False
