"""demo.py's stages, one a file, each readable alone; demo.py is the command line over them.

  pipeline.py    the shared state (folders, recipe, the flags every stage passes on) and the
                 stage runner: commands printed and logged, resume through the inputs ledger
                 (study.stage_inputs), attempt times (study.stage_times), clean stops
  data.py        data       generate the master set, split it by paraphrase group
  model.py       tiny       build or reuse the built-in model
  screening.py   screen     the base model's pass counts: mixed / non-mixed, retention set
  sft.py         train (1)  the SFT warm start on the non-mixed questions
  grpo.py        train (2)  the GRPO arms on the mixed questions
  evaluation.py  evaluate   every model against the base on every set
  report.py      report     tables, plots, report.md, RESULTS.md

`Demo` is all of them on one Pipeline; STAGES is the order demo.py runs them in.
"""
from __future__ import annotations

from study.demo_stages.data import DataStage
from study.demo_stages.evaluation import EvaluationStage
from study.demo_stages.grpo import GrpoStage
from study.demo_stages.model import ModelStage
from study.demo_stages.report import ReportStage
from study.demo_stages.screening import ScreeningStage
from study.demo_stages.sft import SftStage

STAGES = ("data", "tiny", "screen", "train", "evaluate", "report")


class Demo(DataStage, ModelStage, ScreeningStage, SftStage, GrpoStage, EvaluationStage,
           ReportStage):
    """The miniature study's pipeline: each method in STAGES runs one stage."""

    def train(self) -> None:
        """SFT warm start, then the GRPO runs (three side by side, plain GRPO after); without a
        warm start (warm_start: false), GRPO exp10 alone."""
        if self.cfg.warm_start:
            self.sft()
        self.grpo()
