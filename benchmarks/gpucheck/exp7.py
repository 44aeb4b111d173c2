"""exp7 as the default run has it, a few useful steps: the recipe (recipes/grpo_exp7.yaml: G 4,
3,072 new tokens, batch mode, gen batch 8), the pre-quantized 4-bit checkpoint, --vllm-sleep auto,
the calculator on, through relrl.rl.grpo_main itself (its engine sizing, sleep decision and KV
check included). Figures: seconds per useful step, sampled tokens per sampling second, peak
memory, vLLM's KV cache against a generation call's demand."""
from __future__ import annotations

import json
import time

import torch

from gpucheck.checkpoints import hub_model
from gpucheck.common import QUESTIONS, ROOT, Check, cuda
from gpucheck.environment import Skip, importable
from relrl.engines.vllm import check_four_bit_loadable, kv_cache_tokens
from relrl.modeling.loading import attach_lora, load_pretrained, save_adapter
from relrl.rl import grpo_main
from relrl.rl.grpo_metrics import trainer_seconds
from relrl.runtime.cli import UsageError

USEFUL_STEPS = 4  # one generation call (8 questions) and one update (grad accum 4)


def write_inputs(check: Check, work) -> tuple[str, str]:
    """(dataset, warm-start adapter): two rounds of the check's questions, and a new LoRA saved
    on the 4-bit checkpoint (exp7 trains an SFT adapter further; its B is zero, as new)."""
    work.mkdir(parents=True, exist_ok=True)
    rows = [{"id": f"q{k}", "question": QUESTIONS[k % len(QUESTIONS)], "answer": "0.3679"}
            for k in range(2 * len(QUESTIONS))]
    dataset = work / "questions.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    adapter = work / "sft-adapter"
    if not (adapter / "adapter_config.json").is_file():
        model, _ = load_pretrained(str(check.nf4_folder), load_in_4bit=None, seed=0)
        save_adapter(attach_lora(model, r=32, alpha=32), adapter)
        del model
        if cuda():
            torch.cuda.empty_cache()
    return str(dataset), str(adapter)


def batch_steps(check: Check, out: dict) -> None:
    engine = "hf"
    if cuda() and importable("vllm") and not check.skip_vllm:
        try:
            check_four_bit_loadable(True)
            engine = "vllm"
        except UsageError as refusal:
            out["vllm_refused"] = str(refusal)
    work = check.work_dir / f"{check.config}-exp7"
    dataset, adapter = write_inputs(check, work)
    run = work / "run"
    argv = ["--config", str(ROOT / "recipes" / "grpo_exp7.yaml"), "--model", str(check.nf4_folder),
            "--dataset", dataset, "--sft-adapter", adapter, "--output-dir", str(run), "--overwrite",
            "--max-useful-steps", str(USEFUL_STEPS), "--sampling-mode", "batch",
            "--rollout-engine", engine, "--tools", "calculator", "--vllm-sleep", "auto",
            "--vllm-gpu-memory-utilization", str(check.vllm_memory),
            "--save-every", "1000", "--val-every", "1000", "--no-health-check"]
    if not hub_model(check):  # random weights never answer right: a toy reward that varies
        argv += ["--reward", "digit-share"]
    if check.config != "qwen3-8b":
        argv += ["--max-new-tokens", str(check.shapes["completion"])]
    seen: dict = {}
    real_make_engine = grpo_main.make_engine

    def recording_make_engine(*args, **kwargs):
        made = real_make_engine(*args, **kwargs)
        seen.update(sleeps=bool(getattr(made, "sleeps", False)), kv_demand=kwargs.get("kv_demand"),
                    kv_cache_tokens=kv_cache_tokens(made.llm) if hasattr(made, "llm") else None)
        return made

    grpo_main.make_engine = recording_make_engine
    start = time.perf_counter()
    try:
        status = grpo_main.main("exp7", argv)
    finally:
        grpo_main.make_engine = real_make_engine
    out.update(engine=engine, exit_status=status, run_seconds=round(time.perf_counter() - start, 1))
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines() if line]
    sampling = sum({(x["t_sample"], x["total_attempts"]) : x["t_sample"] for x in log}.values())
    tokens = sum(sum(x["completion_lengths"]) for x in log)
    demand = seen.get("kv_demand")
    out.update(useful_steps=len(log), seconds_per_useful_step=round(trainer_seconds(log) / max(len(log), 1), 2),
               useful_sampled_tokens=tokens,
               tokens_per_s=round(tokens / sampling, 1) if sampling else None,
               vllm_sleeps=seen.get("sleeps"), kv_cache_tokens=seen.get("kv_cache_tokens"),
               kv_demand_tokens=demand[0] * demand[1] if demand else None,
               kv_demand=f"{demand[0]} sequences x {demand[1]:,} tokens" if demand else None)
    if out["kv_cache_tokens"] and out["kv_demand_tokens"]:
        out["kv_fits"] = out["kv_demand_tokens"] <= out["kv_cache_tokens"]
    if cuda():
        out["peak_trainer_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    if status != 0:
        raise RuntimeError(f"grpo_exp7 exited {status}")
    if not log:
        raise Skip("no useful step: every group had equal rewards")
