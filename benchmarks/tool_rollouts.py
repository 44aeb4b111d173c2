"""Tool rollouts on vLLM in rounds against asynchronous ones, beside rollouts without tools, in
one run (issue 47).

For each batch (questions x G samples), on one vLLM engine serving `tiny-tool`:
  rounds  every request ends its turn before any call is answered (the HF engine's way)
  async   each request answered and re-enqueued at once (the vLLM engine's default)
  none    the same questions without the calculator, one turn
The three run interleaved, --repeats times, after one warm-up call each; a cell is the best
repeat (the least disturbed by other jobs; every repeat's wall time is kept too). Tokens are the model's own (sampled); inserted tool turns are prefilled, not counted.
Wall time is what a run waits; CPU time (this process's: vLLM runs in it) is kept beside it,
since another job on a shared machine inflates the wall time of whatever runs beside it.

Why the asynchronous loop saves steps but maybe not time: every scheduler step is timed with
the sequences in flight and the prompt tokens it prefills, and a least-squares fit of the
rounds' and asynchronous steps, seconds = fixed + per sequence x in flight + per token x
prefilled, says what a step costs; the fit's predicted async / rounds ratio is set beside the
measured one and beside the step ratio (what a device whose step costs the same whatever it
holds would give).

    python benchmarks/tool_rollouts.py [--batches 16 32 64] [-G 4] [--repeats 3]

Writes results/tool-rollouts/benchmark.json (a list of rows, one per batch) and prints the table.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from relrl.data.dataset_io import atomic_write_json
from relrl.data.prompting import build_prompt
from relrl.engines.base import SamplingConfig, question_seed
from relrl.engines.vllm import vllm_release
from relrl.engines.vllm_steps import VLLMTurns
from relrl.models.by_name import load_tokenizer, make_engine
from relrl.models.tiny_tool_build import RECIPE, training_rows
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import TOOL_FAMILIES, select
from relrl.runtime.cli import ArgumentParser, positive_int, run_main

ROOT = Path(__file__).resolve().parent.parent
MODES = ("rounds", "async", "none")


class TimedTurns(VLLMTurns):
    """VLLMTurns that logs each step: (seconds, sequences in flight, prompt tokens prefilled)."""

    def __init__(self, engine, sampling, log: list):
        super().__init__(engine, sampling)
        self.log, self.prefill = log, 0

    def submit(self, keys, requests):
        self.prefill += sum(len(r.ids) for r in requests)
        super().submit(keys, requests)

    def step(self):
        in_flight, start = self.core.get_num_unfinished_requests(), time.perf_counter()
        ended = super().step()
        self.log.append((time.perf_counter() - start, in_flight, self.prefill))
        self.prefill = 0
        return ended


def step_cost(logs: dict[str, list[list[tuple]]], sync_steps: int, async_steps: int) -> dict:
    """The least-squares step cost over every timed step of the rounds and asynchronous runs,
    and the async / rounds ratio it predicts from one run of each (their steps are the same at
    every repeat: the same tokens)."""
    steps = [s for mode in ("rounds", "async") for run in logs[mode] for s in run]
    seconds = np.array([s[0] for s in steps])
    design = np.array([[1.0, s[1], s[2]] for s in steps])
    (fixed, per_seq, per_token), *_ = np.linalg.lstsq(design, seconds, rcond=None)
    fitted = design @ np.array([fixed, per_seq, per_token])
    spread = ((seconds - seconds.mean()) ** 2).sum()
    r2 = 1 - ((seconds - fitted) ** 2).sum() / spread if spread > 0 else 1.0

    def predicted(mode):
        return sum(fixed + per_seq * s[1] + per_token * s[2] for s in logs[mode][0])

    return {"step_fixed_ms": round(1000 * fixed, 3), "step_per_sequence_ms": round(1000 * per_seq, 4),
            "step_per_prefill_token_ms": round(1000 * per_token, 5), "step_fit_r2": round(r2, 3),
            "step_fixed_share_rounds": round(fixed * sync_steps / predicted("rounds"), 3),
            "async_speedup_predicted": round(predicted("rounds") / predicted("async"), 3),
            "async_speedup_if_steps_cost_alike": round(sync_steps / async_steps, 3)}


def timed_call(engine, prompts, G, seeds, sampling):
    """(completions, wall seconds, CPU seconds, scheduler steps) of one generate call."""
    steps, wall, cpu = engine.steps, time.perf_counter(), time.process_time()
    out = [c for row in engine.generate(prompts, G, seeds, sampling) for c in row]
    return out, time.perf_counter() - wall, time.process_time() - cpu, engine.steps - steps


def run_mode(engine, tok, rows, mode, args, log: list | None = None):
    tools = "none" if mode == "none" else "calculator"
    engine.rounds = mode == "rounds"
    log = [] if log is None else log
    engine.turns = lambda sampling: TimedTurns(engine, sampling, log)
    prompts = [build_prompt(tok, r["question"], tools=tools) for r in rows]
    seeds = [question_seed(args.seed, r["id"]) for r in rows]
    sampling = SamplingConfig(max_new_tokens=args.max_new_tokens, tools=tools)
    return timed_call(engine, prompts, args.G, seeds, sampling)


def measure(engine, tok, rows, args) -> dict:
    runs = {mode: [] for mode in MODES}
    logs = {mode: [] for mode in MODES}
    for _ in range(args.repeats):
        for mode in MODES:  # interleaved: each repeat sees the machine in one state
            logs[mode].append([])
            runs[mode].append(run_mode(engine, tok, rows, mode, args, logs[mode][-1]))
    row = {"batch": len(rows), "G": args.G, "sequences": len(rows) * args.G}
    for mode, key in zip(MODES, ("sync", "async", "no_tools")):
        completions = runs[mode][0][0]
        tokens = sum(c.sampled_tokens for c in completions)
        wall, cpu = min(r[1] for r in runs[mode]), min(r[2] for r in runs[mode])
        row.update({f"{key}_tokens_per_s": round(tokens / wall, 1),
                    f"{key}_seconds": round(wall, 3), f"{key}_cpu_seconds": round(cpu, 3),
                    f"{key}_seconds_each": [round(r[1], 3) for r in runs[mode]],
                    f"{key}_tokens": tokens, f"{key}_steps": runs[mode][0][3],
                    f"{key}_tool_calls": sum(c.tool_calls for c in completions),
                    f"{key}_inserted_tokens": sum(len(c.token_ids) - c.sampled_tokens
                                                  for c in completions)})
    same = [a.token_ids == r.token_ids for a, r in zip(runs["async"][0][0], runs["rounds"][0][0])]
    row["async_same_tokens_as_rounds"] = f"{sum(same)}/{len(same)}"
    row["async_speedup"] = round(row["sync_seconds"] / row["async_seconds"], 3)
    row["async_speedup_cpu"] = round(row["sync_cpu_seconds"] / row["async_cpu_seconds"], 3)
    per_token = {key: row[f"{key}_seconds"] / row[f"{key}_tokens"] for key in ("sync", "async", "no_tools")}
    row["async_time_per_token_vs_no_tools"] = round(per_token["async"] / per_token["no_tools"], 3)
    row["sync_time_per_token_vs_no_tools"] = round(per_token["sync"] / per_token["no_tools"], 3)
    row.update(step_cost(logs, row["sync_steps"], row["async_steps"]))
    return row


def table(rows: list[dict]) -> str:
    lines = ["| batch x G | rounds tok/s (s) | async tok/s (s) | no tools tok/s (s) | async / rounds "
             "(wall, CPU) | scheduler steps, rounds / async | time per token, tools / none "
             "(async, rounds) | calls | same tokens | step cost: fixed ms + ms a sequence "
             "(R^2), fixed share | async / rounds: fit, steps alike |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(
            f"| {r['batch']} x {r['G']} | {r['sync_tokens_per_s']:.0f} ({r['sync_seconds']:.2f}) "
            f"| {r['async_tokens_per_s']:.0f} ({r['async_seconds']:.2f}) "
            f"| {r['no_tools_tokens_per_s']:.0f} ({r['no_tools_seconds']:.2f}) "
            f"| {r['async_speedup']:.2f}x, {r['async_speedup_cpu']:.2f}x "
            f"| {r['sync_steps']} / {r['async_steps']} "
            f"| {r['async_time_per_token_vs_no_tools']:.2f}, {r['sync_time_per_token_vs_no_tools']:.2f} "
            f"| {r['async_tool_calls']} | {r['async_same_tokens_as_rounds']} "
            f"| {r['step_fixed_ms']:.2f} + {r['step_per_sequence_ms']:.3f} ({r['step_fit_r2']:.2f}), "
            f"{r['step_fixed_share_rounds']:.2f} "
            f"| {r['async_speedup_predicted']:.2f}x, {r['async_speedup_if_steps_cost_alike']:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-tool")
    parser.add_argument("--batches", type=positive_int("--batches"), nargs="+", default=[16, 32, 64])
    parser.add_argument("-G", type=positive_int("-G"), default=4)
    parser.add_argument("--repeats", type=positive_int("--repeats"), default=3)
    parser.add_argument("--max-new-tokens", type=positive_int("--max-new-tokens"), default=120,
                        help="as benchmarks/tiny_tool_check.py (default 120)")
    parser.add_argument("--seed", type=int, default=100, help="a development seed (0, 1, >= 100)")
    parser.add_argument("--output", default=str(ROOT / "results" / "tool-rollouts" / "benchmark.json"))

    def run():
        args = parser.parse_args()
        tok = load_tokenizer(args.model)
        train = frozenset(r["question"] for r in training_rows(RECIPE))
        questions = generate_rows(select(TOOL_FAMILIES), max(args.batches), args.seed,
                                  paraphrases=0, exclude=train)
        questions = [{"id": f"t{i}", "question": r["question"]} for i, r in enumerate(questions)]
        engine = make_engine("vllm", None, tok, source=args.model, max_new_tokens=args.max_new_tokens,
                             max_sequences=max(args.batches) * args.G)
        print(f"{vllm_release()}, {args.model}, max_new_tokens {args.max_new_tokens}, "
              f"{args.repeats} repeats, load average {os.getloadavg()[0]:.2f}", flush=True)
        try:
            for mode in MODES:  # warm-up: the first calls of an engine are slower
                run_mode(engine, tok, questions[:min(args.batches)], mode, args)
            rows = []
            for batch in args.batches:
                rows.append(measure(engine, tok, questions[:batch], args))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
        finally:
            engine.close()
        for row in rows:
            row.update(model=args.model, max_new_tokens=args.max_new_tokens, repeats=args.repeats,
                       vllm=vllm_release())
        atomic_write_json(Path(args.output), rows)
        print(table(rows))
        print(f"load average at the end {os.getloadavg()[0]:.2f}; written to {args.output}")

    run_main(run)


if __name__ == "__main__":
    main()
