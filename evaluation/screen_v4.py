"""Screen a dataset with the base model: G samples per question, keep the pass count.

A question the base model gets right in all G samples or in none gives GRPO no contrastive
signal; the "mixed" ones (1..G-1 correct) are GRPO's training set and the others SFT's.
Writes, in --output-dir:
  mixed.jsonl       questions with 0 < pass count < G, each with base_score and base_samples
  non_mixed.jsonl   the all-correct and all-wrong questions, with the same two fields
  screening.json    counts per class, pass-count histogram, every completion (for DPO pairs)

  python evaluation/screen_v4.py --model tiny --dataset data/train.jsonl --output-dir data/screen
Sharded (SLURM array), then merged:  ... --shard 0/3 ; ... --shard 1/3 ; ... --shard 2/3 ; ... --merge
"""
from pathlib import Path

from relrl.data.dataset_io import atomic_write_jsonl, load_dataset, questions_fingerprint
from relrl.evaluation.cli import add_eval_args, model_label, settings_from_args
from relrl.evaluation.runner import ModelRun, check_rows, model_generator, progress_path
from relrl.evaluation.shards import (
    load_shards,
    merged_model_result,
    resolve_shard,
    shard_path,
    shard_rows,
    write_result,
)
from relrl.models.by_name import open_engine
from relrl.runtime.cli import ArgumentParser, UsageError, env_default, run_main

DEFAULT_MODEL = "unsloth/Qwen3-8B-unsloth-bnb-4bit"


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"base model to screen with (default {DEFAULT_MODEL})")
    parser.add_argument("--dataset", default=env_default("DATASET_PATH", None),
                        help="questions to screen, JSONL in the study's schema (env DATASET_PATH)")
    parser.add_argument("--output-dir", default=env_default("OUTPUT_DIR", None),
                        help="folder for mixed.jsonl, non_mixed.jsonl, screening.json (env OUTPUT_DIR)")
    add_eval_args(parser, samples=4, temperature=0.8)
    args = parser.parse_args(argv)
    if not args.dataset:
        parser.error("--dataset is required (or set DATASET_PATH)")
    if not args.output_dir:
        parser.error("--output-dir is required (or set OUTPUT_DIR)")
    if args.samples < 2:
        parser.error("--samples: screening needs at least 2 samples per question to find mixed ones")
    return args


def classify(pass_count: int, samples: int) -> str:
    if pass_count == samples:
        return "all_correct"
    return "all_wrong" if pass_count == 0 else "mixed"


def screening_result(result: dict) -> dict:
    """The model result plus each question's class and the summary counts."""
    records = [{**r, "class": classify(r["pass_count"], r["samples"])} for r in result["results"]]
    counts = {name: sum(r["class"] == name for r in records) for name in ("all_correct", "all_wrong", "mixed")}
    histogram = {str(k): sum(r["pass_count"] == k for r in records) for k in range(result["samples"] + 1)}
    summary = {key: value for key, value in result.items() if key != "results"}
    return {**summary, "kind": "screening", "classes": counts, "pass_count_histogram": histogram,
            "results": records}


def write_outputs(folder: Path, rows: list[dict], screening: dict, records: str = "inline") -> None:
    by_id = {str(r["id"]): r for r in screening["results"]}
    mixed, non_mixed = [], []
    for row in rows:
        record = by_id[str(row["id"])]
        out = {**row, "base_score": record["pass_count"], "base_samples": record["samples"]}
        (mixed if record["class"] == "mixed" else non_mixed).append(out)
    atomic_write_jsonl(folder / "mixed.jsonl", mixed)
    atomic_write_jsonl(folder / "non_mixed.jsonl", non_mixed)
    # last: its presence means "complete"
    write_result(folder / "screening.json", screening, records=records)
    c = screening["classes"]
    print(f"{len(rows)} questions: {c['mixed']} mixed, {c['all_correct']} all correct, "
          f"{c['all_wrong']} all wrong; wrote {folder}/mixed.jsonl, non_mixed.jsonl, screening.json")


def main(argv=None):
    args = parse_args(argv)
    settings = settings_from_args(args)
    folder = Path(args.output_dir)
    if folder.exists() and not folder.is_dir() or not folder.parent.is_dir():
        raise UsageError(f"--output-dir: {folder} is not a folder, nor one that can be made "
                         f"in an existing folder")
    rows = load_dataset(args.dataset)[: args.max_questions]
    check_rows(rows, args.dataset)
    folder.mkdir(exist_ok=True)  # only once the input is known to be good
    fingerprint = questions_fingerprint(rows)
    output = folder / "screening.json"

    if args.merge:
        shards = load_shards(output, fingerprint)
        merged = merged_model_result(rows, shards, "screening")
        write_outputs(folder, rows, screening_result(merged), args.records)
        return 0

    shard = resolve_shard(args.shard)
    part = shard_rows(rows, *shard)
    target = output if shard[1] == 1 else shard_path(output, *shard)
    run = ModelRun(part, settings, label=model_label(args.model), model_path=args.model,
                   adapter=None, dataset=args.dataset,
                   progress_file=progress_path(target, "screen"),
                   rollout_engine=args.rollout_engine)

    engine, tokenizer = open_engine(args, max_new_tokens=settings.max_new_tokens)
    with engine:
        screening = screening_result(run.evaluate(model_generator(engine, tokenizer, settings)))
    if shard[1] == 1:
        write_outputs(folder, rows, screening, args.records)
    else:
        written = write_result(output, screening, shard, fingerprint, records=args.records)
        print(f"wrote {written}; run --merge once every shard has finished")
    return 0


if __name__ == "__main__":
    run_main(main)
