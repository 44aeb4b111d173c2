"""The GRPO command line (training/grpo_exp7_dynamic.py, training/grpo_exp10_nosft.py): flags to
settings, checks before anything loads, then the model, the engine and the trainer."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

from relrl.data.dataset_io import load_dataset, questions_fingerprint
from relrl.engines import (
    TOP_K_HELP,
    add_engine_args,
    add_sleep_arg,
    require_vllm,
)
from relrl.grading.rewards import RewardFn
from relrl.modeling.loading import (
    attach_lora,
    check_adapter_dir,
    check_model_source,
    load_adapter,
)
from relrl.models.by_name import load_model, make_engine, vllm_sleep
from relrl.rl.dynamic_sampling import (
    INFORMATIVE_BY,
    SCHEMES,
)
from relrl.rl.grpo_config import GRPOConfig
from relrl.rl.grpo_loss import (
    ADVANTAGE_MODES,
    AGGREGATIONS,
)
from relrl.rl.grpo_trainer import LOG_FILE, STATS_FILE, GRPOTrainer
from relrl.runtime import distributed
from relrl.runtime.checkpointing import (
    prepare_output_dir,
    run_fingerprint,
)
from relrl.runtime.cli import (
    ArgumentParser,
    UsageError,
    add_load_args,
    add_tolerance_rule_arg,
    env_default,
    load_in_4bit_flag,
    positive_int,
)
from relrl.runtime.tracking import RUN_FILES as TRACKING_FILES
from relrl.runtime.tracking import add_report_to_arg, open_tracker

# ---------------------------------------------------------------------- command line
VARIANTS = {
    "exp7": {"output_dir": "outputs/grpo_exp7", "warm_start": True,
             "about": "GRPO with DAPO dynamic sampling from an SFT warm start (the study's exp7)"},
    "exp10": {"output_dir": "outputs/grpo_exp10", "warm_start": False,
              "about": "GRPO with DAPO dynamic sampling from a fresh LoRA (the study's exp10)"},
}


def build_parser(variant: str):
    spec, d = VARIANTS[variant], GRPOConfig()
    script = "training/grpo_exp7_dynamic.py" if spec["warm_start"] else \
        "training/grpo_exp10_nosft.py"
    p = ArgumentParser(description=spec["about"], epilog=distributed.launch_help(script),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    a = p.add_argument
    a("--model", default=d.model, help=f"base model: hub id, folder, tiny or tiny-random "
      f"(default {d.model})")
    a("--dataset", default=env_default("DATASET_PATH", None),
      help="training questions, JSONL (env DATASET_PATH; the study: the 266 mixed questions)")
    a("--val-dataset", default=None, help="validation questions: accuracy every --val-every "
      "useful steps, best adapter kept in best/")
    if spec["warm_start"]:
        a("--sft-adapter", default=env_default("SFT_LORA_PATH", None),
          help="SFT LoRA to start from and train further (env SFT_LORA_PATH); required")
        a("--fold", type=int, default=env_default("FOLD", None, int),
          help="use fold_<k> in --sft-adapter or in its adapters/ folder, as the k-fold "
          "SFT run writes them (env FOLD)")
    else:
        a("--lora-r", type=positive_int("--lora-r"), default=d.lora_r, help="LoRA rank (32)")
        a("--lora-alpha", type=positive_int("--lora-alpha"), default=d.lora_alpha,
          help="LoRA alpha (32)")
    a("--output-dir", default=env_default("OUTPUT_DIR", spec["output_dir"]),
      help=f"checkpoints, logs, statistics (env OUTPUT_DIR; default {spec['output_dir']})")
    a("--resume", nargs="?", const=True, default=None, metavar="CHECKPOINT",
      help="continue from CHECKPOINT, or from the output folder's latest when none is named")
    a("--overwrite", action="store_true", help="delete the output folder's checkpoints first")
    a("--seed", type=int, default=d.seed, help="run seed (0)")
    add_load_args(p)
    g = p.add_argument_group("rollouts")
    add_engine_args(g)
    add_sleep_arg(g)
    g.add_argument("--num-generations", "-G", type=int, default=d.num_generations,
                   help="completions per question (4)")
    g.add_argument("--temperature", type=float, default=d.temperature, help="(1.0)")
    g.add_argument("--top-p", type=float, default=d.top_p, help="(0.95)")
    g.add_argument("--top-k", type=int, default=d.top_k, help=TOP_K_HELP)
    g.add_argument("--max-new-tokens", type=positive_int("--max-new-tokens"), default=None,
                   help="max completion length (3072 on CUDA, 256 on the CPU)")
    g.add_argument("--gen-micro-batch", type=positive_int("--gen-micro-batch"),
                   default=d.gen_micro_batch, help="sequences per generate call (32): speed only")
    g.add_argument("--tolerance", type=float, default=d.tolerance,
                   help="relative error counted correct (0.05)")
    add_tolerance_rule_arg(g)
    g.add_argument("--reward", choices=("grader", "digit-share"), default=d.reward,
                   help="grader: the study's graded answer reward; digit-share: a toy reward "
                   "(share of digits) for smoke tests with tiny-random")
    g.add_argument("--overlong-buffer", type=int, default=d.overlong_buffer,
                   help="DAPO soft overlong penalty over the last N tokens (0: off)")
    g.add_argument("--mask-truncated", action="store_true",
                   help="truncated completions add nothing to the loss (DAPO overlong filtering)")
    g = p.add_argument_group("dynamic sampling")
    g.add_argument("--sampling-mode", choices=("step", "batch"), default=None,
                   help="step: one question per generation call, redrawn until informative (the "
                   "study); batch: --gen-batch questions per call (the DAPO paper). Default batch "
                   "on CUDA (fewer generation calls per update: docs/engines.md), step on the CPU")
    g.add_argument("--gen-batch", type=positive_int("--gen-batch"), default=d.gen_batch,
                   help="questions per generation call in batch mode (8)")
    g.add_argument("--max-resample", type=positive_int("--max-resample"), default=d.max_resample,
                   help="draws (batch mode: rounds) before a step gives up (10)")
    g.add_argument("--max-total-steps", type=positive_int("--max-total-steps"),
                   default=env_default("MAX_TOTAL_STEPS", d.max_total_attempts, int),
                   help="cap on groups generated, useful or not (env MAX_TOTAL_STEPS; 1000)")
    g.add_argument("--informative-by", choices=INFORMATIVE_BY, default=None,
                   help="which groups train: correct (default): some of the G answers right and "
                   "some wrong; reward: any two rewards differ, the study's rule, under which a "
                   "group told apart only by format or partial credit trains too (the default "
                   "with --reward digit-share, whose answers are never right)")
    g.add_argument("--pass-rate-sampler", action="store_true",
                   help="prefer questions whose recent pass rate makes an informative group likely")
    g.add_argument("--pass-rate-scheme", choices=SCHEMES, default=d.pass_rate_scheme,
                   help="with --pass-rate-sampler: plug-in (v1, weighted draws) or predictive "
                   "(v2, the likeliest informative; benchmarks/sampler_simulation.py)")
    g = p.add_argument_group("optimisation")
    g.add_argument("--max-useful-steps", type=positive_int("--max-useful-steps"),
                   default=env_default("MAX_USEFUL_STEPS", d.max_useful_steps, int),
                   help="informative groups to train on (env MAX_USEFUL_STEPS; 200)")
    g.add_argument("--learning-rate", type=float,
                   default=env_default("LEARNING_RATE", d.learning_rate, float),
                   help="(env LEARNING_RATE; 1e-5)")
    g.add_argument("--weight-decay", type=float, default=d.weight_decay, help="AdamW (0.1)")
    g.add_argument("--warmup-ratio", type=float, default=d.warmup_ratio,
                   help="share of updates with linear warmup, then cosine (0.1)")
    g.add_argument("--grad-accum", type=positive_int("--grad-accum"), default=d.grad_accum,
                   help="informative groups per optimiser update (4)")
    g.add_argument("--max-grad-norm", type=float, default=d.max_grad_norm, help="(0.1)")
    g.add_argument("--train-micro-batch", type=positive_int("--train-micro-batch"),
                   default=d.train_micro_batch,
                   help="completions per forward/backward pass (4): memory only, the same update")
    g.add_argument("--num-iterations", type=positive_int("--num-iterations"),
                   default=d.num_iterations, help="updates per rollout batch (1)")
    g = p.add_argument_group("loss")
    g.add_argument("--advantage", choices=ADVANTAGE_MODES, default=d.advantage,
                   help="group_norm: (r - mean) / (std + eps); mean_only: r - mean (Dr. GRPO)")
    g.add_argument("--clip-low", type=float, default=d.clip_low, help="(0.2)")
    g.add_argument("--clip-high", type=float, default=d.clip_high, help="clip-higher (0.28)")
    g.add_argument("--beta", type=float, default=env_default("BETA", d.beta, float),
                   help="k3 KL coefficient to the adapter-off reference (env BETA; 0.0)")
    g.add_argument("--aggregation", choices=AGGREGATIONS, default=d.aggregation,
                   help="token_mean (DAPO), seq_mean_token_mean (GRPO), "
                   "seq_sum_constant (Dr. GRPO)")
    g.add_argument("--tis-cap", type=float, default=d.tis_cap,
                   help="truncated importance sampling: each token's surrogate weighted by "
                   "min(p_trainer / p_sampler, C), with the vLLM engine's sampler log-probs "
                   "(2.0; 0: off; the hf engine samples from the trainer itself: no weight)")
    g = p.add_argument_group("validation and checkpoints")
    g.add_argument("--save-every", type=positive_int("--save-every"), default=d.save_every,
                   help="checkpoint every N useful steps (20)")
    g.add_argument("--val-every", type=positive_int("--val-every"), default=d.val_every,
                   help="validate every N useful steps (20)")
    g.add_argument("--val-samples", type=positive_int("--val-samples"), default=d.val_samples,
                   help="completions per validation question (1); more steadies the choice of "
                   "the best checkpoint")
    g.add_argument("--val-limit", type=positive_int("--val-limit"), default=None,
                   help="validate on the first N validation questions only")
    g.add_argument("--patience", type=int, default=d.patience,
                   help="stop after N validations without a new best (0: never)")
    add_report_to_arg(p)
    return p


def resolve_sft_adapter(args) -> str:
    if not args.sft_adapter:
        raise UsageError("--sft-adapter: required (or set SFT_LORA_PATH); "
                         "use grpo_exp10_nosft.py to start from a fresh LoRA")
    path = Path(args.sft_adapter)
    if args.fold is not None:  # sft_qwen3_kfold.py writes <output>/adapters/fold_<k>/
        found = [p / f"fold_{args.fold}" for p in (path, path / "adapters")]
        found = [p for p in found if p.is_dir()]
        if not found:
            raise UsageError(f"--fold: no fold_{args.fold} adapter folder in {path} "
                             f"or {path / 'adapters'}")
        path = found[0]
    check_adapter_dir(path, "--sft-adapter")
    return str(path)


def config_from_args(args, variant: str) -> GRPOConfig:
    cuda = torch.cuda.is_available()
    cfg = GRPOConfig(
        model=args.model, dataset=args.dataset or "", val_dataset=args.val_dataset,
        output_dir=args.output_dir, seed=args.seed,
        load_in_4bit=load_in_4bit_flag(args),
        unsloth=args.unsloth, num_generations=args.num_generations,
        temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
        max_new_tokens=args.max_new_tokens or (3072 if cuda else 256),
        gen_micro_batch=args.gen_micro_batch, tolerance=args.tolerance,
        tolerance_rule=args.tolerance_rule, reward=args.reward,
        rollout_engine=args.rollout_engine, tis_cap=args.tis_cap,
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
        sampling_mode=args.sampling_mode or ("batch" if cuda else "step"),
        gen_batch=args.gen_batch,
        max_resample=args.max_resample, max_total_attempts=args.max_total_steps,
        pass_rate_sampler=args.pass_rate_sampler, pass_rate_scheme=args.pass_rate_scheme,
        informative_by=args.informative_by,
        max_useful_steps=args.max_useful_steps,
        learning_rate=args.learning_rate, weight_decay=args.weight_decay,
        warmup_ratio=args.warmup_ratio, grad_accum=args.grad_accum,
        max_grad_norm=args.max_grad_norm, num_iterations=args.num_iterations,
        train_micro_batch=args.train_micro_batch,
        advantage=args.advantage, clip_low=args.clip_low, clip_high=args.clip_high,
        beta=args.beta, aggregation=args.aggregation, overlong_buffer=args.overlong_buffer,
        mask_truncated=args.mask_truncated, save_every=args.save_every,
        val_every=args.val_every, val_samples=args.val_samples, patience=args.patience)
    if not VARIANTS[variant]["warm_start"]:
        cfg.lora_r, cfg.lora_alpha = args.lora_r, args.lora_alpha
    return cfg


def main(variant: str, argv=None, *, reward_fn: RewardFn | None = None) -> int:
    """Validate everything (flags, datasets, adapter, output folder), then load and train."""
    args = build_parser(variant).parse_args(argv)
    cfg = config_from_args(args, variant)
    cfg.check()
    if not cfg.dataset:
        raise UsageError("--dataset: required (or set DATASET_PATH)")
    if VARIANTS[variant]["warm_start"]:
        cfg.sft_adapter = resolve_sft_adapter(args)
    check_model_source(cfg.model)
    if cfg.rollout_engine == "vllm":
        require_vllm()  # before anything is loaded
    rows = load_dataset(cfg.dataset)
    val_rows = load_dataset(cfg.val_dataset)[: args.val_limit] if cfg.val_dataset else []
    settings = {**cfg.settings(), "dataset_fingerprint": questions_fingerprint(rows),
                "val_fingerprint": questions_fingerprint(val_rows) if val_rows else None}
    fingerprint = run_fingerprint(settings)
    distributed.setup()  # torchrun / srun: one rank per process; else a no-op
    resume_from = distributed.on_main(lambda: prepare_output_dir(
        cfg.output_dir, fingerprint, resume=args.resume, overwrite=args.overwrite,
        run_files=(LOG_FILE, STATS_FILE, *TRACKING_FILES)))
    # a missing package stops every rank before the model loads; rank 0 alone reports
    tracker = open_tracker(args.report_to, cfg.output_dir, run_name=Path(cfg.output_dir).name,
                           config=settings, main=distributed.is_main())

    torch.manual_seed(cfg.seed)  # a new LoRA's initial weights (the same on every rank)
    model, tokenizer = load_model(cfg.model, load_in_4bit=cfg.load_in_4bit,
                                  use_unsloth=cfg.unsloth, seed=cfg.seed)
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
              f"G={cfg.num_generations}, {cfg.rollout_engine} rollouts, "
              f"{cfg.max_useful_steps} useful steps{ranks}, fingerprint {fingerprint}", flush=True)
    try:
        sleep = vllm_sleep(args.vllm_sleep, model, cfg.vllm_gpu_memory_utilization,
                           cfg.train_micro_batch, cfg.max_new_tokens)
        with make_engine(cfg.rollout_engine, model, tokenizer, source=cfg.model, seed=cfg.seed,
                         max_new_tokens=cfg.max_new_tokens, sleep=sleep,
                         gpu_memory_utilization=cfg.vllm_gpu_memory_utilization) as engine:
            trainer = GRPOTrainer(cfg, model, tokenizer, rows, val_rows, reward_fn=reward_fn,
                                  settings=settings, fingerprint=fingerprint, engine=engine,
                                  tracker=tracker)
            trainer.run(resume_from)
    finally:
        tracker.close()
        distributed.cleanup()
    return 0
