"""The one-shot GPU check: does the study's job fit and behave on this GPU, through the
project's own code? Every step is timed and the JSON is rewritten (atomically) after each one,
so a failing step, a dying process or a killed job keeps every figure measured before it.

Each group of steps runs in its own process (in-process vLLM engines do not give their GPU memory
back, vLLM issue 21073; Unsloth patches transformers when imported, so only its own process
imports it), one after another, results merged into one JSON:
  prepare  environment (versions; the NVIDIA driver against the minimum torch's CUDA needs;
           vLLM's bitsandbytes plugin loaded and registered as vLLM does), checkpoint (random
           weights with Qwen3-8B's architecture, benchmarks/configs/qwen3-8b/config.json,
           save_pretrained), checkpoint_nf4 (the pre-quantized 4-bit checkpoint: the default model
           unsloth/Qwen3-8B-unsloth-bnb-4bit where the hub is reachable and --model auto, else
           those random weights quantized to NF4 and saved as hub bnb-4bit checkpoints are)
  exp7     batch_steps: the default run's configuration, a few useful steps of
           training/grpo_exp7_dynamic.py's recipe in batch mode (G and new tokens as the recipe
           has them, --vllm-sleep auto, the calculator on) from the 4-bit checkpoint: seconds
           per useful step, tokens/s, peak memory, vLLM's KV cache against the batch's demand
  4bit     the 4-bit checkpoint loaded by path with --load-in-4bit auto (the default model's
           code path), LoRA r=32 on every projection, then: vllm_start (as GRPO starts it:
           sleep auto, max_num_seqs and the KV check from gen batch x G), tool_gap (the sampler's
           log-probs against the trainer's over a tool rollout's turns after an adapter sync
           and after a sleep and wake; the think-block difference's effect), adapter_sync,
           vllm_rollout, grpo_update (G 4 x 4 groups of 3,072 tokens inside the engine's
           updating()), logprobs_agree, hf_rollout, tool_rollout, stepping, sft_step, release
  bf16     the same steps on the bf16 random-weight checkpoint
  unsloth  Unsloth's 4-bit loader: load, logprobs_agree, hf_rollout, grpo_update, tool_rollout

Steps run in that order, most valuable first. --steps picks steps by name in every path;
--budget-s skips a step whose estimated seconds (gpucheck/plan.py) no longer fit the time
left, so the most valuable steps fit a short first slot (10 minutes by default on a GPU).
A bare node (torch, transformers and peft) still gets the HF-engine steps, and the 4-bit ones
where bitsandbytes imports; a step whose optional package (bitsandbytes, scipy, vllm, unsloth)
is absent is skipped with the reason, and so is a step that needs one that did not run. Exit
status 1 when a step failed.

    python benchmarks/gpu_check.py                  # on a GPU node: results/gpu_check/<gpu>.json
    python benchmarks/gpu_check.py --config small   # the same steps scaled down, on the CPU
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the gpucheck package beside this file

from gpucheck import plan
from gpucheck.environment import Skip, importable, no_gpu_refusal, require, simulate_missing

# These import neither transformers nor peft (the workers do, each in its own process).
from relrl.data.dataset_io import atomic_write_json
from relrl.runtime.cli import ArgumentParser, UsageError, run_main

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BUDGET_S = 600  # a first short slot on a shared GPU node


def gpu_name() -> str:
    """The GPU's name without creating a CUDA context in this (parent) process."""
    name = f"cpu-{platform.machine()}"
    if torch.cuda.is_available():
        smi = shutil.which("nvidia-smi")
        found = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                               check=False, capture_output=True, text=True).stdout.strip() if smi else ""
        name = found or "cuda"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")


