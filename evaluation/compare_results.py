"""Result JSONs in, the tables of RESULTS.md and the paper out (plus plots).

Reads any number of model results and pair files (both sides of a pair are used; a base that
appears in several pair files is counted once). Every model is compared with --base on the same
questions: Markdown table of correct/n, accuracy with a 95% interval, truncated completions,
delta vs base, the paired test's p and its Holm-adjusted value, and the margin over the best
guess baseline (relrl.evaluation.guess_baselines: fitted on training rows, from --baseline-train or as the
evaluation recorded them); mean@k and pass@k with 95% intervals from resampling paraphrase groups
(relrl.evaluation.clustered_stats); the guesses' own table; then accuracy by the base screening
score when the questions carry it; then accuracy by target range and each model's median
per-family rank correlation of answers with targets (relrl.evaluation.strata). Plots:
accuracy.png, every model's bar with its interval and a line at the best guess;
training_<run>.png per GRPO log (its run's curves; the statistics.json beside
the log, when there, gives validation intervals).

  python evaluation/compare_results.py results/holdout_*.json --base Qwen3-8B \\
      --output-md results/holdout.md --plots-dir results/plots --grpo-log exp7=runs/exp7/train_log.jsonl
"""
import sys
from pathlib import Path

from relrl.data.dataset_io import (
    DatasetError,
    atomic_write_json,
    atomic_write_text,
    load_dataset,
    parse_json,
    read_json,
    read_text,
)
from relrl.evaluation.guess_baselines import GUESSES, margin, score_baselines
from relrl.evaluation.model_results import difficulty_breakdown
from relrl.evaluation.results_io import read_result
from relrl.evaluation.stats import (
    bootstrap_ci,
    discordant,
    holm,
    mcnemar,
    paired_permutation_test,
    wilson_interval,
)
from relrl.evaluation.strata import MIN_ANSWERED, strata
from relrl.runtime.cli import ArgumentParser, UsageError, run_main
from study.at_k import NOTE as AT_K_NOTE
from study.at_k import at_k_cells, cell_text
from study.result_plots import plot_run, plot_set, save_figure


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="model result or pair result JSON files")
    parser.add_argument("--base", default=None, help="label of the base model (default: the base "
                        "side of the first pair file, else the first model)")
    parser.add_argument("--output-md", default=None, help="write the Markdown tables here")
    parser.add_argument("--output-json", default=None, help="write the table's numbers as JSON here")
    parser.add_argument("--plots-dir", default=None,
                        help="write accuracy.png (and training_<run>.png per --grpo-log) here")
    parser.add_argument("--grpo-log", action="append", default=[], metavar="[RUN=]FILE",
                        help="GRPO train_log.jsonl (step, reward_mean, waste_rate, ...), named RUN "
                        "in its figure (default: its folder's name); repeatable")
    parser.add_argument("--baseline-train", default=None, metavar="FILE",
                        help="training rows (JSONL) to fit the guess baselines on (default: the "
                        "baselines the base model's result file recorded, if any)")
    parser.add_argument("--title", default=None, help="heading above the tables")
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------- reading


def _check_model_result(data, path: str) -> dict:
    if not isinstance(data, dict) or data.get("kind") not in ("model_result", "screening") or \
            not isinstance(data.get("results"), list) or not data["results"]:
        raise DatasetError(f"{path}: not a model result (need kind and a non-empty results list)")
    for key in ("model", "fingerprint", "samples"):
        if key not in data:
            raise DatasetError(f"{path}: model result without {key!r}")
    for i, r in enumerate(data["results"]):
        if not isinstance(r, dict) or not {"id", "correct", "pass_count", "samples"} <= set(r):
            raise DatasetError(f"{path}: result {i} lacks id/correct/pass_count/samples")
    return data


def read_models(paths: list[str]) -> tuple[list[dict], str | None]:
    """Model results in input order, each once; and the first pair file's base label."""
    models: dict[str, dict] = {}
    pair_base = None
    for path in paths:
        data = read_result(path)
        if isinstance(data, dict) and data.get("kind") == "pair_result":
            sides = [_check_model_result(data.get("base"), path + " (base)"),
                     _check_model_result(data.get("finetuned"), path + " (finetuned)")]
            pair_base = pair_base or sides[0]["model"]
        else:
            sides = [_check_model_result(data, path)]
        for result in sides:
            result = {**result, "_file": path, "_baselines": data.get("guess_baselines")}
            seen = models.get(result["model"])
            if seen is None:
                models[result["model"]] = result
            elif _outcomes(seen) != _outcomes(result):
                raise UsageError(f"two different results are both named {result['model']!r} "
                                 f"({seen['_file']}, {path}); rerun one with --label")
    return list(models.values()), pair_base


