"""The SFT k-fold cross-validation behind training/sft_qwen3_kfold.py and sft_train_qwen25.py.

Folds by `group` (relrl.data.folds); per fold a fresh LoRA trained on the other folds
(relrl.finetune.sft_trainer), saved to adapters/fold_k/, then scored on its held-out fold against
the base (the same weights with the adapter off) by relrl.evaluation.runner, McNemar per fold;
cv_summary.json last. `--folds 1 --train-all` trains the warm start on every row instead.

Output folder:
  config.yaml             the resolved settings (--config config.yaml runs them again)
  adapters/fold_k/        the fold's adapter (PEFT files): GRPO's warm start
  fold_k/                 checkpoint-N/, train_log.jsonl, statistics.json, evaluation.json
  cv_summary.json         base and SFT accuracy per fold, mean and spread, deltas, pooled McNemar
  adapters/all/, all/     the same for --train-all (one adapter on every row, no evaluation)
"""
from __future__ import annotations

import gc
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from relrl.data.dataset_io import atomic_write_json, load_dataset, questions_fingerprint
from relrl.data.folds import fold_rows
from relrl.evaluation.cli import model_label
from relrl.evaluation.model_results import compare_models
from relrl.evaluation.results_io import pair_accuracies, read_result, records_paths, write_result
from relrl.evaluation.runner import check_rows, progress_path, score_model
from relrl.evaluation.settings import EvalSettings, eval_range
from relrl.evaluation.stats import mcnemar
from relrl.finetune.epoch_loop import LOG_FILE, STATS_FILE
from relrl.finetune.examples import build_examples
from relrl.finetune.sft_trainer import SFTConfig, SFTTrainer
from relrl.grading.scoring import TOLERANCE_RULES
from relrl.modeling.loading import attach_lora, check_model_source, reference_policy, save_adapter
from relrl.models.by_name import load_model
from relrl.runtime import distributed
from relrl.runtime.checkpointing import prepare_output_dir, run_fingerprint
from relrl.runtime.cli import UsageError, env_default
from relrl.runtime.config import SettingsParser, refuse_other_settings, setting, write_config
from relrl.runtime.stop import exit_status
from relrl.runtime.tracking import REPORT_TO, Tracker, open_tracker
from relrl.runtime.tracking import RUN_FILES as TRACKING_FILES
from relrl.tools.protocol import DEFAULT_MAX_TOOL_CALLS

EVAL_FILE, SUMMARY_FILE = "evaluation.json", "cv_summary.json"
SCORING = "scoring each held-out fold (adapter against the base)"


# ---------------------------------------------------------------------------- one adapter


@dataclass
class FoldPlan:
    """One adapter to train: its rows, where it goes, and (k-fold) the rows it is scored on."""
    name: str  # "fold_3" or "all"
    train_rows: list[dict]
    test_rows: list[dict]
    run_dir: Path
    adapter_dir: Path
    settings: dict
    resume_from: Path | None = None

    @property
    def fingerprint(self) -> str:
        return run_fingerprint(self.settings)


def run_files() -> tuple[str, ...]:
    """Files in a fold folder that --overwrite clears along with its checkpoints."""
    target = Path(EVAL_FILE)
    return (LOG_FILE, STATS_FILE, EVAL_FILE, *(records.name for records in records_paths(target)),
            progress_path(target, "base").name, progress_path(target, "finetuned").name,
            *TRACKING_FILES)


def plan_runs(cfg: SFTConfig, rows: list[dict], output_dir: Path, *, folds: int, fold: int | None,
              fold_seed: int, train_all: bool, resume, overwrite: bool) -> list[FoldPlan]:
    """Every adapter this invocation trains, each output folder checked (refusing another
    run's checkpoints): all before a model is loaded."""
    if train_all:
        if folds != 1:
            raise UsageError(f"--train-all trains one adapter on all rows: use --folds 1, not {folds}")
        if fold is not None:
            raise UsageError("--fold: not with --train-all (there is one adapter, on all rows)")
        splits = {"all": (rows, [])}
    else:
        if folds < 2:
            raise UsageError("--folds 1 leaves nothing to evaluate on: add --train-all to train "
                             "the warm start on all rows")
        if len(rows) < folds:
            raise UsageError(f"--folds: {len(rows)} rows cannot fill {folds} folds")
        if fold is not None and not 0 <= fold < folds:
            raise UsageError(f"--fold: must satisfy 0 <= fold < {folds}, got {fold}")
        splits = {f"fold_{k}": fold_rows(rows, folds, k, fold_seed)
                  for k in ([fold] if fold is not None else range(folds))}
    plans = []
    for name, (train_rows, test_rows) in splits.items():
        settings = {**cfg.settings(), "run": name, "folds": folds, "fold_seed": fold_seed,
                    "train_fingerprint": questions_fingerprint(train_rows)}
        plan = FoldPlan(name, train_rows, test_rows, output_dir / name,
                        output_dir / "adapters" / name, settings)
        plan.resume_from = prepare_output_dir(plan.run_dir, plan.fingerprint, resume=resume,
                                              overwrite=overwrite, run_files=run_files())
        plans.append(plan)
    return plans