# ---------------------------------------------------------------------------- one step
def step_function(name: str):
    """The callable (check, figures) of a step, looked up when it runs (tests replace some)."""
    # each module imported only when one of its steps runs: a bare node lacks what some need
    if name == "environment":
        from gpucheck.environment import environment
        return lambda check, out: environment(out)
    if name in ("checkpoint", "checkpoint_nf4"):
        from gpucheck import checkpoints
        return checkpoints.prepare_checkpoint if name == "checkpoint" else checkpoints.prepare_nf4
    path, step = name.split(".", 1)
    if path == "exp7":
        # its module imports relrl.rl, whose problem generators need scipy: a node without it
        # skips the step, saying so, instead of failing on the import
        if not importable("scipy"):
            return lambda check, out: require("scipy")
        from gpucheck.exp7 import batch_steps
        return batch_steps
    if step == "tool_gap":
        from gpucheck.tool_gap import tool_gap
        return tool_gap(path)
    from gpucheck import steps
    return getattr(steps, step)(path)


def status_phrase(status: str | None) -> str:
    return {"failed": "failed", "skipped": "was skipped"}.get(status, "did not run")


def decided(name: str, done: dict, chosen) -> dict | None:
    """The entry of a step skipped before it starts (not selected, or a step it needs did not
    run), else None."""
    if not plan.selected(name, chosen):
        return {"status": "skipped", "why": "not selected (--steps)", "seconds": 0.0}
    if name == "unsloth.load" and not torch.cuda.is_available():  # known without its process
        return {"status": "skipped", "why": "Unsloth needs CUDA", "seconds": 0.0}
    missing = next((n for n in plan.needs(name) if done.get(n, {}).get("status") != "ran"), None)
    if missing is None:
        return None
    root = done.get(missing, {}).get("needs", missing)  # the step that did not run itself
    before = done.get(root, {})
    why = f"needs {root}, which {status_phrase(before.get('status'))}"
    return {"status": "skipped", "needs": root, "seconds": 0.0,
            "why": why + (f" ({before['why']})" if "why" in before else "")}


def run_step(name: str, check, done: dict, chosen, deadline: float | None) -> dict:
    """The step's entry: status ran, skipped or failed, why, seconds, its figures."""
    entry = decided(name, done, chosen)
    if entry is not None:
        return entry
    late = plan.fits(check.config, name, None if deadline is None else deadline - time.time())
    if late is not None:
        return {"status": "skipped", "why": late, "seconds": 0.0}
    cuda = torch.cuda.is_available()
    figures: dict = {}
    if cuda:  # what the step before left in PyTorch's cache is free for this one (and vLLM)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    try:
        step_function(name)(check, figures)
        entry = {"status": "ran"}
    except Skip as why:
        entry = {"status": "skipped", "why": str(why)}
    except Exception as exc:  # noqa: BLE001 - a failing step must not lose the others' figures
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        entry = {"status": "failed", "why": f"{type(exc).__name__}: {first}".rstrip(": "),
                 "traceback": traceback.format_exc(limit=6).splitlines()[-12:]}
    if cuda:
        torch.cuda.synchronize()
    entry["seconds"] = round(time.perf_counter() - start, 2)
    if cuda:
        free, total = torch.cuda.mem_get_info()
        entry.update(peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2),
                     gpu_used_gib=round((total - free) / 2**30, 2))
    return {**entry, **figures}


def summary_line(name: str, entry: dict) -> str:
    text = f"{name:24s} {entry['status']:7s} {entry['seconds']:8.1f} s"
    return text + (f"  {entry['why']}" if "why" in entry else "")


# ---------------------------------------------------------------------------- a group
def run_group(args, names: list[str], out: Path) -> None:
    """Run one group's steps in this process, adding each entry to the JSON as it ends."""
    from gpucheck.common import SHAPES, Check, model_config

    check = Check(args.config, SHAPES[args.config], model_config(args.config)["vocab_size"],
                  args.work_dir, args.vllm_gpu_memory_utilization, args.skip_vllm, model=args.model)
    chosen = plan.parse_steps(args.steps)
    deadline = args.started + args.budget_s if args.budget_s else None
    for name in names:
        result = json.loads(out.read_text())
        entry = run_step(name, check, result["steps"], chosen, deadline)
        result["steps"][name] = entry
        result["total_seconds"] = round(time.time() - args.started, 1)
        atomic_write_json(out, result)
        print(f"gpu_check: {summary_line(name, entry)}", flush=True)


