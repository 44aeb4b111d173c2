"""A baseline model evaluated on each held-out fold of the group-aware k-fold split, so it can be
set beside the SFT folds (training/sft_qwen3_kfold.py uses the same split: same --folds and
--fold-seed give the same questions per fold).

Writes --output-dir/fold_K.json (a model result per fold) and, once every fold is done,
summary.json (accuracy per fold, mean and spread, pooled). One fold per SLURM array task:
--fold k, or FOLD, or SLURM_ARRAY_TASK_ID.

  python evaluation/evaluate_qwen25_base.py --model tiny-random --dataset data/non_mixed.jsonl \\
      --output-dir results/qwen25_base --folds 5
"""
import statistics
from pathlib import Path

from relrl.data.dataset_io import atomic_write_json, load_dataset
from relrl.data.folds import fold_rows
from relrl.evaluation.cli import add_eval_args, model_label, settings_from_args
from relrl.evaluation.results_io import read_result, write_result
from relrl.evaluation.runner import ModelRun, check_rows, model_generator, progress_path
from relrl.modeling.loading import check_model_source
from relrl.models.by_name import open_engine
from relrl.runtime.cli import ArgumentParser, UsageError, env_default, number_type, positive_int, run_main

DEFAULT_MODEL = "Qwen/Qwen2.5-7B-Instruct"


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"baseline model (default {DEFAULT_MODEL})")
    parser.add_argument("--dataset", default=env_default("DATASET_PATH", None),
                        help="questions, JSONL in the study's schema (env DATASET_PATH)")
    parser.add_argument("--output-dir", default=env_default("OUTPUT_DIR", None),
                        help="folder for fold_K.json and summary.json (env OUTPUT_DIR)")
    parser.add_argument("--folds", type=positive_int("--folds"), default=5, help="number of folds (default 5)")
    fold = number_type("--fold", int, ">= 0")
    task = env_default("SLURM_ARRAY_TASK_ID", None, fold)
    parser.add_argument("--fold", type=fold, default=env_default("FOLD", task, fold),
                        help="evaluate only this fold (0-based; env FOLD or SLURM_ARRAY_TASK_ID); "
                        "default all folds")
    parser.add_argument("--fold-seed", type=number_type("--fold-seed", int, ">= 0"), default=0,
                        help="seed of the fold split (default 0)")
    parser.add_argument("--label", default=None, help="model name in tables (default: its name)")
    add_eval_args(parser, shards=False)  # the fold is the unit of parallel work
    args = parser.parse_args(argv)
    if not args.dataset:
        parser.error("--dataset is required (or set DATASET_PATH)")
    if not args.output_dir:
        parser.error("--output-dir is required (or set OUTPUT_DIR)")
    if args.fold is not None and args.fold >= args.folds:
        parser.error(f"--fold: must satisfy 0 <= fold < --folds {args.folds}, got {args.fold}")
    return args


def summarize(folder: Path, folds: int, fold_seed: int) -> dict | None:
    """Cross-fold summary from the fold files on disk, or None while some are missing."""
    paths = [folder / f"fold_{k}.json" for k in range(folds)]
    if not all(p.exists() for p in paths):
        return None
    results = [read_result(p) for p in paths]
    for path, r in zip(paths, results):
        if (r.get("folds"), r.get("fold_seed"), r.get("model_path")) != \
                (folds, fold_seed, results[0].get("model_path")):
            raise UsageError(f"{path}: from another split or model (folds {r.get('folds')}, "
                             f"fold seed {r.get('fold_seed')}); remove it and rerun that fold")
    accuracies = [r["accuracy"] for r in results]
    correct, total = sum(r["correct"] for r in results), sum(r["n"] * r["samples"] for r in results)
    return {
        "kind": "kfold_summary", "model": results[0]["model"].rsplit(" fold ", 1)[0],
        "folds": folds,
        "per_fold": [{"fold": k, "n": r["n"], "correct": r["correct"], "accuracy": r["accuracy"]}
                     for k, r in enumerate(results)],
        "mean_accuracy": statistics.fmean(accuracies),
        "std_accuracy": statistics.stdev(accuracies) if folds > 1 else 0.0,
        "pooled": {"n": sum(r["n"] for r in results), "correct": correct, "accuracy": correct / total},
    }


def main(argv=None):
    args = parse_args(argv)
    settings = settings_from_args(args)
    folder = Path(args.output_dir)
    if not folder.is_dir():
        raise UsageError(f"--output-dir: {folder} is not an existing folder")
    rows = load_dataset(args.dataset)[: args.max_questions]
    check_rows(rows, args.dataset)
    todo = [args.fold] if args.fold is not None else list(range(args.folds))
    held_out = {k: fold_rows(rows, args.folds, k, args.fold_seed)[1] for k in todo}
    name = args.label or model_label(args.model)
    runs = {}
    for k in todo:
        target = folder / f"fold_{k}.json"
        runs[k] = ModelRun(held_out[k], settings, label=f"{name} fold {k}",
                           model_path=args.model, adapter=None, dataset=args.dataset,
                           progress_file=progress_path(target, "base"),
                           rollout_engine=args.rollout_engine)

    check_model_source(args.model)
    engine, tokenizer = open_engine(args, max_new_tokens=settings.max_new_tokens)
    with engine:
        generate = model_generator(engine, tokenizer, settings)
        for k, run in runs.items():
            result = run.evaluate(generate)
            write_result(folder / f"fold_{k}.json", {**result, "fold": k, "folds": args.folds,
                                                     "fold_seed": args.fold_seed},
                         records=args.records)
    summary = summarize(folder, args.folds, args.fold_seed)
    if summary is not None:
        atomic_write_json(folder / "summary.json", summary)
        print(f"{name}: mean accuracy over {args.folds} folds {100 * summary['mean_accuracy']:.1f}% "
              f"(sd {100 * summary['std_accuracy']:.1f}); wrote {folder}/summary.json")
    return 0


if __name__ == "__main__":
    run_main(main)
