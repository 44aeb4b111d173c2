"""The shared evaluation runner: sample, grade, record, resume.

Every evaluation script (and SFT fold scoring) goes through `evaluate_rows`, which takes a
`generate(rows, seeds, n)` function, so the bookkeeping is tested with a fake model; the real
one (`model_generator`) holds a rollout engine (relrl.engines: hf, hf-merged or vllm). Each
question's completions are seeded from (run seed, question id), so a question's outcome does
not depend on batch size, shard or resume point; that is what makes a merged or resumed run
equal an uninterrupted one (relrl.evaluation.shards splits and merges).

Per-question records follow the "model result" schema (relrl.evaluation.model_results): the
first sample's target, extracted answer, correctness, truncation and response, plus
`pass_count` out of `samples`, and for K > 1 every sample under `completions`. With --tools,
each sample also keeps its `transcript` (tool calls and answers included; `response`, the
graded text, is the model's last turn) and its `tool_calls` and `tool_errors`.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from relrl.data.dataset_io import DatasetError, ProgressFile, questions_fingerprint
from relrl.data.prompting import build_prompt
from relrl.engines import Engine, SamplingConfig, question_seed
from relrl.evaluation.model_results import model_result, summary_line
from relrl.evaluation.settings import EvalSettings, setting_changes
from relrl.grading.scoring import grade
from relrl.grading.target_kind import target_kind_of
from relrl.models.by_name import make_engine
from relrl.runtime.cli import UsageError

# generate(rows, seeds, n) -> one list of n completions (objects with .text, .truncated) per row
Generate = Callable[[list[dict], list[int], int], list[list]]


HEADER_ID = "__run__"


ROW_FIELDS_KEPT = ("base_score", "base_samples", "family", "group", "topic", "difficulty", "source",
                   "target_kind")


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
        if settings.uses_tools:  # without tools a record keeps exactly the study's fields
            graded[-1].update(transcript=completion.transcript, tool_calls=completion.tool_calls,
                              tool_errors=completion.tool_errors)
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
            detail = setting_changes((header.get("run") or {}).get("settings"),
                                     self.run.get("settings"))
            raise UsageError(f"{path}: progress of a different run (differs in {', '.join(changed)})"
                             f"{'; ' + detail if detail else ''}; delete it or choose another --output")
        self._has_header = header is not None

    def add(self, record: dict) -> None:
        if not self._has_header:
            self.file.append({"id": HEADER_ID, "run": self.run})
            self._has_header = True
        self.file.append(record)
        self.done[str(record["id"])] = record


def progress_path(target: str | Path, role: str) -> Path:
    target = Path(target)
    return target.with_name(f"{target.name}.{role}.progress.jsonl")


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
                            micro_batch=settings.micro_batch, tools=settings.tools,
                            max_tool_calls=settings.max_tool_calls)

    def run(rows: list[dict], seeds: list[int], n: int) -> list[list]:
        prompts = [build_prompt(tokenizer, row["question"], tools=settings.tools) for row in rows]
        return engine.generate(prompts, n, seeds, config)

    return run


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
            if rollout_engine != "hf":  # the default left out: a run header without it matches
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
