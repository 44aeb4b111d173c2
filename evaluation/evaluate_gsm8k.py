"""General-maths forgetting check on GSM8K: a model, or a base and its adapter, on grade-school
word problems outside the training domain.

Questions come from a local GSM8K-format file (JSONL or parquet with `question` and an `answer`
whose last line is `#### number`), or, only with --hub, from the hub dataset openai/gsm8k
(needs network). Answers are graded as exact numbers (--tolerance 0 by default).

  python evaluation/evaluate_gsm8k.py --model tiny-random --dataset data/gsm8k_test.jsonl \\
      --adapter runs/exp7/checkpoint-80 --output results/gsm8k_ckpt80.json
  python evaluation/evaluate_gsm8k.py --model Qwen/Qwen3-8B --hub --max-questions 500 --output results/gsm8k_base.json
"""
from pathlib import Path

from relrl.data.dataset_io import DatasetError, parse_json, question_id, read_text
from relrl.evaluation.cli import add_eval_args, add_model_args, run_cli
from relrl.runtime.cli import ArgumentParser, UsageError, env_default, run_main

DEFAULT_MODEL = "unsloth/Qwen3-8B-unsloth-bnb-4bit"
HUB_ID = "openai/gsm8k"


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(parser, DEFAULT_MODEL,
                   dataset_help="GSM8K-format JSONL or parquet (answers end in '#### number')")
    parser.add_argument("--hub", action="store_true",
                        help=f"read {HUB_ID} from the Hugging Face hub instead of --dataset (network)")
    parser.add_argument("--split", default="test", help="hub split with --hub (default test)")
    parser.add_argument("--adapter", default=env_default("LORA_PATH", None),
                        help="LoRA adapter: evaluate base and adapter, paired (env LORA_PATH)")
    parser.add_argument("--base-results", default=None,
                        help="earlier base result on the same questions: evaluate the adapter only")
    add_eval_args(parser)
    parser.set_defaults(tolerance=0.0)
    args = parser.parse_args(argv)
    if args.hub == bool(args.dataset):
        parser.error("give either --dataset FILE (GSM8K JSONL or parquet) or --hub")
    if args.base_results and not args.adapter:
        parser.error("--base-results: only meaningful with --adapter")
    return args


def final_answer(answer: str) -> str | None:
    """The number after GSM8K's `####` marker, without thousands separators."""
    if "####" not in answer:
        return None
    text = answer.rsplit("####", 1)[1].strip().replace(",", "").replace("$", "")
    try:
        float(text)
    except ValueError:
        return None
    return text


def to_rows(records, where: str) -> list[dict]:
    """Study-schema rows from GSM8K records; a bad record names its position."""
    rows = []
    for line, record in enumerate(records, start=1):
        question = record.get("question") if isinstance(record, dict) else None
        answer = record.get("answer") if isinstance(record, dict) else None
        if not isinstance(question, str) or not question.strip():
            raise DatasetError(f"{where}:{line}: missing 'question'")
        if not isinstance(answer, str):
            raise DatasetError(f"{where}:{line}: missing 'answer'")
        target = final_answer(answer)
        if target is None:
            raise DatasetError(f"{where}:{line}: answer has no '#### number' line")
        rows.append({"id": question_id(question), "question": question, "answer": target,
                     "answer_type": "numeric", "source": "gsm8k",
                     "reasoning": answer.rsplit("####", 1)[0].strip()})
    if not rows:
        raise DatasetError(f"{where}: no questions")
    return rows


def read_local(path: str) -> list[dict]:
    file = Path(path)
    if not file.is_file():
        raise DatasetError(f"{path}: no such file")
    if file.suffix == ".parquet":
        import pandas as pd

        try:
            return pd.read_parquet(file).to_dict("records")
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise DatasetError(f"{path}: not a readable parquet file ({type(exc).__name__})") from None
    records = []
    for line_no, line in enumerate(read_text(file).splitlines(), start=1):
        if line.strip():
            records.append(parse_json(line, path, line_no))  # bounded; a DatasetError
    return records


def read_hub(split: str) -> list[dict]:
    import datasets

    try:
        return list(datasets.load_dataset(HUB_ID, "main", split=split))
    except Exception as exc:  # offline, unknown split: one line, not a traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"--hub: cannot load {HUB_ID} split {split!r}: {first}") from None


def main(argv=None):
    args = parse_args(argv)
    if args.hub:
        args.dataset = f"hf:{HUB_ID}/main/{args.split}"
        rows = to_rows(read_hub(args.split), args.dataset)
    else:
        rows = to_rows(read_local(args.dataset), args.dataset)
    return run_cli(args, rows[: args.max_questions])


if __name__ == "__main__":
    run_main(main)
