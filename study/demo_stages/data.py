"""Stage `data`: generate the master set, then split it by paraphrase group.

  generators/build_dataset.py generate -> <work>/data/master_all.jsonl
  generators/build_dataset.py split    -> <work>/data/{train,val,holdout,ood}.jsonl
  generators/build_dataset.py generate -> <work>/data/reworded.jsonl   (with reworded_rows)

No paraphrase straddles two splits; whole topics or families (the recipe's ood_topics or
ood_families) are held out as the out-of-distribution (forgetting) check that SFT and GRPO
never train on. With exclude_pretraining no problem the built-in model was pretrained on is
drawn; with reworded_rows a further test set asks problems of every family of the recipe, held
out or not, in wordings the model never saw (--wording new), drawn at a seed of its own and apart
from every problem of the master set.
"""
from __future__ import annotations

from relrl.problems.registry import expand_sets
from study.demo_stages.pipeline import Pipeline
from study.pipeline_config import names

# The reworded set's seed is the run's plus this: its draws are apart from every run's master
# set (development and confirmatory seeds are far below it), and --exclude keeps it apart from
# this run's master set whatever the draws.
REWORDED_SEED_OFFSET = 1_000_000


class DataStage(Pipeline):
    def data(self) -> None:
        c, d = self.cfg, self.work / "data"
        families = ["--families", c.families] if c.families else []
        self.run("generate", ["generators/build_dataset.py", "generate", "--n", c.n_master,
                              "--seed", self.seed, "--paraphrases", c.paraphrases, *families,
                              *self.unseen(), "--out", d / "master_all.jsonl"],
                 done=d / "master_all.jsonl")
        # By group, so no paraphrase straddles two splits; whole topics held out as the
        # out-of-distribution (forgetting) check that SFT and GRPO never train on.
        self.run("split", ["generators/build_dataset.py", "split", d / "master_all.jsonl",
                           "--out-dir", d, "--seed", self.seed, "--val-frac", c.val_frac,
                           "--holdout-frac", c.holdout_frac, *self.held_out()],
                 done=d / "ood.jsonl")
        if c.reworded_rows is not None:
            self.reworded()

    def reworded(self) -> None:
        """The reworded test set: every family of the recipe (trained and held out alike, so a
        report can split them) in its new wordings only, no problem of the master set."""
        c, d = self.cfg, self.work / "data"
        families = ["--families", c.families] if c.families else []
        self.run("reworded", ["generators/build_dataset.py", "generate", "--n", c.reworded_rows,
                              "--seed", self.seed + REWORDED_SEED_OFFSET, "--paraphrases",
                              c.paraphrases, *families, "--wording", "new", "--exclude",
                              d / "master_all.jsonl", *self.unseen(), "--out",
                              d / "reworded.jsonl"], done=d / "reworded.jsonl")

    def unseen(self) -> list:
        """generate's flag that leaves out the model's pretraining problems, if the recipe asks."""
        return ["--exclude-pretraining", self.cfg.model] if self.cfg.exclude_pretraining else []

    def held_out(self) -> list:
        """split's flag for what the recipe holds out whole: topics, or several families."""
        if self.cfg.ood_families:
            return ["--ood-families", ",".join(expand_sets(names(self.cfg.ood_families)))]
        return ["--ood-topics", self.cfg.ood_topics]