def _outcomes(result: dict) -> list:
    return [(r["id"], r["correct"], r["pass_count"]) for r in result["results"]]


def read_run(spec: str) -> tuple[str, list[dict], dict | None]:
    """--grpo-log [RUN=]FILE: the run's name, its log lines, and the statistics.json beside the
    log (None when absent)."""
    name, _, path = spec.rpartition("=")
    name = name or Path(path).parent.name or Path(path).stem
    stats = Path(path).parent / "statistics.json"
    return name, read_log(path), read_json(stats) if stats.is_file() else None


def read_log(path: str) -> list[dict]:
    rows = []
    if not Path(path).exists():
        raise UsageError(f"--grpo-log: {path}: no such file")
    lines = read_text(path).splitlines()
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        row = parse_json(line, path, line_no)  # relrl.untrusted's bounds, a DatasetError
        if not isinstance(row, dict) or "step" not in row:
            raise DatasetError(f"{path}:{line_no}: log line without 'step'")
        rows.append(row)
    if not rows:
        raise DatasetError(f"{path}: no log lines")
    return rows


# ---------------------------------------------------------------------------- numbers


def table_rows(models: list[dict], base_label: str) -> list[dict]:
    base = next((m for m in models if m["model"] == base_label), None)
    if base is None:
        raise UsageError(f"--base: no result is labelled {base_label!r} "
                         f"(labels: {', '.join(m['model'] for m in models)})")
    base_ids = [r["id"] for r in base["results"]]
    rows = []
    for m in [base] + [m for m in models if m is not base]:  # the base row first
        if m["fingerprint"] != base["fingerprint"] or [r["id"] for r in m["results"]] != base_ids:
            raise UsageError(f"{m['_file']}: {m['model']!r} was run on other questions than the base "
                             f"{base_label!r} (fingerprint {m['fingerprint']} vs {base['fingerprint']})")
        rows.append(_row(m, base))
    others = [r for r in rows if r["model"] != base_label]
    for row, adjusted in zip(others, holm([r["p"] for r in others])):
        row["p_holm"] = adjusted
    return rows


def _row(m: dict, base: dict) -> dict:
    recs, n, k = m["results"], len(m["results"]), m["samples"]
    correct = sum(r["pass_count"] for r in recs)
    total = sum(r["samples"] for r in recs)
    if k == 1:
        low, high = wilson_interval(correct, n)
    else:
        low, high = bootstrap_ci([r["pass_count"] / r["samples"] for r in recs])
    base_acc = sum(r["pass_count"] for r in base["results"]) / sum(r["samples"] for r in base["results"])
    row = {"model": m["model"], "file": m["_file"], "n": n, "samples": k, "correct": correct,
           "accuracy": correct / total, "ci_low": low, "ci_high": high,
           "truncated": m.get("truncated", sum(bool(r.get("truncated")) for r in recs)),
           "delta": correct / total - base_acc, "p": None, "test": None, "p_holm": None,
           "at_k": at_k_cells(recs)}
    if m is not base:
        b = base["results"]
        if k == 1 and base["samples"] == 1:
            b01, b10 = discordant([r["correct"] for r in b], [r["correct"] for r in recs])
            row.update(p=mcnemar(b01, b10)["exact_p"], test="mcnemar", b01=b01, b10=b10)
        else:
            test = paired_permutation_test([r["pass_count"] for r in b], [r["samples"] for r in b],
                                           [r["pass_count"] for r in recs], [r["samples"] for r in recs])
            row.update(p=test["p"], test="permutation")
    return row


def guess_block(models: list[dict], base_label: str, train_file: str | None) -> dict | None:
    """The guess baselines on these questions: fitted on --baseline-train's rows and graded by
    the base result's rule, else the block the base's (or another model's) file recorded."""
    base = next(m for m in models if m["model"] == base_label)
    if train_file is None:
        return next((m["_baselines"] for m in [base, *models] if m.get("_baselines")), None)
    if not Path(train_file).is_file():
        raise UsageError(f"--baseline-train: {train_file}: no such file")
    block = score_baselines(base["results"], load_dataset(train_file),
                            tolerance=base.get("tolerance", 0.05),
                            rule=base.get("tolerance_rule", "study"))
    return {**block, "train_file": train_file}


GUESS_NAMES = {"constant": "one constant answer", "family_mode": "the family's usual answer",
               "copy": "a number copied from the question"}


def guess_label(block: dict) -> str:
    """The best guess in words, with its answer when it is one constant."""
    best = block["best"]["guess"]
    answer = block["constant"]["answer"] if best == "constant" else None
    return GUESS_NAMES[best] + (f" {answer:g}" if answer is not None else "")