def worker_argv(args, group: str, out: Path) -> list[str]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", group, "--output", str(out),
            "--config", args.config, "--work-dir", str(args.work_dir), "--model", args.model,
            "--budget-s", str(args.budget_s), "--started", repr(args.started),
            "--vllm-gpu-memory-utilization", str(args.vllm_gpu_memory_utilization)]
    argv += ["--skip-vllm"] if args.skip_vllm else []
    argv += ["--steps", args.steps] if args.steps is not None else []
    argv += ["--simulate-missing", args.simulate_missing] if args.simulate_missing else []
    return argv


def spawn_group(args, group: str, names: list[str], out: Path) -> None:
    """The group in a child process; steps it did not record (it died) are failed or skipped
    here with its exit status and the last line it wrote to stderr."""
    log = args.work_dir / "logs" / f"{group}.stderr"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as err:
        code = subprocess.run(worker_argv(args, group, out), check=False, stderr=err,
                              cwd=ROOT).returncode
    result = json.loads(out.read_text())
    lost = [n for n in names if n not in result["steps"]]
    if not lost:
        return
    tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:]
    result["steps"][lost[0]] = {
        "status": "failed", "seconds": 0.0,
        "why": f"the {group} process exited with status {code} during this step"
               + (f": {tail[0][:300]}" if tail else ""), "stderr": str(log)}
    for name in lost[1:]:
        result["steps"][name] = {"status": "skipped", "seconds": 0.0, "needs": lost[0],
                                 "why": f"the {group} process died at {lost[0]}"}
    atomic_write_json(out, result)
    for name in lost:
        print(f"gpu_check: {summary_line(name, result['steps'][name])}", flush=True)


def nothing_fits(args, names: list[str]) -> bool:
    """No step of the group but release fits the time left once its process has started."""
    if not args.budget_s:
        return False
    left = args.started + args.budget_s - time.time()
    left -= 0 if args.in_process else plan.PROCESS_START_S[args.config]
    chosen = plan.parse_steps(args.steps)
    return all(plan.short(n) == "release" or not plan.selected(n, chosen)
               or plan.fits(args.config, n, left) is not None for n in names)


def all_decided(args, names: list[str], out: Path) -> bool:
    """Every step of the group is skipped before it starts (its release then has nothing to
    free): recorded here, and no process is started for it."""
    result = json.loads(out.read_text())
    done, chosen = dict(result["steps"]), plan.parse_steps(args.steps)
    entries = {}
    for name in names:
        entry = decided(name, done, chosen) if plan.short(name) != "release" else \
            {"status": "skipped", "seconds": 0.0, "why": "nothing to release: no step of the path ran"}
        if entry is None:
            return False
        entries[name] = done[name] = entry
    for name, entry in entries.items():
        result["steps"][name] = entry
        print(f"gpu_check: {summary_line(name, entry)}", flush=True)
    atomic_write_json(out, result)
    return True


def skip_group(args, names: list[str], out: Path, why: str) -> None:
    result = json.loads(out.read_text())
    for name in names:
        result["steps"][name] = {"status": "skipped", "seconds": 0.0, "why": why}
        print(f"gpu_check: {summary_line(name, result['steps'][name])}", flush=True)
    atomic_write_json(out, result)


