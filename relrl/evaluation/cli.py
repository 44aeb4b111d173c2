"""The command line the evaluation scripts share: their flags, the settings read from them, and
`run_cli`, the run every script makes (validate everything, load the model, evaluate the base
and the fine-tuned policy, write a model or pair result, or merge finished shards)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from relrl.data.dataset_io import load_dataset, questions_fingerprint
from relrl.engines import TOP_K_HELP, add_engine_args
from relrl.evaluation.guess_baselines import describe, score_baselines, with_baselines
from relrl.evaluation.model_results import compare_models, load_model_result, with_records
from relrl.evaluation.results_io import add_records_arg
from relrl.evaluation.runner import ModelRun, check_rows, model_generator, progress_path
from relrl.evaluation.settings import EvalSettings, check_settings, eval_range
from relrl.evaluation.shards import (
    load_shards,
    merged_model_result,
    resolve_shard,
    shard_path,
    shard_rows,
    write_result,
)
from relrl.modeling.loading import check_adapter_dir, check_model_source
from relrl.models.by_name import open_engine
from relrl.runtime.cli import (
    UsageError,
    add_load_args,
    add_tolerance_rule_arg,
    env_default,
    number_type,
    positive_int,
)
from relrl.tools.protocol import DEFAULT_MAX_TOOL_CALLS, TOOL_CHOICES


def add_model_args(parser, default_model: str, *, base_label: bool = True,
                   dataset_help: str = "questions, JSONL in the study's schema",
                   study_default_output: bool = False) -> None:
    """--model, --dataset, --output (required, or with `study_default_output` the study's
    OUTPUT_DIR/RUN_NAME file: see study_output) and the labels used in tables."""
    parser.add_argument("--model", default=default_model,
                        help=f"base model: hub id, local folder, tiny, tiny-tool or tiny-random (default "
                        f"{default_model})")
    parser.add_argument("--dataset", default=env_default("DATASET_PATH", None),
                        help=f"{dataset_help} (env DATASET_PATH)")
    if study_default_output:
        parser.add_argument("--output", default=None, help="result JSON to write (default: the "
                            "study's $OUTPUT_DIR/eval_$RUN_NAME.json, results/ and eval unset)")
    else:
        parser.add_argument("--output", required=True, help="result JSON to write")
    parser.add_argument("--baseline-train", default=None, metavar="FILE",
                        help="training rows (JSONL) to fit the guess baselines on; the result then "
                        "records them and each model's margin over the best (relrl.evaluation.guess_baselines)")
    parser.add_argument("--label", default=None, help="name of the evaluated model in tables "
                        "(default: the adapter's parent/name, else the model's name)")
    if base_label:
        parser.add_argument("--base-label", default=None, help="name of the base model in tables")


def add_adapter_arg(parser) -> None:
    parser.add_argument("--adapter", default=env_default("LORA_PATH", None),
                        help="LoRA adapter folder to evaluate (env LORA_PATH)")


def eval_number(name: str, kind: type = float):
    """argparse type of the EvalSettings field `name`: finite and in the range it declares."""
    return number_type("--" + name.replace("_", "-"), kind, eval_range(name))


def add_eval_args(parser, *, samples: int = 1, temperature: float = 1.0, shards: bool = True) -> None:
    """Sampling, grading and (with `shards`) sharding flags shared by the evaluation scripts."""
    parser.add_argument("--samples", type=eval_number("samples", int), default=samples,
                        help=f"completions per question (default {samples})")
    parser.add_argument("--seed", type=eval_number("seed", int), default=0,
                        help="run seed; each question's seed derives from it and the question id "
                        "(default 0)")
    parser.add_argument("--temperature", type=eval_number("temperature"), default=temperature,
                        help=f"sampling temperature (default {temperature})")
    parser.add_argument("--top-p", type=eval_number("top_p"), default=0.95,
                        help="nucleus sampling (default 0.95)")
    parser.add_argument("--top-k", type=eval_number("top_k", int), default=0, help=TOP_K_HELP)
    parser.add_argument("--max-new-tokens", type=eval_number("max_new_tokens", int), default=3072,
                        help="completion length limit; longer answers count as truncated "
                        "(default 3072, the study's; use less on a CPU)")
    parser.add_argument("--micro-batch", type=eval_number("micro_batch", int), default=16,
                        help="sequences per forward pass: memory and speed, never results (default 16)")
    parser.add_argument("--tolerance", type=eval_number("tolerance"), default=0.05,
                        help="relative tolerance for a correct answer (default 0.05)")
    add_tolerance_rule_arg(parser)
    parser.add_argument("--allow-plain", action="store_true",
                        help="grade a final plain number when there is no \\boxed{} answer")
    parser.add_argument("--max-questions", type=positive_int("--max-questions"), default=None,
                        help="only the first N questions of the dataset (a quick look)")
    add_tool_args(parser)
    add_records_arg(parser)
    add_load_args(parser, unsloth=False)
    add_engine_args(parser)
    if shards:
        parser.add_argument("--shard", default=None, help="run shard i/n of the questions (0-based); "
                            "default CHUNK_INDEX/N_CHUNKS or the SLURM array variables")
        parser.add_argument("--merge", action="store_true",
                            help="merge finished shard files into --output and stop")


def add_tool_args(parser) -> None:
    """--tools and --max-tool-calls (relrl.tools.protocol; the engines run the calls)."""
    parser.add_argument("--tools", choices=TOOL_CHOICES, default="none",
                        help="none: the study's single-turn answers (default); calculator: the "
                        "prompt declares the calculator and the model's calls are answered "
                        "between turns; the grader reads the model's last turn")
    parser.add_argument("--max-tool-calls", type=eval_number("max_tool_calls", int),
                        default=DEFAULT_MAX_TOOL_CALLS,
                        help=f"tool calls answered per completion, later ones get an error "
                        f"(default {DEFAULT_MAX_TOOL_CALLS}; only with --tools)")


def settings_from_args(args) -> EvalSettings:
    """The evaluation settings made from the flags, each finite and in its declared range."""
    return check_settings(EvalSettings(
        samples=args.samples, seed=args.seed, temperature=args.temperature, top_p=args.top_p,
        top_k=args.top_k, max_new_tokens=args.max_new_tokens, tolerance=args.tolerance,
        tolerance_rule=args.tolerance_rule, allow_plain=args.allow_plain,
        micro_batch=args.micro_batch, tools=args.tools, max_tool_calls=args.max_tool_calls))


def check_output(path: str | Path, flag: str = "--output") -> Path:
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{flag}: {path} is a folder, expected a .json file path")
    if not path.parent.is_dir():
        raise UsageError(f"{flag}: folder {path.parent} does not exist")
    return path


def model_label(model: str, adapter: str | None = None) -> str:
    """A short readable name: the adapter's parent/name (e.g. exp7/checkpoint-80) or the model's."""
    if adapter:
        p = Path(adapter).resolve()
        return f"{p.parent.name}/{p.name}" if p.parent.name else p.name
    return Path(model).name if Path(model).exists() else model.rsplit("/", 1)[-1]


def study_output(args) -> Path:
    """--output, else the study's $OUTPUT_DIR/eval_$RUN_NAME.json (results/eval_eval.json when
    neither is set); that default folder is created, an explicit --output's must exist."""
    if args.output:
        return Path(args.output)
    folder = Path(env_default("OUTPUT_DIR", "results"))
    output = folder / f"eval_{env_default('RUN_NAME', 'eval')}.json"
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"OUTPUT_DIR: {folder} is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    return output


