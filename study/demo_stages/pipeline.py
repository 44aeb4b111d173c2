"""The demo's shared state and its stage runner: what every stage of demo.py reads.

A `Pipeline` holds the run's folders, its recipe and the flags every stage passes on (rollout
engine, tolerance rule, tools), and runs each stage's script through `run`: the command printed,
its output in <work>/logs/<stage>.log, each attempt timed into <results>/stage_times.jsonl
(study.stage_times), and skipped when its result was made from the same inputs
(<results>/stage_inputs.json, study.stage_inputs). The stages themselves are the other modules
of this package, one a file; `study.demo_stages.Demo` puts them together.

A stage is finished only when its output exists and no signal or health check stopped it there.
A script that a signal stopped checkpoints and exits STOPPED_EXIT (75, relrl.runtime.stop), or,
as trainers did before, 0 with `stopped_by: "SIG..."` in its statistics.json: the stage is
stopped, and the same command resumes it.
"""
from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from relrl.data.dataset_io import read_json
from relrl.runtime.cli import UsageError
from relrl.runtime.stop import STOPPED_EXIT
from study import pipeline_config, stage_inputs, stage_times
from study.pipeline_config import PipelineConfig
from study.stage_progress import Monitor, Work, clock

ROOT = Path(__file__).resolve().parents[2]

# Sizes and rates of each pipeline: a recipe, read through study.pipeline_config's schema.
# first (`make demo`: GRPO with the calculator and the held-out gain in half an hour); full (the
# study's own miniature) and fast (`--fast`); the replicated study (`--seeds`) runs
# replication, the full miniature with the changes its pre-registration
# (results/demo-replication/PREREGISTRATION.md) fixes, and replication-fast is its smoke
# version; replication-v2 is the redone replication's (results/demo-replication-v2/), which
# `make demo FULL=1` runs at a development seed; replication-v3 is the third miniature's
# (results/science-v3/).
RECIPES = ROOT / "recipes" / "demo"
BUILT_IN = ("first", "full", "fast", "replication", "replication-fast", "replication-v2",
            "replication-v3")
SETTINGS_FILE = "pipeline.yaml"  # the resolved settings, beside the run; --recipe reruns it
# Sequences per generate call: a tiny model on a CPU is bound by per-token overhead, so bigger
# batches are faster; it never changes a result (per-question seeds).
MICRO_BATCH = 64
# Result files with per-question records in a compact layout, a summary beside its gzipped
# records (--records gzip, docs/evaluation.md; results/ commits them recompressed to xz by
# evaluation/recompress_results.py): the evaluations, and screening, whose work folder the
# redone replication commits.
RECORDS = "gzip"


def recipe(name: str) -> PipelineConfig:
    """A built-in pipeline's settings: recipes/demo/<name>.yaml."""
    return pipeline_config.load(RECIPES / f"{name}.yaml")


def signal_stopped(done: Path | None) -> bool:
    """A training run's statistics.json written when a signal stopped it (stopped_by
    "SIGTERM"): the run resumes from its checkpoint, whatever status the script exited with."""
    return done is not None and done.name == "statistics.json" and done.is_file() and \
        str(read_json(done).get("stopped_by", "")).startswith("SIG")


def health_stopped(done: Path | None) -> bool:
    """A training run's statistics.json written when its health check stopped it (stopped_by
    "unhealthy:<share>", exit status 3): a failed stage, never a finished one."""
    return done is not None and done.name == "statistics.json" and done.is_file() and \
        str(read_json(done).get("stopped_by", "")).startswith("unhealthy")


def finished(done: Path | None) -> bool:
    """A stage is done when its output exists, unless a signal or the health check stopped it
    there."""
    return done is not None and done.exists() and not signal_stopped(done) and \
        not health_stopped(done)


def shown(arg) -> str:
    """Paths inside the repository relative to it, so logs and result files name them portably."""
    if isinstance(arg, Path) and arg.is_relative_to(ROOT):
        return str(arg.relative_to(ROOT))
    return str(arg)