def guess_markdown(block: dict) -> list[str]:
    """The guesses' table: what each answers, how often it is right, with a Wilson interval."""
    train = block.get("train", {})
    where = f" in {block['train_file']}" if block.get("train_file") else ""
    answers = {"constant": f"{block['constant']['answer']:g}" if block["constant"]["answer"]
               is not None else "none",
               "family_mode": f"per family ({len(block['family_mode']['answers'])} fitted)",
               "copy": block["copy"]["rule"]}
    out = ["", "### Guess baselines", "",
           f"Fitted on {train.get('rows', 'the')} training rows{where}, never on these questions; "
           f"graded by the same rule ({block['tolerance_rule']}, tolerance {block['tolerance']:g}). "
           "A model's margin is its accuracy minus the best guess's.", "",
           "| Guess | Answer | Correct / n | Accuracy (95% CI) |", "|---|---|---|---|"]
    for name in GUESSES:
        g = block[name]
        low, high = wilson_interval(g["correct"], block["n"])
        best = " (best)" if name == block["best"]["guess"] else ""
        out.append(f"| {GUESS_NAMES[name]}{best} | {answers[name]} | {g['correct']}/{block['n']} | "
                   f"{_pct(g['accuracy'])} ({_pct(low)}-{_pct(high)}) |")
    return out


def difficulty_rows(models: list[dict]) -> tuple[list[str], dict[str, dict]]:
    """Score levels and, per model, {level: {n, correct, accuracy}}."""
    per_model = {m["model"]: difficulty_breakdown(m["results"]) for m in models}
    per_model = {k: v for k, v in per_model.items() if v}
    levels = sorted({lvl for table in per_model.values() for lvl in table},
                    key=lambda s: tuple(int(x) for x in s.split("/")))
    return levels, per_model


# ---------------------------------------------------------------------------- Markdown


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def markdown(rows: list[dict], base_label: str, levels: list[str], per_model: dict,
             title: str | None, guesses: dict | None = None,
             strata_by_model: dict | None = None) -> str:
    out = [f"## {title}", ""] if title else []
    margin_head = (" Margin vs best guess |", "---|") if guesses else ("", "")
    out += [f"Base: {base_label}; {rows[0]['n']} questions.", "",
            "| Model | Correct / n | Accuracy (95% CI) | Truncated | Delta vs base | p | p (Holm) |"
            + margin_head[0], "|---|---|---|---|---|---|---|" + margin_head[1]]
    for r in rows:
        n = f"{r['n']}" if r["samples"] == 1 else f"{r['n']}x{r['samples']}"
        delta = "-" if r["model"] == base_label else f"{100 * r['delta']:+.1f}pp"
        out.append(f"| {r['model']} | {r['correct']}/{n} | {_pct(r['accuracy'])} "
                   f"({_pct(r['ci_low'])}-{_pct(r['ci_high'])}) | {r['truncated']} | {delta} | "
                   f"{_p(r['p'])} | {_p(r['p_holm'])} |"
                   + (f" {100 * r['margin']:+.1f}pp |" if guesses else ""))
    out += ["", "95% CI: Wilson score interval (one sample per question) or a percentile bootstrap "
             "over questions (K samples per question). p: McNemar's exact test on the paired "
             "outcomes (one sample per question) or the exact paired sign-flip permutation test on "
             "per-question accuracies (K > 1), two-sided, against the base; Holm-adjusted over "
             f"the {max(len(rows) - 1, 0)} comparisons."]
    out += at_k_table(rows)
    if guesses:
        out += guess_markdown(guesses)
    if levels:
        names = [r["model"] for r in rows if r["model"] in per_model]
        out += ["", "### Accuracy by base screening score", "",
                "| Base score | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for level in levels:
            cells = []
            for name in names:
                cell = per_model[name].get(level)
                cells.append("-" if cell is None else
                             f"{_pct(cell['accuracy'])} ({cell['correct']}/{cell['total']})")
            out.append(f"| {level} | " + " | ".join(cells) + " |")
    if strata_by_model:
        out += strata_table(rows, strata_by_model)
    return "\n".join(out) + "\n"


def at_k_table(rows: list[dict]) -> list[str]:
    """mean@k and pass@k per model, each with its interval over paraphrase groups."""
    names = ["mean@k"] + sorted({n for r in rows for n in r["at_k"] if n != "mean@k"},
                                key=lambda n: int(n.split("@")[1]))
    out = ["", "### mean@k and pass@k, with 95% intervals over paraphrase groups", "",
           "| Model | Groups | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for r in rows:
        cells = [cell_text(r["at_k"].get(n)) for n in names]
        out.append(f"| {r['model']} | {r['at_k']['mean@k']['groups']} | " + " | ".join(cells) + " |")
    return out + ["", AT_K_NOTE]


def strata_table(rows: list[dict], by_model: dict[str, dict]) -> list[str]:
    """Accuracy by target range, and the median per-family rank correlation of answers with
    targets (relrl.evaluation.strata): whether a model's accuracy comes from reading the question."""
    low, high = by_model[rows[0]["model"]]["high_range"]
    out = ["", "### Accuracy by target range, and whether answers follow the targets", "",
           f"| Model | Target in [{low:g}, {high:g}) | Other targets | Other targets: answers in "
           f"[{low:g}, {high:g}) | Median family rank correlation (families) |",
           "|---|---|---|---|---|"]
    for r in rows:
        s = by_model[r["model"]]
        cells = []
        for part in (s["by_target_range"]["high"], s["by_target_range"]["rest"]):
            cells.append("-" if part["accuracy"] is None else
                         f"{_pct(part['accuracy'])} ({part['correct']}/{part['total']})")
        share, rho = s["by_target_range"]["rest"]["answers_in_range"], s["median_rank_correlation"]
        cells.append("-" if share is None else f"{share:.2f}")
        cells.append(("-" if rho is None else f"{rho:+.3f}")
                     + f" ({s['families_with_rank_correlation']})")
        out.append(f"| {r['model']} | " + " | ".join(cells) + " |")
    out += ["", f"Rank correlation: Spearman's rho, per family with at least {MIN_ANSWERED} "
            "answered questions, between each question's answer (the median of its samples) and "
            "its target; near 0, the answers do not follow the question's numbers."]
    return out


# ---------------------------------------------------------------------------- plots


def plot_training(logs: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("reward_mean", "mean reward"), ("waste_rate", "waste rate (zero-signal groups)")]
    if any("val_accuracy" in row for rows in logs.values() for row in rows):
        panels.append(("val_accuracy", "validation accuracy"))
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.6 * len(panels)), sharex=True)
    for ax, (field, title) in zip(axes, panels):
        for name, rows in logs.items():
            points = [(row["step"], row[field]) for row in rows if row.get(field) is not None]
            if points:
                ax.plot(*zip(*points), marker="." if field == "val_accuracy" else None, label=name)
        ax.set_ylabel(title, fontsize=8)
    axes[-1].set_xlabel("step")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


