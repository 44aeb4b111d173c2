"""Stage `screen`: the base model samples each question screen_samples times (screen_v4.py).

  <work>/screen/{mixed,non_mixed}.jsonl           the training pool: mixed ones train GRPO,
                                                  the others SFT, as in the study
  <work>/screen_holdout/{mixed,non_mixed}.jsonl   the holdout: its mixed part is the held-out
                                                  mixed-style test set
  <work>/screen_ood/{mixed,non_mixed}.jsonl       with retention_disjoint: the ood split
  <work>/data/retention.jsonl                     with retention_min_score: holdout questions
                                                  the base got right often; with
                                                  retention_disjoint, ood ones too, and no
                                                  group with a mixed question (the held-out
                                                  mixed-style set's, or its like in ood)

With --jobs N each set runs as N shards side by side, merged after; merged shards are the
unsharded result (per-question seeds). screening.json, every completion, is written in the
compact layout (--records gzip; recompressed to xz for results/), as the redone replication
commits its work folder.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

from relrl.data.dataset_io import atomic_write_jsonl, load_dataset
from relrl.evaluation.retention import select_retention
from relrl.evaluation.runner import progress_path
from relrl.evaluation.shards import shard_path, shard_rows
from study.demo_stages.pipeline import MICRO_BATCH, RECORDS, Pipeline
from study.stage_progress import Work


class ScreeningStage(Pipeline):
    def screen(self) -> None:
        c, d = self.cfg, self.work / "data"
        common = ["--model", self.cfg.model, "--samples", c.screen_samples, "--seed", self.seed,
                  "--max-new-tokens", c.max_new_tokens, "--micro-batch", MICRO_BATCH,
                  *self.engine, *self.rule, *self.tools, "--records", RECORDS]
        # The training pool splits into mixed (GRPO) and non-mixed (SFT), as in the study;
        # the holdout is screened too, so its mixed part is a held-out "mixed-style" test set.
        # Each set in --jobs shards, merged after, so the lanes finish together; merged shards
        # are the unsharded result (per-question seeds).
        shards, merges = [], []
        for name, source in self.screened_sets():
            out = self.work / name
            out.mkdir(exist_ok=True)
            args = ["evaluation/screen_v4.py", "--dataset", d / source, "--output-dir", out, *common]
            if self.lanes == 1:
                shards.append((name, args, out / "mixed.jsonl",
                               partial(self.screen_work, d / source, out, 0, 1)))
                continue
            shards += [(f"{name}_{i}of{self.lanes}", [*args, "--shard", f"{i}/{self.lanes}"],
                        out / "mixed.jsonl", partial(self.screen_work, d / source, out, i,
                                                     self.lanes))
                       for i in range(self.lanes)]
            merges.append((f"{name}_merge", [*args, "--merge"], out / "mixed.jsonl"))
        self.run_side_by_side(shards)
        self.run_side_by_side(merges)
        if self.cfg.retention_min_score is not None:
            self.retention_set()

    def screened_sets(self) -> list[tuple[str, str]]:
        """(output folder, split file) of each set screened; the ood split too where the
        retention set takes in never-trained families."""
        sets = [("screen_holdout", "holdout.jsonl"), ("screen", "train.jsonl")]
        return sets + [("screen_ood", "ood.jsonl")] if self.cfg.retention_disjoint else sets

    @staticmethod
    def screen_work(dataset: Path, out: Path, index: int, count: int) -> Work:
        """What screen_v4.py's progress file holds when shard `index` of `count` is screened."""
        target = out / "screening.json"
        target = target if count == 1 else shard_path(target, index, count)
        questions = len(shard_rows(load_dataset(dataset), index, count))
        return Work((progress_path(target, "screen"),), questions, "questions")

    def retention_set(self) -> None:
        """data/retention.jsonl: holdout questions the base screened right often
        (relrl.evaluation.retention); with retention_disjoint ood ones too, and no group that
        has a mixed question."""
        d, rows = self.work / "data", []
        splits = [("holdout", "screen_holdout")]
        if self.cfg.retention_disjoint:
            splits.append(("ood", "screen_ood"))
        for split, folder in splits:
            mixed = load_dataset(self.work / folder / "mixed.jsonl")
            rows += select_retention(
                load_dataset(d / f"{split}.jsonl"),
                [*mixed, *load_dataset(self.work / folder / "non_mixed.jsonl")],
                self.cfg.retention_min_score,
                exclude_groups=({str(r["group"]) for r in mixed} if self.cfg.retention_disjoint
                                else frozenset()))
        if not rows:
            raise SystemExit(f"[demo] retention: no holdout question was screened right "
                             f"{self.cfg.retention_min_score}+ times; the holdout is too small")
        atomic_write_jsonl(d / "retention.jsonl", rows)
        self.say(f"retention: {len(rows)} questions in {len({r['group'] for r in rows})} groups")
