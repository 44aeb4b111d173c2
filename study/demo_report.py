"""The miniature study's report: tables, findings and stage times, written from result files.

Every number in the report is read from a JSON file a script wrote (the compare tables, the
GRPO statistics, the paired evaluation results); the findings are sentences generated from
those numbers, so a rerun rewrites them and nothing in the report is typed by hand.
"""
from __future__ import annotations

from pathlib import Path

from relrl.data.dataset_io import read_json
from relrl.evaluation.model_results import compare_models, load_model_result
from relrl.evaluation.results_io import pair_accuracies
from study import stage_times
from study.at_k import NOTE as AT_K_NOTE
from study.at_k import at_k_cells, cell_text, pass_name, samples_of
from study.replication.seed_files import records_if_any

SET_TITLES = {
    "train": "Mixed training questions (in-distribution, as the study reported)",
    "heldout": "Held-out mixed-style questions (unseen groups, training families)",
    "holdout": "Holdout (unseen groups, training families, all difficulties)",
    "ood": "Out-of-distribution topics (never trained on by SFT or GRPO)",
}
GRPO_RUNS = (("exp7", "exp7, uniform question draws"),
             ("exp7_passrate", "exp7, pass-rate sampler"),
             ("exp10", "exp10, uniform question draws"),
             ("exp7_plain", "exp7, plain GRPO (no dynamic sampling)"))
OPTIONAL_RUNS = ("exp7_plain",)  # trained only when the pipeline sets plain_grpo
TARGET_GAIN, ALPHA = 0.05, 0.05


def slug(label: str) -> str:
    """File stem of a model's result file: "GRPO exp7 best" -> grpo_exp7_best."""
    return label.lower().replace(" ", "_")


def waste_rows(out: Path) -> list[dict]:
    """Generation waste of the GRPO runs, from their statistics files."""
    rows = []
    for run, label in GRPO_RUNS:
        if run in OPTIONAL_RUNS and not (out / f"grpo_{run}" / "statistics.json").is_file():
            continue
        s = read_json(out / f"grpo_{run}" / "statistics.json")
        rows.append({"run": label, "useful_steps": s["useful_steps"],
                     "groups": s["total_attempts"], "wasted": s["wasted_steps"],
                     "waste_rate": s["waste_rate"], "best_step": s.get("best_step"),
                     "best_val_accuracy": s.get("best_val_accuracy")})
    return rows


def _row(out: Path, set_name: str, model: str) -> dict:
    table = read_json(out / f"compare_{set_name}.json")
    return next(r for r in table["rows"] if r["model"] == model)


def _versus_base(out: Path, set_name: str, model: str) -> str:
    r, base = _row(out, set_name, model), _row(out, set_name, "base")
    # one sample a question: McNemar's discordant counts; K samples: the paired permutation test
    evidence = (f"b01 {r['b01']}, b10 {r['b10']}" if "b01" in r else
                f"paired permutation test over {r['samples']} samples a question")
    return (f"{100 * base['accuracy']:.1f}% -> {100 * r['accuracy']:.1f}% "
            f"({100 * r['delta']:+.1f} points, {evidence}, p = {r['p']:.3g})")


def _head_to_head(out: Path, set_name: str, a: str, b: str) -> dict:
    """McNemar of model a against model b on one set (a plays the base)."""
    folder = out / "eval" / set_name
    return compare_models(load_model_result(folder / f"{slug(a)}.json", "finetuned"),
                          load_model_result(folder / f"{slug(b)}.json", "finetuned"), n_boot=200)


def _test_name(pair: dict) -> str:
    return "McNemar" if pair["test"].startswith("mcnemar") else "the paired permutation test"


def _effect(delta: float, p: float) -> str:
    if p >= ALPHA:
        return "no significant change"
    return "a significant gain" if delta > 0 else "a significant loss"


