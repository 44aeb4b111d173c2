"""Does `tiny-tool` solve problems? Fresh questions of its families, graded under the
`complement` rule, with the calculator and without it, beside the guess baselines.

For each setting: accuracy over all samples, and per family the accuracy and the rank
(Spearman) correlation between the model's answers and the targets over the questions it solves
at least once (each question's answer: the median of its samples' parsed answers), reported for
families with at least --min-solved such questions. Issue 29 asks, with the calculator: accuracy
>= 15% and >= 3x the best guess baseline, and a correlation >= 0.8 on every such family.

    python benchmarks/tiny_tool_check.py [--per-family 8] [--samples 4] [--seed 100]

Writes results/tiny-tool/check.json (the figures) and prints the table. Questions come from a
development seed (100 by default), never from tiny-tool's training draws.
"""
from __future__ import annotations

import time
from pathlib import Path

from relrl.data.dataset_io import atomic_write_json
from relrl.evaluation.guess_baselines import describe, score_baselines
from relrl.evaluation.runner import evaluate_rows, model_generator
from relrl.evaluation.settings import EvalSettings
from relrl.evaluation.strata import question_pair, rank_correlation
from relrl.models.by_name import load_model, make_engine
from relrl.models.tiny_build import threads
from relrl.models.tiny_tool_build import RECIPE, training_rows
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import TOOL_FAMILIES, select
from relrl.runtime.cli import ArgumentParser, positive_int, run_main

ROOT = Path(__file__).resolve().parent.parent
RULE = "complement"


def family_table(records: list[dict], min_solved: int) -> dict:
    """Per family: accuracy over samples, and Spearman's rho of answers with targets over the
    questions solved at least once (issue 29's criterion), when at least `min_solved` are."""
    by_family: dict[str, list[dict]] = {}
    for record in records:
        by_family.setdefault(record["family"], []).append(record)
    table = {}
    for family, rows in sorted(by_family.items()):
        samples = [c for r in rows for c in r.get("completions", [r])]
        solved = [r for r in rows if r["pass_count"] > 0]
        pairs = [p for p in map(question_pair, solved) if p is not None]
        entry = {"questions": len(rows), "accuracy": sum(c["correct"] for c in samples) / len(samples),
                 "solved_questions": len(solved)}
        rho = rank_correlation(pairs)["rank_correlation"]
        if len(pairs) >= min_solved and rho is not None:
            entry["spearman"] = rho
        table[family] = entry
    return table


def check(engine, tokenizer, rows, tools: str, args) -> dict:
    settings = EvalSettings(samples=args.samples, seed=args.seed, temperature=1.0, top_p=0.95,
                            max_new_tokens=args.max_new_tokens, tolerance_rule=RULE, tools=tools,
                            micro_batch=64)
    start = time.time()
    records = evaluate_rows(rows, model_generator(engine, tokenizer, settings), settings,
                            desc=f"tools {tools}")
    samples = [c for r in records for c in r.get("completions", [r])]
    out = {"tools": tools, "questions": len(records), "samples": len(samples),
           "accuracy": sum(c["correct"] for c in samples) / len(samples),
           "seconds": round(time.time() - start, 1),
           "by_family": family_table(records, args.min_solved)}
    if tools != "none":
        calls = sum(c.get("tool_calls", 0) for c in samples)
        out["calls_per_answer"] = calls / len(samples)
        out["failed_call_share"] = sum(c.get("tool_errors", 0) for c in samples) / max(calls, 1)
    return out


def table(result: dict) -> str:
    with_tool, without = result["calculator"], result["none"]
    lines = [f"{'family':32s} {'calc acc':>8s} {'rho':>6s} {'solved':>6s} {'plain acc':>9s}"]
    for family, entry in with_tool["by_family"].items():
        rho = f"{entry['spearman']:.2f}" if "spearman" in entry else "-"
        plain = without["by_family"][family]["accuracy"]
        lines.append(f"{family:32s} {entry['accuracy']:8.2f} {rho:>6s} "
                     f"{entry['solved_questions']:6d} {plain:9.2f}")
    lines.append(f"overall: with the calculator {with_tool['accuracy']:.3f}, without "
                 f"{without['accuracy']:.3f}, on {with_tool['questions']} questions x "
                 f"{with_tool['samples'] // with_tool['questions']} samples; "
                 f"{describe(result['guess_baselines'])}")
    return "\n".join(lines)


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-tool")
    parser.add_argument("--per-family", type=positive_int("--per-family"), default=8)
    parser.add_argument("--samples", type=positive_int("--samples"), default=4)
    parser.add_argument("--seed", type=int, default=100, help="a development seed (0, 1, >= 100)")
    parser.add_argument("--max-new-tokens", type=positive_int("--max-new-tokens"), default=120)
    parser.add_argument("--min-solved", type=positive_int("--min-solved"), default=8)
    parser.add_argument("--output", default=str(ROOT / "results" / "tiny-tool" / "check.json"))

    def run():
        args = parser.parse_args()
        train = training_rows(RECIPE)
        families = select(TOOL_FAMILIES)
        rows = generate_rows(families, args.per_family * len(families), args.seed, paraphrases=0,
                             exclude=frozenset(r["question"] for r in train))
        model, tokenizer = load_model(args.model)
        engine = make_engine("hf", model, tokenizer)
        with threads(2):
            result = {tools: check(engine, tokenizer, rows, tools, args)
                      for tools in ("calculator", "none")}
        baselines = score_baselines(rows, train, rule=RULE)
        result.update(model=args.model, seed=args.seed, rule=RULE, families=list(TOOL_FAMILIES),
                      guess_baselines=baselines)
        atomic_write_json(Path(args.output), result)
        print(table(result))
        print(f"written to {args.output}")

    run_main(run)


if __name__ == "__main__":
    main()
