"""Keep a generated question only when a second model, not shown the answer, solves it to the
same number (the shared grader, within --tolerance).

Each item is sent with the same system prompt the models are evaluated with. An item is kept
when the verifier's answer matches the generated one; otherwise it goes to the rejected file
with the reason (a different value and by how much, no extractable answer, a cut-off answer).
Answers are appended to <kept>.progress.jsonl as they arrive, so a rerun pays for nothing twice;
the kept and rejected files are written once every item has an answer.

  python generators/verify_generated.py --input data/generated.jsonl --model openai/o3-mini \
      --kept data/generated_verified.jsonl --rejected data/generated_rejected.jsonl
"""
import argparse
import hashlib
import sys
from pathlib import Path

from tqdm import tqdm

from relrl.data.dataset_io import ProgressFile, atomic_write_jsonl, load_dataset
from relrl.data.prompting import chat_messages
from relrl.evaluation import api_client as api
from relrl.evaluation.api_jobs import run_jobs
from relrl.evaluation.runner import check_rows
from relrl.grading.scoring import grade
from relrl.grading.target_kind import target_kind_of
from relrl.runtime.cli import ArgumentParser, UsageError, add_tolerance_rule_arg, positive_int, run_main


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="generated items, any dataset file")
    parser.add_argument("--model", required=True, help="verifier model id at the endpoint")
    parser.add_argument("--kept", required=True, help="JSONL of items the verifier agrees with")
    parser.add_argument("--rejected", required=True, help="JSONL of the others, with reasons")
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="relative tolerance for agreement (default 0.05)")
    add_tolerance_rule_arg(parser)
    parser.add_argument("--allow-plain", action=argparse.BooleanOptionalAction, default=True,
                        help="read a final plain number when there is no \\boxed{} (default on)")
    parser.add_argument("--temperature", type=float, default=None,
                        help="verifier temperature (default: the provider's)")
    parser.add_argument("--max-tokens", type=positive_int("--max-tokens"), default=None,
                        help="answer length limit (not sent by default)")
    api.add_api_arguments(parser)
    args = parser.parse_args(argv)
    if not args.tolerance >= 0:
        parser.error(f"--tolerance must be >= 0, got {args.tolerance}")
    return args


def question_hash(row: dict) -> str:
    return hashlib.sha256(f"{row['question']}\x00{row['answer']}".encode("utf-8")).hexdigest()[:12]


def verdict(row: dict, answer: dict, args) -> tuple[bool, str, dict]:
    """(kept, reason, fields to add) from the verifier's stored answer."""
    g = grade(answer["text"], row["answer"], tolerance=args.tolerance, rule=args.tolerance_rule,
              target_kind=target_kind_of(row), allow_plain=args.allow_plain,
              truncated=answer["finish_reason"] == "length")
    fields = {"verified_by": args.model, "verifier_answer": g.extracted,
              "verifier_value": g.value}
    if g.correct:
        return True, "", fields
    if answer["finish_reason"] == "length":
        return False, "verifier's answer was cut off (max tokens)", fields
    if g.value is None:
        return False, f"verifier gave no extractable answer ({g.reason})", fields
    return False, (f"verifier answered {g.extracted}, generated answer {row['answer']} "
                   f"({g.reason})"), fields


def main(argv=None):
    args = parse_args(argv)
    rows = load_dataset(args.input)
    check_rows(rows, args.input)
    kept_path, rejected_path = Path(args.kept), Path(args.rejected)
    for flag, path in (("--kept", kept_path), ("--rejected", rejected_path)):
        if not path.parent.is_dir():
            raise UsageError(f"{flag}: folder {path.parent} does not exist")
    if kept_path.resolve() == rejected_path.resolve():
        raise UsageError("--kept and --rejected must be different files")
    client = api.client_from_args(args, args.model)
    progress = ProgressFile(kept_path.with_name(kept_path.name + ".progress.jsonl"), key="id")
    done = progress.load()
    for record in done.values():
        if record.get("model") != args.model:
            raise UsageError(f"{progress.path}: answers of {record.get('model')}, not "
                             f"{args.model}; use another --kept path")
    by_id = {str(row["id"]): row for row in rows}
    stale = [k for k, r in done.items() if k in by_id and r["q"] != question_hash(by_id[k])]
    if stale:
        raise UsageError(f"{progress.path}: item {stale[0]} changed since it was verified; "
                         "use another --kept path")
    todo = [row for row in rows if str(row["id"]) not in done]

    def solve(row: dict) -> api.ChatResult:
        return client.chat(chat_messages(row["question"]), temperature=args.temperature,
                           max_tokens=args.max_tokens)

    with tqdm(total=len(rows), initial=len(rows) - len(todo), desc="verified", file=sys.stderr,
              disable=None) as bar:
        def save(row: dict, result: api.ChatResult) -> None:
            record = {"id": str(row["id"]), "q": question_hash(row), "model": args.model,
                      "text": result.text, "finish_reason": result.finish_reason,
                      "usage": result.usage()}
            progress.append(record)
            done[record["id"]] = record
            bar.update(1)

        try:
            report = run_jobs(todo, solve, save, workers=args.workers,
                              should_stop=lambda _: api.over_budget(args, client))
        finally:
            api.log(f"this run: {client.totals.line()}")
    for row, reason in report.failures:
        api.log(f"item {row['id']} not verified: {reason}")
    missing = [row for row in rows if str(row["id"]) not in done]
    if missing:
        why = report.stopped or ("--max-cost reached" if api.over_budget(args, client)
                                 else "request failures")
        api.log(f"{len(missing)} of {len(rows)} items have no answer yet ({why}); answers so "
                "far are saved, rerun to finish")
        return 1
    kept, rejected = [], []
    for row in rows:
        ok, reason, fields = verdict(row, done[str(row["id"])], args)
        if ok:
            kept.append({**row, **fields})
        else:
            rejected.append({**row, **fields, "rejected_reason": reason})
    atomic_write_jsonl(kept_path, kept)
    atomic_write_jsonl(rejected_path, rejected)
    print(f"kept {len(kept)}/{len(rows)} -> {kept_path}; rejected {len(rejected)} -> "
          f"{rejected_path}", flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
