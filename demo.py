"""The study in miniature: every stage of the pipeline on a CPU with the built-in `tiny` model.

  generate data -> build/reuse tiny -> screen (G=4) -> SFT warm start on non-mixed
  -> GRPO exp7 (warm start) and exp10 (no SFT) on mixed, with validation early stopping
  -> evaluate every model on four sets, McNemar against the base -> tables, plots, RESULTS.md

Each stage is the real script a cluster user runs, called as a subprocess with the command
printed, so this file doubles as a worked example of the commands. A stage whose result was
made from the same inputs (command, input files, adapters: <results>/stage_inputs.json, see
study/stage_inputs.py) is skipped, and every script resumes from its own progress files: a
killed demo loses nothing, and a retrained adapter is evaluated afresh. The stages are in
study/demo_stages/, one file each (data, model, screening, sft, grpo, evaluation, report) over
pipeline.py, which holds the shared state and runs the scripts; this file is the command line.

  python demo.py --recipe recipes/demo/first.yaml --tolerance-rule complement
                            # `make demo`: the first demo, GRPO with the calculator and the
                            # held-out gain (21.5 minutes on 2 cores; study/first_report.py)
  python demo.py            # the full miniature (18 minutes on 2 cores with tiny cached)
  python demo.py --fast     # a 5-minute look; its numbers are labelled FAST
  python demo.py --seeds 2,3,4   # the replicated study (results/demo-replication/, about
                                 # two hours a seed on 2 cores), then its pooled report
  python demo.py --recipe my.yaml   # the stages with your settings (recipes/demo/*.yaml are
                                    # the built-in ones; study/pipeline_config.py says each key)

The settings a run used are written beside it as pipeline.yaml (work and results folders), with
the command that reruns it.

SIGTERM, SIGUSR1 or Ctrl-C stops it cleanly: the running scripts get SIGTERM (training writes a
checkpoint and exits 75, "stopped, resume later") and the same command resumes.
"""
import os
import signal
import time
from pathlib import Path

from relrl.data.dataset_io import read_json
from relrl.engines import ENGINES, default_engine
from relrl.runtime.cli import (
    ArgumentParser,
    UsageError,
    add_tolerance_rule_arg,
    positive_int,
    run_main,
    seed_list,
)
from study import first_report, pipeline_config, pooled_report
from study.demo_report import splice_results_md
from study.demo_stages import STAGES, Demo
from study.demo_stages.pipeline import (  # noqa: F401 (finished, health_stopped: read here too)
    BUILT_IN,
    RECIPES,
    ROOT,
    finished,
    health_stopped,
    recipe,
    shown,
)
from study.demo_stages.report import RESULTS_END, RESULTS_START  # noqa: F401 (read here too)
from study.pipeline_config import PipelineConfig

# RESULTS.md quotes the pre-registered replication (these seeds, default folders) verbatim
CONFIRMATORY_SEEDS = [2, 3, 4]
REPLICATION_START, REPLICATION_END = ("<!-- replication-results:start -->",
                                      "<!-- replication-results:end -->")


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true",
                        help="the 5-minute version (FAST): recipes/demo/fast.yaml, with --seeds "
                        "recipes/demo/replication-fast.yaml")
    parser.add_argument("--recipe", "--config", dest="recipe", metavar="FILE.yaml", default=None,
                        help="the pipeline's settings from this recipe (keys and their meaning: "
                        "study/pipeline_config.py; a run's own is <work-dir>/pipeline.yaml) "
                        "instead of recipes/demo/full.yaml, or replication.yaml with --seeds; "
                        "default folders runs/ and results/demo[-replication]-recipe-<name>")
    parser.add_argument("--seed", type=int, default=None, help="one seed for every stage (0)")
    parser.add_argument("--seeds", type=seed_list("--seeds"), default=None,
                        help="the replicated study: comma-separated seeds, each run as the "
                        "miniature's stages into <results>/seed-N/, then a pooled report "
                        "(default folders runs/ and results/demo-replication)")
    parser.add_argument("--work-dir", default=None,
                        help="datasets, adapters, checkpoints and pipeline.yaml (default "
                        "runs/demo[-fast][-complement])")
    parser.add_argument("--results-dir", default=None,
                        help="result JSONs, tables, plots (default "
                        "results/demo[-fast][-complement])")
    parser.add_argument("--jobs", type=positive_int("--jobs"), default=min(2, os.cpu_count() or 1),
                        help="stages run side by side where independent (default: 2, or 1 on "
                        "a one-core machine)")
    parser.add_argument("--rollout-engine", choices=ENGINES, default=default_engine(),
                        help="how screening, GRPO and evaluation sample: hf, hf-merged or vllm "
                        "(default vllm on a CUDA machine where vLLM is installed, else hf; the "
                        "recorded miniature used hf)")
    add_tolerance_rule_arg(parser)
    parser.add_argument("--stop-after", choices=STAGES, default=None,
                        help="stop after this stage (a rerun without it carries on from there)")
    return parser.parse_args(argv)