def train_adapter(cfg: SFTConfig, plan: FoldPlan, model, tokenizer,
                  tracker: Tracker | None = None) -> dict:
    """Attach a fresh LoRA, train it on the plan's rows (resuming when asked), save it."""
    examples, built = build_examples(plan.train_rows, tokenizer, cfg.max_length, cfg.tools)
    for note in built.warnings() if distributed.is_main() else ():
        print(f"warning: {plan.name}: {note}", file=sys.stderr, flush=True)
    if not examples:
        raise UsageError(f"--max-length {cfg.max_length}: every prompt of {plan.name} is longer")
    torch.manual_seed(cfg.seed)  # the new LoRA's initial weights
    peft_model = attach_lora(model, r=cfg.lora_r, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout)
    trainer = SFTTrainer(cfg, peft_model, tokenizer, examples, plan.run_dir,
                         fingerprint=plan.fingerprint, settings=plan.settings,
                         label=f"sft {plan.name}", tracker=tracker)
    result = trainer.run(plan.resume_from)
    result.update(answer_only=built.answer_only, boxed_added=built.boxed_added,
                  truncated=built.truncated, dropped=len(built.dropped), tools=cfg.tools)
    if cfg.tools != "none":
        result.update(tool_solutions=built.tool_solutions, plain_reasoning=built.plain_reasoning)
    if not distributed.is_main():  # rank 0 writes; the others only trained
        return {"result": result, "model": peft_model}
    atomic_write_json(plan.run_dir / STATS_FILE, result)
    if not result["stopped_by"].startswith("SIG"):
        plan.adapter_dir.parent.mkdir(parents=True, exist_ok=True)
        save_adapter(peft_model, plan.adapter_dir)
        mix = "" if cfg.tools == "none" else (
            f" ({built.tool_solutions} calling the {cfg.tools}, {built.plain_reasoning} plain: "
            "no expression)")
        print(f"{plan.name}: {result['steps']} steps on {len(examples)} examples{mix}, final loss "
              f"{result['losses'][-1]:.4f}; adapter saved to {plan.adapter_dir}", flush=True)
    return {"result": result, "model": peft_model}


def evaluate_fold(cfg: SFTConfig, plan: FoldPlan, model, tokenizer, settings, *, folds: int,
                  fold_seed: int) -> dict:
    """The fold's adapter against the base (adapter off) on the held-out rows: a pair result
    with McNemar's test, written to fold_k/evaluation.json."""
    target = plan.run_dir / EVAL_FILE
    common = dict(model_path=cfg.model, dataset=cfg.dataset)
    base_name = model_label(cfg.model)
    model.eval()
    ft = score_model(model, tokenizer, plan.test_rows, settings, label=f"sft {plan.name}",
                     adapter=str(plan.adapter_dir), **common,
                     progress_file=progress_path(target, "finetuned"))
    with reference_policy(model):
        base = score_model(model, tokenizer, plan.test_rows, settings,
                           label=f"{base_name} {plan.name}", adapter=None, **common,
                           progress_file=progress_path(target, "base"))
    pair = {**compare_models(base, ft), "fold": int(plan.name.split("_")[1]), "folds": folds,
            "fold_seed": fold_seed, "train_n": len(plan.train_rows),
            "adapter": str(plan.adapter_dir)}
    write_result(target, pair)
    print(f"{plan.name}: base {pair['base_accuracy']:.1f}% -> sft {pair['ft_accuracy']:.1f}% "
          f"(delta {pair['delta']:+.1f}pp, b01={pair['mcnemar_b01']} "
          f"b10={pair['mcnemar_b10']}, McNemar p={pair['mcnemar_p']:.3g}) on {pair['n']} held-out "
          f"questions", flush=True)
    return pair


