"""A replication's pooled report from its seed folders' JSON alone: pooled.json and report.md,
by the design the seeds ran (study.replication.design.for_seeds: the third when its retention
set is apart from the held-out set, the redone one when plain GRPO ran beside exp7, else the
first replication's). demo.py --seeds writes it after its seeds; run it on its own to pool seeds
that were run one at a time:

  python -m study.pooled_report results/demo-replication-v2 --seeds 21,22,23
"""
from __future__ import annotations

import json
from pathlib import Path

from relrl.data.dataset_io import atomic_write_text
from relrl.runtime.cli import ArgumentParser, UsageError, run_main, seed_list
from study.replication import design as designs
from study.replication.pool import pooled_results
from study.replication.sections import build_report


def texts(out: Path, seeds: list[int]) -> dict[str, str]:
    """pooled.json's and report.md's text for these seeds, as write() writes them (a committed
    folder's files must be these, byte for byte)."""
    design = designs.for_seeds(out, seeds)
    pooled = pooled_results(design, out, seeds)
    return {"pooled.json": json.dumps(pooled, indent=2, ensure_ascii=False) + "\n",
            "report.md": build_report(design, pooled)}


def write(out: Path, seeds: list[int]) -> str:
    """pooled.json and report.md in `out`; returns the report."""
    files = texts(out, seeds)
    for name, text in files.items():
        atomic_write_text(out / name, text)
    return files["report.md"]


def main(argv=None) -> int:
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="the replication's results folder (holding seed-N/)")
    parser.add_argument("--seeds", type=seed_list("--seeds"), required=True,
                        help="comma-separated seeds whose folders are pooled, such as 21,22,23")
    args = parser.parse_args(argv)
    out = Path(args.results)
    missing = [s for s in args.seeds if not (out / f"seed-{s}").is_dir()]
    if missing:
        raise UsageError(f"{out}: no seed folder for seed(s) {', '.join(map(str, missing))}")
    write(out, args.seeds)
    print(f"[pooled] {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    run_main(main)