def pipeline(args, replicated: bool) -> tuple[str, PipelineConfig]:
    """The pipeline's name and settings: --recipe's file (a built-in one by its name), else the
    built-in recipe that --fast and --seeds pick. Read before any folder is made, so a bad
    recipe stops the demo with one line and nothing written."""
    if args.recipe is None:
        name = {(False, False): "full", (True, False): "fast", (False, True): "replication",
                (True, True): "replication-fast"}[args.fast, replicated]
        return name, recipe(name)
    if args.fast:
        raise UsageError("--fast and --recipe: give one of them (--fast is "
                         "recipes/demo/fast.yaml)")
    path = Path(args.recipe).resolve()
    for name in BUILT_IN:
        if path == (RECIPES / f"{name}.yaml").resolve():
            return name, recipe(name)
    return shown(path), pipeline_config.load(args.recipe)


def is_fast(name: str) -> bool:
    """Whether a pipeline's numbers are labelled FAST in its report."""
    return name in ("fast", "replication-fast")


def folder_suffix(args, name: str, replicated: bool) -> str:
    """Default folders' suffix: a fast run, a run of another recipe, or a run under another
    tolerance rule (whose screening and results differ), never lands in the folders of the
    study-rule full run (`demo`) or of the pre-registered replication (`demo-replication`)."""
    rule = "" if args.tolerance_rule == "study" else f"-{args.tolerance_rule}"
    own = {"replication": "", "replication-fast": "-fast"} if replicated else \
        {"full": "", "fast": "-fast"}
    return own.get(name, f"-recipe-{Path(name).stem}") + rule


def run_stages(demo: Demo, stop_after: str | None) -> bool:
    """Every stage in order; False when --stop-after ended the run early. SIGTERM, SIGUSR1
    and Ctrl-C stop the running scripts cleanly (Demo.stop); the same command resumes."""
    demo.write_settings()
    previous = {sig: signal.signal(sig, demo.stop) for sig in (signal.SIGTERM, signal.SIGUSR1)}
    try:
        for name in STAGES:
            getattr(demo, name)()
            if name == stop_after:
                return name == STAGES[-1]
        return True
    except KeyboardInterrupt:
        demo.stop(signal.SIGINT)
        raise SystemExit("[demo] interrupted: run the same command again to resume") from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def replicate(args, seeds: list[int]) -> int:
    """Each seed's stages into <results>/seed-N (work files in <work>/seed-N), then the pooled
    report from those folders' JSON files."""
    config, settings = pipeline(args, replicated=True)
    suffix = folder_suffix(args, config, replicated=True)
    work = Path(args.work_dir or ROOT / "runs" / f"demo-replication{suffix}").resolve()
    out = Path(args.results_dir or ROOT / "results" / f"demo-replication{suffix}").resolve()
    started, complete = time.time(), True
    for seed in seeds:
        w, o = work / f"seed-{seed}", out / f"seed-{seed}"
        for folder in (w / "data", w / "logs", o):
            folder.mkdir(parents=True, exist_ok=True)
        print(f"\n[demo] seed {seed} ({config}): {shown(o)}", flush=True)
        complete = run_stages(Demo(is_fast(config), seed, w, o, args.jobs, config,
                                   engine=args.rollout_engine,
                                   tolerance_rule=args.tolerance_rule, settings=settings),
                              args.stop_after)
    if complete:
        report = pooled_report.write(out, seeds)
        print(f"[demo] pooled report: {out / 'report.md'}")
        if seeds == CONFIRMATORY_SEEDS and config == "replication" \
                and args.results_dir is None and args.tolerance_rule == "study":
            splice_results_md(ROOT / "RESULTS.md", report, REPLICATION_START, REPLICATION_END)
    print(f"[demo] finished in {time.time() - started:.0f} s")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.seeds is not None:
        if args.seed is not None:
            raise UsageError("--seed and --seeds: give one of them")
        return replicate(args, args.seeds)
    args.seed = 0 if args.seed is None else args.seed
    config, settings = pipeline(args, replicated=False)
    suffix = folder_suffix(args, config, replicated=False)
    work = Path(args.work_dir or ROOT / "runs" / f"demo{suffix}").resolve()
    out = Path(args.results_dir or ROOT / "results" / f"demo{suffix}").resolve()
    for folder in (work / "data", work / "logs", out):
        folder.mkdir(parents=True, exist_ok=True)
    demo = Demo(is_fast(config), args.seed, work, out, args.jobs, config,
                engine=args.rollout_engine, tolerance_rule=args.tolerance_rule, settings=settings)
    started = time.time()
    run_stages(demo, args.stop_after)
    print(f"\n[demo] finished in {time.time() - started:.0f} s")
    for stage, seconds in demo.timings:
        print(f"  {stage:<40} {seconds:6.0f} s")
    if not settings.warm_start and (out / "summary.json").is_file():  # the first demo's result
        summary = read_json(out / "summary.json")
        print("", *first_report.closing_table(summary), f"plot: {shown(out / summary['plot'])}",
              sep="\n")
    print(f"[demo] report: {out / 'report.md'}\n[demo] logs: {work / 'logs'}")
    return 0


if __name__ == "__main__":
    run_main(main)