def run_study_cli(parser, args) -> int:
    """The study's evaluation scripts: the dataset checked first (a bad row stops us before
    anything else), then the adapter, then the output path, then the run. Both may come from
    the environment, so argparse cannot mark them required."""
    if not args.dataset:
        parser.error("--dataset is required (or set DATASET_PATH)")
    rows = load_dataset(args.dataset)[: args.max_questions]
    if not args.adapter:
        parser.error("--adapter is required (or set LORA_PATH)")
    args.output = study_output(args)
    return run_cli(args, rows)


def load_base_results(path: str, rows: Sequence[dict], settings: EvalSettings) -> dict:
    """An earlier base-model result for exactly these questions (refused otherwise)."""
    base = load_model_result(path, role="base")
    fingerprint = questions_fingerprint(rows)
    if base.get("fingerprint") != fingerprint or \
            [str(r["id"]) for r in base["results"]] != [str(r["id"]) for r in rows]:
        raise UsageError(f"--base-results: {path} is for other questions (fingerprint "
                         f"{base.get('fingerprint')}, the dataset gives {fingerprint})")
    theirs, ours = base.get("settings", {}), settings.signature()
    changed = sorted(k for k in ours if theirs.get(k) != ours[k])
    if changed:
        print(f"warning: {path} was sampled with other settings ({', '.join(changed)}); "
              "the comparison stays paired by question", file=sys.stderr)
    return base


