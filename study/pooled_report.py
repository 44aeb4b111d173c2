"""A replication's pooled report from its seed folders' JSON alone: pooled.json and report.md,
by the design the seeds ran (the redone one's, study.replication_v2_report, when plain GRPO ran
beside exp7; else the first replication's). demo.py --seeds writes it after its seeds; run it
on its own to pool seeds that were run one at a time:

  python -m study.pooled_report results/demo-replication-v2 --seeds 21,22,23
"""
from __future__ import annotations

from pathlib import Path

from relrl.data.dataset_io import atomic_write_json
from relrl.runtime.cli import ArgumentParser, UsageError, run_main, seed_list
from study import pipeline_config, replication_report, replication_v2_report


def reporter(out: Path, seeds: list[int]):
    """The report module for these seeds, from the first seed's pipeline.yaml (runs older than
    pipeline.yaml are the first replication's)."""
    settings = out / f"seed-{seeds[0]}" / "pipeline.yaml"
    redone = settings.is_file() and pipeline_config.load(settings).plain_grpo
    return replication_v2_report if redone else replication_report


def write(out: Path, seeds: list[int]) -> str:
    """pooled.json and report.md in `out`; returns the report."""
    module = reporter(out, seeds)
    pooled = module.pooled_results(out, seeds)
    atomic_write_json(out / "pooled.json", pooled)
    report = module.build_report(pooled)
    (out / "report.md").write_text(report)
    return report


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
