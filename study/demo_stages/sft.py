"""The SFT warm start, the first half of stage `train` (training/sft_qwen3_kfold.py).

Trains one adapter (<work>/sft/adapters/all) on screening's non-mixed questions; with
sft_topics only those topics' (so the topics SFT never saw can show forgetting), and with
sft_form prose on the written-out worked solutions instead of the calculator's
(<work>/data/sft_non_mixed.jsonl when either applies); with sft_steps for that many
optimiser steps instead of sft_epochs passes. `--resume`: a run stopped part-way
carries on from its latest checkpoint when the demo is rerun.
"""
from __future__ import annotations

from pathlib import Path

from relrl.data.dataset_io import atomic_write_jsonl, load_dataset
from study import pipeline_config
from study.demo_stages.pipeline import Pipeline, shown


class SftStage(Pipeline):
    @property
    def sft_adapter(self) -> Path:
        return self.work / "sft" / "adapters" / "all"

    def sft(self) -> None:
        c = self.cfg
        # --resume: a stage stopped part-way (SIGTERM, Ctrl-C, a kill) carries on from its
        # latest checkpoint when the demo is rerun; with none it starts afresh.
        self.run("sft", ["training/sft_qwen3_kfold.py", "--resume", "--model", c.model, "--dataset",
                         self.sft_dataset(), "--output-dir",
                         self.work / "sft", "--folds", 1, "--train-all", "--epochs",
                         c.sft_epochs, "--learning-rate", c.sft_lr, "--seed", self.seed,
                         *self.dose, *self.rule, *self.tools],
                 self.sft_adapter)

    @property
    def dose(self) -> list:
        """--max-steps with sft_steps: a dose fixed in optimiser steps, so more data does not
        mean more updates (the redone replication's collapse); none leaves the command as it
        was, so finished stages stay done."""
        return [] if self.cfg.sft_steps is None else ["--max-steps", self.cfg.sft_steps]

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
                                 f"{c.sft_topics} in {shown(non_mixed)}")
        if c.sft_form == "prose":
            rows = [{k: v for k, v in r.items() if k != "expression"} for r in rows]
        out = self.work / "data" / "sft_non_mixed.jsonl"
        atomic_write_jsonl(out, rows)
        self.say(f"sft: {len(rows)} non-mixed questions of {c.sft_topics or 'every topic'}, "
                 f"{c.sft_form} solutions")
        return out
