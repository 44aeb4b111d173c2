"""Stage `data`: generate the master set, then split it by paraphrase group.

  generators/build_dataset.py generate -> <work>/data/master_all.jsonl
  generators/build_dataset.py split    -> <work>/data/{train,val,holdout,ood}.jsonl

No paraphrase straddles two splits; whole topics or families (the recipe's ood_topics or
ood_families) are held out as the out-of-distribution (forgetting) check that SFT and GRPO
never train on.
"""
from __future__ import annotations

from relrl.problems.registry import expand_sets
from study.demo_stages.pipeline import Pipeline
from study.pipeline_config import names


class DataStage(Pipeline):
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
                           "--holdout-frac", c.holdout_frac, *self.held_out()],
                 done=d / "ood.jsonl")

    def held_out(self) -> list:
        """split's flag for what the recipe holds out whole: topics, or several families."""
        if self.cfg.ood_families:
            return ["--ood-families", ",".join(expand_sets(names(self.cfg.ood_families)))]
        return ["--ood-topics", self.cfg.ood_topics]
