"""Run API models (OpenRouter or any OpenAI-compatible endpoint) on a dataset and grade them.

Writes one "model result" JSON per model, the same schema as a local evaluation, so
compare_results.py puts frontier models beside our own. Every answer is appended to a progress
file the moment it arrives: a rerun (after a kill, a 429 storm or --max-cost) sends no request
for an answer already paid for. Grading uses the shared grader with --allow-plain on by default,
since frontier models often end with a "Final answer" line instead of \\boxed{}.

  export OPENROUTER_API_KEY=...
  python evaluation/benchmark_api_models.py --models openai/o3-mini google/gemini-3.1-pro-preview \
      --dataset data/holdout_54q.jsonl --output-dir results/api
"""
import argparse
import hashlib
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from relrl.data.dataset_io import load_dataset, questions_fingerprint
from relrl.data.prompting import chat_messages
from relrl.evaluation import api_client as api
from relrl.evaluation.api_jobs import run_jobs
from relrl.evaluation.model_results import model_result, summary_line
from relrl.evaluation.results_io import add_records_arg
from relrl.evaluation.runner import Progress, check_rows, progress_path, score_question
from relrl.evaluation.settings import EvalSettings, eval_range
from relrl.evaluation.shards import write_result
from relrl.runtime.cli import (
    ArgumentParser,
    UsageError,
    add_tolerance_rule_arg,
    env_default,
    number_type,
    positive_int,
    run_main,
)


@dataclass
class Answer:
    """One stored API answer, shaped like a local Completion for the shared scorer."""

    text: str
    truncated: bool


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", required=True, metavar="MODEL",
                        help="model ids at the endpoint, e.g. openai/o3-mini")
    parser.add_argument("--dataset", default=env_default("DATASET_PATH", None),
                        help="questions, JSONL in the study's schema (env DATASET_PATH)")
    parser.add_argument("--output-dir", default=env_default("OUTPUT_DIR", None),
                        help="folder for <model>.json results and their progress files "
                             "(env OUTPUT_DIR)")
    parser.add_argument("--label", default=None,
                        help="name in tables (one model only; default: the model id)")
    parser.add_argument("--samples", type=positive_int("--samples"), default=1,
                        help="answers per question (default 1)")
    # an API takes 0 (greedy), which a local sampler cannot
    parser.add_argument("--temperature", type=number_type("--temperature", float, ">= 0"),
                        default=None,
                        help="sampling temperature (default: not sent, the provider's default)")
    parser.add_argument("--top-p", type=number_type("--top-p", float, eval_range("top_p")),
                        default=None, help="nucleus sampling (not sent by default)")
    parser.add_argument("--max-tokens", type=positive_int("--max-tokens"), default=None,
                        help="completion limit; longer answers count as truncated (not sent by "
                             "default; reasoning models need room)")
    parser.add_argument("--seed", type=number_type("--seed", int, eval_range("seed")), default=None,
                        help="send seed+k with sample k, for providers that honour it")
    parser.add_argument("--tolerance", type=number_type("--tolerance", float, eval_range("tolerance")),
                        default=0.05,
                        help="relative tolerance for a correct answer (default 0.05)")
    add_tolerance_rule_arg(parser)
    parser.add_argument("--allow-plain", action=argparse.BooleanOptionalAction, default=True,
                        help="grade a final plain number when there is no \\boxed{} (default on)")
    parser.add_argument("--max-questions", type=positive_int("--max-questions"), default=None,
                        help="only the first N questions (a cheap trial)")
    add_records_arg(parser)
    api.add_api_arguments(parser)
    args = parser.parse_args(argv)
    if not args.dataset:
        parser.error("--dataset is required (or set DATASET_PATH)")
    if not args.output_dir:
        parser.error("--output-dir is required (or set OUTPUT_DIR)")
    if args.label and len(args.models) > 1:
        parser.error("--label names one model; drop it when running several")
    if len(set(args.models)) != len(args.models):
        parser.error("--models: a model is listed twice")
    return args