# ---------------------------------------------------------------------------- main


def main(argv=None):
    args = parse_args(argv)
    for flag, value in (("--output-md", args.output_md), ("--output-json", args.output_json)):
        if value and not Path(value).parent.is_dir():
            raise UsageError(f"{flag}: folder {Path(value).parent} does not exist")
    if args.plots_dir and not Path(args.plots_dir).is_dir():
        raise UsageError(f"--plots-dir: {args.plots_dir} is not an existing folder")
    models, pair_base = read_models(args.results)
    runs = {name: (log, stats) for name, log, stats in map(read_run, args.grpo_log)}
    for name, (log, _) in runs.items():
        for field in ("reward_mean", "waste_rate"):
            if not any(field in row for row in log):
                raise DatasetError(f"{name}: GRPO log has no {field!r} field")
    base_label = args.base or pair_base or models[0]["model"]
    rows = table_rows(models, base_label)
    guesses = guess_block(models, base_label, args.baseline_train)
    if guesses is not None:
        if guesses["n"] != rows[0]["n"]:
            raise UsageError(f"the recorded guess baselines cover {guesses['n']} questions, the "
                             f"results {rows[0]['n']}; give --baseline-train")
        for row in rows:
            row["margin"] = margin(row["accuracy"], guesses)
    levels, per_model = difficulty_rows(models)
    by_model = {m["model"]: strata(m["results"]) for m in models}
    text = markdown(rows, base_label, levels, per_model, args.title, guesses, by_model)

    if args.output_md:
        atomic_write_text(args.output_md, text)
    if args.output_json:
        atomic_write_json(args.output_json, {"base": base_label, "rows": rows,
                                             "by_base_score": per_model, "strata": by_model,
                                             **({"guess_baselines": guesses} if guesses else {})})
    if args.plots_dir:
        plots = Path(args.plots_dir)
        best = None if guesses is None else {"label": "best guess: " + guess_label(guesses),
                                             "accuracy": guesses["best"]["accuracy"]}
        plot_set(rows, plots / "accuracy.png", best_guess=best, title=args.title)
        if runs:
            plot_training({name: log for name, (log, _) in runs.items()}, plots / "training.png")
        for name, (log, stats) in runs.items():
            plot_run(name, log, plots / f"training_{name}.png",
                     val_history=(stats or {}).get("val_history"),
                     val_samples=(stats or {}).get("settings", {}).get("val_samples", 1))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    run_main(main)
