"""Development probe for issue 46, item 1: does SFT in the calculator's tool form, at a dose
fixed in optimiser steps, improve its own topics (the positive control) without breaking the
others? Development seeds only (0, 1, 100 and up); nothing here is confirmatory.

From a pipeline work folder (demo.py --stop-after screen) it
  1. writes <scratch>/data/sft.jsonl: screening's non-mixed training questions of --topics,
     with their calculator expressions (sft_form tool), and <scratch>/data/eval.jsonl: every
     holdout question of those topics and of the others (never trained on; checked);
  2. trains one adapter per dose (training/sft_qwen3_kfold.py --max-steps N);
  3. scores the base and each adapter on eval.jsonl with fresh samples (seed + 1000), the first
     with evaluation/evaluate_single.py, the rest against that base
     (evaluate_finetuned_only.py), each while the next dose trains;
  4. tables them (evaluation/sft_dose_table.py) into <output-dir>/probe.json and probe.md.
Every step is skipped when its output exists, so a stopped probe resumes where it was.

  python evaluation/sft_dose_probe.py --work-dir runs/science-v3-dev/seed-100 --seed 100 \\
      --topics system_reliability,availability --doses 20,60,150
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from relrl.data.dataset_io import atomic_write_jsonl, load_dataset
from relrl.problems.registry import TOPICS
from relrl.runtime.cli import ArgumentParser, UsageError, run_main, seed_list
from study import pipeline_config

ROOT = Path(__file__).resolve().parents[1]
EVAL_SEED_OFFSET = 1000  # as the pipelines' eval_seed_offset: fresh samples, not screening's
CONFIRMATORY_FLOOR = 100  # seeds 2-99 include every confirmatory seed the study has named


def parse_args(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", required=True, help="the pipeline work folder (data/, screen/)")
    p.add_argument("--seed", type=int, required=True, help="the work folder's development seed")
    p.add_argument("--topics", required=True, help="comma-separated topics SFT trains on")
    p.add_argument("--doses", type=seed_list("--doses"), required=True,
                   help="comma-separated SFT doses in optimiser steps")
    p.add_argument("--samples", type=int, default=2, help="samples per held-out question")
    p.add_argument("--other-groups", type=int, default=None,
                   help="score only this many paraphrase groups of the other topics, drawn by "
                   "the seed (the SFT topics' are scored whole); default all")
    p.add_argument("--learning-rate", default="2e-4", help="SFT's (the recipes' sft_lr)")
    p.add_argument("--max-new-tokens", type=int, default=120)
    p.add_argument("--output-dir", default=None,
                   help="default results/science-v3/development/sft-dose-seed-N")
    p.add_argument("--scratch", default=None,
                   help="adapters and data (default runs/science-v3-dev/sft-dose-seed-N)")
    return p.parse_args(argv)


def check_seed(seed: int) -> None:
    """A confirmatory seed must stay unrun until its pre-registration is frozen."""
    if seed not in (0, 1) and seed < CONFIRMATORY_FLOOR:
        raise UsageError(f"--seed {seed}: development seeds only (0, 1, {CONFIRMATORY_FLOOR} "
                         "and up); confirmatory seeds wait for a frozen pre-registration")


def split_rows(non_mixed: list[dict], holdout: list[dict], topics: set[str], *,
               other_groups: int | None = None, seed: int = 0):
    """(SFT rows, evaluation rows): the topics' non-mixed training questions in tool form, and
    the holdout (of the other topics, other_groups groups drawn by the seed when given);
    refused if a held-out group or question text is among the SFT rows."""
    sft = [r for r in non_mixed if r.get("topic") in topics and r.get("expression")]
    if not sft:
        raise UsageError(f"no non-mixed training question with a calculator expression in "
                         f"topics {', '.join(sorted(topics))}")
    trained_groups = {r["group"] for r in sft}
    trained_text = {r["question"] for r in sft}
    leaked = [r["id"] for r in holdout if r["group"] in trained_groups
              or r["question"] in trained_text]
    if leaked:
        raise UsageError(f"{len(leaked)} held-out questions are in the SFT data: {leaked[:3]}")
    own = [r for r in holdout if r.get("topic") in topics]
    if not own or len(own) == len(holdout):
        raise UsageError("the holdout needs questions of the SFT topics and of others")
    if other_groups is not None:  # a smaller, seeded share of the other topics: time, not bias
        others = sorted({r["group"] for r in holdout if r.get("topic") not in topics})
        kept = set(random.Random(seed).sample(others, min(other_groups, len(others))))
        holdout = [r for r in holdout if r.get("topic") in topics or r["group"] in kept]
    return sft, holdout


def run_step(name: str, args: list, log: Path) -> subprocess.Popen:
    """A script under nice 19 (the 2 cores are shared), its output to log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["nice", "-n", "19", sys.executable, *[str(a) for a in args]]
    print(f"[probe] {name}: {' '.join(cmd[3:])}", flush=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"),
                            stderr=subprocess.STDOUT)


