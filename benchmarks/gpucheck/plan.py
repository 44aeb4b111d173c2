"""Which steps run, in which order, and which would not fit the time budget. No torch, no relrl:
the parent process decides this before any worker starts.

Groups run one after another, each in its own process: `prepare` (environment and checkpoints),
then the paths in value order. The default run's configuration comes first (exp7 from the
pre-quantized 4-bit checkpoint in batch mode), then the 4bit path (the default model's loader and
4-bit vLLM), then bf16 and Unsloth. Inside a path the steps are in value order too, so a budget
cut drops the least valuable ones.
"""
from __future__ import annotations

PREPARE = ("environment", "checkpoint", "checkpoint_nf4")
PATHS = ("exp7", "4bit", "bf16", "unsloth")
_VLLM_PATH = ("load", "vllm_start", "tool_gap", "adapter_sync", "vllm_rollout", "grpo_update",
              "logprobs_agree", "hf_rollout", "tool_rollout", "stepping", "sft_step", "release")
PATH_STEPS = {
    "exp7": ("batch_steps",),
    "4bit": _VLLM_PATH,
    "bf16": _VLLM_PATH,
    # Unsloth: its loader under the trainer's steps (the 4bit path covers serving and SFT)
    "unsloth": ("load", "logprobs_agree", "hf_rollout", "grpo_update", "tool_rollout", "release"),
}
# a step's needs inside its path; the prepare steps each path needs are added by needs()
_NEEDS = {"vllm_start": ("load",), "tool_gap": ("vllm_start",), "adapter_sync": ("vllm_start",),
          "vllm_rollout": ("vllm_start",), "stepping": ("vllm_start",), "release": ()}
STEP_NAMES = sorted({s for steps in PATH_STEPS.values() for s in steps})

# Seconds each step is expected to take (prepare steps and the path steps), used only to skip
# what would not fit --budget-s. qwen3-8b: estimates for an H100 from the shapes (no GPU has run
# this check yet; replace them with the first run's seconds); small: measured on a 2-core CPU.
ESTIMATE_S = {
    "qwen3-8b": {"environment": 15, "checkpoint": 60, "checkpoint_nf4": 90,
                 "exp7.batch_steps": 240,
                 "load": 40, "vllm_start": 90, "tool_gap": 40, "adapter_sync": 20,
                 "vllm_rollout": 30, "grpo_update": 60, "logprobs_agree": 5, "hf_rollout": 60,
                 "tool_rollout": 40, "stepping": 5, "sft_step": 20, "release": 10},
    "small": {"environment": 2, "checkpoint": 8, "checkpoint_nf4": 3, "exp7.batch_steps": 30,
              "load": 1, "vllm_start": 15, "tool_gap": 10, "adapter_sync": 1, "vllm_rollout": 60,
              "grpo_update": 1, "logprobs_agree": 1, "hf_rollout": 1, "tool_rollout": 8,
              "stepping": 1, "sft_step": 1, "release": 5},
}
PROCESS_START_S = {"qwen3-8b": 20, "small": 10}  # a worker importing torch, transformers, peft


def short(name: str) -> str:
    return name.split(".", 1)[1] if "." in name else name


def needs(name: str) -> tuple[str, ...]:
    """The steps `name` (a full name, <path>.<step> or a prepare step) needs to have run."""
    if "." not in name:
        return ("checkpoint",) if name == "checkpoint_nf4" else ()
    path, step = name.split(".", 1)
    if path in ("exp7", "4bit") and step in ("batch_steps", "load"):
        return ("checkpoint_nf4",)
    if step == "load":
        return ("checkpoint",)
    return tuple(f"{path}.{s}" for s in _NEEDS.get(step, ("load",)))


def estimate(config: str, name: str) -> float:
    table = ESTIMATE_S[config]
    return float(table.get(name, table.get(short(name), 0)))


def groups(paths: list[str]) -> list[tuple[str, list[str]]]:
    """(group, its steps' full names), in the order they run: prepare, then the paths in value
    order (whatever order --paths gives them)."""
    out = [("prepare", list(PREPARE))]
    return out + [(p, [f"{p}.{s}" for s in PATH_STEPS[p]]) for p in PATHS if p in paths]


def parse_paths(text: str) -> list[str]:
    paths = [p.strip() for p in text.split(",") if p.strip()]
    if not paths or any(p not in PATHS for p in paths):
        raise ValueError(f"--paths: each one of {', '.join(PATHS)}, got {text!r}")
    return paths


def parse_steps(text: str | None) -> set[str] | None:
    """--steps: short step names, run in every path that has them (None: all)."""
    if text is None:
        return None
    chosen = {s.strip() for s in text.split(",") if s.strip()}
    wrong = sorted(chosen - set(STEP_NAMES))
    if wrong or not chosen:
        raise ValueError(f"--steps: each one of {', '.join(STEP_NAMES)}, got {text!r}")
    return chosen


def selected(name: str, chosen: set[str] | None) -> bool:
    """Prepare steps and release always run (release frees the path's GPU memory)."""
    return chosen is None or "." not in name or short(name) in chosen or short(name) == "release"


def fits(config: str, name: str, seconds_left: float | None) -> str | None:
    """None when the step's estimate fits the time left (or there is no budget, or it is
    release, which frees memory), else why it is skipped."""
    if seconds_left is None or short(name) == "release":
        return None
    need = estimate(config, name)
    if need <= seconds_left:
        return None
    return f"would not fit --budget-s (estimated {need:.0f} s, {max(seconds_left, 0):.0f} s left)"
