"""Can a small model learn to write a problem's answer as ONE calculator expression with the
question's numbers? Which families, at what size and training cost? (issue #29, item 5)

Offline and single-turn: a fresh Qwen3 miniature (built from relrl.models.tiny_build's pieces:
its tokenizer, config, initialisation and training loop) is trained on rows of the families
that have an expression (every phrasing a row) with the target

    Model: <family name>
    \\boxed{<expression>}

(the first line names the formula, so a wrong answer can be told apart as a wrong formula or
wrong numbers). Then, on fresh held-out questions of the same families (no training question
among them, any phrasing), 4 completions at T=1.0 top-p 0.95 and one greedy: the last boxed
expression is evaluated by the calculator and its value graded under the complement rule. Per
family: accuracy, share of expressions that parse, share written with the question's numbers
only (relrl.problems.base.stray_numbers), share naming the right model, and the Spearman
correlation of the answer (median parsed sample value per question) against the target. The
guess baselines (fitted on training rows) stand beside the overall accuracy.

    python benchmarks/tool_learnability.py [--configs w192-l4-s1000,...] [--out DIR]

Each config writes DIR/<config>.json; a config whose JSON exists is skipped (resumable).
`--table` prints the Markdown table of every JSON in DIR and the families it chooses for
relrl.problems.registry.TOOL_FAMILIES (choose_tool_families).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from relrl.data.dataset_io import atomic_write_json
from relrl.data.prompting import build_prompt, build_training_text
from relrl.evaluation.guess_baselines import fit_guesses, score_fitted
from relrl.grading.extraction import boxed_contents
from relrl.grading.scoring import is_correct_value
from relrl.grading.target_kind import target_kind_of
from relrl.modeling.tiny_models import new_model, qwen3_config
from relrl.modeling.tiny_tokenizer import train_tokenizer
from relrl.models.tiny_build import RECIPE, pretrain
from relrl.problems.base import stray_numbers
from relrl.problems.bound_form import bound_expression, question_numbers
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import FAMILIES
from relrl.runtime.cli import ArgumentParser, UsageError, run_main
from relrl.tools.calculator import CalculatorError, evaluate

SYSTEM = ("Write the answer to the reliability problem as one calculator expression with the "
          "problem's numbers: name the model, then \\boxed{expression}.")
SEED = 20261203
TRAIN_PROBLEMS = 4000        # x 3 phrasings = 12,000 training rows
EVAL_PER_FAMILY = 8
SAMPLES = 4
MAX_NEW_TOKENS = 160
GUESS_FIT_ROWS = 1500        # the guesses' fit grades every distinct target per candidate
MIN_TOOL_FAMILIES = 12
MAX_EXPRESSION_CHARS = 45
WIDE = dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
            head_dim=32, intermediate_size=768)
# tiny's recipe (width 192 x 4 blocks, batch 4, lr 2e-3) with more steps, or wider and deeper
CONFIGS = {
    "w192-l4-s1000": dict(steps=1000),
    "w192-l4-s2000": dict(steps=2000),
    "w256-l6-s1000": dict(steps=1000, **WIDE),
    # the bound form (relrl.problems.bound_form): the question's numbers copied in order into
    # names, the formula over the names; phrasings whose numbers differ from the expression's
    # (FIT, percent, minutes) are left out of training and test alike
    "w192-l4-s2000-bound": dict(steps=2000, form="bound"),
}
DEFAULT_OUT = Path("results/tool-learnability")


def expression_families() -> list:
    return [f for f in FAMILIES.values() if f.expression is not None]


def target_text(row: dict, form: str = "plain") -> str:
    expression = row["expression"]
    if form == "bound":
        expression = bound_expression(row["question"], expression)
    return f"Model: {row['family']}\n\\boxed{{{expression}}}"


def copies_numbers(expression: str, question: str, form: str) -> bool:
    """Whether an expression is written with the question's numbers only: in the bound form,
    its names hold exactly the question's numbers, in order."""
    if form == "bound":
        return [b.partition("=")[2].strip() for b in expression.split(";")[:-1]] == \
            question_numbers(question)
    return not stray_numbers(expression, question)


