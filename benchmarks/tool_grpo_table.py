"""The GRPO runs of benchmarks/tool_grpo.sh side by side: held-out accuracy of tiny-tool before
and after (4 samples a question, complement rule, with the calculator); the noise judged over
paraphrase groups (a group's questions are one draw: exact sign-flip test and stratified
cluster bootstrap, relrl.evaluation.clustered_stats), the per-question permutation test beside
it; the best guess baseline; whether answers still follow targets (median over families of
Spearman's rho, relrl.evaluation.strata); and what training looked like (entropy, clip
fraction, the capped share of the importance ratio where the sampler's log-probs are used,
wall time per useful step).

    python benchmarks/tool_grpo_table.py [--seed 100] [--results results/tiny-tool]

Prints a markdown table of the runs found (results/tiny-tool/<loss>-seed<SEED>/).
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from relrl.evaluation.clustered_stats import compare_groups, group_differences
from relrl.evaluation.results_io import pair_accuracies, read_result
from relrl.rl.grpo_metrics import trainer_seconds
from relrl.runtime.cli import ArgumentParser, UsageError, run_main

ROOT = Path(__file__).resolve().parent.parent
LOSSES = ("grpo", "gspo", "cispo")


def mean_of(records: list[dict], key: str) -> float | None:
    values = [r[key] for r in records if r.get(key) is not None]
    return statistics.fmean(values) if values else None


def run_row(folder: Path) -> dict:
    pair = read_result(folder / "eval_holdout.json")  # with its records (a sidecar file)
    stats = json.loads((folder / "statistics.json").read_text())
    steps = [json.loads(line) for line in (folder / "train_log.jsonl").read_text().splitlines()
             if line.strip()]
    base, trained, delta = pair_accuracies(pair)
    groups = compare_groups(group_differences(pair["base"]["results"],
                                              pair["finetuned"]["results"]))
    return {
        "loss": stats.get("loss", "grpo"), "n": pair["n"], "groups": groups["groups"],
        "base": base, "trained": trained, "delta": delta,
        "group_p": groups["p"], "group_ci": (groups["ci_low"], groups["ci_high"]),
        "question_p": pair["paired_test"]["p"],
        "best_guess": pair.get("guess_baselines", {}).get("best", {}).get("accuracy"),
        "rho": (pair["base"]["strata"]["median_rank_correlation"],
                pair["finetuned"]["strata"]["median_rank_correlation"]),
        "best": (stats.get("best_step"), stats.get("best_val_accuracy")),
        "useful_steps": stats["useful_steps"], "waste_rate": stats.get("waste_rate"),
        "stopped_by": stats.get("stopped_by"),
        "entropy": mean_of(steps, "entropy"), "clip_frac": mean_of(steps, "clip_frac"),
        "tis_capped": mean_of(steps, "tis_capped_frac"),
        "seconds_per_step": trainer_seconds(steps) / max(stats["useful_steps"], 1),
    }


def fmt(value, pattern="{:.3f}") -> str:
    return "-" if value is None else pattern.format(value)


def table(rows: list[dict]) -> str:
    lines = ["| loss | questions (groups) | base | trained | delta (95% CI, groups) | p groups | "
             "p questions | best guess | median rho base / trained | best step (val) | "
             "useful steps | waste | entropy | clip frac | capped ratio | s / useful step | stopped by |",
             "|---" * 17 + "|"]
    for r in rows:
        low, high = r["group_ci"]
        lines.append(
            f"| {r['loss']} | {r['n']} ({r['groups']}) | {r['base']:.3f} | {r['trained']:.3f} | "
            f"{r['delta']:+.3f} ({low:+.3f}, {high:+.3f}) | {fmt(r['group_p'], '{:.3g}')} | "
            f"{fmt(r['question_p'], '{:.3g}')} | {fmt(r['best_guess'])} | "
            f"{fmt(r['rho'][0], '{:.2f}')} / {fmt(r['rho'][1], '{:.2f}')} | "
            f"{r['best'][0]} ({fmt(r['best'][1])}) | {r['useful_steps']} | "
            f"{fmt(r['waste_rate'], '{:.0%}')} | {fmt(r['entropy'], '{:.2f}')} | "
            f"{fmt(r['clip_frac'])} | {fmt(r['tis_capped'])} | {r['seconds_per_step']:.1f} | "
            f"{r['stopped_by']} |")
    return "\n".join(lines)


def main() -> None:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--results", default=str(ROOT / "results" / "tiny-tool"))

    def run():
        args = parser.parse_args()
        folders = [Path(args.results) / f"{loss}-seed{args.seed}" for loss in LOSSES]
        rows = [run_row(f) for f in folders if (f / "eval_holdout.json").is_file()]
        if not rows:
            raise UsageError(f"--results {args.results}: no finished run of seed {args.seed} "
                             "(<loss>-seed<SEED>/eval_holdout.json)")
        print(table(rows))

    run_main(run)


if __name__ == "__main__":
    main()
