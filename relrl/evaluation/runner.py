"""The shared evaluation runner: sample, grade, record, resume, shard, merge.

Every evaluation script (and SFT fold scoring) goes through `evaluate_rows`, which takes a
`generate(rows, seeds, n)` function, so the bookkeeping is tested with a fake model; the real
one (`model_generator`) holds a rollout engine (relrl.engines: hf or vllm). Each
question's completions are seeded from (run seed, question id), so a question's outcome does
not depend on batch size, shard or resume point; that is what makes a merged or resumed run
equal an uninterrupted one.

Per-question records follow the "model result" schema: the first sample's target, extracted
answer, correctness, truncation and response, plus `pass_count` out of `samples`, and for
K > 1 every sample under `completions`. Aggregates count all n x K completions.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from relrl.data.dataset_io import DatasetError, ProgressFile, load_dataset, questions_fingerprint
from relrl.data.prompting import build_prompt
from relrl.engines import TOP_K_HELP, Engine, SamplingConfig, add_engine_args, question_seed
from relrl.evaluation import results_io
from relrl.evaluation.guess_baselines import describe, score_baselines, with_baselines
from relrl.evaluation.stats import (
    discordant,
    mcnemar,
    paired_bootstrap_ci,
    paired_permutation_test,
    pass_at_k,
)
from relrl.evaluation.strata import strata
from relrl.grading.scoring import grade
from relrl.grading.target_kind import target_kind_of
from relrl.modeling.loading import check_adapter_dir, check_model_source
from relrl.models.by_name import make_engine, open_engine
from relrl.runtime.cli import (
    UsageError,
    add_load_args,
    add_tolerance_rule_arg,
    env_default,
    parse_shard,
    positive_int,
)

# generate(rows, seeds, n) -> one list of n completions (objects with .text, .truncated) per row
Generate = Callable[[list[dict], list[int], int], list[list]]
HEADER_ID = "__run__"
ROW_FIELDS_KEPT = ("base_score", "base_samples", "family", "group", "topic", "difficulty", "source",
                   "target_kind")


@dataclass(frozen=True)
class EvalSettings:
    samples: int = 1
    seed: int = 0
    temperature: float = 1.0
    top_p: float = 0.95
    max_new_tokens: int = 3072
    tolerance: float = 0.05
    tolerance_rule: str = "study"  # or "complement" (relrl.grading.scoring)
    top_k: int = 0  # 0: off
    allow_plain: bool = False
    micro_batch: int = 16  # sequences per forward pass: speed only, never results

    def signature(self) -> dict:
        """The settings that change results (a resumed run must match them)."""
        sig = asdict(self)
        sig.pop("micro_batch")
        if not sig["top_k"]:  # added later: off leaves it out, so earlier results still match
            sig.pop("top_k")
        if sig["tolerance_rule"] == "study":  # added later, likewise
            sig.pop("tolerance_rule")
        return sig


# ---------------------------------------------------------------------------- running


def check_rows(rows: Sequence[dict], source: str) -> None:
    """Refuse duplicate ids before any work: results and progress are keyed by id."""
    seen: dict[str, int] = {}
    for index, row in enumerate(rows, start=1):
        qid = str(row["id"])
        if qid == HEADER_ID:
            raise DatasetError(f"{source}: row {index}: id {HEADER_ID!r} is reserved")
        if qid in seen:
            raise DatasetError(f"{source}: rows {seen[qid]} and {index} share the id {qid!r} "
                               "(duplicate question?)")
        seen[qid] = index


def score_question(row: dict, completions: Sequence, settings: EvalSettings) -> dict:
    graded = []
    for completion in completions:
        g = grade(completion.text, row["answer"], tolerance=settings.tolerance,
                  rule=settings.tolerance_rule, target_kind=target_kind_of(row),
                  allow_plain=settings.allow_plain, truncated=bool(completion.truncated))
        graded.append({"extracted": g.extracted, "value": g.value, "correct": bool(g.correct),
                       "truncated": bool(completion.truncated), "reward": g.reward,
                       "response": completion.text})
    first = graded[0]
    record = {"id": row["id"], "question": row["question"], "target": row["answer"], **first,
              "pass_count": sum(c["correct"] for c in graded), "samples": len(graded)}
    if len(graded) > 1:
        record["completions"] = graded
    record.update({key: row[key] for key in ROW_FIELDS_KEPT if key in row})
    return record


class Progress:
    """A progress file whose first line names the run, so a resume with other settings,
    another model or other questions is refused instead of silently mixed in."""

    def __init__(self, path: str | Path, run: dict):
        self.file = ProgressFile(path, key="id")
        self.run = json.loads(json.dumps(run))  # compare as it will read back
        self.done = self.file.load()  # corrupt line -> DatasetError, before any work
        header = self.done.pop(HEADER_ID, None)
        if header is None and self.done:
            raise DatasetError(f"{path}: progress file has no run header line")
        if header is not None and header.get("run") != self.run:
            changed = sorted(k for k in set(self.run) | set(header.get("run") or {})
                             if (header.get("run") or {}).get(k) != self.run.get(k))
            raise UsageError(f"{path}: progress of a different run (differs in {', '.join(changed)}); "
                             "delete it or choose another --output")
        self._has_header = header is not None

    def add(self, record: dict) -> None:
        if not self._has_header:
            self.file.append({"id": HEADER_ID, "run": self.run})
            self._has_header = True
        self.file.append(record)
        self.done[str(record["id"])] = record


def evaluate_rows(rows: Sequence[dict], generate: Generate, settings: EvalSettings, *,
                  progress: Progress | None = None, desc: str = "eval") -> list[dict]:
    """Per-question records in row order, resuming from and appending to `progress`."""
    from tqdm import tqdm

    done = progress.done if progress is not None else {}
    todo = [row for row in rows if str(row["id"]) not in done]
    per_call = max(1, settings.micro_batch // settings.samples)
    results = dict(done)
    # In a SLURM log (no terminal) the bar is redrawn at most every 30 s.
    with tqdm(total=len(rows), initial=len(rows) - len(todo), desc=desc, file=sys.stderr,
              mininterval=1 if sys.stderr.isatty() else 30) as bar:
        for start in range(0, len(todo), per_call):
            chunk = todo[start:start + per_call]
            seeds = [question_seed(settings.seed, str(row["id"])) for row in chunk]
            for row, completions in zip(chunk, generate(chunk, seeds, settings.samples), strict=True):
                record = score_question(row, completions, settings)
                if progress is not None:
                    progress.add(record)
                results[str(row["id"])] = record
                bar.update(1)
    return [results[str(row["id"])] for row in rows]


def model_generator(engine: Engine, tokenizer, settings: EvalSettings) -> Generate:
    """`generate` for a rollout engine: the shared prompt, seeded sampling."""
    config = SamplingConfig(temperature=settings.temperature, top_p=settings.top_p,
                            top_k=settings.top_k, max_new_tokens=settings.max_new_tokens,
                            micro_batch=settings.micro_batch)

    def run(rows: list[dict], seeds: list[int], n: int) -> list[list]:
        prompts = [build_prompt(tokenizer, row["question"]) for row in rows]
        return engine.generate(prompts, n, seeds, config)

    return run


# ---------------------------------------------------------------------------- results


def _pass_at(records: Sequence[dict], samples: int) -> dict:
    ks = sorted({k for k in (1, 2, 4, 8, 16, 32, 64) if k <= samples} | {samples})
    n = len(records)
    return {str(k): sum(pass_at_k(r["samples"], r["pass_count"], k) for r in records) / n for k in ks}


def difficulty_breakdown(records: Sequence[dict]) -> dict | None:
    """Accuracy by the base model's screening score ("0/4" ... "4/4"), when rows carry it."""
    groups: dict[tuple[int, int | None], list[dict]] = {}
    for r in records:
        if r.get("base_score") is not None:
            groups.setdefault((int(r["base_score"]), r.get("base_samples")), []).append(r)
    if not groups:
        return None
    table = {}
    for (score, of), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        correct = sum(r["pass_count"] for r in rs)
        total = sum(r["samples"] for r in rs)
        table[f"{score}/{of}" if of else str(score)] = {
            "n": len(rs), "correct": correct, "total": total, "accuracy": correct / total}
    return table