class Pipeline:
    """The state every stage shares, and the runner of its scripts."""

    def __init__(self, fast: bool, seed: int, work: Path, out: Path, lanes: int,
                 config: str | None = None, engine: str = "hf", tolerance_rule: str = "study",
                 settings: PipelineConfig | None = None):
        # `config` names the pipeline: a built-in recipe's name, or a user's recipe file as
        # shown, whose `settings` are given
        self.config = config or ("fast" if fast else "full")
        self.cfg = settings or recipe(self.config)
        self.engine_name = engine
        self.engine = ["--rollout-engine", engine]  # every sampling stage
        # every grading stage; the study's rule is the scripts' default, so its commands (and
        # the results they made) stay as they were
        self.tolerance_rule = tolerance_rule
        self.rule = [] if tolerance_rule == "study" else ["--tolerance-rule", tolerance_rule]
        # every stage that samples or trains on completions; without tools the flag is left
        # off, so the study's commands (and the stages they made) stay as they were
        self.tools = [] if self.cfg.tools == "none" else ["--tools", self.cfg.tools]
        self.fast, self.seed, self.work, self.out = fast, seed, work, out
        self.timings: list[tuple[str, float]] = []  # this invocation's, for the console
        self.children: list[subprocess.Popen] = []  # the scripts running now
        self.stop_signal: str | None = None
        self.py = sys.executable
        self.lanes, self.lock = lanes, threading.Lock()
        self.ledger = stage_inputs.Ledger(out)  # what made each stage's result

    def write_settings(self) -> None:
        """pipeline.yaml in the work and results folders: the settings this run used, which
        `--recipe` reruns. Settings changed since the last run here are named; the stages they
        feed start afresh (their commands differ), the others stay done."""
        for folder in (self.work, self.out):
            path = folder / SETTINGS_FILE
            try:
                before = pipeline_config.load(path) if path.is_file() else None
            except UsageError:  # edited by hand into something unreadable: replaced below
                before = None
            if before is not None and before != self.cfg:
                self.say(f"settings changed since the last run in {shown(folder)}: "
                         + "; ".join(self.cfg.changes_from(before)))
            rerun = ["python demo.py --recipe", shown(path), "--seed", str(self.seed),
                     "--work-dir", shown(self.work), "--results-dir", shown(self.out),
                     "--rollout-engine", self.engine_name, *self.rule]
            pipeline_config.write(path, self.cfg, header=(
                f"demo.py's pipeline settings for this run ({self.config}, seed {self.seed}).\n"
                "Rerun it (stages already made from the same inputs are kept):\n"
                f"  {' '.join(rerun)}"))

    def say(self, line: str) -> None:
        with self.lock:  # lines from stages running side by side must not interleave
            print(f"[demo] {line}", flush=True)

    def run(self, stage: str, args: list, done: Path | None = None,
            work: Callable[[], Work] | None = None, processes: int = 1) -> None:
        """Run one script unless its result `done` was made from the same inputs (the ledger,
        study.stage_inputs); its output goes to work/logs/<stage>.log, and with `work` (made
        when the script starts: what its files hold when it is finished) a progress line with
        the time left goes to the console every half minute (study.stage_progress). With
        `processes` running at once each gets its share of the cores as threads: a
        few-million-parameter model gains more from two one-thread processes than from one
        process on two threads."""
        inputs = None if done is None else stage_inputs.inputs_of(args, done, shown)
        if done is not None:
            args = self.command_for(stage, args, done, inputs)
            if args is None:
                return
        if self.stop_signal:
            raise SystemExit(f"[demo] stopped by {self.stop_signal} before {stage}")
        cmd = [self.py, *map(shown, args)]
        log = self.work / "logs" / f"{stage}.log"
        self.say(f"{stage}: {' '.join(cmd[1:])}")
        env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // processes))}
        code = stage_times.code_version(ROOT)  # the scripts read the checkout as it is now
        if done is not None:  # begun: a rerun on these inputs resumes, on others starts afresh
            self.record(stage, inputs, finished=False, code=code)
        start, status, proc, exit_code = time.time(), "interrupted", None, None
        try:
            with open(log, "w") as handle:
                proc = subprocess.Popen(cmd, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                                        env=env)
                self.children.append(proc)
                if work is None:
                    exit_code = proc.wait()
                else:
                    with Monitor(stage, work(), self.say):
                        exit_code = proc.wait()
            status = "stopped" if self.stopped(exit_code, done) else exit_code
        finally:  # an interrupted attempt's time is recorded too: the resumed stage redoes it
            if proc is not None:
                if proc.poll() is None:  # interrupted while it ran: let it checkpoint and exit
                    proc.terminate()
                    proc.wait()
                self.children.remove(proc)
            end = time.time()
            self.timings.append((stage, end - start))
            stage_times.record(self.out / stage_times.FILE_NAME, stage, start, end, status,
                               code)
        if status == "stopped" or (status != 0 and self.stop_signal):
            raise SystemExit(f"[demo] {stage} stopped before finishing "
                             f"({self.stop_signal or f'exit {exit_code}'}); run the same "
                             "command again to resume it")
        if status != 0:
            tail = log.read_text().strip().splitlines()[-5:]
            raise SystemExit(f"[demo] {stage} failed (exit {status}); see {log}:\n"
                             + "\n".join(tail))
        if done is not None:
            self.record(stage, inputs, finished=True, code=code)
        self.say(f"{stage}: done in {clock(end - start)}")

    def stopped(self, exit_code: int, done: Path | None) -> bool:
        """Whether a script that exited `exit_code` stopped before finishing, to be resumed:
        it exited STOPPED_EXIT, or 0 with a statistics.json a signal stopped (trainers before
        STOPPED_EXIT), or 0 without its result while the demo itself was being stopped. Any
        other status (3: the health check stopped training) is a failure."""
        if exit_code == STOPPED_EXIT:
            return True
        return exit_code == 0 and (signal_stopped(done) or bool(
            self.stop_signal and done is not None and not finished(done)))

    def command_for(self, stage: str, args: list, done: Path, inputs: dict) -> list | None:
        """None when `done` was made from these inputs, else the command to run. The
        leftovers of a run begun on other inputs are dropped first (training starts again
        with --overwrite instead of --resume; an evaluation's progress files go, as they name
        the adapter by its path alone), so nothing measured on old inputs reaches the new
        result; a run stopped part-way on these same inputs resumes."""
        with self.lock:
            entry = self.ledger.get(stage)
        if finished(done) and stage_inputs.made_from(entry, inputs):
            self.say(f"{stage}: done already ({done})")
            return None
        if entry is not None and not stage_inputs.same_inputs(entry["inputs"], inputs):
            what = ", ".join(stage_inputs.changed(entry["inputs"], inputs))
            self.say(f"{stage}: its inputs changed ({what}): starting it afresh")
            for progress in done.parent.glob(glob.escape(done.name) + ".*.progress.jsonl"):
                progress.unlink()
            return ["--overwrite" if a == "--resume" else a for a in args]
        if finished(done):
            self.say(f"{stage}: {shown(done)} exists, but nothing records what made it: "
                     "making it again")
        return args

    def record(self, stage: str, inputs: dict, *, finished: bool, code: str) -> None:
        with self.lock:
            self.ledger.put(stage, inputs, finished=finished, code=code)

    def stop(self, signum, _frame=None) -> None:
        """SIGTERM or SIGUSR1 (SLURM's notice), or Ctrl-C: pass SIGTERM on to the running
        scripts, which checkpoint (training) or keep what they finished (evaluation) and
        exit, and start nothing new. Runs in a signal handler: no locks."""
        self.stop_signal = signal.Signals(signum).name
        for child in list(self.children):
            if child.poll() is None:
                child.terminate()

    def run_side_by_side(self, jobs: list[tuple], lanes: int | None = None) -> None:
        """Independent `run` jobs (stage, args, done[, work]), `lanes` (default --jobs) at a
        time; the first failure is raised once the others have finished, so no finished work is
        lost."""
        if not jobs:
            return
        lanes = min(lanes or self.lanes, len(jobs))
        with ThreadPoolExecutor(lanes) as pool:
            futures = [pool.submit(self.run, *job, processes=lanes) for job in jobs]
        for future in futures:
            if future.exception() is not None:
                raise future.exception()
