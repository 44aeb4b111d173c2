"""Result JSONs in, the tables of RESULTS.md and the paper out (plus plots).

Reads any number of model results and pair files (both sides of a pair are used; a base that
appears in several pair files is counted once). Every model is compared with --base on the same
questions: Markdown table of correct/n, accuracy with a 95% interval, truncated completions,
delta vs base, the paired test's p and its Holm-adjusted value; then accuracy by the base
screening score when the questions carry it. Plots: accuracy by checkpoint (or by model when no
label names a checkpoint) and, from GRPO log JSONL files, reward and waste rate by step.

  python evaluation/compare_results.py results/holdout_*.json --base Qwen3-8B \\
      --output-md results/holdout.md --plots-dir results/plots --grpo-log runs/exp7/log.jsonl
"""
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from relrl.cli import ArgumentParser, UsageError, run_main
from relrl.data import DatasetError, atomic_write_json, atomic_write_text, read_json, read_text
from relrl.evaluation import difficulty_breakdown
from relrl.stats import bootstrap_ci, discordant, holm, mcnemar, paired_permutation_test, wilson_interval

CHECKPOINT = re.compile(r"(?:checkpoint|ckpt)[-_ ]?(\d+)", re.IGNORECASE)


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="model result or pair result JSON files")
    parser.add_argument("--base", default=None, help="label of the base model (default: the base "
                        "side of the first pair file, else the first model)")
    parser.add_argument("--output-md", default=None, help="write the Markdown tables here")
    parser.add_argument("--output-json", default=None, help="write the table's numbers as JSON here")
    parser.add_argument("--plots-dir", default=None, help="write accuracy.png (and training.png) here")
    parser.add_argument("--grpo-log", action="append", default=[],
                        help="GRPO log JSONL (step, reward_mean, waste_rate, val_accuracy); repeatable")
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
        data = read_json(path)
        if isinstance(data, dict) and data.get("kind") == "pair_result":
            sides = [_check_model_result(data.get("base"), path + " (base)"),
                     _check_model_result(data.get("finetuned"), path + " (finetuned)")]
            pair_base = pair_base or sides[0]["model"]
        else:
            sides = [_check_model_result(data, path)]
        for result in sides:
            result = {**result, "_file": path}
            seen = models.get(result["model"])
            if seen is None:
                models[result["model"]] = result
            elif _outcomes(seen) != _outcomes(result):
                raise UsageError(f"two different results are both named {result['model']!r} "
                                 f"({seen['_file']}, {path}); rerun one with --label")
    return list(models.values()), pair_base


def _outcomes(result: dict) -> list:
    return [(r["id"], r["correct"], r["pass_count"]) for r in result["results"]]


def read_log(path: str) -> list[dict]:
    rows = []
    if not Path(path).exists():
        raise UsageError(f"--grpo-log: {path}: no such file")
    lines = read_text(path).splitlines()
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{line_no}: malformed JSON ({exc.msg})") from None
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
           "delta": correct / total - base_acc, "p": None, "test": None, "p_holm": None}
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
             title: str | None) -> str:
    out = [f"## {title}", ""] if title else []
    out += [f"Base: {base_label}; {rows[0]['n']} questions.", "",
            "| Model | Correct / n | Accuracy (95% CI) | Truncated | Delta vs base | p | p (Holm) |",
            "|---|---|---|---|---|---|---|"]
    for r in rows:
        n = f"{r['n']}" if r["samples"] == 1 else f"{r['n']}x{r['samples']}"
        delta = "-" if r["model"] == base_label else f"{100 * r['delta']:+.1f}pp"
        out.append(f"| {r['model']} | {r['correct']}/{n} | {_pct(r['accuracy'])} "
                   f"({_pct(r['ci_low'])}-{_pct(r['ci_high'])}) | {r['truncated']} | {delta} | "
                   f"{_p(r['p'])} | {_p(r['p_holm'])} |")
    out += ["", "95% CI: Wilson score interval (one sample per question) or a percentile bootstrap "
             "over questions (K samples per question). p: McNemar's exact test on the paired "
             "outcomes (one sample per question) or the exact paired sign-flip permutation test on "
             "per-question accuracies (K > 1), two-sided, against the base; Holm-adjusted over "
             f"the {max(len(rows) - 1, 0)} comparisons."]
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
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- plots


def _checkpoint(model: dict) -> tuple[str, int] | None:
    """(run name, step) when the label or adapter path names a checkpoint."""
    for text in (model["model"], model.get("adapter") or ""):
        found = CHECKPOINT.search(text)
        if found:
            run = (text[:found.start()] + text[found.end():]).strip(" /_-") or "run"
            return run, int(found.group(1))
    return None


def plot_accuracy(models: list[dict], rows: list[dict], base_label: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_model = {r["model"]: r for r in rows}
    runs: dict[str, list[tuple[int, dict]]] = {}
    for m in models:
        found = _checkpoint(m) if m["model"] != base_label else None
        if found:
            runs.setdefault(found[0], []).append((found[1], by_model[m["model"]]))
    fig, ax = plt.subplots(figsize=(7, 4))
    if runs:
        for run, points in sorted(runs.items()):
            points.sort(key=lambda p: p[0])
            steps = [s for s, _ in points]
            acc = [100 * r["accuracy"] for _, r in points]
            err = [[100 * (r["accuracy"] - r["ci_low"]) for _, r in points],
                   [100 * (r["ci_high"] - r["accuracy"]) for _, r in points]]
            ax.errorbar(steps, acc, yerr=err, marker="o", capsize=3, label=run)
        ax.set_xlabel("checkpoint (training step)")
    else:
        names = [r["model"] for r in rows]
        acc = [100 * r["accuracy"] for r in rows]
        err = [[100 * (r["accuracy"] - r["ci_low"]) for r in rows],
               [100 * (r["ci_high"] - r["accuracy"]) for r in rows]]
        ax.bar(range(len(rows)), acc, yerr=err, capsize=3, color="tab:blue")
        ax.set_xticks(range(len(rows)), names, rotation=20, ha="right")
    ax.axhline(100 * by_model[base_label]["accuracy"], color="grey", linestyle="--",
               label=f"{base_label} (base)")
    ax.set_ylabel("accuracy (%), 95% CI")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
    fig.savefig(path, dpi=120)
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
    logs = {Path(p).parent.name or Path(p).stem: read_log(p) for p in args.grpo_log}
    for name, rows in logs.items():
        for field in ("reward_mean", "waste_rate"):
            if not any(field in row for row in rows):
                raise DatasetError(f"{name}: GRPO log has no {field!r} field")
    base_label = args.base or pair_base or models[0]["model"]
    rows = table_rows(models, base_label)
    levels, per_model = difficulty_rows(models)
    text = markdown(rows, base_label, levels, per_model, args.title)

    if args.output_md:
        atomic_write_text(args.output_md, text)
    if args.output_json:
        atomic_write_json(args.output_json, {"base": base_label, "rows": rows,
                                             "by_base_score": per_model})
    if args.plots_dir:
        plot_accuracy(models, rows, base_label, Path(args.plots_dir) / "accuracy.png")
        if logs:
            plot_training(logs, Path(args.plots_dir) / "training.png")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    run_main(main)