def model_result(records: Sequence[dict], *, label: str, model_path: str, adapter: str | None,
                 dataset: str, fingerprint: str, settings: EvalSettings,
                 rollout_engine: str | None = None) -> dict:
    """The "model result" object of the team contract, built only from records and metadata.
    `rollout_engine` (hf or vllm) is recorded when a model sampled the completions."""
    n = len(records)
    total = sum(r["samples"] for r in records)
    correct = sum(r["pass_count"] for r in records)
    samples = [c for r in records for c in r.get("completions", [r])]
    result = {
        "kind": "model_result", "model": label, "model_path": model_path, "adapter": adapter,
        "dataset": dataset, "fingerprint": fingerprint, "n": n, "correct": correct,
        "accuracy": correct / total if total else 0.0,
        "truncated": sum(c["truncated"] for c in samples),
        "unextracted": sum(c["value"] is None for c in samples),
        "samples": settings.samples, "seed": settings.seed, "tolerance": settings.tolerance,
        "tolerance_rule": settings.tolerance_rule,
        "settings": settings.signature(),
        "pass_at_k": _pass_at(records, settings.samples) if n else {},
    }
    if rollout_engine is not None:
        result["rollout_engine"] = rollout_engine
    by_score = difficulty_breakdown(records)
    if by_score is not None:
        result["by_base_score"] = by_score
    result["strata"] = strata(records)
    result["results"] = list(records)
    return result


