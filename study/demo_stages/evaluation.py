"""Stage `evaluate`: every model against the base on every set, paired question by question.

  <results>/eval/<set>/<model>.json   pair files (evaluate_single.py, evaluate_finetuned_only.py)

Sets: the mixed training questions (train), the holdout, the out-of-distribution topics (ood),
the held-out mixed-style set (heldout: sampled eval_samples times when that is above 1, else
taken from the holdout's results), with retention_min_score the retention set and, with
reworded_rows, the reworded set (every family of the recipe in wordings the model never saw, one
sample a question, like the holdout and ood; data.py makes it). Models:
the SFT warm start, exp7's best and final checkpoints, exp10's best, and with plain_grpo plain
GRPO's best (reads `sft_adapter` from sft.py and the runs' checkpoints from grpo.py). The files
are written in a compact layout (--records gzip; results/ commits them recompressed to xz,
docs/evaluation.md).
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

from relrl.data.dataset_io import load_dataset
from relrl.evaluation.guess_baselines import rescore, with_baselines
from relrl.evaluation.model_results import compare_models, with_records
from relrl.evaluation.results_io import read_result, write_result
from relrl.evaluation.runner import progress_path
from study import pipeline_config
from study.demo_report import slug
from study.demo_stages.pipeline import MICRO_BATCH, RECORDS, Pipeline, shown
from study.stage_progress import Work

K_SETS = ("heldout", "retention")  # the sets sampled eval_samples times per question


class EvaluationStage(Pipeline):
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
                      *self.rule, *self.tools, "--records", RECORDS]
            jobs = []
            for label, adapter in self.models().items():
                target = out / f"{slug(label)}.json"
                args = ["evaluation/evaluate_finetuned_only.py", "--base-results",
                        jobs[0][2]] if jobs else ["evaluation/evaluate_single.py", "--base-label",
                                                  "base"]
                # the progress files of the models it samples: the base too in the first job
                roles = ("finetuned",) if jobs else ("base", "finetuned")
                work = partial(self.eval_work, dataset, target, roles)
                jobs.append((f"eval_{name}_{target.stem}", [*args, *common, "--adapter", adapter,
                                                            "--label", label, "--output", target],
                             target, work))
            firsts.append(jobs[0])
            rest += jobs[1:]
        self.run_side_by_side(firsts)
        self.run_side_by_side(rest)
        if self.heldout_derived():
            self.heldout_from_holdout()

    @staticmethod
    def eval_work(dataset: Path, target: Path, roles: tuple[str, ...]) -> Work:
        """What an evaluation's progress files hold once it has sampled every question."""
        return Work(tuple(progress_path(target, role) for role in roles),
                    len(load_dataset(dataset)) * len(roles), "questions")

    def models(self) -> dict[str, Path]:
        """Label -> adapter of every model compared with the base."""
        if not self.cfg.warm_start:
            return {"GRPO exp10 best": self.work / "exp10" / "best"}
        models = {"SFT warm start": self.sft_adapter,
                  "GRPO exp7 best": self.work / "exp7" / "best",
                  "GRPO exp7 final": self.final_checkpoint("exp7"),
                  "GRPO exp10 best": self.work / "exp10" / "best"}
        if self.cfg.plain_grpo:
            models["GRPO exp7 plain best"] = self.work / "exp7_plain" / "best"
        return models

    def eval_sets(self) -> dict[str, Path]:
        """The sets sampled; the held-out mixed-style set is taken from the holdout's results."""
        d = self.work / "data"
        sets = {"train": self.work / "screen" / "mixed.jsonl",
                "holdout": d / "holdout.jsonl", "ood": d / "ood.jsonl"}
        if self.cfg.eval_samples > 1:  # K samples: sampled on its own
            sets["heldout"] = self.work / "screen_holdout" / "mixed.jsonl"
        if self.cfg.retention_min_score is not None:
            sets["retention"] = d / "retention.jsonl"
        if self.cfg.reworded_rows is not None:
            sets["reworded"] = d / "reworded.jsonl"
        return {name: path for name, path in sets.items() if self.chosen(name)}

    def chosen(self, set_name: str) -> bool:
        """Whether the recipe's eval_sets (every set when null) name this set."""
        return self.cfg.eval_sets is None or set_name in pipeline_config.names(self.cfg.eval_sets)

    def heldout_derived(self) -> bool:
        """Whether the held-out mixed-style results are taken from the holdout's (one sample a
        question) instead of sampled on their own."""
        return "heldout" not in self.eval_sets() and "holdout" in self.eval_sets() and \
            self.chosen("heldout")

    def reported_sets(self) -> list[str]:
        """The sets with results, as the report lists them."""
        return [*self.eval_sets(), *(["heldout"] if self.heldout_derived() else [])]

    def eval_args(self, set_name: str) -> list:
        """Run seed (apart from screening's in the replication) and samples of one set."""
        k = self.cfg.eval_samples if set_name in K_SETS else 1
        if set_name == "retention" and self.cfg.retention_samples is not None:
            k = self.cfg.retention_samples
        return ["--seed", self.seed + self.cfg.eval_seed_offset,
                *(["--samples", k] if k > 1 else [])]

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
                    "dataset": shown(self.work / "screen_holdout" / "mixed.jsonl")}

        for label in self.models():
            pair = read_result(source / f"{slug(label)}.json")
            result = compare_models(subset(pair["base"]), subset(pair["finetuned"]))
            if "guess_baselines" in pair:  # the same fitted guesses, scored on the subset
                block = rescore(pair["guess_baselines"], result["base"]["results"])
                result = with_baselines(result, block)
            write_result(dest / f"{slug(label)}.json", result, records=RECORDS)
