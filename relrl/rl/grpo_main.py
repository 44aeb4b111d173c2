"""The GRPO command line (training/grpo_exp7_dynamic.py, training/grpo_exp10_nosft.py): flags to
settings, checks before anything loads, then the model, the engine and the trainer."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from relrl.data.dataset_io import load_dataset, questions_fingerprint
from relrl.engines import require_vllm
from relrl.grading.rewards import RewardFn
from relrl.modeling.loading import attach_lora, check_adapter_dir, check_model_source, load_adapter
from relrl.models.by_name import (
    PROMPT_TOKENS,
    check_engine_choice,
    load_model,
    make_engine,
    tool_context_tokens,
    vllm_sleep,
)
from relrl.rl.grpo_config import GRPOConfig
from relrl.rl.grpo_trainer import LOG_FILE, STATS_FILE, GRPOTrainer
from relrl.rl.health import UNHEALTHY_EXIT
from relrl.runtime import distributed
from relrl.runtime.checkpointing import run_fingerprint
from relrl.runtime.cli import UsageError, env_default, number_type
from relrl.runtime.config import SettingsParser, prepare_run_dir
from relrl.runtime.stop import exit_status
from relrl.runtime.tracking import RUN_FILES as TRACKING_FILES
from relrl.runtime.tracking import open_tracker

# ---------------------------------------------------------------------- command line
VARIANTS = {
    "exp7": {"output_dir": "outputs/grpo_exp7", "warm_start": True,
             "script": "training/grpo_exp7_dynamic.py", "exclude": ("lora_r", "lora_alpha"),
             "about": "GRPO with DAPO dynamic sampling from an SFT warm start (the study's exp7)"},
    "exp10": {"output_dir": "outputs/grpo_exp10", "warm_start": False,
              "script": "training/grpo_exp10_nosft.py", "exclude": ("sft_adapter",),
              "about": "GRPO with DAPO dynamic sampling from a fresh LoRA (the study's exp10)"},
}


def build_parser(variant: str) -> SettingsParser:
    """The flags of GRPOConfig (less what the variant does not take) and the run's actions."""
    spec = VARIANTS[variant]
    p = SettingsParser(GRPOConfig, exclude=spec["exclude"],
                       defaults={"output_dir": spec["output_dir"]}, description=spec["about"],
                       epilog=distributed.launch_help(spec["script"]))
    if spec["warm_start"]:
        fold = number_type("--fold", int, ">= 0")
        p.add_argument("--fold", type=fold, default=env_default("FOLD", None, fold),
                       help="use fold_<k> in --sft-adapter or in its adapters/ folder, as the "
                       "k-fold SFT run writes them (env FOLD)")
    p.add_argument("--resume", nargs="?", const=True, default=None, metavar="CHECKPOINT",
                   help="continue from CHECKPOINT, or from the output folder's latest when none "
                   "is named")
    p.add_argument("--overwrite", action="store_true",
                   help="delete the output folder's checkpoints first")
    return p


def resolve_sft_adapter(adapter: str | None, fold: int | None) -> str:
    if not adapter:
        raise UsageError("--sft-adapter: required (or set SFT_LORA_PATH); "
                         "use grpo_exp10_nosft.py to start from a fresh LoRA")
    path = Path(adapter)
    # sft_qwen3_kfold.py writes <output>/adapters/fold_<k>/; a rerun's config.yaml names the
    # fold's own folder, which FOLD may still point at
    if fold is not None and path.name != f"fold_{fold}":
        found = [p / f"fold_{fold}" for p in (path, path / "adapters")]
        found = [p for p in found if p.is_dir()]
        if not found:
            raise UsageError(f"--fold: no fold_{fold} adapter folder in {path} "
                             f"or {path / 'adapters'}")
        path = found[0]
    check_adapter_dir(path, "--sft-adapter")
    return str(path)