def settings_of(result: dict) -> EvalSettings:
    return EvalSettings(**result["settings"])


_SLIM = ("id", "target", "extracted", "value", "correct", "truncated", "pass_count", "samples")


def compare_models(base: dict, ft: dict, *, n_boot: int = 10_000, run_name: str | None = None) -> dict:
    """The paired comparison file: the study's fields in its units (results_io.study_fields;
    `run_name` defaults to the fine-tuned model's label), then both model results, whose
    `accuracy` are the exact fractions (read them with results_io.pair_accuracies).

    With one sample per question the test is McNemar's (exact binomial p as `mcnemar_p`, the
    corrected chi-square beside it). With K > 1, `paired_test` (the exact sign-flip permutation
    test on per-question accuracies) is the primary test; McNemar then reports first samples.
    """
    check_same_questions(base, ft, "base results", "fine-tuned results")
    b_rec, f_rec = base["results"], ft["results"]
    b01, b10 = discordant([r["correct"] for r in b_rec], [r["correct"] for r in f_rec])
    mc = mcnemar(b01, b10)
    b_acc = [r["pass_count"] / r["samples"] for r in b_rec]
    f_acc = [r["pass_count"] / r["samples"] for r in f_rec]
    paired = paired_permutation_test([r["pass_count"] for r in b_rec], [r["samples"] for r in b_rec],
                                     [r["pass_count"] for r in f_rec], [r["samples"] for r in f_rec])
    one_sample = base["samples"] == 1 and ft["samples"] == 1
    return {
        "kind": "pair_result",
        "dataset": ft["dataset"], "fingerprint": ft["fingerprint"], "n": ft["n"],
        **results_io.study_fields(base["accuracy"], ft["accuracy"], n=ft["n"],
                                  run_name=run_name or ft["model"], lora_path=ft["adapter"]),
        "mcnemar_b01": b01, "mcnemar_b10": b10, "mcnemar_p": mc["exact_p"],
        "mcnemar_chi2": mc["chi2"], "mcnemar_chi2_p": mc["chi2_p"],
        "test": "mcnemar_exact" if one_sample else "paired_permutation",
        "p_value": mc["exact_p"] if one_sample else paired["p"],
        "paired_test": paired,
        "bootstrap_ci": paired_bootstrap_ci(b_acc, f_acc, n_boot=n_boot),
        "base_results": [{k: r[k] for k in _SLIM} for r in b_rec],
        "ft_results": [{k: r[k] for k in _SLIM} for r in f_rec],
        "base": base, "finetuned": ft,
    }


