"""Every setting of a GRPO run (exp7 and exp10), written once: its default (the study's), its help
and flag (relrl.runtime.config makes the command line and the recipes from them), the checks
before anything loads, and the settings that make two runs the same run."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from relrl.engines import DEFAULT_VLLM_MEMORY, ENGINES, MEMORY_FRACTION_RANGE, SLEEP_MODES, default_engine
from relrl.grading.scoring import TOLERANCE_RULES
from relrl.rl.dynamic_sampling import INFORMATIVE_BY, SCHEMES
from relrl.rl.grpo_loss import ADVANTAGE_MODES, AGGREGATIONS, OBJECTIVES, TIS_MODES
from relrl.rl.health import HEALTH_DEFAULTS
from relrl.runtime.cli import UsageError
from relrl.runtime.config import LOAD_IN_4BIT, check_fields, fingerprint_settings, flag_of, setting
from relrl.runtime.tracking import REPORT_TO
from relrl.tools.protocol import DEFAULT_MAX_TOOL_CALLS, TOOL_CHOICES

DEFAULT_MODEL = "unsloth/Qwen3-8B-unsloth-bnb-4bit"
ROLLOUTS, SAMPLING, OPTIMISATION = "rollouts", "dynamic sampling", "optimisation"
LOSS, VALIDATION = "loss", "validation and checkpoints"
HEALTH = "health check (relrl/rl/health.py)"


def _cuda() -> bool:
    return torch.cuda.is_available()


@dataclass
class GRPOConfig:
    """Every setting of a run; defaults are the study's (exp7)."""
    model: str = setting(DEFAULT_MODEL, "base model: hub id, folder, tiny, tiny-tool or tiny-random")
    dataset: str = setting("", "training questions, JSONL (the study: the 266 mixed questions)",
                           env="DATASET_PATH")
    val_dataset: str | None = setting(None, "validation questions: accuracy every --val-every "
                                      "useful steps, best adapter kept in best/")
    sft_adapter: str | None = setting(None, "SFT LoRA to start from and train further; required",
                                      env="SFT_LORA_PATH")
    output_dir: str = setting("outputs/grpo_exp7", "checkpoints, logs, statistics",
                              env="OUTPUT_DIR", fingerprint=False)
    seed: int = setting(0, "run seed", range=">= 0")
    # a new LoRA's rank and alpha (a warm-start adapter keeps its own)
    lora_r: int = setting(32, "LoRA rank", positive=True)
    lora_alpha: int = setting(32, "LoRA alpha", positive=True)
    load_in_4bit: bool | None = setting(None, "auto: a pre-quantized checkpoint in 4-bit anywhere, a "
                                        "full-precision one in 4-bit NF4 on CUDA and float32 on the "
                                        "CPU; yes: quantize wherever bitsandbytes runs; no: full "
                                        "precision", choices=LOAD_IN_4BIT)
    unsloth: bool = setting(False, "load through Unsloth (CUDA only)")
    # rollouts
    rollout_engine: str = setting(
        "hf", "hf: batched Hugging Face generate; hf-merged: the same on a copy of the policy "
        "with its LoRA merged, refreshed before each rollout (one more copy of the adapted "
        "weights; not for a 4-bit base or Unsloth; docs/engines.md); vllm: vLLM (continuous batching, "
        "paged KV cache, LoRA served unmerged)", choices=ENGINES, group=ROLLOUTS,
        default_here=default_engine, default_text="vllm on a CUDA machine where vLLM is "
        "installed, else hf")
    vllm_gpu_memory_utilization: float = setting(
        DEFAULT_VLLM_MEMORY, "share of GPU memory vLLM may take for weights and KV cache (the "
        "default leaves room for the 4-bit policy and its update; ~0.85 when nothing else "
        "shares the GPU)", group=ROLLOUTS, fingerprint=False, range=MEMORY_FRACTION_RANGE)
    vllm_sleep: str = setting(
        "auto", "put vLLM to sleep (weights to pinned host memory, KV cache freed) during each "
        "update: on, off, or auto: only when its memory share and the update's estimated peak "
        "do not fit the GPU together (docs/engines.md); a no-op without CUDA",
        choices=SLEEP_MODES, group=ROLLOUTS, fingerprint=False)
    num_generations: int = setting(4, "completions per question (G)", aliases=("-G",),
                                   group=ROLLOUTS, range=">= 2")
    temperature: float = setting(1.0, "sampling temperature: must be 1, the temperature of the "
                                 "trainer's and vLLM's log-probs", group=ROLLOUTS, range="> 0")
    top_p: float = setting(0.95, "nucleus sampling", group=ROLLOUTS, range="(0, 1]")
    # the study's generate inherited Qwen3's 20 (README); a truncation like top-p, which biases
    # the trainer/sampler ratio of --tis-cap since vLLM reports log-probs before truncation
    top_k: int = setting(0, "sample among the K likeliest tokens only (0: off)", group=ROLLOUTS, range=">= 0")
    max_new_tokens: int = setting(3072, "max completion length", positive=True, group=ROLLOUTS,
                                  default_here=lambda: 3072 if _cuda() else 256,
                                  default_text="3072 on CUDA, 256 on the CPU")
    gen_micro_batch: int = setting(32, "sequences per generate call: speed only", positive=True,
                                   group=ROLLOUTS, fingerprint=False)
    tolerance: float = setting(0.05, "relative error counted correct", group=ROLLOUTS, range="[0, 1]")
    tolerance_rule: str = setting(
        "study", "study: relative error, the study's rule; complement: a probability target t "
        "is judged on min(t, 1 - t), a reliability near 1 on its failure probability",
        choices=TOLERANCE_RULES, group=ROLLOUTS)
    reward: str = setting("grader", "grader: the study's graded answer reward; digit-share: a "
                          "toy reward (share of digits) for smoke tests with tiny-random",
                          choices=("grader", "digit-share"), group=ROLLOUTS)
    tools: str = setting(
        "none", "none: one turn, the study's; calculator: the model may call a calculator, whose "
        "answers are inserted between turns and kept out of the loss (docs/training.md)",
        choices=TOOL_CHOICES, group=ROLLOUTS)
    max_tool_calls: int = setting(DEFAULT_MAX_TOOL_CALLS, "with --tools: calls a completion may "
                                  "make (one past the limit is not run)", group=ROLLOUTS, range=">= 0")
    overlong_buffer: int = setting(0, "DAPO soft overlong penalty over the last N of the model's "
                                   "own tokens (0: off)", group=ROLLOUTS, range=">= 0")
    mask_truncated: bool = setting(False, "truncated completions add nothing to the loss (DAPO "
                                   "overlong filtering)", group=ROLLOUTS)
    # dynamic sampling
    dynamic_sampling: bool = setting(
        True, "on: groups whose answers are all right or all wrong are dropped and redrawn "
        "(DAPO); off: plain GRPO, every group generated trains (uninformative ones with zero "
        "advantage), so --max-useful-steps counts groups generated",
        choices={"on": True, "off": False}, group=SAMPLING)
    sampling_mode: str = setting(
        "step", "step: one question per generation call, redrawn until informative (the "
        "study); batch: --gen-batch questions per call (the DAPO paper; fewer generation calls "
        "per update: docs/engines.md)", choices=("step", "batch"), group=SAMPLING,
        default_here=lambda: "batch" if _cuda() else "step",
        default_text="batch on CUDA, step on the CPU")
    gen_batch: int = setting(8, "questions per generation call in batch mode", positive=True,
                             group=SAMPLING)
    max_resample: int = setting(10, "draws (batch mode: rounds) before a step gives up",
                                positive=True, group=SAMPLING)
    max_total_attempts: int = setting(1000, "cap on groups generated, useful or not",
                                      flag="--max-total-steps", positive=True,
                                      env="MAX_TOTAL_STEPS", group=SAMPLING, fingerprint=False)
    # None: "correct", but "reward" for the toy digit-share reward, which is never right
    informative_by: str | None = setting(
        None, "which groups train: correct: some of the G answers right and some wrong; "
        "reward: any two rewards differ, the study's rule, under which a group told apart only "
        "by format or partial credit trains too", choices=INFORMATIVE_BY, group=SAMPLING,
        default_text="correct; reward with --reward digit-share, whose answers are never right")
    pass_rate_sampler: bool = setting(False, "prefer questions whose recent pass rate makes an "
                                      "informative group likely", group=SAMPLING)
    pass_rate_scheme: str = setting(
        "plug-in", "with --pass-rate-sampler: plug-in (v1, weighted draws) or predictive (v2, "
        "the likeliest informative; benchmarks/sampler_simulation.py)", choices=SCHEMES,
        group=SAMPLING)
    # optimisation
    max_useful_steps: int = setting(200, "informative groups to train on", positive=True,
                                    env="MAX_USEFUL_STEPS", group=OPTIMISATION)
    learning_rate: float = setting(1e-5, "peak learning rate", env="LEARNING_RATE",
                                   group=OPTIMISATION, range="> 0")
    weight_decay: float = setting(0.1, "AdamW weight decay", group=OPTIMISATION, range=">= 0")
    warmup_ratio: float = setting(0.1, "share of updates with linear warmup, then cosine",
                                  group=OPTIMISATION, range="[0, 1)")
    grad_accum: int = setting(4, "informative groups per optimiser update", positive=True,
                              group=OPTIMISATION)
    train_micro_batch: int = setting(4, "completions per forward/backward pass: memory only, "
                                     "the same update", positive=True, group=OPTIMISATION,
                                     fingerprint=False)
    max_grad_norm: float = setting(0.1, "gradient clipping norm", group=OPTIMISATION, range="> 0")
    num_iterations: int = setting(1, "updates per rollout batch", positive=True,
                                  group=OPTIMISATION)
    # loss
    loss: str = setting("grpo", "the policy objective: grpo (per-token clipped ratio, the study's), "
                        "gspo (one length-normalised ratio per completion) or cispo (clipped, "
                        "detached importance weight on every token's log-prob); formulas and "
                        "clip settings in docs/training.md", choices=OBJECTIVES, group=LOSS)
    advantage: str = setting("group_norm", "group_norm: (r - mean) / (std + eps); mean_only: "
                             "r - mean (Dr. GRPO)", choices=ADVANTAGE_MODES, group=LOSS)
    clip_low: float = setting(0.2, "lower clip of the policy ratio", group=LOSS, range="[0, 1]")
    clip_high: float = setting(0.28, "upper clip of the policy ratio (clip-higher)", group=LOSS, range=">= 0")
    beta: float = setting(0.0, "k3 KL coefficient to the adapter-off reference", env="BETA",
                          group=LOSS, range=">= 0")
    aggregation: str = setting("token_mean", "token_mean (DAPO), seq_mean_token_mean (GRPO), "
                               "seq_sum_constant (Dr. GRPO)", choices=AGGREGATIONS, group=LOSS)
    tis_cap: float = setting(
        2.0, "truncated importance sampling: each token's surrogate weighted by "
        "min(p_trainer / p_sampler, C), with the vLLM engine's sampler log-probs (0: off; the "
        "hf engine samples from the trainer itself: no weight)", group=LOSS, range=">= 0")
    tis_mode: str = setting(
        "token", "how --tis-cap corrects: token: each token's ratio capped at C; sequence-mask: "
        "the completion's ratio (product over its tokens) weights it, and a completion whose "
        "ratio exceeds C is left out of the policy term", choices=TIS_MODES, group=LOSS)
    # validation and checkpoints
    save_every: int = setting(20, "checkpoint every N useful steps", positive=True,
                              group=VALIDATION)
    val_every: int = setting(20, "validate every N useful steps", positive=True,
                             group=VALIDATION)
    val_samples: int = setting(1, "completions per validation question; more steadies the "
                               "choice of the best checkpoint", positive=True, group=VALIDATION)
    # the validation questions' fingerprint already counts the ones kept
    val_limit: int | None = setting(None, "validate on the first N validation questions only",
                                    positive=True, group=VALIDATION, fingerprint=False)
    patience: int = setting(0, "stop after N validations without a new best (0: never)",
                            group=VALIDATION, range=">= 0")
    # health check: fingerprint=False, as they change when a run stops, not what it learns
    health_check: bool = setting(True, "warn in one line when the last --health-window groups "
                                 "show mostly truncated or zero-signal completions, and stop "
                                 "the run (checkpoint, exit status 3) past the stop limits",
                                 group=HEALTH, fingerprint=False)
    health_window: int = setting(HEALTH_DEFAULTS["window"], "groups generated that the shares "
                                 "are measured over", positive=True, group=HEALTH,
                                 fingerprint=False)
    health_warn_truncated: float = setting(
        HEALTH_DEFAULTS["warn_truncated"], "warn when this share of completions is cut at "
        "--max-new-tokens", group=HEALTH, fingerprint=False, range="(0, 1]")
    health_stop_truncated: float = setting(
        HEALTH_DEFAULTS["stop_truncated"], "stop when this share is truncated", group=HEALTH,
        fingerprint=False, range="(0, 1]")
    health_warn_zero_signal: float = setting(
        HEALTH_DEFAULTS["warn_zero_signal"], "warn when this share of groups is all right or "
        "all wrong", group=HEALTH, fingerprint=False, range="(0, 1]")
    health_stop_zero_signal: float = setting(
        HEALTH_DEFAULTS["stop_zero_signal"], "stop when this share is all right or all wrong",
        group=HEALTH, fingerprint=False, range="(0, 1]")
    health_warn_wasted: float = setting(
        HEALTH_DEFAULTS["warn_wasted"], "warn when this share of groups gives no useful step "
        "(zero-signal or the same reward throughout)", group=HEALTH, fingerprint=False, range="(0, 1]")
    health_stop_wasted: float = setting(
        HEALTH_DEFAULTS["stop_wasted"], "stop when this share gives no useful step",
        group=HEALTH, fingerprint=False, range="(0, 1]")
    report_to: str = setting("none", "also log the training curves to TensorBoard "
                             "(<output-dir>/tensorboard) or Weights & Biases (honours "
                             "WANDB_MODE=offline)", choices=REPORT_TO, fingerprint=False)

    def __post_init__(self):
        if self.informative_by is None:
            self.informative_by = "reward" if self.reward == "digit-share" else "correct"

    def check(self) -> None:
        """Refuse impossible settings, naming the flag, before anything is loaded: each field's
        declared range and choices (check_fields, also run when the flags are parsed), then
        what depends on two settings."""
        def need(ok, name, why):
            if not ok:
                raise UsageError(f"{flag_of(self, name)}: {why}")
        check_fields(self)
        if self.loss != "cispo":  # 1: no floor on the weight, MiniMax-M1's setting
            need(self.clip_low < 1, "clip_low", f"must be in [0, 1), got {self.clip_low}"
                 " (1, no lower bound, is for --loss cispo only)")
        need(self.overlong_buffer < self.max_new_tokens, "overlong_buffer",
             f"must be in [0, max_new_tokens), got {self.overlong_buffer}")
        need(self.tis_mode == "token" or self.tis_cap > 0, "tis_mode",
             f"{self.tis_mode} needs --tis-cap > 0 (0 turns the correction off)")
        # The loss, the KL, the entropy and vLLM's raw log-probs are all of the temperature-1
        # distribution; sampling at another temperature would make every ratio off-policy.
        need(self.temperature == 1, "temperature", f"must be 1, got {self.temperature}: the "
             "trainer's log-probs (the loss, the KL) and vLLM's are at temperature 1")
        for kind in ("truncated", "zero_signal", "wasted"):
            warn, stop = getattr(self, f"health_warn_{kind}"), getattr(self, f"health_stop_{kind}")
            need(warn <= stop, f"health_warn_{kind}",
                 f"must be in (0, {flag_of(self, f'health_stop_{kind}')} {stop}], got {warn}")

    def settings(self) -> dict:
        """The settings that make two runs the same run: the fields not marked speed, memory
        or bookkeeping only (fingerprint=False)."""
        out = fingerprint_settings(self)
        # Settings added after runs were recorded: left out at their defaults, so those resume.
        for key, default in (("pass_rate_scheme", "plug-in"), ("val_samples", 1),
                             ("tolerance_rule", "study"), ("top_k", 0), ("tools", "none"),
                             ("max_tool_calls", DEFAULT_MAX_TOOL_CALLS), ("loss", "grpo"),
                             ("tis_mode", "token"), ("dynamic_sampling", True)):
            if out[key] == default:
                out.pop(key)
        if self.tools == "none":  # no calls are made, so their limit changes nothing
            out.pop("max_tool_calls", None)
        if out["informative_by"] == "reward":  # as runs from before the option judged groups
            out.pop("informative_by")
        if self.sft_adapter:  # the warm-start adapter brings its own rank and alpha
            out.pop("lora_r"), out.pop("lora_alpha")
        return out
