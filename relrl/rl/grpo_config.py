"""Every setting of a GRPO run (exp7 and exp10): the study's defaults, checks that name the flag, and
the settings that make two runs the same run."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from relrl.engines import (
    DEFAULT_VLLM_MEMORY,
    ENGINES,
    check_memory_fraction,
)
from relrl.grading.scoring import TOLERANCE_RULES
from relrl.rl.dynamic_sampling import (
    INFORMATIVE_BY,
)
from relrl.rl.grpo_loss import (
    ADVANTAGE_MODES,
    AGGREGATIONS,
)
from relrl.runtime.cli import (
    UsageError,
)

DEFAULT_MODEL = "unsloth/Qwen3-8B-unsloth-bnb-4bit"


@dataclass
class GRPOConfig:
    """Every setting of a run; defaults are the study's (exp7)."""
    model: str = DEFAULT_MODEL
    dataset: str = ""
    val_dataset: str | None = None
    sft_adapter: str | None = None  # warm start: this adapter is trained further
    output_dir: str = "outputs/grpo_exp7"
    seed: int = 0
    lora_r: int = 32  # a new LoRA's rank and alpha (a warm-start adapter keeps its own)
    lora_alpha: int = 32
    load_in_4bit: bool | None = None
    unsloth: bool = False
    # rollouts
    num_generations: int = 4
    temperature: float = 1.0
    top_p: float = 0.95
    top_k: int = 0  # 0: off (the study's generate inherited Qwen3's 20: see the README)
    max_new_tokens: int = 3072
    gen_micro_batch: int = 32
    tolerance: float = 0.05
    tolerance_rule: str = "study"  # or "complement" (relrl.grading.grader)
    reward: str = "grader"  # or "digit-share", a toy reward for smoke tests
    rollout_engine: str = "hf"  # or "vllm"
    vllm_gpu_memory_utilization: float = DEFAULT_VLLM_MEMORY
    # dynamic sampling
    sampling_mode: str = "step"  # "step": one question per call; "batch": gen_batch per call
    gen_batch: int = 8
    max_resample: int = 10  # draws (step mode) or rounds (batch mode) before a step gives up
    max_total_attempts: int = 1000  # groups generated over the whole run
    pass_rate_sampler: bool = False
    pass_rate_scheme: str = "plug-in"  # or "predictive" (relrl.rl.dynamic_sampling.SCHEMES)
    # which groups train (relrl.rl.dynamic_sampling): "correct", or "reward" (the study's rule);
    # None: "correct", but "reward" for the toy digit-share reward, which is never right
    informative_by: str | None = None
    # optimisation
    max_useful_steps: int = 200
    learning_rate: float = 1e-5
    weight_decay: float = 0.1
    warmup_ratio: float = 0.1
    grad_accum: int = 4  # informative groups per optimiser update
    train_micro_batch: int = 4  # completions per forward/backward pass: memory, not maths
    max_grad_norm: float = 0.1
    num_iterations: int = 1
    # loss
    advantage: str = "group_norm"
    clip_low: float = 0.2
    clip_high: float = 0.28
    beta: float = 0.0
    aggregation: str = "token_mean"
    overlong_buffer: int = 0  # DAPO soft overlong penalty over the last N tokens (0: off)
    mask_truncated: bool = False  # truncated completions add nothing to the loss
    tis_cap: float = 2.0  # truncated importance sampling cap on trainer/sampler (0: off)
    # validation and checkpoints
    save_every: int = 20
    val_every: int = 20
    val_samples: int = 1  # completions per validation question (accuracy over all of them)
    patience: int = 0  # stop after this many validations without a new best (0: never)

    def __post_init__(self):
        if self.informative_by is None:
            self.informative_by = "reward" if self.reward == "digit-share" else "correct"

    def check(self) -> None:
        """Refuse impossible settings, naming the flag, before anything is loaded."""
        def need(ok, flag, why):
            if not ok:
                raise UsageError(f"{flag}: {why}")
        need(self.num_generations >= 2, "--num-generations", "GRPO compares completions within "
             f"a group, so G must be >= 2, got {self.num_generations}")
        need(self.clip_low >= 0, "--clip-low", f"must be >= 0, got {self.clip_low}")
        need(self.clip_low < 1, "--clip-low", f"must be < 1, got {self.clip_low}")
        need(self.clip_high >= 0, "--clip-high", f"must be >= 0, got {self.clip_high}")
        need(self.beta >= 0, "--beta", f"must be >= 0, got {self.beta}")
        need(self.learning_rate > 0, "--learning-rate", f"must be > 0, got {self.learning_rate}")
        need(0 <= self.warmup_ratio < 1, "--warmup-ratio",
             f"must be in [0, 1), got {self.warmup_ratio}")
        need(self.max_grad_norm > 0, "--max-grad-norm", f"must be > 0, got {self.max_grad_norm}")
        need(self.weight_decay >= 0, "--weight-decay", f"must be >= 0, got {self.weight_decay}")
        need(self.temperature > 0, "--temperature", f"must be > 0, got {self.temperature}")
        need(0 < self.top_p <= 1, "--top-p", f"must be in (0, 1], got {self.top_p}")
        need(self.top_k >= 0, "--top-k", f"must be >= 1 (or 0: off), got {self.top_k}")
        need(0 <= self.overlong_buffer < self.max_new_tokens, "--overlong-buffer",
             f"must be in [0, max_new_tokens), got {self.overlong_buffer}")
        need(self.tolerance >= 0, "--tolerance", f"must be >= 0, got {self.tolerance}")
        need(self.tolerance_rule in TOLERANCE_RULES, "--tolerance-rule", "study or complement")
        need(self.advantage in ADVANTAGE_MODES, "--advantage", f"one of {ADVANTAGE_MODES}")
        need(self.aggregation in AGGREGATIONS, "--aggregation", f"one of {AGGREGATIONS}")
        need(self.sampling_mode in ("step", "batch"), "--sampling-mode", "step or batch")
        need(self.informative_by in INFORMATIVE_BY, "--informative-by", "correct or reward")
        need(self.reward in ("grader", "digit-share"), "--reward", "grader or digit-share")
        for name in ("max_new_tokens", "gen_micro_batch", "gen_batch", "max_resample",
                     "max_total_attempts", "max_useful_steps", "grad_accum", "num_iterations",
                     "train_micro_batch", "save_every", "val_every", "val_samples", "lora_r",
                     "lora_alpha"):
            flag = "--max-total-steps" if name == "max_total_attempts" else \
                "--" + name.replace("_", "-")
            need(getattr(self, name) >= 1, flag, f"must be >= 1, got {getattr(self, name)}")
        need(self.patience >= 0, "--patience", f"must be >= 0, got {self.patience}")
        need(self.tis_cap >= 0, "--tis-cap", f"must be >= 0 (0: off), got {self.tis_cap}")
        need(self.rollout_engine in ENGINES, "--rollout-engine", f"one of {ENGINES}")
        check_memory_fraction(self.vllm_gpu_memory_utilization)

    def settings(self) -> dict:
        """The settings that make two runs the same run. Left out: the output folder, the
        micro-batch sizes and vLLM's memory share (speed and memory only) and the cap on
        generated groups."""
        out = dataclasses.asdict(self)
        for key in ("output_dir", "max_total_attempts", "gen_micro_batch", "train_micro_batch",
                    "vllm_gpu_memory_utilization"):
            out.pop(key)
        # Added later: left out at their defaults, so runs from before still resume.
        for key, default in (("pass_rate_scheme", "plug-in"), ("val_samples", 1),
                             ("tolerance_rule", "study"), ("top_k", 0)):
            if out[key] == default:
                out.pop(key)
        if out["informative_by"] == "reward":  # as runs from before the option judged groups
            out.pop("informative_by")
        if self.sft_adapter:  # the warm-start adapter brings its own rank and alpha
            out.pop("lora_r"), out.pop("lora_alpha")
        return out