def check_same_questions(a: dict, b: dict, a_name: str, b_name: str) -> None:
    """Paired statistics need the same questions in the same order."""
    if a.get("fingerprint") != b.get("fingerprint") or \
            [r["id"] for r in a["results"]] != [r["id"] for r in b["results"]]:
        raise UsageError(f"{a_name} and {b_name} are for different questions (fingerprint "
                         f"{a.get('fingerprint')} vs {b.get('fingerprint')}); compare runs on one dataset")


def load_model_result(path: str | Path, role: str = "base") -> dict:
    """A model result from a result file: a model result itself, or one side of a pair file."""
    data = results_io.read_result(path)
    if isinstance(data, dict) and data.get("kind") == "pair_result":
        data = data["base" if role == "base" else "finetuned"]
    if not isinstance(data, dict) or data.get("kind") not in ("model_result", "screening") \
            or not isinstance(data.get("results"), list):
        raise DatasetError(f"{path}: not a model result or pair result JSON")
    return data


def summary_line(result: dict) -> str:
    k = result["samples"]
    of = f"{result['n']}" if k == 1 else f"{result['n']}x{k}"
    return (f"{result['model']}: {result['correct']}/{of} correct ({100 * result['accuracy']:.1f}%), "
            f"{result['truncated']} truncated, {result['unextracted']} without an answer")


# ---------------------------------------------------------------------------- shards


def shard_rows(rows: Sequence[dict], index: int, count: int) -> list[dict]:
    """Round-robin: shard i gets rows i, i+n, ... so families spread over shards."""
    return list(rows[index::count])


def shard_path(output: str | Path, index: int, count: int) -> Path:
    output = Path(output)
    return output.with_name(f"{output.stem}.shard-{index}-of-{count}{output.suffix}")


def progress_path(target: str | Path, role: str) -> Path:
    target = Path(target)
    return target.with_name(f"{target.name}.{role}.progress.jsonl")


def resolve_shard(spec: str | None) -> tuple[int, int]:
    """--shard, else the study's CHUNK_INDEX / N_CHUNKS, else SLURM array variables."""
    if spec is None:
        index, count = env_default("CHUNK_INDEX", None), env_default("N_CHUNKS", None)
        if index is not None and count is not None:
            spec = f"{index}/{count}"
    return parse_shard(spec)


def load_shards(output: str | Path, fingerprint: str) -> list[dict]:
    """All shard files of `output`, checked to be one complete set for this dataset."""
    output = Path(output)
    found = sorted(output.parent.glob(f"{output.stem}.shard-*-of-*{output.suffix}"))
    if not found:
        raise UsageError(f"--merge: no shard files {output.stem}.shard-I-of-N{output.suffix} "
                         f"in {output.parent}")
    counts = {int(p.stem.rsplit("-of-", 1)[1]) for p in found}
    if len(counts) != 1:
        raise UsageError(f"--merge: shard files of different shard counts {sorted(counts)} "
                         f"in {output.parent}; remove the stale ones")
    count = counts.pop()
    shards = []
    for index in range(count):
        path = shard_path(output, index, count)
        if not path.exists():
            raise UsageError(f"--merge: {path} is missing (run shard {index}/{count} first)")
        data = results_io.read_result(path)
        info = data.get("shard") if isinstance(data, dict) else None
        if not info or info.get("index") != index or info.get("count") != count:
            raise DatasetError(f"{path}: not shard {index}/{count} of a run")
        if info.get("dataset_fingerprint") != fingerprint:
            raise UsageError(f"--merge: {path} was run on another dataset than --dataset")
        shards.append(data)
    return shards