# ---------------------------------------------------------------------------- main
def build_parser() -> ArgumentParser:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=("qwen3-8b", "small"), default="qwen3-8b",
                        help="qwen3-8b (the study's model and shapes, CUDA) or small (the CPU test)")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/relrl-gpu-check"),
                        help="where the checkpoints are saved (reused by a rerun)")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "results" / "gpu_check")
    parser.add_argument("--output", type=Path, default=None,
                        help="the JSON file (default: <output-dir>/<gpu name>[-<config>].json)")
    parser.add_argument("--paths", default=",".join(plan.PATHS),
                        help=f"comma-separated, of {', '.join(plan.PATHS)} (run in that order)")
    parser.add_argument("--steps", default=None,
                        help="comma-separated step names to run in each path (e.g. load,vllm_start,"
                        "tool_gap,batch_steps; default: all, most valuable first); the others are "
                        "skipped as not selected; the prepare steps and release always run")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="skip a step whose estimated seconds no longer fit in this many "
                        f"seconds from the start (default: {DEFAULT_BUDGET_S} with --config "
                        "qwen3-8b, none with small; 0: none)")
    parser.add_argument("--model", choices=("auto", "random"), default="auto",
                        help="the 4-bit checkpoint: auto, the default model from the hub where "
                        "it is reachable (qwen3-8b only), else random weights quantized here")
    parser.add_argument("--skip-vllm", action="store_true", help="skip every vLLM step")
    parser.add_argument("--vllm-gpu-memory-utilization", type=float, default=0.35,
                        help="vLLM's share of GPU memory beside the policy being trained")
    parser.add_argument("--simulate-missing", default="",
                        help="comma-separated packages to act as if not installed (a bare node: "
                        "bitsandbytes,vllm,unsloth,scipy)")
    parser.add_argument("--in-process", action="store_true",
                        help="every group in this process (tests; on a GPU vLLM's memory is "
                        "then not given back between paths)")
    parser.add_argument("--worker", default=None, help="(internal) run one group")
    parser.add_argument("--started", type=float, default=None, help="(internal)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        paths = plan.parse_paths(args.paths)
        plan.parse_steps(args.steps)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.simulate_missing:
        simulate_missing([p for p in args.simulate_missing.split(",") if p])
    if args.config == "qwen3-8b" and not torch.cuda.is_available():
        raise UsageError(no_gpu_refusal())
    if args.budget_s is None:
        args.budget_s = DEFAULT_BUDGET_S if args.config == "qwen3-8b" else 0
    if args.worker is not None:
        run_group(args, dict(plan.groups(list(plan.PATHS)))[args.worker], args.output)
        return 0

    args.started = time.time()
    suffix = "" if args.config == "qwen3-8b" else f"-{args.config}"
    out = args.output or args.output_dir / f"{gpu_name()}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    from gpucheck.common import GEN_BATCH, GROUPS, LORA_R, SHAPES, G

    atomic_write_json(out, {
        "gpu": gpu_name(), "config": args.config, "shapes": SHAPES[args.config], "G": G,
        "groups": GROUPS, "gen_batch": GEN_BATCH, "lora_r": LORA_R, "paths": paths,
        "budget_s": args.budget_s or None, "processes": "in-process" if args.in_process else "one per group",
        "simulated_missing": args.simulate_missing or None,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(args.started)), "steps": {}})
    for group, names in plan.groups(paths):
        if all_decided(args, names, out):
            continue
        if nothing_fits(args, names):
            skip_group(args, names, out, "would not fit --budget-s (no step of the group fits "
                       "the time left with its process's start)")
        elif args.in_process:
            run_group(args, names, out)
        else:
            spawn_group(args, group, names, out)
    result = json.loads(out.read_text())
    result["total_seconds"] = round(time.time() - args.started, 1)
    atomic_write_json(out, result)
    steps = result["steps"]
    print(f"\ngpu_check: {len(steps)} steps in {result['total_seconds']} s: "
          + ", ".join(f"{sum(e['status'] == s for e in steps.values())} {s}"
                      for s in ("ran", "skipped", "failed")) + f"; wrote {out}")
    for name, entry in steps.items():
        print("  " + summary_line(name, entry))
    return 1 if any(e["status"] == "failed" for e in steps.values()) else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run_main(main)