def findings(out: Path) -> list[str]:
    """The demo's targets (a held-out gain of TARGET_GAIN at p < ALPHA, no significant OOD loss)
    and the study's other claims, checked against this run's numbers."""
    held, ood = _row(out, "heldout", "GRPO exp7 best"), _row(out, "ood", "GRPO exp7 best")
    gain_met = held["delta"] >= TARGET_GAIN and held["p"] < ALPHA
    ood_met = ood["p"] >= ALPHA or ood["delta"] > 0
    sft_ood = _row(out, "ood", "SFT warm start")
    warm = _head_to_head(out, "heldout", "GRPO exp10 best", "GRPO exp7 best")
    exp10_acc, exp7_acc, warm_gain = pair_accuracies(warm)
    best, final = (_row(out, "heldout", f"GRPO exp7 {k}") for k in ("best", "final"))
    stats = read_json(out / "grpo_exp7" / "statistics.json")
    return [
        f"- **Target 1, {'met' if gain_met else 'missed'}**: GRPO exp7 (best validation "
        f"checkpoint) on held-out mixed-style questions: {_versus_base(out, 'heldout', 'GRPO exp7 best')}"
        f"; the target is at least +{100 * TARGET_GAIN:.0f} points with p < {ALPHA}.",
        f"- **Target 2, {'met' if ood_met else 'missed'}**: GRPO exp7 on the out-of-distribution "
        f"topics: {_versus_base(out, 'ood', 'GRPO exp7 best')}; the target is no significant loss.",
        f"- **SFT alone** (the warm start): out-of-distribution "
        f"{_versus_base(out, 'ood', 'SFT warm start')}, {_effect(sft_ood['delta'], sft_ood['p'])}"
        f"{_holdout_clause(out)}. The study reported a significant loss on its holdout (-20.4 "
        "points, p = 0.019).",
        f"- **Warm start**: on held-out mixed-style questions exp7 (SFT then GRPO) "
        f"{100 * exp7_acc:.1f}% against exp10 (GRPO alone) {100 * exp10_acc:.1f}%, "
        f"{_test_name(warm)} between the two p = {warm['p_value']:.3g}: "
        f"{_effect(warm_gain, warm['p_value'])} "
        "from the warm start. The study found exp10 no better than its base in distribution "
        "(+0.4 points) and exp7 better (+7.5 points at its best checkpoint).",
        f"- **Peak before the last step**: exp7's best validation accuracy came at step "
        f"{stats.get('best_step')} of {stats['useful_steps']}; on held-out mixed-style questions "
        f"the best checkpoint scores {100 * best['accuracy']:.1f}% and the final one "
        f"{100 * final['accuracy']:.1f}%. The study's best exp7 checkpoint was step 80 of 200.",
    ]


def _holdout_clause(out: Path) -> str:
    """"; holdout <change>, <effect>" where the holdout was evaluated (a recipe's eval_sets may
    leave it out, as the third design's does), else nothing."""
    if not (out / "compare_holdout.json").is_file():
        return ""
    hold = _row(out, "holdout", "SFT warm start")
    return (f"; holdout {_versus_base(out, 'holdout', 'SFT warm start')}, "
            f"{_effect(hold['delta'], hold['p'])}")


def guess_lines(out: Path) -> list[str]:
    """Per evaluated set, the best guess baseline and each model's margin over it, from the
    compare_<set>.json files that carry baselines (empty when none does)."""
    tables = {p.stem.removeprefix("compare_"): read_json(p) for p in sorted(out.glob("compare_*.json"))}
    tables = {name: t for name, t in tables.items() if t.get("guess_baselines")}
    if not tables:
        return []
    models = [r["model"] for r in next(iter(tables.values()))["rows"]]
    lines = ["## Guess baselines", "",
             "The best of three answers that read no question (one constant and each family's "
             "usual answer, both fitted on the training rows, and the question's last number), "
             "graded by the same rule; margin: a model's accuracy minus the best guess's, in points.",
             "", "| Set | Best guess | Its accuracy | " + " | ".join(models) + " |",
             "|---|---|---|" + "---|" * len(models)]
    for name, t in tables.items():
        g = t["guess_baselines"]
        margins = {r["model"]: r["margin"] for r in t["rows"]}
        lines.append(f"| {name} | {g['best']['guess']} ({g['tolerance_rule']} rule) | "
                     f"{100 * g['best']['accuracy']:.1f}% | " + " | ".join(
                         f"{100 * margins[m]:+.1f}" if m in margins else "-" for m in models) + " |")
    return lines + [""]


AT_K_HEADING = "### mean@k and pass@k"  # compare_results' own table, in compare files since issue #31