def merge_records(rows: Sequence[dict], parts: Sequence[Sequence[dict]]) -> list[dict]:
    """Records from all shards, in dataset order; every question exactly once."""
    by_id: dict[str, dict] = {}
    for part in parts:
        for record in part:
            if str(record["id"]) in by_id:
                raise UsageError(f"--merge: question {record['id']} appears in two shards")
            by_id[str(record["id"])] = record
    missing = [row["id"] for row in rows if str(row["id"]) not in by_id]
    if missing or len(by_id) != len(rows):
        raise UsageError(f"--merge: shards cover {len(by_id)} of {len(rows)} questions "
                         f"(missing e.g. {missing[:3]})")
    return [by_id[str(row["id"])] for row in rows]


def same_meta(results: Sequence[dict], what: str) -> None:
    """Refuse to merge one model's shard results that come from different runs."""
    keys = ("model", "model_path", "adapter", "dataset", "settings")
    first = {k: results[0][k] for k in keys}
    for other in results[1:]:
        if {k: other[k] for k in keys} != first:
            raise UsageError(f"--merge: the {what} shards come from different runs")


def with_records(result: dict, records: Sequence[dict]) -> dict:
    """`result` rebuilt over other records (a subset, or records merged from shards)."""
    return model_result(records, label=result["model"], model_path=result["model_path"],
                        adapter=result["adapter"], dataset=result["dataset"],
                        fingerprint=questions_fingerprint(
                            {"question": r["question"], "answer": r["target"]} for r in records),
                        settings=settings_of(result), rollout_engine=result.get("rollout_engine"))


def merged_model_result(rows: Sequence[dict], shard_results: Sequence[dict], what: str) -> dict:
    same_meta(shard_results, what)
    return with_records(shard_results[0], merge_records(rows, [s["results"] for s in shard_results]))


# ---------------------------------------------------------------------------- CLI pieces


def add_adapter_arg(parser) -> None:
    parser.add_argument("--adapter", default=env_default("LORA_PATH", None),
                        help="LoRA adapter folder to evaluate (env LORA_PATH)")


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


def add_eval_args(parser, *, samples: int = 1, temperature: float = 1.0, shards: bool = True) -> None:
    """Sampling, grading and (with `shards`) sharding flags shared by the evaluation scripts."""
    parser.add_argument("--samples", type=positive_int("--samples"), default=samples,
                        help=f"completions per question (default {samples})")
    parser.add_argument("--seed", type=int, default=0, help="run seed; each question's seed "
                        "derives from it and the question id (default 0)")
    parser.add_argument("--temperature", type=float, default=temperature,
                        help=f"sampling temperature (default {temperature})")
    parser.add_argument("--top-p", type=float, default=0.95, help="nucleus sampling (default 0.95)")
    parser.add_argument("--top-k", type=int, default=0, help=TOP_K_HELP)
    parser.add_argument("--max-new-tokens", type=positive_int("--max-new-tokens"), default=3072,
                        help="completion length limit; longer answers count as truncated "
                        "(default 3072, the study's; use less on a CPU)")
    parser.add_argument("--micro-batch", type=positive_int("--micro-batch"), default=16,
                        help="sequences per forward pass: memory and speed, never results (default 16)")
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="relative tolerance for a correct answer (default 0.05)")
    add_tolerance_rule_arg(parser)
    parser.add_argument("--allow-plain", action="store_true",
                        help="grade a final plain number when there is no \\boxed{} answer")
    parser.add_argument("--max-questions", type=positive_int("--max-questions"), default=None,
                        help="only the first N questions of the dataset (a quick look)")
    add_load_args(parser, unsloth=False)
    add_engine_args(parser)
    if shards:
        parser.add_argument("--shard", default=None, help="run shard i/n of the questions (0-based); "
                            "default CHUNK_INDEX/N_CHUNKS or the SLURM array variables")
        parser.add_argument("--merge", action="store_true",
                            help="merge finished shard files into --output and stop")


