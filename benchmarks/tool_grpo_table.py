"""The GRPO runs of benchmarks/tool_grpo.sh side by side: held-out accuracy of tiny-tool before
and after (4 samples a question, complement rule, with the calculator), the paired tests, the
best guess baseline, and what training looked like (entropy, clip fraction, the capped share of
the importance ratio where the sampler's log-probs are used, wall time per useful step).

    python benchmarks/tool_grpo_table.py [--seed 100] [--results results/tiny-tool]

Prints a markdown table of the runs found (results/tiny-tool/<loss>-seed<SEED>/).
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from relrl.runtime.cli import ArgumentParser, UsageError, run_main

ROOT = Path(__file__).resolve().parent.parent
LOSSES = ("grpo", "gspo", "cispo")


def mean_of(records: list[dict], key: str) -> float | None:
    values = [r[key] for r in records if r.get(key) is not None]
    return statistics.fmean(values) if values else None


def run_row(folder: Path) -> dict:
    result = json.loads((folder / "eval_holdout.json").read_text())
    stats = json.loads((folder / "statistics.json").read_text())
    log = [json.loads(line) for line in (folder / "train_log.jsonl").read_text().splitlines()
           if line.strip()]
    seconds = sum(r.get("t_sample", 0) + r.get("t_update", 0) for r in log)
    best = result.get("guess_baselines", {}).get("best", {})
    return {
        "loss": stats.get("loss", "grpo"), "n": result["n"],
        "base": result["base_accuracy"], "trained": result["ft_accuracy"],
        "delta": result["delta"], "ci": result.get("bootstrap_ci", {}),
        "mcnemar_p": result.get("mcnemar_p"), "paired": result.get("paired_test", {}),
        "best_guess": best.get("accuracy"), "useful_steps": stats["useful_steps"],
        "waste_rate": stats.get("waste_rate"), "stopped_by": stats.get("stopped_by"),
        "entropy": mean_of(log, "entropy"), "clip_frac": mean_of(log, "clip_frac"),
        "tis_capped": mean_of(log, "tis_capped_frac"),
        "seconds_per_step": seconds / max(stats["useful_steps"], 1),
    }


def fmt(value, pattern="{:.3f}") -> str:
    return "-" if value is None else pattern.format(value)


def table(rows: list[dict]) -> str:
    lines = ["| loss | questions | base | trained | delta (95% CI) | McNemar p | paired p "
             "(groups) | best guess | useful steps | waste | entropy | clip frac | "
             "capped ratio | s / useful step | stopped by |",
             "|---" * 15 + "|"]
    for r in rows:
        ci = r["ci"]
        delta = f"{r['delta']:+.3f} ({fmt(ci.get('low'), '{:+.3f}')}, " \
                f"{fmt(ci.get('high'), '{:+.3f}')})"
        lines.append(
            f"| {r['loss']} | {r['n']} | {r['base']:.3f} | {r['trained']:.3f} | {delta} | "
            f"{fmt(r['mcnemar_p'], '{:.3g}')} | {fmt(r['paired'].get('p'), '{:.3g}')} | "
            f"{fmt(r['best_guess'])} | {r['useful_steps']} | {fmt(r['waste_rate'], '{:.0%}')} | "
            f"{fmt(r['entropy'], '{:.2f}')} | {fmt(r['clip_frac'])} | {fmt(r['tis_capped'])} | "
            f"{r['seconds_per_step']:.1f} | {r['stopped_by']} |")
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