# ---------------------------------------------------------------------------- summary


def _spread(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values)}


def summarize(output_dir: Path, folds: int) -> dict | None:
    """The cross-validation summary from the fold files on disk (None when there are none)."""
    found = [(k, output_dir / f"fold_{k}" / EVAL_FILE) for k in range(folds)]
    pairs = [(k, read_result(path)) for k, path in found if path.exists()]
    if not pairs:
        return None
    runs = {(p["folds"], p["fold_seed"], p["dataset"], p["base"]["samples"],
             p["finetuned"].get("tools", "none")) for _, p in pairs}
    if len(runs) > 1 or next(iter(runs))[0] != folds:
        raise UsageError(f"{output_dir}: the fold files come from different splits or settings "
                         f"({sorted(map(str, runs))}, asked for {folds} folds)")
    per_fold = [{
        "fold": k, "n": p["n"], "train_n": p["train_n"],
        "base_correct": p["base"]["correct"], "sft_correct": p["finetuned"]["correct"],
        **dict(zip(("base_accuracy", "sft_accuracy", "delta"), pair_accuracies(p))),
        "mcnemar_b01": p["mcnemar_b01"], "mcnemar_b10": p["mcnemar_b10"],
        "mcnemar_p": p["mcnemar_p"], "adapter": p["adapter"],
        "file": str(output_dir / f"fold_{k}" / EVAL_FILE)} for k, p in pairs]
    n = sum(f["n"] for f in per_fold)
    b01 = sum(f["mcnemar_b01"] for f in per_fold)
    b10 = sum(f["mcnemar_b10"] for f in per_fold)
    base_correct = sum(f["base_correct"] for f in per_fold)
    sft_correct = sum(f["sft_correct"] for f in per_fold)
    samples = pairs[0][1]["base"]["samples"]
    tools = pairs[0][1]["finetuned"].get("tools", "none")
    return {
        "kind": "sft_kfold_summary", "folds": folds, "folds_done": len(per_fold),
        "complete": len(per_fold) == folds, "dataset": pairs[0][1]["dataset"],
        "fold_seed": pairs[0][1]["fold_seed"], "samples": samples,
        **({} if tools == "none" else {"tools": tools}),  # the study's summary keeps its keys
        "base_accuracy": _spread([f["base_accuracy"] for f in per_fold]),
        "sft_accuracy": _spread([f["sft_accuracy"] for f in per_fold]),
        "delta": _spread([f["delta"] for f in per_fold]),
        "best_fold": max(per_fold, key=lambda f: (f["sft_accuracy"], -f["fold"]))["fold"],
        "pooled": {"n": n, "base_correct": base_correct, "sft_correct": sft_correct,
                   "base_accuracy": base_correct / (n * samples),
                   "sft_accuracy": sft_correct / (n * samples),
                   "delta": (sft_correct - base_correct) / (n * samples),
                   "mcnemar_b01": b01, "mcnemar_b10": b10, "mcnemar_p": mcnemar(b01, b10)["exact_p"]},
        "per_fold": per_fold,
    }


def write_summary(output_dir: Path, folds: int) -> dict | None:
    summary = summarize(output_dir, folds)
    if summary is None:
        return None
    atomic_write_json(output_dir / SUMMARY_FILE, summary)
    b, s, d = summary["base_accuracy"], summary["sft_accuracy"], summary["delta"]
    print(f"cross-validation ({summary['folds_done']}/{folds} folds): base {b['mean']:.3f} "
          f"(sd {b['std']:.3f}), sft {s['mean']:.3f} (sd {s['std']:.3f}), delta "
          f"{100 * d['mean']:+.1f}pp (sd {100 * d['std']:.1f}); pooled McNemar "
          f"p={summary['pooled']['mcnemar_p']:.3g}; wrote {output_dir / SUMMARY_FILE}", flush=True)
    return summary


# ---------------------------------------------------------------------------- command line