def settings_from_args(args) -> EvalSettings:
    if not args.temperature > 0:
        raise UsageError(f"--temperature: must be > 0, got {args.temperature}")
    if not 0 < args.top_p <= 1:
        raise UsageError(f"--top-p: must be in (0, 1], got {args.top_p}")
    if not args.top_k >= 0:
        raise UsageError(f"--top-k: must be >= 1 (or 0: off), got {args.top_k}")
    if not args.tolerance >= 0:
        raise UsageError(f"--tolerance: must be >= 0, got {args.tolerance}")
    return EvalSettings(samples=args.samples, seed=args.seed, temperature=args.temperature,
                        top_p=args.top_p, top_k=args.top_k, max_new_tokens=args.max_new_tokens,
                        tolerance=args.tolerance, tolerance_rule=args.tolerance_rule,
                        allow_plain=args.allow_plain,
                        micro_batch=args.micro_batch)


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


def write_result(path: str | Path, result: dict, shard: tuple[int, int] | None = None,
                 fingerprint: str | None = None) -> Path:
    """Write the final result, or a shard file carrying what --merge checks."""
    path = Path(path)
    if shard is not None and shard[1] > 1:
        result = {**result, "shard": {"index": shard[0], "count": shard[1],
                                      "dataset_fingerprint": fingerprint}}
        path = shard_path(path, *shard)
    results_io.write_result(path, result)
    return path


class ModelRun:
    """One model on one list of rows: the progress file is opened (and checked) at once, so a
    bad or foreign progress file stops a script before it loads a model."""

    def __init__(self, rows: Sequence[dict], settings: EvalSettings, *, label: str, model_path: str,
                 adapter: str | None, dataset: str, progress_file: str | Path | None = None,
                 rollout_engine: str = "hf"):
        check_rows(rows, dataset)
        self.rows, self.settings = list(rows), settings
        self.meta = {"label": label, "model_path": model_path, "adapter": adapter, "dataset": dataset,
                     "fingerprint": questions_fingerprint(rows), "settings": settings,
                     "rollout_engine": rollout_engine}
        self.progress = None
        if progress_file is not None:  # the label is left out: renaming a run keeps its work
            run = {"model_path": model_path, "adapter": adapter,
                   "fingerprint": self.meta["fingerprint"], "settings": settings.signature()}
            if rollout_engine != "hf":  # (progress files written before engines stay valid)
                run["rollout_engine"] = rollout_engine
            self.progress = Progress(progress_file, run)

    def evaluate(self, generate: Generate) -> dict:
        records = evaluate_rows(self.rows, generate, self.settings, progress=self.progress,
                                desc=self.meta["label"])
        result = model_result(records, **self.meta)
        print(summary_line(result), flush=True)
        return result


def score_model(model, tokenizer, rows: Sequence[dict], settings: EvalSettings, *, label: str,
                model_path: str, adapter: str | None, dataset: str,
                progress_file: str | Path | None = None) -> dict:
    """Evaluate a loaded model on rows and return its model result (used by SFT fold scoring).
    With `progress_file`, finished questions are appended there and a rerun resumes."""
    run = ModelRun(rows, settings, label=label, model_path=model_path, adapter=adapter,
                   dataset=dataset, progress_file=progress_file)
    return run.evaluate(model_generator(make_engine("hf", model, tokenizer), tokenizer, settings))


# ---------------------------------------------------------------------------- script flow


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
        write_result(output, add_baselines(result, rows, train_rows, settings, args.baseline_train))
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
    written = write_result(output, result, shard, fingerprint)
    print(f"wrote {written}" + ("; run --merge once every shard has finished" if shard[1] > 1 else ""))
    return 0


def add_model_args(parser, default_model: str, *, base_label: bool = True,
                   dataset_help: str = "questions, JSONL in the study's schema",
                   study_default_output: bool = False) -> None:
    """--model, --dataset, --output (required, or with `study_default_output` the study's
    OUTPUT_DIR/RUN_NAME file: see study_output) and the labels used in tables."""
    parser.add_argument("--model", default=default_model,
                        help=f"base model: hub id, local folder, tiny or tiny-random (default {default_model})")
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