def slug(name: str) -> str:
    """A file name for a model id: openai/o3-mini -> openai_o3-mini."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"


def question_hash(row: dict) -> str:
    """Ties a stored answer to the question text it answers."""
    return hashlib.sha256(row["question"].encode("utf-8")).hexdigest()[:12]


class ModelBenchmark:
    """One model: its client, progress file and result path, opened (and checked) up front."""

    def __init__(self, args, model: str, rows: list[dict], output_dir: Path):
        self.args, self.model, self.rows = args, model, rows
        self.label = args.label or model
        self.client = api.client_from_args(args, model)
        self.output = output_dir / f"{slug(self.label)}.json"
        run = {"model": model, "base_url": self.client.base_url, "temperature": args.temperature,
               "top_p": args.top_p, "max_tokens": args.max_tokens, "seed": args.seed,
               "extra_body": args.extra_body}
        self.progress = Progress(progress_path(self.output, "api"), run)
        by_id = {str(row["id"]): row for row in rows}
        for record in self.progress.done.values():
            row = by_id.get(str(record["qid"]))
            if row is not None and record["q"] != question_hash(row):
                raise UsageError(f"{self.progress.file.path}: question {record['qid']} has other "
                                 "text than in --dataset; use another --output-dir")

    def todo(self) -> list[tuple[dict, int]]:
        return [(row, k) for row in self.rows for k in range(self.args.samples)
                if f"{row['id']}#{k}" not in self.progress.done]

    def ask(self, job: tuple[dict, int]) -> api.ChatResult:
        row, k = job
        return self.client.chat(chat_messages(row["question"]), temperature=self.args.temperature,
                                top_p=self.args.top_p, max_tokens=self.args.max_tokens,
                                seed=None if self.args.seed is None else self.args.seed + k)

    def save(self, job: tuple[dict, int], result: api.ChatResult) -> None:
        row, k = job
        self.progress.add({"id": f"{row['id']}#{k}", "qid": row["id"], "sample": k,
                           "q": question_hash(row), "text": result.text,
                           "finish_reason": result.finish_reason, "served_by": result.model,
                           "usage": result.usage()})

    def result(self) -> dict:
        settings = EvalSettings(samples=self.args.samples, seed=self.args.seed or 0,
                                temperature=self.args.temperature, top_p=self.args.top_p,
                                max_new_tokens=self.args.max_tokens,
                                tolerance=self.args.tolerance,
                                tolerance_rule=self.args.tolerance_rule,
                                allow_plain=self.args.allow_plain)
        answers = defaultdict(dict)
        for record in self.progress.done.values():
            answers[str(record["qid"])][record["sample"]] = record
        totals = api.UsageTotals()
        records = []
        for row in self.rows:
            stored = [answers[str(row["id"])][k] for k in range(self.args.samples)]
            graded = score_question(row, [Answer(s["text"], s["finish_reason"] == "length")
                                          for s in stored], settings)
            graded["usage"] = _sum_usage(s["usage"] for s in stored)
            for s in stored:
                totals.add(s["usage"])
            records.append(graded)
        result = model_result(records, label=self.label, model_path=self.model, adapter=None,
                              dataset=self.args.dataset,
                              fingerprint=questions_fingerprint(self.rows), settings=settings)
        result["source"] = "api"
        result["api"] = {"base_url": self.client.base_url, "extra_body": self.args.extra_body}
        usage = totals.as_dict()
        usage.pop("requests")  # attempts of earlier runs are not stored, only their answers
        result["usage"] = usage
        results = result.pop("results")  # keep the per-question list last, as local results do
        result["results"] = results
        return result


def _sum_usage(usages) -> dict:
    usages = list(usages)
    costs = [u.get("cost_usd") for u in usages]
    return {"prompt_tokens": sum(u.get("prompt_tokens") or 0 for u in usages),
            "completion_tokens": sum(u.get("completion_tokens") or 0 for u in usages),
            "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 8)}


def main(argv=None):
    args = parse_args(argv)
    rows = load_dataset(args.dataset)[: args.max_questions]
    check_rows(rows, args.dataset)
    output_dir = Path(args.output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise UsageError(f"--output-dir: {output_dir} is a file")
    # Every client (key check) and progress file is opened before anything is sent or written.
    benches = [ModelBenchmark(args, model, rows, output_dir) for model in args.models]
    names = [b.output.name for b in benches]
    if len(set(names)) != len(names):
        raise UsageError(f"--models: two models would write the same file ({', '.join(names)})")
    output_dir.mkdir(parents=True, exist_ok=True)
    clients = [b.client for b in benches]
    unfinished = []
    for bench in benches:
        todo = bench.todo()
        with tqdm(total=len(rows) * args.samples, initial=len(rows) * args.samples - len(todo),
                  desc=bench.label, file=sys.stderr, disable=None, mininterval=5) as bar:
            def save(job, result, bench=bench, bar=bar):
                bench.save(job, result)
                bar.update(1)

            try:
                report = run_jobs(todo, bench.ask, save, workers=args.workers,
                                  should_stop=lambda _: api.over_budget(args, *clients))
            finally:
                api.log(f"{bench.label}: this run {bench.client.totals.line()}")
        for (row, k), reason in report.failures:
            api.log(f"{bench.label}: question {row['id']} sample {k} not answered: {reason}")
        missing = len(bench.todo())
        if missing:
            why = report.stopped or ("--max-cost reached" if api.over_budget(args, *clients)
                                     else "request failures")
            unfinished.append(f"{bench.label}: {missing} answers missing ({why})")
            continue
        result = bench.result()
        write_result(bench.output, result, records=args.records)
        print(f"{summary_line(result)} -> {bench.output}", flush=True)
    if unfinished:
        for line in unfinished:
            api.log(line)
        api.log("answers so far are saved; rerun the same command to finish")
        return 1
    return 0


if __name__ == "__main__":
    run_main(main)