def main(variant: str, argv=None, *, reward_fn: RewardFn | None = None) -> int:
    """Validate everything (flags, datasets, adapter, output folder), then load and train.
    0 when the run ends; 75 (STOPPED_EXIT) when a signal stopped it, to be resumed with
    --resume; 3 when the health check stopped it."""
    spec = VARIANTS[variant]
    cfg, args = build_parser(variant).parse(argv)
    cfg.check()
    if not cfg.dataset:
        raise UsageError("--dataset: required (or set DATASET_PATH)")
    if spec["warm_start"]:  # config.yaml then names the fold's own folder
        cfg.sft_adapter = resolve_sft_adapter(cfg.sft_adapter, args.fold)
    check_model_source(cfg.model)
    if cfg.rollout_engine == "vllm":
        require_vllm()  # before anything is loaded
    check_engine_choice(cfg.rollout_engine, cfg.model, cfg.load_in_4bit, cfg.unsloth)
    rows = load_dataset(cfg.dataset)
    val_rows = load_dataset(cfg.val_dataset)[: cfg.val_limit] if cfg.val_dataset else []
    settings = {**cfg.settings(), "dataset_fingerprint": questions_fingerprint(rows),
                "val_fingerprint": questions_fingerprint(val_rows) if val_rows else None}
    fingerprint = run_fingerprint(settings)
    distributed.setup()  # torchrun / srun: one rank per process; else a no-op
    # A missing package stops every rank before anything is written or loaded (the tracker
    # writes nothing before its first step); rank 0 alone reports.
    tracker = open_tracker(cfg.report_to, cfg.output_dir, run_name=Path(cfg.output_dir).name,
                           config=settings, main=distributed.is_main())
    resume_from = distributed.on_main(lambda: prepare_run_dir(
        cfg, cfg.output_dir, fingerprint, resume=args.resume, overwrite=args.overwrite,
        run_files=(LOG_FILE, STATS_FILE, *TRACKING_FILES), exclude=spec["exclude"]))

    torch.manual_seed(cfg.seed)  # a new LoRA's initial weights (the same on every rank)
    model, tokenizer = load_model(cfg.model, load_in_4bit=cfg.load_in_4bit,
                                  use_unsloth=cfg.unsloth, seed=cfg.seed,
                                  max_new_tokens=cfg.max_new_tokens, tools=cfg.tools,
                                  max_tool_calls=cfg.max_tool_calls)  # Unsloth's max_seq_length
    if cfg.sft_adapter:
        model = load_adapter(model, cfg.sft_adapter, trainable=True, flag="--sft-adapter")
    else:
        model = attach_lora(model, r=cfg.lora_r, alpha=cfg.lora_alpha)
    world = distributed.world()
    if distributed.is_main():
        ranks = f", {world} ranks" if world > 1 else ""
        # nothing has to divide, but ranks without a share only wait: say so
        per_call = cfg.grad_accum if cfg.sampling_mode == "step" else cfg.gen_batch
        chunks = math.ceil(cfg.grad_accum * cfg.num_generations / cfg.train_micro_batch)
        if world > per_call:
            print(f"warning: {world} ranks but at most {per_call} questions per generation call "
                  f"({'--grad-accum' if cfg.sampling_mode == 'step' else '--gen-batch'}): "
                  "some ranks will wait; --sampling-mode batch with --gen-batch >= the number "
                  "of ranks keeps them all busy", file=sys.stderr, flush=True)
        if world > chunks:
            print(f"warning: {world} ranks but {chunks} micro-batches per update: lower "
                  "--train-micro-batch to give every rank one", file=sys.stderr, flush=True)
        print(f"GRPO {variant}: {cfg.model}"
              f"{' + ' + cfg.sft_adapter if cfg.sft_adapter else ''}, {len(rows)} questions, "
              f"G={cfg.num_generations}, {cfg.rollout_engine} rollouts, {cfg.loss} loss, "
              f"{cfg.max_useful_steps} useful steps{ranks}, fingerprint {fingerprint}", flush=True)
    try:
        tool_tokens = tool_context_tokens(tokenizer, cfg.tools, cfg.max_tool_calls)
        sleep = vllm_sleep(cfg.vllm_sleep, model, cfg.vllm_gpu_memory_utilization,
                           cfg.train_micro_batch, cfg.max_new_tokens, tool_tokens)
        # vLLM's scheduler sized by this rank's largest generation call (training or
        # validation), its KV check by a training call at full length
        questions = cfg.grad_accum if cfg.sampling_mode == "step" else cfg.gen_batch
        training = math.ceil(questions / world) * cfg.num_generations
        validation = math.ceil(len(val_rows) / world) * cfg.val_samples
        with make_engine(cfg.rollout_engine, model, tokenizer, source=cfg.model, seed=cfg.seed,
                         max_new_tokens=cfg.max_new_tokens, sleep=sleep,
                         gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
                         max_sequences=max(training, validation),
                         kv_demand=(training, PROMPT_TOKENS + cfg.max_new_tokens + tool_tokens)) as engine:
            trainer = GRPOTrainer(cfg, model, tokenizer, rows, val_rows, reward_fn=reward_fn,
                                  settings=settings, fingerprint=fingerprint, engine=engine,
                                  tracker=tracker)
            result = trainer.run(resume_from)
        # every rank waits for rank 0's statistics.json: a launcher (torchrun, srun
        # --kill-on-bad-exit) ends the other ranks as soon as one exits non-zero (75, 3)
        distributed.barrier()
    finally:
        tracker.close()
        distributed.cleanup()
    if result["stopped_by"].startswith("unhealthy"):
        return UNHEALTHY_EXIT
    return exit_status(result["stopped_by"])  # STOPPED_EXIT (75) when a signal stopped it