def wait_all(procs: list[tuple[str, subprocess.Popen]]) -> None:
    for name, proc in procs:
        if proc.wait() != 0:
            raise SystemExit(f"[probe] {name} failed (exit {proc.returncode}); see its log")


def main(argv=None):
    a = parse_args(argv)
    check_seed(a.seed)
    topics = set(pipeline_config.names(a.topics))
    if not topics or topics - set(TOPICS):
        raise UsageError(f"--topics: unknown topic in {a.topics!r} (known: {', '.join(TOPICS)})")
    if min(a.doses) < 1:
        raise UsageError("--doses: every dose is at least 1 optimiser step")
    work = Path(a.work_dir)
    out = Path(a.output_dir or ROOT / "results/science-v3/development" / f"sft-dose-seed-{a.seed}")
    scratch = Path(a.scratch or ROOT / "runs/science-v3-dev" / f"sft-dose-seed-{a.seed}")
    sft_rows, eval_rows = split_rows(load_dataset(work / "screen" / "non_mixed.jsonl"),
                                     load_dataset(work / "data" / "holdout.jsonl"), topics,
                                     other_groups=a.other_groups, seed=a.seed)
    data = scratch / "data"
    atomic_write_jsonl(data / "sft.jsonl", sft_rows)
    atomic_write_jsonl(data / "eval.jsonl", eval_rows)
    print(f"[probe] seed {a.seed}: SFT on {len(sft_rows)} questions of {a.topics}; "
          f"{len(eval_rows)} held-out questions, {a.samples} samples each", flush=True)
    rule = ["--tolerance-rule", "complement", "--tools", "calculator"]
    t0 = time.time()
    common = ["--model", "tiny-tool", "--dataset", data / "eval.jsonl", "--seed",
              a.seed + EVAL_SEED_OFFSET, "--samples", a.samples, "--max-new-tokens",
              a.max_new_tokens, "--micro-batch", 64, "--baseline-train", work / "data" / "train.jsonl",
              "--rollout-engine", "hf", "--records", "gzip", *rule]

    def train(dose):
        adapter = scratch / f"sft-{dose}" / "adapters" / "all"
        if not (adapter / "adapter_model.safetensors").is_file():
            wait_all([(f"sft {dose}", run_step(f"sft {dose}", [
                "training/sft_qwen3_kfold.py", "--resume", "--model", "tiny-tool", "--dataset",
                data / "sft.jsonl", "--output-dir", scratch / f"sft-{dose}", "--folds", 1,
                "--train-all", "--max-steps", dose, "--learning-rate", a.learning_rate,
                "--seed", a.seed, *rule], scratch / "logs" / f"sft-{dose}.log"))])
        (out / "sft").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(scratch / f"sft-{dose}" / "all" / "statistics.json",
                        out / "sft" / f"sft-{dose}.json")

    def job(dose, first: bool):
        target = out / "eval" / f"sft-{dose}.json"
        head = (["evaluation/evaluate_single.py", "--base-label", "tiny-tool"] if first else
                ["evaluation/evaluate_finetuned_only.py", "--base-results",
                 out / "eval" / f"sft-{a.doses[0]}.json"])
        return (f"eval sft-{dose}", [*head, *common, "--adapter",
                                     scratch / f"sft-{dose}" / "adapters" / "all", "--label",
                                     f"SFT {dose} steps", "--output", target],
                scratch / "logs" / f"eval-{dose}.log", target)

    # Two lanes on the two cores: the doses train one after another while each trained one is
    # scored (the first with the base, which the later ones are compared against).
    (out / "eval").mkdir(parents=True, exist_ok=True)
    trained, failed = {d: threading.Event() for d in a.doses}, []

    def training_lane():
        try:
            for dose in a.doses:
                train(dose)
                trained[dose].set()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            failed.append(exc)
            for event in trained.values():
                event.set()

    lane = threading.Thread(target=training_lane, daemon=True)
    lane.start()
    for i, dose in enumerate(a.doses):
        trained[dose].wait()
        if failed:
            raise failed[0]
        name, args, log, target = job(dose, i == 0)
        if not target.is_file():
            wait_all([(name, run_step(name, args, log))])
    lane.join()
    for leftover in (out / "eval").glob("*.progress.jsonl"):  # the results are whole now
        leftover.unlink()
    wait_all([("table", run_step("table", [
        "evaluation/sft_dose_table.py", "--probe-dir", out, "--topics", a.topics,
        "--seed", a.seed, "--doses", ",".join(map(str, a.doses))],
        scratch / "logs" / "table.log"))])
    print(f"[probe] done in {time.time() - t0:.0f} s: {out / 'probe.md'}", flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