def add_baselines(result: dict, rows: Sequence[dict], train_rows: Sequence[dict] | None,
                  settings: EvalSettings, train_file: str | None) -> dict:
    """The result with the guess baselines fitted on `train_rows` and scored on `rows` by the
    result's own rule; unchanged without training rows."""
    if train_rows is None:
        return result
    block = score_baselines(rows, train_rows, tolerance=settings.tolerance,
                            rule=settings.tolerance_rule)
    result = with_baselines(result, {**block, "train_file": train_file})
    print(describe(result["guess_baselines"]), flush=True)
    return result


def run_cli(args, rows: list[dict]) -> int:
    """What evaluate_single, evaluate_finetuned_only and evaluate_gsm8k share.

    args.adapter None: the model alone -> a model result. With an adapter: a pair file, the
    base being the same weights with the adapter off, or args.base_results when given.
    Everything is validated before the model loads; shards write OUT.shard-i-of-n.json.
    """
    settings = settings_from_args(args)
    output = check_output(args.output)
    check_rows(rows, args.dataset)
    fingerprint = questions_fingerprint(rows)
    adapter = args.adapter
    base_path = getattr(args, "base_results", None)
    base_file = load_base_results(base_path, rows, settings) if base_path else None
    train_rows = load_dataset(args.baseline_train) if args.baseline_train else None

    if args.merge:
        shards = load_shards(output, fingerprint)
        if adapter is None:
            result = merged_model_result(rows, shards, "model")
        else:
            ft = merged_model_result(rows, [s["finetuned"] for s in shards], "fine-tuned")
            base = with_records(base_file, base_file["results"]) if base_file else \
                merged_model_result(rows, [s["base"] for s in shards], "base")
            result = compare_models(base, ft, run_name=env_default("RUN_NAME", None))
        write_result(output, add_baselines(result, rows, train_rows, settings, args.baseline_train),
                     records=args.records)
        print(f"merged {len(shards)} shards into {output}")
        return 0


    check_model_source(args.model)
    if adapter is not None:
        check_adapter_dir(adapter)
    shard = resolve_shard(args.shard)
    part = shard_rows(rows, *shard)
    target = output if shard[1] == 1 else shard_path(output, *shard)
    common = dict(model_path=args.model, dataset=args.dataset, rollout_engine=args.rollout_engine)
    base_run = ft_run = None
    if base_file is None:
        label = (getattr(args, "base_label", None) if adapter else args.label) or model_label(args.model)
        base_run = ModelRun(part, settings, label=label, adapter=None,
                            progress_file=progress_path(target, "base"), **common)
    if adapter is not None:
        ft_run = ModelRun(part, settings, label=args.label or model_label(args.model, adapter),
                          adapter=adapter, progress_file=progress_path(target, "finetuned"), **common)

    engine, tokenizer = open_engine(args, adapter=adapter, max_new_tokens=settings.max_new_tokens)
    with engine:
        generate = model_generator(engine, tokenizer, settings)
        if base_run is not None:
            with engine.base_policy():  # the same weights, adapter off
                base = base_run.evaluate(generate)
        else:
            ids = {str(r["id"]) for r in part}
            base = with_records(base_file, [r for r in base_file["results"] if str(r["id"]) in ids])
        result = base
        if ft_run is not None:
            result = compare_models(base, ft_run.evaluate(generate),
                                    run_name=env_default("RUN_NAME", None))
            print(f"delta {result['delta']:+.1f}pp, b01={result['mcnemar_b01']} "
                  f"b10={result['mcnemar_b10']}, {result['test']} p={result['p_value']:.3g}")
    if shard[1] == 1:  # a shard's part is not the evaluated set: --merge scores the whole
        result = add_baselines(result, part, train_rows, settings, args.baseline_train)
    written = write_result(output, result, shard, fingerprint, records=args.records)
    print(f"wrote {written}" + ("; run --merge once every shard has finished" if shard[1] > 1 else ""))
    return 0