def at_k_lines(out: Path, set_name: str, compare_md: str) -> list[str]:
    """For a compare file older than compare_results' mean@k / pass@k table, the same figures
    computed here from each model's evaluation records (study.at_k), "-" for a model whose
    records are not there; nothing when the compare file has the table."""
    if AT_K_HEADING in compare_md:
        return []
    lines = ["", "### mean@k and pass@K, with 95% intervals over paraphrase groups", "",
             "| Model | K | Groups | mean@k | pass@K |", "|---|---|---|---|---|"]
    for row in read_json(out / f"compare_{set_name}.json")["rows"]:
        recs = records_if_any(out, set_name, row["model"])
        if recs is None:
            lines.append(f"| {row['model']} | - | - | - | - |")
            continue
        cells = at_k_cells(recs)
        lines.append(f"| {row['model']} | {samples_of(recs)} | {cells['mean@k']['groups']} | "
                     f"{cell_text(cells['mean@k'])} | {cell_text(cells.get(pass_name(cells)))} |")
    return lines + ["", AT_K_NOTE + " Computed by this report from the evaluation records: the "
                    "compare table above predates mean@k."]


def build_report(out: Path, *, fast: bool, seed: int, out_name: str,
                 timings: list[dict]) -> str:
    label = "FAST demo (a quick look: small data, few steps; not the miniature study)" \
        if fast else "Miniature study (`make demo`)"
    parts = [f"# {label}", "",
             f"Seed {seed}. Every number below was computed by the scripts from the files in "
             f"`{out_name}/`; rerun with `python demo.py{' --fast' if fast else ''}` to "
             "reproduce it.", "", "## Findings", "", *findings(out), "", *guess_lines(out)]
    # the sets this run evaluated, in this order (a recipe's eval_sets may leave some out)
    sets = [name for name in (*SET_TITLES, "retention", "reworded")
            if (out / f"compare_{name}.md").is_file()]
    for name in sets:
        compare_md = (out / f"compare_{name}.md").read_text().strip()
        parts += [compare_md, *at_k_lines(out, name, compare_md), ""]
    curves = "holdout" if "holdout" in sets else sets[0]  # where the report stage drew them
    parts += ["## Dynamic sampling: generated groups that carry no learning signal", "",
              "Without dynamic sampling every such group would be a zero-gradient update; "
              "with it (all runs here) they are dropped before the update and redrawn, so the "
              "waste is paid in generation time instead.", "",
              "| Run | Useful steps | Groups generated | Zero-signal groups | Waste rate | "
              "Best validation step (accuracy) |", "|---|---|---|---|---|---|"]
    for r in waste_rows(out):
        best = "-" if r["best_step"] is None else \
            f"{r['best_step']} ({100 * r['best_val_accuracy']:.1f}%)"
        parts.append(f"| {r['run']} | {r['useful_steps']} | {r['groups']} | {r['wasted']} | "
                     f"{100 * r['waste_rate']:.1f}% | {best} |")
    parts += ["", f"![training curves](plots/{curves}/training.png)", "",
              *[f"![{run} training curves](plots/{curves}/training_{run}.png)"
                for run, _ in GRPO_RUNS if (out / "plots" / curves / f"training_{run}.png").exists()],
              "",
              *stage_table(timings)]
    return "\n".join(parts) + "\n"


def stage_table(records: list[dict]) -> list[str]:
    """The stage-times section: every attempt of every stage, from stage_times.jsonl."""
    lines = [f"## Stage times (every attempt, from `{stage_times.FILE_NAME}`)", "",
             f"Busy wall-clock time: {stage_times.busy_seconds(records) / 60:.0f} minutes "
             "(stages run side by side counted once).", "",
             "| Stage | Attempts | Seconds (all attempts) | Last status | Code |",
             "|---|---|---|---|---|"]
    return lines + [f"| {r['stage']} | {r['attempts']} | {r['seconds']:.0f} | {r['status']} | "
                    f"{', '.join(r['codes'])} |" for r in stage_times.per_stage(records)]


def splice_results_md(path: Path, report: str, start: str, end: str) -> None:
    """Replace the generated section of RESULTS.md, leaving the hand-written text alone."""
    text = path.read_text()
    a, b = text.index(start), text.index(end)
    # Two heading levels down, under RESULTS.md's own section heading.
    body = "\n".join("##" + line if line.startswith("#") else line
                     for line in report.replace("](plots/", "](results/demo/plots/").split("\n"))
    path.write_text(text[:a + len(start)] + "\n" + body + text[b:])