@dataclass
class KFoldConfig(SFTConfig):
    """The SFT settings, the split and the scoring of each held-out fold. Only SFTConfig's
    fields make a fold's fingerprint; the split's own (folds, fold_seed) are added per fold."""
    output_dir: str = setting("outputs/sft_qwen3", "adapters/, fold_k/ and cv_summary.json",
                              env="OUTPUT_DIR", fingerprint=False)
    folds: int | None = setting(None, "k of the group-aware k-fold split", positive=True,
                                default_text="5; 1 with --train-all", fingerprint=False)
    fold_seed: int = setting(0, "seed of the fold split, the same as evaluate_qwen25_base.py's",
                             fingerprint=False, range=">= 0")
    train_all: bool = setting(False, "one adapter on every row, no evaluation: the warm start "
                              "(with --folds 1)", fingerprint=False)
    max_questions: int | None = setting(None, "only the first N rows of the dataset (a quick "
                                        "try)", positive=True, fingerprint=False)
    eval_samples: int = setting(1, "completions per question (the study: 1)", positive=True,
                                group=SCORING, fingerprint=False)
    # the scoring settings take the values EvalSettings declares (eval_range)
    eval_seed: int = setting(0, "evaluation seed", group=SCORING, fingerprint=False,
                             range=eval_range("seed"))
    eval_temperature: float = setting(1.0, "sampling temperature", group=SCORING,
                                      fingerprint=False, range=eval_range("temperature"))
    eval_top_p: float = setting(0.95, "nucleus sampling", group=SCORING, fingerprint=False,
                                range=eval_range("top_p"))
    eval_top_k: int = setting(0, "sample among the K likeliest tokens only (0: off)",
                              group=SCORING, fingerprint=False, range=eval_range("top_k"))
    eval_max_new_tokens: int = setting(
        3072, "max completion length", positive=True, group=SCORING, fingerprint=False,
        default_here=lambda: 3072 if torch.cuda.is_available() else 256,
        default_text="3072 on CUDA, 256 on a CPU")
    eval_max_tool_calls: int = setting(DEFAULT_MAX_TOOL_CALLS, "with --tools: calls a scored "
                                       "completion may make", group=SCORING, fingerprint=False,
                                       range=eval_range("max_tool_calls"))
    eval_micro_batch: int = setting(16, "sequences per generation pass: speed only",
                                    positive=True, group=SCORING, fingerprint=False)
    tolerance: float = setting(0.05, "relative tolerance for a correct answer", group=SCORING,
                               fingerprint=False, range=eval_range("tolerance"))
    tolerance_rule: str = setting(
        "study", "study: relative error, the study's rule; complement: a probability target t "
        "is judged on min(t, 1 - t), a reliability near 1 on its failure probability",
        choices=TOLERANCE_RULES, group=SCORING, fingerprint=False)
    report_to: str = setting("none", "also log the training curves to TensorBoard "
                             "(<output-dir>/fold_k/tensorboard) or Weights & Biases",
                             choices=REPORT_TO, fingerprint=False)


def build_parser(default_model: str, default_output: str, about: str) -> SettingsParser:
    p = SettingsParser(KFoldConfig, defaults={"model": default_model, "output_dir": default_output},
                       description=about, epilog=distributed.launch_help("training/sft_qwen3_kfold.py"))
    p.add_argument("--fold", type=int, default=None,
                   help="train and score only this fold, 0-based (env FOLD or SLURM_ARRAY_TASK_ID "
                   "unless --train-all); default every fold")
    p.add_argument("--summarize", action="store_true",
                   help="only rebuild cv_summary.json from the fold files (after a SLURM array)")
    p.add_argument("--resume", action="store_true", help="continue each fold from its latest checkpoint")
    p.add_argument("--overwrite", action="store_true",
                   help="delete the folds' checkpoints, logs and scores first")
    return p


def eval_settings(cfg: KFoldConfig) -> EvalSettings:
    """How each held-out fold is scored: with the tools the adapter was trained to call (the
    base model gets the same prompt and tools)."""
    return EvalSettings(samples=cfg.eval_samples, seed=cfg.eval_seed,
                        temperature=cfg.eval_temperature, top_p=cfg.eval_top_p,
                        top_k=cfg.eval_top_k, max_new_tokens=cfg.eval_max_new_tokens,
                        tolerance=cfg.tolerance, tolerance_rule=cfg.tolerance_rule,
                        micro_batch=cfg.eval_micro_batch, tools=cfg.tools,
                        max_tool_calls=cfg.eval_max_tool_calls)


