"""The GRPO arms, the second half of stage `train`, on screening's mixed questions with
validation early stopping (<work>/<arm>/best, checkpoint-N, statistics.json):

  exp7            training/grpo_exp7_dynamic.py from the SFT warm start, dynamic sampling
  exp7_passrate   the same with the pass-rate sampler
  exp10           training/grpo_exp10_nosft.py, a fresh adapter (no SFT); with matched_arms
                  the SFT adapter's rank, alpha and learning rate
  exp7_plain      with plain_grpo: exp7 without dynamic sampling, for as many generated groups
                  as exp7 generated

Without a warm start (warm_start: false, the first demo) exp10 runs alone at grpo_lr.

The first three run side by side; exp7_plain after exp7, whose group count it reads.
"""
from __future__ import annotations

import math
from functools import partial
from pathlib import Path

from relrl.data.dataset_io import read_json
from study.demo_stages.pipeline import MICRO_BATCH, Pipeline
from study.stage_progress import Work


class GrpoStage(Pipeline):
    """Reads the SFT warm start's adapter (`sft_adapter`, sft.py)."""

    def grpo(self) -> None:
        c = self.cfg
        if not c.warm_start:  # the first demo: exp10 alone, a fresh adapter on the base
            self.run(*self.grpo_job("exp10", "training/grpo_exp10_nosft.py",
                                    "--learning-rate", c.grpo_lr))
            return
        # The SFT adapter scales its update by alpha/r = 32/16 = 2, exp10's fresh one by
        # 32/32 = 1: the warm start gets half the learning rate for the same step size.
        warm = ["--sft-adapter", self.sft_adapter, "--learning-rate", c.grpo_warm_lr]
        runs = [self.grpo_job("exp7", "training/grpo_exp7_dynamic.py", *warm),
                self.grpo_job("exp7_passrate", "training/grpo_exp7_dynamic.py", *warm,
                              "--pass-rate-sampler", *self.scheme_args()),
                self.grpo_job("exp10", "training/grpo_exp10_nosft.py", *self.exp10_adapter_args())]
        # Three runs of one length: all at once ends sooner than two and then one.
        self.run_side_by_side(runs, lanes=len(runs) if self.lanes > 1 else 1)
        if c.plain_grpo:
            # Plain GRPO counts every generated group as a step: as many as exp7 generated
            # (its total_attempts), so the arms differ in what trains, not in sampling; it
            # validates as many times as exp7, so the best checkpoint is chosen as often.
            groups = read_json(self.work / "exp7" / "statistics.json")["total_attempts"]
            every = math.ceil(groups * c.grpo_val_every / c.grpo_steps)
            self.run(*self.grpo_job("exp7_plain", "training/grpo_exp7_dynamic.py", *warm,
                                    "--dynamic-sampling", "off", steps=groups, every=every))

    def grpo_job(self, name: str, script: str, *extra, steps: int | None = None,
                 every: int | None = None) -> tuple:
        """One arm's `run` job (stage, args, done): `steps` useful steps (the recipe's
        grpo_steps), validated and saved every `every` (grpo_val_every)."""
        c = self.cfg
        steps = c.grpo_steps if steps is None else steps
        every = c.grpo_val_every if every is None else every
        out = self.work / name
        common = ["--model", c.model, "--dataset", self.work / "screen" / "mixed.jsonl",
                  "--val-dataset", self.work / "data" / "val.jsonl", "--seed", self.seed,
                  "--max-useful-steps", steps, "--val-every", every, "--save-every", every,
                  "--max-new-tokens", c.max_new_tokens, "--grad-accum", c.grpo_grad_accum,
                  *self.replication_train_args(),
                  # DAPO-style batches: 16 questions x G=4 per generation call fill the CPU.
                  "--sampling-mode", "batch", "--gen-batch", 16,
                  "--gen-micro-batch", MICRO_BATCH, *self.engine, *self.rule, *self.tools]
        # train_log.jsonl: one line a useful step (relrl.rl.grpo_trainer)
        return (f"grpo_{name}", [script, "--resume", *extra, *common, "--output-dir", out],
                out / "statistics.json",
                partial(Work, (out / "train_log.jsonl",), steps, "useful steps"))

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
        if not self.cfg.warm_start:
            return ("exp10",)
        return ("exp7", "exp10", "exp7_passrate", *(("exp7_plain",) if self.cfg.plain_grpo else ()))

    def final_checkpoint(self, run: str) -> Path:
        stats = read_json(self.work / run / "statistics.json")
        return self.work / run / f"checkpoint-{stats['useful_steps']}"

    def replication_train_args(self) -> list:
        k = self.cfg.val_samples
        informative = self.cfg.informative_by
        return ([*(["--val-samples", k] if k > 1 else []),
                 *(["--informative-by", informative] if informative else [])])

    def scheme_args(self) -> list:
        scheme = self.cfg.pass_rate_scheme
        return ["--pass-rate-scheme", scheme] if scheme else []
