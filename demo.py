"""The study in miniature: every stage of the pipeline on a CPU with the built-in `tiny` model.

  generate data -> build/reuse tiny -> screen (G=4) -> SFT warm start on non-mixed
  -> GRPO exp7 (warm start) and exp10 (no SFT) on mixed, with validation early stopping
  -> evaluate every model on four sets, McNemar against the base -> tables, plots, RESULTS.md

Each stage is the real script a cluster user runs, called as a subprocess with the command
printed, so this file doubles as a worked example of the commands. A stage whose result was
made from the same inputs (command, input files, adapters: <results>/stage_inputs.json, see
study/stage_inputs.py) is skipped, and every script resumes from its own progress files: a
killed demo loses nothing, and a retrained adapter is evaluated afresh.

  python demo.py            # the full miniature (18 minutes on 2 cores with tiny cached)
  python demo.py --fast     # a 5-minute look; its numbers are labelled FAST
  python demo.py --seeds 2,3,4   # the replicated study (results/demo-replication/, about
                                 # two hours a seed on 2 cores), then its pooled report
  python demo.py --recipe my.yaml   # the stages with your settings (recipes/demo/*.yaml are
                                    # the built-in ones; study/pipeline_config.py says each key)

The settings a run used are written beside it as pipeline.yaml (work and results folders), with
the command that reruns it.

SIGTERM, SIGUSR1 or Ctrl-C stops it cleanly: the running scripts get SIGTERM (training writes a
checkpoint) and the same command resumes.
"""
import glob
import gzip
import math
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from relrl.data.dataset_io import atomic_write_jsonl, load_dataset, read_json
from relrl.engines import ENGINES, default_engine
from relrl.evaluation.guess_baselines import rescore, with_baselines
from relrl.evaluation.model_results import compare_models, with_records
from relrl.evaluation.results_io import read_result, write_result
from relrl.evaluation.retention import select_retention
from relrl.runtime.cli import (
    ArgumentParser,
    UsageError,
    add_tolerance_rule_arg,
    positive_int,
    run_main,
    seed_list,
)
from study import pipeline_config, pooled_report, stage_inputs, stage_times
from study.demo_report import SET_TITLES, build_report, slug, splice_results_md
from study.pipeline_config import PipelineConfig

ROOT = Path(__file__).resolve().parent

# Sizes and rates of each pipeline: a recipe, read through study.pipeline_config's schema.
# full (the study's own miniature) and fast (`--fast`); the replicated study (`--seeds`) runs
# replication, the full miniature with the changes its pre-registration
# (results/demo-replication/PREREGISTRATION.md) fixes, and replication-fast is its smoke
# version; replication-v2 is the redone replication's (results/demo-replication-v2/), which
# `make demo` runs at a development seed.
RECIPES = ROOT / "recipes" / "demo"
BUILT_IN = ("full", "fast", "replication", "replication-fast", "replication-v2")
SETTINGS_FILE = "pipeline.yaml"  # the resolved settings, beside the run; --recipe reruns it


def recipe(name: str) -> PipelineConfig:
    """A built-in pipeline's settings: recipes/demo/<name>.yaml."""
    return pipeline_config.load(RECIPES / f"{name}.yaml")


K_SETS = ("heldout", "retention")  # the sets sampled eval_samples times per question
RETENTION_TITLE = "Retention (held-out questions the base screened right at least half the time)"
# Sequences per generate call: a tiny model on a CPU is bound by per-token overhead, so bigger
# batches are faster; it never changes a result (per-question seeds).
MICRO_BATCH = 64
RESULTS_START, RESULTS_END = "<!-- demo-results:start -->", "<!-- demo-results:end -->"
# RESULTS.md quotes the pre-registered replication (these seeds, default folders) verbatim
CONFIRMATORY_SEEDS = [2, 3, 4]
REPLICATION_START, REPLICATION_END = ("<!-- replication-results:start -->",
                                      "<!-- replication-results:end -->")


def signal_stopped(done: Path | None) -> bool:
    """A training run's statistics.json written when a signal stopped it (stopped_by
    "SIGTERM"): the script exited 0, and the run resumes from its checkpoint."""
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