def main(argv=None, *, default_model: str, default_output: str, about: str) -> int:
    """Validate everything (flags, dataset, folds, output folders), then train and score."""
    cfg, args = build_parser(default_model, default_output, about).parse(argv)
    if cfg.folds is None:
        cfg.folds = 1 if cfg.train_all else 5
    if args.fold is None and not cfg.train_all:  # an array job's task id picks its fold
        args.fold = env_default("FOLD", env_default("SLURM_ARRAY_TASK_ID", None, int), int)
    output_dir = Path(cfg.output_dir)
    if args.summarize:
        if write_summary(output_dir, cfg.folds) is None:
            raise UsageError(f"--summarize: no fold_K/{EVAL_FILE} in {output_dir}")
        return 0
    cfg.check()
    if not cfg.dataset:
        raise UsageError("--dataset: required (or set DATASET_PATH)")
    check_model_source(cfg.model)
    rows = load_dataset(cfg.dataset)[: cfg.max_questions]
    check_rows(rows, cfg.dataset)
    output_dir.mkdir(parents=True, exist_ok=True)
    distributed.setup()  # torchrun / srun: one rank per process; else a no-op
    try:
        return _train_and_score(cfg, args, rows, output_dir)
    finally:
        distributed.cleanup()


def _plan(cfg: KFoldConfig, args, rows, output_dir: Path) -> list[FoldPlan]:
    """Rank 0: check the output folders (and with --overwrite clear them), then record the
    settings in config.yaml. In an array, every task writes the same file."""
    refuse_other_settings(cfg, output_dir, [d for d in output_dir.iterdir() if d.is_dir()],
                          resume=args.resume, overwrite=args.overwrite)
    plans = plan_runs(cfg, rows, output_dir, folds=cfg.folds, fold=args.fold,
                      fold_seed=cfg.fold_seed, train_all=cfg.train_all,
                      resume=args.resume or None, overwrite=args.overwrite)
    write_config(cfg, output_dir)
    return plans


def _train_and_score(cfg: KFoldConfig, args, rows, output_dir: Path) -> int:
    plans = distributed.on_main(lambda: _plan(cfg, args, rows, output_dir))
    settings = None if cfg.train_all else eval_settings(cfg)
    main = distributed.is_main()
    if main:
        print(f"SFT {cfg.model}: {len(rows)} rows, {'all rows' if cfg.train_all else f'{cfg.folds} folds'}"
              f" ({', '.join(p.name for p in plans)}), LoRA r={cfg.lora_r} "
              f"alpha={cfg.lora_alpha}, lr {cfg.learning_rate:g}, "
              f"{f'{cfg.max_steps} steps' if cfg.max_steps else f'{cfg.epochs} epochs'}, "
              f"batch {cfg.batch_size}, {distributed.world()} rank(s)"
              f"{'' if cfg.tools == 'none' else f', tools: {cfg.tools}'}", flush=True)
    # one tracker per adapter, each opened before its model loads (a missing package: at once)
    trackers = [open_tracker(cfg.report_to, plan.run_dir, run_name=f"sft-{plan.name}",
                             config=plan.settings, main=main) for plan in plans]
    for plan, tracker in zip(plans, trackers):
        # Unsloth's max_seq_length: a training example (--max-length, tool turns included)
        # or, where the fold is scored, a prompt, the scoring's new tokens and tool turns
        model, tokenizer = load_model(
            cfg.model, load_in_4bit=cfg.load_in_4bit, use_unsloth=cfg.unsloth,
            max_seq_length=cfg.max_length,
            max_new_tokens=None if cfg.train_all else cfg.eval_max_new_tokens,
            tools=cfg.tools, max_tool_calls=cfg.eval_max_tool_calls)
        try:
            trained = train_adapter(cfg, plan, model, tokenizer, tracker)
            if trained["result"]["stopped_by"].startswith("SIG"):  # resume with --resume
                # the others wait for rank 0's files: a launcher ends every rank once one
                # exits non-zero
                distributed.barrier()
                return exit_status(trained["result"]["stopped_by"])
            if not cfg.train_all and main:  # scoring the fold is rank 0's; the others wait
                pair = evaluate_fold(cfg, plan, trained["model"], tokenizer, settings,
                                     folds=cfg.folds, fold_seed=cfg.fold_seed)
                tracker.log({"heldout": {**dict(zip(("base_accuracy", "ft_accuracy", "delta"),
                                                    pair_accuracies(pair))),
                                         "mcnemar_p": pair["mcnemar_p"]}},
                            trained["result"]["steps"])
        finally:
            tracker.close()
        distributed.barrier()
        del model, trained
        gc.collect()  # the next fold loads a fresh base model: free this one first
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    if not cfg.train_all and main:
        write_summary(output_dir, cfg.folds)
    return 0
