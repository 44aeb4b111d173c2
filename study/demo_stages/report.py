"""Stage `report`: the tables, plots and report of the run, from the files the stages wrote.

  <results>/grpo_<arm>/statistics.json, train_log.jsonl.gz   each GRPO run's (log gzipped)
  <results>/compare_<set>.{md,json}, plots/<set>/             evaluation/compare_results.py
  <results>/report.md                                         study.demo_report.build_report
  <results>/summary.json, report.md                           without a warm start (the first
                                                              demo): study.first_report
  RESULTS.md's generated section                              `make demo STUDY=1` only

Reads the GRPO runs (`grpo_runs`, grpo.py) and the sets evaluated (`eval_sets`, evaluation.py).
"""
from __future__ import annotations

import gzip
import os

from relrl.data.dataset_io import atomic_write_json, atomic_write_text
from study import first_report, stage_times
from study.demo_report import SET_TITLES, build_report, splice_results_md
from study.demo_stages.pipeline import ROOT, Pipeline, shown

RETENTION_TITLE = "Retention (held-out questions the base screened right at least half the time)"
REWORDED_TITLE = "Reworded (new problems of every family, in wordings the model never saw)"
RESULTS_START, RESULTS_END = "<!-- demo-results:start -->", "<!-- demo-results:end -->"


class ReportStage(Pipeline):
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
        reported = self.reported_sets()
        titles = {name: title for name, title in {**SET_TITLES, "retention": RETENTION_TITLE,
                                                   "reworded": REWORDED_TITLE}.items()
                  if name in reported}
        # one call also draws the training curves: the holdout's, else the first set's
        curves = "holdout" if "holdout" in titles else next(iter(titles))
        jobs = []
        for name in titles:
            (plots / name).mkdir(exist_ok=True)
            files = sorted((self.out / "eval" / name).glob("*.json"))
            extra = []
            if name == curves:
                logs = {run: self.out / f"grpo_{run}" / "train_log.jsonl.gz" for run in self.grpo_runs()}
                extra = [a for run, log in logs.items() for a in ("--grpo-log", f"{run}={shown(log)}")]
            jobs.append((f"compare_{name}", ["evaluation/compare_results.py", *files,
                                             "--base", "base", "--title", titles[name],
                                             "--output-md", self.out / f"compare_{name}.md",
                                             "--output-json", self.out / f"compare_{name}.json",
                                             "--plots-dir", plots / name, *extra], None))
        self.run_side_by_side(jobs)
        self.write_report()

    def write_report(self) -> None:
        if not self.cfg.warm_start:  # the first demo: its one comparison
            self.write_first_report()
            return
        text = build_report(self.out, fast=self.fast, seed=self.seed,
                            out_name=os.path.relpath(self.out, ROOT),
                            timings=stage_times.read(self.out / stage_times.FILE_NAME))
        (self.out / "report.md").write_text(text)
        # RESULTS.md quotes `make demo` only
        if self.config == "full" and self.tolerance_rule == "study":
            splice_results_md(ROOT / "RESULTS.md", text, RESULTS_START, RESULTS_END)

    def write_first_report(self) -> None:
        """summary.json (the held-out gain, its interval, the best guess) and report.md."""
        summary = first_report.summary(self.out)
        atomic_write_json(self.out / "summary.json", summary)
        atomic_write_text(self.out / "report.md", first_report.report(
            self.out, summary, seed=self.seed, out_name=os.path.relpath(self.out, ROOT),
            steps=self.cfg.grpo_steps))