def _shown(arg) -> str:
    """Paths inside the repository relative to it, so logs and result files name them portably."""
    if isinstance(arg, Path) and arg.is_relative_to(ROOT):
        return str(arg.relative_to(ROOT))
    return str(arg)


class Demo:
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
                self.say(f"settings changed since the last run in {_shown(folder)}: "
                         + "; ".join(self.cfg.changes_from(before)))
            rerun = ["python demo.py --recipe", _shown(path), "--seed", str(self.seed),
                     "--work-dir", _shown(self.work), "--results-dir", _shown(self.out),
                     "--rollout-engine", self.engine_name, *self.rule]
            pipeline_config.write(path, self.cfg, header=(
                f"demo.py's pipeline settings for this run ({self.config}, seed {self.seed}).\n"
                "Rerun it (stages already made from the same inputs are kept):\n"
                f"  {' '.join(rerun)}"))

    def say(self, line: str) -> None:
        with self.lock:  # lines from stages running side by side must not interleave
            print(f"[demo] {line}", flush=True)

    def run(self, stage: str, args: list, done: Path | None = None, processes: int = 1) -> None:
        """Run one script unless its result `done` was made from the same inputs (the ledger,
        study.stage_inputs); its output goes to work/logs/<stage>.log. With `processes`
        running at once each gets its share of the cores as threads: a few-million-parameter
        model gains more from two one-thread processes than from one process on two threads."""
        inputs = None if done is None else stage_inputs.inputs_of(args, done, _shown)
        if done is not None:
            args = self.command_for(stage, args, done, inputs)
            if args is None:
                return
        if self.stop_signal:
            raise SystemExit(f"[demo] stopped by {self.stop_signal} before {stage}")
        cmd = [self.py, *map(_shown, args)]
        log = self.work / "logs" / f"{stage}.log"
        self.say(f"{stage}: {' '.join(cmd[1:])}")
        env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // processes))}
        code = stage_times.code_version(ROOT)  # the scripts read the checkout as it is now
        if done is not None:  # begun: a rerun on these inputs resumes, on others starts afresh
            self.record(stage, inputs, finished=False, code=code)
        start, status, proc = time.time(), "interrupted", None
        try:
            with open(log, "w") as handle:
                proc = subprocess.Popen(cmd, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                                        env=env)
                self.children.append(proc)
                exit_code = proc.wait()
            # A training script stopped by SIGTERM checkpoints and exits 0 without finishing.
            unfinished = signal_stopped(done) or bool(self.stop_signal and done is not None
                                                      and not finished(done))
            status = "stopped" if exit_code == 0 and unfinished else exit_code
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
                             f"({self.stop_signal or 'exit 0'}); run the same command again "
                             "to resume it")
        if status != 0:
            tail = log.read_text().strip().splitlines()[-5:]
            raise SystemExit(f"[demo] {stage} failed (exit {status}); see {log}:\n"
                             + "\n".join(tail))
        if done is not None:
            self.record(stage, inputs, finished=True, code=code)

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
        if entry is not None and entry["inputs"] != inputs:
            what = ", ".join(stage_inputs.changed(entry["inputs"], inputs))
            self.say(f"{stage}: its inputs changed ({what}): starting it afresh")
            for progress in done.parent.glob(glob.escape(done.name) + ".*.progress.jsonl"):
                progress.unlink()
            return ["--overwrite" if a == "--resume" else a for a in args]
        if finished(done):
            self.say(f"{stage}: {_shown(done)} exists, but nothing records what made it: "
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
        """Independent `run` jobs (stage, args, done), `lanes` (default --jobs) at a time; the
        first failure is raised once the others have finished, so no finished work is lost."""
        if not jobs:
            return
        lanes = min(lanes or self.lanes, len(jobs))
        with ThreadPoolExecutor(lanes) as pool:
            futures = [pool.submit(self.run, *job, processes=lanes) for job in jobs]
        for future in futures:
            if future.exception() is not None:
                raise future.exception()

    # ------------------------------------------------------------------ stages
    def data(self) -> None:
        c, d = self.cfg, self.work / "data"
        families = ["--families", c.families] if c.families else []
        self.run("generate", ["generators/build_dataset.py", "generate", "--n", c.n_master,
                              "--seed", self.seed, "--paraphrases", c.paraphrases, *families,
                              "--out", d / "master_all.jsonl"], done=d / "master_all.jsonl")
        # By group, so no paraphrase straddles two splits; whole topics held out as the
        # out-of-distribution (forgetting) check that SFT and GRPO never train on.
        self.run("split", ["generators/build_dataset.py", "split", d / "master_all.jsonl",
                           "--out-dir", d, "--seed", self.seed, "--val-frac", c.val_frac,
                           "--holdout-frac", c.holdout_frac, "--ood-topics", c.ood_topics],
                 done=d / "ood.jsonl")

    def tiny(self) -> None:
        """The built-in model, built once into the cache (tiny-tool's build checks itself under
        the complement rule, whatever the pipeline's)."""
        if self.cfg.model == "tiny":
            self.run("tiny", ["-m", "relrl.models.tiny_build", *self.rule])
        else:
            self.run("tiny-tool", ["-m", "relrl.models.tiny_tool_build"])

    def screen(self) -> None:
        c, d = self.cfg, self.work / "data"
        common = ["--model", self.cfg.model, "--samples", c.screen_samples, "--seed", self.seed,
                  "--max-new-tokens", c.max_new_tokens, "--micro-batch", MICRO_BATCH,
                  *self.engine, *self.rule, *self.tools]
        # The training pool splits into mixed (GRPO) and non-mixed (SFT), as in the study;
        # the holdout is screened too, so its mixed part is a held-out "mixed-style" test set.
        # Each set in --jobs shards, merged after, so the lanes finish together; merged shards
        # are the unsharded result (per-question seeds).
        shards, merges = [], []
        for name, source in (("screen_holdout", "holdout.jsonl"), ("screen", "train.jsonl")):
            out = self.work / name
            out.mkdir(exist_ok=True)
            args = ["evaluation/screen_v4.py", "--dataset", d / source, "--output-dir", out, *common]
            if self.lanes == 1:
                shards.append((name, args, out / "mixed.jsonl"))
                continue
            shards += [(f"{name}_{i}of{self.lanes}", [*args, "--shard", f"{i}/{self.lanes}"],
                        out / "mixed.jsonl") for i in range(self.lanes)]
            merges.append((f"{name}_merge", [*args, "--merge"], out / "mixed.jsonl"))
        self.run_side_by_side(shards)
        self.run_side_by_side(merges)
        if self.cfg.retention_min_score is not None:
            self.retention_set()

    def retention_set(self) -> None:
        """data/retention.jsonl: holdout questions the base screened right often
        (relrl.evaluation.retention)."""
        d, screened = self.work / "data", self.work / "screen_holdout"
        rows = select_retention(load_dataset(d / "holdout.jsonl"),
                                [*load_dataset(screened / "mixed.jsonl"),
                                 *load_dataset(screened / "non_mixed.jsonl")],
                                self.cfg.retention_min_score)
        if not rows:
            raise SystemExit(f"[demo] retention: no holdout question was screened right "
                             f"{self.cfg.retention_min_score}+ times; the holdout is too small")
        atomic_write_jsonl(d / "retention.jsonl", rows)
        self.say(f"retention: {len(rows)} questions in {len({r['group'] for r in rows})} groups")

    def sft_dataset(self) -> Path:
        """The SFT warm start's questions: screening's non-mixed ones; of sft_topics only when
        set, so the topics SFT never saw can show forgetting; without their calculator
        expressions with sft_form prose, so SFT trains on the written-out worked solutions
        (data/sft_non_mixed.jsonl when either applies)."""
        c, non_mixed = self.cfg, self.work / "screen" / "non_mixed.jsonl"
        if c.sft_topics is None and c.sft_form == "tool":
            return non_mixed
        rows = load_dataset(non_mixed)
        if c.sft_topics is not None:
            topics = set(pipeline_config.names(c.sft_topics))
            rows = [r for r in rows if r.get("topic") in topics]
            if not rows:
                raise SystemExit(f"[demo] sft: no non-mixed question of sft_topics "
                                 f"{c.sft_topics} in {_shown(non_mixed)}")
        if c.sft_form == "prose":
            rows = [{k: v for k, v in r.items() if k != "expression"} for r in rows]
        out = self.work / "data" / "sft_non_mixed.jsonl"
        atomic_write_jsonl(out, rows)
        self.say(f"sft: {len(rows)} non-mixed questions of {c.sft_topics or 'every topic'}, "
                 f"{c.sft_form} solutions")
        return out

    @property
    def sft_adapter(self) -> Path:
        return self.work / "sft" / "adapters" / "all"

    def train(self) -> None:
        """SFT warm start, then the three GRPO runs side by side."""
        c = self.cfg
        # --resume: a stage stopped part-way (SIGTERM, Ctrl-C, a kill) carries on from its
        # latest checkpoint when the demo is rerun; with none it starts afresh.
        sft = ("sft", ["training/sft_qwen3_kfold.py", "--resume", "--model", c.model, "--dataset",
                       self.sft_dataset(), "--output-dir",
                       self.work / "sft", "--folds", 1, "--train-all", "--epochs",
                       c.sft_epochs, "--learning-rate", c.sft_lr, "--seed", self.seed,
                       *self.rule, *self.tools],
               self.sft_adapter)
        # The SFT adapter scales its update by alpha/r = 32/16 = 2, exp10's fresh one by
        # 32/32 = 1: the warm start gets half the learning rate for the same step size.
        warm = ["--sft-adapter", self.sft_adapter, "--learning-rate", c.grpo_warm_lr]

        def grpo(name, script, *extra, steps=c.grpo_steps, every=c.grpo_val_every):
            out = self.work / name
            common = ["--model", c.model, "--dataset", self.work / "screen" / "mixed.jsonl",
                      "--val-dataset", self.work / "data" / "val.jsonl", "--seed", self.seed,
                      "--max-useful-steps", steps, "--val-every", every, "--save-every", every,
                      "--max-new-tokens", c.max_new_tokens, "--grad-accum", c.grpo_grad_accum,
                      *self.replication_train_args(),
                      # DAPO-style batches: 16 questions x G=4 per generation call fill the CPU.
                      "--sampling-mode", "batch", "--gen-batch", 16,
                      "--gen-micro-batch", MICRO_BATCH, *self.engine, *self.rule, *self.tools]
            return (f"grpo_{name}", [script, "--resume", *extra, *common, "--output-dir", out],
                    out / "statistics.json")

        self.run(*sft)
        runs = [grpo("exp7", "training/grpo_exp7_dynamic.py", *warm),
                grpo("exp7_passrate", "training/grpo_exp7_dynamic.py", *warm,
                     "--pass-rate-sampler", *self.scheme_args()),
                grpo("exp10", "training/grpo_exp10_nosft.py", *self.exp10_adapter_args())]
        # Three runs of one length: all at once ends sooner than two and then one.
        self.run_side_by_side(runs, lanes=len(runs) if self.lanes > 1 else 1)
        if c.plain_grpo:
            # Plain GRPO counts every generated group as a step: as many as exp7 generated
            # (its total_attempts), so the arms differ in what trains, not in sampling; it
            # validates as many times as exp7, so the best checkpoint is chosen as often.
            groups = read_json(self.work / "exp7" / "statistics.json")["total_attempts"]
            every = math.ceil(groups * c.grpo_val_every / c.grpo_steps)
            self.run(*grpo("exp7_plain", "training/grpo_exp7_dynamic.py", *warm,
                           "--dynamic-sampling", "off", steps=groups, every=every))

    def exp10_adapter_args(self) -> list:
        """exp10's learning rate, and with matched_arms the SFT adapter's shape and the warm
        start's learning rate (read from the trained adapter, so the two cannot drift apart)."""
        if not self.cfg.matched_arms:
            return ["--learning-rate", self.cfg.grpo_lr]
        shape = read_json(self.sft_adapter / "adapter_config.json")
        return ["--lora-r", shape["r"], "--lora-alpha", shape["lora_alpha"],
                "--learning-rate", self.cfg.grpo_warm_lr]

    def grpo_runs(self) -> tuple[str, ...]:
        """The GRPO runs this pipeline trains, by their folder names."""
        return ("exp7", "exp10", "exp7_passrate", *(("exp7_plain",) if self.cfg.plain_grpo else ()))

    def replication_train_args(self) -> list:
        k = self.cfg.val_samples
        informative = self.cfg.informative_by
        return ([*(["--val-samples", k] if k > 1 else []),
                 *(["--informative-by", informative] if informative else [])])

    def scheme_args(self) -> list:
        scheme = self.cfg.pass_rate_scheme
        return ["--pass-rate-scheme", scheme] if scheme else []

    def eval_args(self, set_name: str) -> list:
        """Run seed (apart from screening's in the replication) and samples of one set."""
        k = self.cfg.eval_samples if set_name in K_SETS else 1
        if set_name == "retention" and self.cfg.retention_samples is not None:
            k = self.cfg.retention_samples
        return ["--seed", self.seed + self.cfg.eval_seed_offset,
                *(["--samples", k] if k > 1 else [])]

    def final_checkpoint(self, run: str) -> Path:
        stats = read_json(self.work / run / "statistics.json")
        return self.work / run / f"checkpoint-{stats['useful_steps']}"

    def models(self) -> dict[str, Path]:
        """Label -> adapter of every model compared with the base."""
        models = {"SFT warm start": self.sft_adapter,
                  "GRPO exp7 best": self.work / "exp7" / "best",
                  "GRPO exp7 final": self.final_checkpoint("exp7"),
                  "GRPO exp10 best": self.work / "exp10" / "best"}
        if self.cfg.plain_grpo:
            models["GRPO exp7 plain best"] = self.work / "exp7_plain" / "best"
        return models

    def evaluate(self) -> None:
        """Per set, the first adapter with evaluate_single (base and adapter, paired); then the
        others with evaluate_finetuned_only against that base, so the base runs once per set."""
        c = self.cfg
        firsts, rest = [], []
        for name, dataset in self.eval_sets().items():
            out = self.out / "eval" / name
            out.mkdir(parents=True, exist_ok=True)
            common = ["--model", self.cfg.model, "--dataset", dataset, *self.eval_args(name),
                      "--max-new-tokens", c.max_new_tokens, "--micro-batch", MICRO_BATCH,
                      "--baseline-train", self.work / "data" / "train.jsonl", *self.engine,
                      *self.rule, *self.tools]
            jobs = []
            for label, adapter in self.models().items():
                target = out / f"{slug(label)}.json"
                args = ["evaluation/evaluate_finetuned_only.py", "--base-results",
                        jobs[0][2]] if jobs else ["evaluation/evaluate_single.py", "--base-label",
                                                  "base"]
                jobs.append((f"eval_{name}_{target.stem}", [*args, *common, "--adapter", adapter,
                                                            "--label", label, "--output", target],
                             target))
            firsts.append(jobs[0])
            rest += jobs[1:]
        self.run_side_by_side(firsts)
        self.run_side_by_side(rest)
        if "heldout" not in self.eval_sets():
            self.heldout_from_holdout()

    def heldout_from_holdout(self) -> None:
        """The held-out mixed-style results: the holdout results on the questions the base was
        mixed on in screening. Each question's completions depend only on its own seed, so these
        are the records a separate run on that subset would write, without sampling them twice."""
        mixed = {row["id"]: row for row in load_dataset(self.work / "screen_holdout" / "mixed.jsonl")}
        source, dest = self.out / "eval" / "holdout", self.out / "eval" / "heldout"
        dest.mkdir(parents=True, exist_ok=True)

        def subset(result: dict) -> dict:
            records = [{**r, "base_score": mixed[r["id"]]["base_score"],
                        "base_samples": mixed[r["id"]]["base_samples"]}
                       for r in result["results"] if r["id"] in mixed]
            return {**with_records(result, records),
                    "dataset": _shown(self.work / "screen_holdout" / "mixed.jsonl")}

        for label in self.models():
            pair = read_result(source / f"{slug(label)}.json")
            result = compare_models(subset(pair["base"]), subset(pair["finetuned"]))
            if "guess_baselines" in pair:  # the same fitted guesses, scored on the subset
                block = rescore(pair["guess_baselines"], result["base"]["results"])
                result = with_baselines(result, block)
            write_result(dest / f"{slug(label)}.json", result)

    def eval_sets(self) -> dict[str, Path]:
        """The sets sampled; the held-out mixed-style set is taken from the holdout's results."""
        d = self.work / "data"
        sets = {"train": self.work / "screen" / "mixed.jsonl",
                "holdout": d / "holdout.jsonl", "ood": d / "ood.jsonl"}
        if self.cfg.eval_samples > 1:  # K samples: sampled on its own
            sets["heldout"] = self.work / "screen_holdout" / "mixed.jsonl"
        if self.cfg.retention_min_score is not None:
            sets["retention"] = d / "retention.jsonl"
        return sets

    def report(self) -> None:
        plots = self.out / "plots"
        plots.mkdir(exist_ok=True)
        for run in self.grpo_runs():
            dest = self.out / f"grpo_{run}"
            dest.mkdir(exist_ok=True)
            (dest / "statistics.json").write_bytes((self.work / run / "statistics.json").read_bytes())
            # the log gzipped, as results/ keeps it (a tenth of the size; read_text reads both)
            (dest / "train_log.jsonl.gz").write_bytes(
                gzip.compress((self.work / run / "train_log.jsonl").read_bytes(), mtime=0))
        titles = {**SET_TITLES, **({"retention": RETENTION_TITLE}
                                   if "retention" in self.eval_sets() else {})}
        jobs = []
        for name in titles:
            (plots / name).mkdir(exist_ok=True)
            files = sorted((self.out / "eval" / name).glob("*.json"))
            extra = []
            if name == "holdout":  # one call also draws the training curves
                logs = {run: self.out / f"grpo_{run}" / "train_log.jsonl.gz" for run in self.grpo_runs()}
                extra = [a for run, log in logs.items() for a in ("--grpo-log", f"{run}={_shown(log)}")]
            jobs.append((f"compare_{name}", ["evaluation/compare_results.py", *files,
                                             "--base", "base", "--title", titles[name],
                                             "--output-md", self.out / f"compare_{name}.md",
                                             "--output-json", self.out / f"compare_{name}.json",
                                             "--plots-dir", plots / name, *extra], None))
        self.run_side_by_side(jobs)
        self.write_report()

    def write_report(self) -> None:
        text = build_report(self.out, fast=self.fast, seed=self.seed,
                            out_name=os.path.relpath(self.out, ROOT),
                            timings=stage_times.read(self.out / stage_times.FILE_NAME))
        (self.out / "report.md").write_text(text)
        # RESULTS.md quotes `make demo` only
        if self.config == "full" and self.tolerance_rule == "study":
            splice_results_md(ROOT / "RESULTS.md", text, RESULTS_START, RESULTS_END)


STAGES = ("data", "tiny", "screen", "train", "evaluate", "report")


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
                        help="how screening, GRPO and evaluation sample: hf or vllm (default "
                        "vllm on a CUDA machine where vLLM is installed, else hf; the recorded "
                        "miniature used hf)")
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
    return _shown(path), pipeline_config.load(args.recipe)


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
    started, finished = time.time(), True
    for seed in seeds:
        w, o = work / f"seed-{seed}", out / f"seed-{seed}"
        for folder in (w / "data", w / "logs", o):
            folder.mkdir(parents=True, exist_ok=True)
        print(f"\n[demo] seed {seed} ({config}): {_shown(o)}", flush=True)
        finished = run_stages(Demo(is_fast(config), seed, w, o, args.jobs, config,
                                   engine=args.rollout_engine,
                                   tolerance_rule=args.tolerance_rule, settings=settings),
                              args.stop_after)
    if finished:
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
    print(f"[demo] report: {out / 'report.md'}\n[demo] logs: {work / 'logs'}")
    return 0


if __name__ == "__main__":
    run_main(main)
