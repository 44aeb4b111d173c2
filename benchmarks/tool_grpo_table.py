"""The GRPO runs of benchmarks/tool_grpo.sh side by side: held-out accuracy of tiny-tool before
and after (4 samples a question, complement rule, with the calculator); the noise judged over
paraphrase groups (a group's questions are one draw: exact sign-flip test and stratified
cluster bootstrap, relrl.evaluation.clustered_stats), the per-question permutation test beside
it; the best guess baseline; whether answers still follow targets (median over families of
Spearman's rho, relrl.evaluation.strata); and what training looked like (entropy, clip
fraction, the capped share of the importance ratio where the sampler's log-probs are used,
wall time per useful step).

    python benchmarks/tool_grpo_table.py [--seeds 100,101] [--results results/tiny-tool]

Prints a markdown table of the runs found (results/tiny-tool/<loss>-seed<SEED>/), one row a
loss and seed; with several seeds, a second table pools each loss's paraphrase groups over the
seeds (a seed's data and training run are its own: its groups are a stratum of the bootstrap).
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from relrl.data.dataset_io import read_text
from relrl.evaluation.clustered_stats import compare_groups, group_differences
from relrl.evaluation.results_io import pair_accuracies, read_result
from relrl.rl.grpo_metrics import trainer_seconds
from relrl.runtime.cli import ArgumentParser, UsageError, run_main, seed_list

ROOT = Path(__file__).resolve().parent.parent
LOSSES = ("grpo", "gspo", "cispo")


def mean_of(records: list[dict], key: str) -> float | None:
    values = [r[key] for r in records if r.get(key) is not None]
    return statistics.fmean(values) if values else None


def seed_groups(pair: dict, seed: int) -> list:
    """The pair's paraphrase-group differences, the seed their stratum."""
    return group_differences(pair["base"]["results"], pair["finetuned"]["results"],
                             stratum=f"seed{seed}")


def run_row(folder: Path, seed: int) -> dict:
    pair = read_result(folder / "eval_holdout.json")  # with its records (a sidecar file)
    stats = json.loads((folder / "statistics.json").read_text())
    steps = [json.loads(line) for line in read_text(folder / "train_log.jsonl.gz").splitlines()
             if line.strip()]
    base, trained, delta = pair_accuracies(pair)
    diffs = seed_groups(pair, seed)
    groups = compare_groups(diffs)
    return {
        "loss": stats.get("loss", "grpo"), "seed": seed, "diffs": diffs,
        "n": pair["n"], "groups": groups["groups"],
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


def pooled_rows(rows: list[dict]) -> list[dict]:
    """Per loss, its seeds' groups pooled: mean group accuracies, exact sign-flip test, the
    bootstrap stratified by seed; and whether the change had the same sign at every seed."""
    pooled = []
    for loss in dict.fromkeys(r["loss"] for r in rows):
        mine = [r for r in rows if r["loss"] == loss]
        c = compare_groups([d for r in mine for d in r["diffs"]])
        pooled.append({"loss": loss, "seeds": [r["seed"] for r in mine], "groups": c["groups"],
                       "base": c["base_accuracy"], "trained": c["ft_accuracy"],
                       "delta": c["delta"], "p": c["p"], "ci": (c["ci_low"], c["ci_high"]),
                       "per_seed": [r["delta"] for r in mine]})
    return pooled


def pooled_table(pooled: list[dict]) -> str:
    lines = ["| loss | seeds | groups | base (group mean) | trained | delta (95% CI, groups "
             "within seeds) | p groups | delta per seed |", "|---" * 8 + "|"]
    for r in pooled:
        low, high = r["ci"]
        lines.append(
            f"| {r['loss']} | {', '.join(map(str, r['seeds']))} | {r['groups']} | "
            f"{r['base']:.3f} | {r['trained']:.3f} | {r['delta']:+.3f} ({low:+.3f}, {high:+.3f}) "
            f"| {r['p']:.3g} | {', '.join(f'{d:+.3f}' for d in r['per_seed'])} |")
    return "\n".join(lines)


def table(rows: list[dict]) -> str:
    lines = ["| loss | seed | questions (groups) | base | trained | delta (95% CI, groups) | p groups | "
             "p questions | best guess | median rho base / trained | best step (val) | "
             "useful steps | waste | entropy | clip frac | capped ratio | s / useful step | stopped by |",
             "|---" * 18 + "|"]
    for r in rows:
        low, high = r["group_ci"]
        lines.append(
            f"| {r['loss']} | {r['seed']} | {r['n']} ({r['groups']}) | {r['base']:.3f} | "
            f"{r['trained']:.3f} | "
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
    parser.add_argument("--seeds", type=seed_list("--seeds"), default=[100],
                        help="comma-separated development seeds (default 100)")
    parser.add_argument("--results", default=str(ROOT / "results" / "tiny-tool"))

    def run():
        args = parser.parse_args()
        rows = [run_row(Path(args.results) / f"{loss}-seed{seed}", seed)
                for loss in LOSSES for seed in args.seeds
                if (Path(args.results) / f"{loss}-seed{seed}" / "eval_holdout.json").is_file()]
        if not rows:
            raise UsageError(f"--results {args.results}: no finished run of seeds "
                             f"{','.join(map(str, args.seeds))} (<loss>-seed<SEED>/eval_holdout.json)")
        print(table(rows))
        if len(args.seeds) > 1:
            print()
            print(pooled_table(pooled_rows(rows)))

    run_main(run)


if __name__ == "__main__":
    main()
