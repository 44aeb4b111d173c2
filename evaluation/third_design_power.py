"""How many confirmatory seeds the third design needs (issue 46, item 2), from its
development seeds' own variance: each goal's figure at the development seeds, and the seeds that
bring it to the goal.

  forgetting  each difference claim's smallest difference a test at its alpha (0.01) detects
              with 80% power; goal: at most 5 points
  transfer    the half-width of the 95% interval of GRPO alone on the never-trained families;
              goal: at most 5 points
  primary     the smallest gain the primary test (at 0.01) detects with 80% power; goal: 5 points

Each figure shrinks with the square root of the groups, and every seed brings as many groups,
so k development seeds at figure f need ceil(k (f / goal)^2) seeds. The figures come from
study.replication's pooled numbers for the development seeds (the same code the confirmatory
report runs), never from a confirmatory seed.

  python evaluation/third_design_power.py --results results/science-v3/development/design \\
      --seeds 102 [--json FILE]
"""
from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist

from relrl.data.dataset_io import atomic_write_json
from relrl.runtime.cli import ArgumentParser, UsageError, run_main, seed_list
from study.replication.design import EXP10, THIRD
from study.replication.pool import pooled_results


def seeds_needed(figure: float, goal: float, seeds: int) -> int:
    return max(1, math.ceil(seeds * (figure / goal) ** 2))


def sizing(pooled: dict, seeds: int) -> list[dict]:
    """One row per goal: what it measures, its figure at the development seeds, the goal and
    the seeds needed."""
    rows = [{"goal": f"{c['claim']}: smallest detectable difference (alpha {c['pooled']['alpha']})",
             "figure": c["pooled"]["mdd"]} for c in pooled["claims"] if "minus" in c]
    rows.append({"goal": f"{EXP10} on never-trained families: 95% interval half-width",
                 "figure": pooled["transfer"]["ood"][EXP10]["half_width"]})
    z = NormalDist().inv_cdf
    # the pooled comparison's smallest detectable change is at the secondary alpha: rescale
    scale = (z(1 - THIRD.primary_alpha / 2) + z(THIRD.target_power)) / \
        (z(1 - THIRD.secondary_alpha / 2) + z(THIRD.target_power))
    rows.append({"goal": f"primary gain: smallest detectable (alpha {THIRD.primary_alpha})",
                 "figure": pooled["primary"]["pooled"]["mdd"] * scale})
    goal = THIRD.min_effect
    return [{**r, "target": goal, "seeds_needed": seeds_needed(r["figure"], goal, seeds)}
            for r in rows]


def table(rows: list[dict], seeds: list[int]) -> str:
    lines = [f"Development seeds {', '.join(map(str, seeds))} (not confirmatory).", "",
             "| Goal | At these seeds (points) | Target (points) | Seeds needed |",
             "|---|---|---|---|"]
    lines += [f"| {r['goal']} | {100 * r['figure']:.1f} | {100 * r['target']:.0f} | "
              f"{r['seeds_needed']} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, required=True, help="the folder with seed-N/")
    p.add_argument("--seeds", type=seed_list("--seeds"), required=True)
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args(argv)
    missing = [s for s in args.seeds if not (args.results / f"seed-{s}" / "eval").is_dir()]
    if missing:
        raise UsageError(f"--seeds: {args.results}/seed-{missing[0]} has no eval/ folder")
    rows = sizing(pooled_results(THIRD, args.results, args.seeds), len(args.seeds))
    print(table(rows, args.seeds), end="")
    if args.json:
        atomic_write_json(args.json, {"seeds": args.seeds, "rows": rows})
    return 0


if __name__ == "__main__":
    run_main(main)