def read_completion(text: str) -> tuple[str | None, str | None, float | None]:
    """(named model, last boxed expression, its value) of one completion; None where absent or
    where the calculator refuses the expression."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    model = first.removeprefix("Model:").strip() if first.startswith("Model:") else None
    boxes = boxed_contents(text)
    if not boxes:
        return model, None, None
    expression = boxes[-1][1]
    try:
        return model, expression, evaluate(expression)
    except CalculatorError:
        return model, expression, None


def sample(model, tokenizer, prompts: list[str], n: int, greedy: bool, seed: int,
           batch: int = 32) -> list[list[str]]:
    """n completions per prompt (T=1.0, top-p 0.95, or greedy), seeded per batch."""
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    out = []
    for start in range(0, len(prompts), batch):
        chunk = prompts[start:start + batch]
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
        torch.manual_seed(seed + start)
        with torch.no_grad():
            ids = model.generate(**enc, do_sample=not greedy, temperature=None if greedy else 1.0,
                                 top_p=None if greedy else 0.95, top_k=None if greedy else 0,
                                 num_return_sequences=n, max_new_tokens=MAX_NEW_TOKENS,
                                 eos_token_id=stop, pad_token_id=tokenizer.pad_token_id)
        texts = tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        out += [texts[k * n:(k + 1) * n] for k in range(len(chunk))]
    return out


def _spearman(answers: list[float], targets: list[float]) -> float | None:
    if len(answers) < 3 or len(set(answers)) < 2:
        return None
    rho = float(spearmanr(answers, targets).statistic)
    return None if rho != rho else round(rho, 3)


def score(rows: list[dict], sampled: list[list[str]], greedy: list[list[str]],
          form: str = "plain") -> dict:
    """Per-family and overall figures for the held-out rows."""
    records = []
    for row, samples, (best,) in zip(rows, sampled, greedy):
        kind, target = target_kind_of(row), float(row["answer"])
        reads = [read_completion(text) for text in samples]

        def right(value):
            return value is not None and is_correct_value(value, row["answer"], rule="complement",
                                                          target_kind=kind)

        values = [v for _, _, v in reads if v is not None]
        records.append({
            "family": row["family"], "target": target,
            "correct": sum(right(v) for _, _, v in reads),
            "greedy_correct": right(read_completion(best)[2]),
            "parsed": len(values),
            "own_numbers": sum(e is not None and v is not None
                               and copies_numbers(e, row["question"], form) for _, e, v in reads),
            "right_model": sum(m == row["family"] for m, _, _ in reads),
            "answer": statistics.median(values) if values else None,
        })
    return records


def summarise(records: list[dict], n: int = SAMPLES) -> dict:
    answered = [r for r in records if r["answer"] is not None]
    parsed = sum(r["parsed"] for r in records)
    return {
        "questions": len(records),
        "accuracy": round(sum(r["correct"] for r in records) / (n * len(records)), 4),
        "greedy_accuracy": round(sum(r["greedy_correct"] for r in records) / len(records), 4),
        "parse_share": round(parsed / (n * len(records)), 4),
        "own_numbers_share": round(sum(r["own_numbers"] for r in records) / parsed, 4)
        if parsed else None,
        "right_model_share": round(sum(r["right_model"] for r in records) / (n * len(records)), 4),
        "spearman": _spearman([r["answer"] for r in answered], [r["target"] for r in answered]),
    }


def run_config(name: str, overrides: dict, out: Path) -> dict:
    overrides = dict(overrides)
    form = overrides.pop("form", "plain")
    recipe = replace(RECIPE, version=f"tool-learnability-{name}", seed=SEED,
                     n_train=3 * TRAIN_PROBLEMS, max_positions=512, **overrides)
    families = expression_families()
    torch.set_num_threads(recipe.threads)
    started = time.time()
    train = [r for r in generate_rows(families, recipe.n_train, SEED, paraphrases=2)
             if form == "plain" or not stray_numbers(r["expression"], r["question"])]
    texts = [f"system\n{SYSTEM}\nuser\n{r['question']}\nassistant\n{target_text(r, form)}"
             for r in train]
    tokenizer = train_tokenizer(texts, recipe.vocab_size)
    pairs = []
    for row in train:
        prompt, completion = build_training_text(tokenizer, row["question"],
                                                 target_text(row, form), system_prompt=SYSTEM)
        pairs.append((tokenizer(prompt, add_special_tokens=False)["input_ids"],
                      tokenizer(completion, add_special_tokens=False)["input_ids"]))
    model = new_model(qwen3_config(tokenizer, recipe.max_positions, **recipe.dims()), SEED, name)
    params = sum(p.numel() for p in model.parameters())
    print(f"{name}: {params:,} parameters, {len(train)} rows, {recipe.steps} steps", flush=True)
    losses = pretrain(model, pairs, recipe, tokenizer.pad_token_id,
                      log=lambda line: print(line, flush=True))
    train_seconds = time.time() - started

    started = time.time()
    held_out = generate_rows(families, EVAL_PER_FAMILY * len(families), SEED + 1, paraphrases=0,
                             exclude=frozenset(r["question"] for r in train))
    if form == "bound":
        held_out = [r for r in held_out if not stray_numbers(r["expression"], r["question"])]
    prompts = [build_prompt(tokenizer, r["question"], system_prompt=SYSTEM) for r in held_out]
    sampled = sample(model, tokenizer, prompts, SAMPLES, greedy=False, seed=SEED)
    greedy = sample(model, tokenizer, prompts, 1, greedy=True, seed=SEED)
    records = score(held_out, sampled, greedy, form)
    fitted = fit_guesses(train[:GUESS_FIT_ROWS], rule="complement")
    guesses = score_fitted(held_out, fitted, rule="complement")
    by_family = []
    for family in families:
        mine = [r for r in records if r["family"] == family.name]
        if not mine:  # the bound form keeps no phrasing of a family that always converts units
            continue
        rows = [r for r in held_out if r["family"] == family.name]
        best_guess = score_fitted(rows, fitted, rule="complement")["best"]["accuracy"]
        by_family.append({"family": family.name, "topic": family.topic,
                          **summarise(mine), "best_guess": round(best_guess, 4)})
    result = {
        "config": name, "form": form, "recipe": asdict(recipe), "parameters": params,
        "train_rows": len(train), "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4),
        "train_seconds": round(train_seconds, 1), "eval_seconds": round(time.time() - started, 1),
        "samples": SAMPLES, "tolerance_rule": "complement",
        "overall": summarise(records),
        "guess_baselines": {g: guesses[g]["accuracy"] for g in ("constant", "family_mode", "copy")}
        | {"best": guesses["best"]},
        "by_family": by_family,
        "completions_example": {r["family"]: s[0] for r, s in zip(held_out, sampled)},
    }
    atomic_write_json(out / f"{name}.json", result)
    return result


def expression_form(family, draws: int = 50) -> tuple[float, float]:
    """(share of phrasings that state every number of the expression verbatim, mean expression
    length in characters) over `draws` problems of `family`."""
    rng = np.random.default_rng(SEED + 2)
    verbatim = total = length = 0
    for _ in range(draws):
        problem = family.generate(rng)
        length += len(problem.expression)
        for question in problem.questions:
            total += 1
            verbatim += not stray_numbers(problem.expression, question)
    return verbatim / total, length / draws


def choose_tool_families(results: list[dict]) -> tuple[str, tuple[str, ...]]:
    """(rule, families) from the best config (highest sampled accuracy): the families it solves
    (accuracy >= 0.5, Spearman >= 0.8) when there are at least MIN_TOOL_FAMILIES; else the
    families where copying the numbers is all that is left to learn: it names the right model
    and writes an expression that parses in >= 90% of samples, every phrasing states the
    expression's numbers verbatim, and the expression is short (<= MAX_EXPRESSION_CHARS)."""
    best = max(results, key=lambda r: r["overall"]["accuracy"])
    solved = tuple(f["family"] for f in best["by_family"]
                   if f["accuracy"] >= 0.5 and (f["spearman"] or 0) >= 0.8)
    if len(solved) >= MIN_TOOL_FAMILIES:
        return f"solved by {best['config']}", solved
    chosen = []
    for f in best["by_family"]:
        if f["right_model_share"] >= 0.9 and f["parse_share"] >= 0.9:
            verbatim, length = expression_form(FAMILIES[f["family"]])
            if verbatim == 1 and length <= MAX_EXPRESSION_CHARS:
                chosen.append(f["family"])
    return (f"formula learnt by {best['config']}, numbers stated verbatim, short expression "
            f"(no family solved)", tuple(chosen))


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(out: Path) -> str:
    """Markdown: one line per config, then accuracy by family (one column per config)."""
    results = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    results.sort(key=lambda r: (r["parameters"], r["recipe"]["steps"]))
    lines = ["| config | params | steps | train s | loss | accuracy | greedy | parse | own numbers "
             "| right model | best guess | families >= 0.5 |", "|" + "---|" * 12]
    for r in results:
        o = r["overall"]
        good = sum(f["accuracy"] >= 0.5 for f in r["by_family"])
        lines.append(f"| {r['config']} | {r['parameters'] / 1e6:.1f}M | {r['recipe']['steps']} | "
                     f"{r['train_seconds']:.0f} | {r['final_loss']:.3f} | {o['accuracy']:.3f} | "
                     f"{o['greedy_accuracy']:.3f} | {o['parse_share']:.2f} | "
                     f"{_share(o['own_numbers_share'])} | {o['right_model_share']:.2f} | "
                     f"{r['guess_baselines']['best']['accuracy']:.3f} "
                     f"({r['guess_baselines']['best']['guess']}) | {good} |")
    if results:
        lines += ["", "Per family: sampled accuracy (Spearman rho of answers vs targets) per config",
                  "", "| family | " + " | ".join(r["config"] for r in results) + " |",
                  "|---|" + "---|" * len(results)]
        families = dict.fromkeys(f["family"] for r in results for f in r["by_family"])
        for family in families:
            cells = []
            for r in results:
                row = next((f for f in r["by_family"] if f["family"] == family), None)
                rho = "-" if row is None or row["spearman"] is None else f"{row['spearman']:.2f}"
                cells.append("-" if row is None else f"{row['accuracy']:.2f} ({rho})")
            lines.append(f"| {family} | " + " | ".join(cells) + " |")
        rule, chosen = choose_tool_families(results)
        lines += ["", f"TOOL_FAMILIES ({rule}): {', '.join(chosen)}"]
    return "\n".join(lines)


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated configs to run (known: {', '.join(CONFIGS)})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--table", action="store_true", help="print the table of DIR and exit")

    def run():
        args = parser.parse_args()
        if args.table:
            print(table(args.out))
            return
        names = [n for n in args.configs.split(",") if n]
        unknown = [n for n in names if n not in CONFIGS]
        if unknown:
            raise UsageError(f"--configs: unknown config {', '.join(unknown)} "
                             f"(known: {', '.join(CONFIGS)})")
        args.out.mkdir(parents=True, exist_ok=True)
        for name in names:
            if (args.out / f"{name}.json").is_file():
                print(f"{name}: done already ({args.out / f'{name}.json'})", file=sys.stderr)
                continue
            run_config(name, CONFIGS[name], args.out)
        print(table(args.out))

    run_main(run)


if __name__ == "__main__":
    main()
