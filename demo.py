"""The study in miniature: every stage of the pipeline on a CPU with the built-in `tiny` model.

  generate data -> build/reuse tiny -> screen (G=4) -> SFT warm start on non-mixed
  -> GRPO exp7 (warm start) and exp10 (no SFT) on mixed, with validation early stopping
  -> evaluate every model on four sets, McNemar against the base -> tables, plots, RESULTS.md

Each stage is the real script a cluster user runs, called as a subprocess with the command
printed, so this file doubles as a worked example of the commands. A stage whose output exists
is skipped, and every script resumes from its own progress files: a killed demo loses nothing.

  python demo.py            # the full miniature (about 20 minutes on 2 cores)
  python demo.py --fast     # a 3-minute look; its numbers are labelled FAST
"""
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from relrl.cli import ArgumentParser, run_main  # noqa: E402
from relrl.data import read_json  # noqa: E402

# Sizes of the two versions. Tuned on validation accuracy only, never on the test sets.
CONFIGS = {
    "full": dict(n_master=600, paraphrases=2, val_frac=0.12, holdout_frac=0.2,
                 ood_topics="growth,spares,importance", screen_samples=4,
                 sft_epochs=2, grpo_steps=60, grpo_val_every=10, eval_max_new_tokens=160),
    "fast": dict(n_master=150, paraphrases=1, val_frac=0.15, holdout_frac=0.2,
                 ood_topics="growth,spares,importance", screen_samples=4,
                 sft_epochs=1, grpo_steps=8, grpo_val_every=4, eval_max_new_tokens=160),
}
# Sequences per generate call: a tiny model on a CPU is bound by per-token overhead, so bigger
# batches are faster; it never changes a result (per-question seeds).
MICRO_BATCH = 64
RESULTS_START, RESULTS_END = "<!-- demo-results:start -->", "<!-- demo-results:end -->"


class Demo:
    def __init__(self, fast: bool, seed: int, work: Path, out: Path):
        self.cfg = CONFIGS["fast" if fast else "full"]
        self.fast, self.seed, self.work, self.out = fast, seed, work, out
        self.timings: list[tuple[str, float]] = []
        self.py = sys.executable

    def run(self, stage: str, args: list, done: Path | None = None) -> None:
        """Run one script unless `done` exists; its output goes to work/logs/<stage>.log."""
        if done is not None and done.exists():
            print(f"[demo] {stage}: done already ({done})", flush=True)
            return
        cmd = [self.py, *map(str, args)]
        log = self.work / "logs" / f"{stage}.log"
        print(f"[demo] {stage}: {' '.join(cmd[1:])}", flush=True)
        start = time.time()
        with open(log, "w") as handle:
            proc = subprocess.run(cmd, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
        self.timings.append((stage, time.time() - start))
        if proc.returncode != 0:
            tail = log.read_text().strip().splitlines()[-5:]
            raise SystemExit(f"[demo] {stage} failed (exit {proc.returncode}); see {log}:\n"
                             + "\n".join(tail))

    # ------------------------------------------------------------------ stages
    def data(self) -> None:
        c, d = self.cfg, self.work / "data"
        self.run("generate", ["generators/build_dataset.py", "generate", "--n", c["n_master"],
                              "--seed", self.seed, "--paraphrases", c["paraphrases"],
                              "--out", d / "master_all.jsonl"], done=d / "master_all.jsonl")
        # By group, so no paraphrase straddles two splits; whole topics held out as the
        # out-of-distribution (forgetting) check that SFT and GRPO never train on.
        self.run("split", ["generators/build_dataset.py", "split", d / "master_all.jsonl",
                           "--out-dir", d, "--seed", self.seed, "--val-frac", c["val_frac"],
                           "--holdout-frac", c["holdout_frac"], "--ood-topics", c["ood_topics"]],
                 done=d / "ood.jsonl")

    def tiny(self) -> None:
        self.run("tiny", ["-m", "relrl.tiny_build"])

    def screen(self) -> None:
        c, d = self.cfg, self.work / "data"
        common = ["--model", "tiny", "--samples", c["screen_samples"], "--seed", self.seed,
                  "--max-new-tokens", c["eval_max_new_tokens"], "--micro-batch", MICRO_BATCH]
        # The training pool splits into mixed (GRPO) and non-mixed (SFT), as in the study;
        # the holdout is screened too, so its mixed part is a held-out "mixed-style" test set.
        for name, source in (("screen", "train.jsonl"), ("screen_holdout", "holdout.jsonl")):
            out = self.work / name
            out.mkdir(exist_ok=True)
            self.run(name, ["evaluation/screen_v4.py", "--dataset", d / source,
                            "--output-dir", out, *common], done=out / "mixed.jsonl")

    def sft(self) -> None:
        c = self.cfg
        self.run("sft", ["training/sft_qwen3_kfold.py", "--model", "tiny", "--dataset",
                         self.work / "screen" / "non_mixed.jsonl", "--output-dir",
                         self.work / "sft", "--folds", 1, "--train-all", "--epochs",
                         c["sft_epochs"], "--seed", self.seed], done=self.sft_adapter)

    @property
    def sft_adapter(self) -> Path:
        return self.work / "sft" / "adapters" / "all"

    def grpo(self) -> None:
        c = self.cfg
        common = ["--model", "tiny", "--dataset", self.work / "screen" / "mixed.jsonl",
                  "--val-dataset", self.work / "data" / "val.jsonl", "--seed", self.seed,
                  "--max-useful-steps", c["grpo_steps"], "--val-every", c["grpo_val_every"],
                  "--save-every", c["grpo_val_every"], "--max-new-tokens",
                  c["eval_max_new_tokens"]]
        runs = {"exp7": ["training/grpo_exp7_dynamic.py", "--sft-adapter", self.sft_adapter],
                "exp10": ["training/grpo_exp10_nosft.py"],
                "exp7_passrate": ["training/grpo_exp7_dynamic.py", "--sft-adapter",
                                  self.sft_adapter, "--pass-rate-sampler"]}
        for name, script in runs.items():
            out = self.work / name
            self.run(f"grpo_{name}", [*script, *common, "--output-dir", out],
                     done=out / "statistics.json")

    def final_checkpoint(self, run: str) -> Path:
        stats = read_json(self.work / run / "statistics.json")
        return self.work / run / f"checkpoint-{stats['useful_steps']}"

    def models(self) -> dict[str, Path]:
        """Label -> adapter of every model compared with the base."""
        return {"SFT warm start": self.sft_adapter,
                "GRPO exp7 best": self.work / "exp7" / "best",
                "GRPO exp7 final": self.final_checkpoint("exp7"),
                "GRPO exp10 best": self.work / "exp10" / "best"}

    def evaluate(self) -> None:
        """The first adapter with evaluate_single (base and adapter, paired); the others with
        evaluate_finetuned_only against that run's base results, so the base runs once per set."""
        c = self.cfg
        for name, dataset in self.eval_sets().items():
            out = self.out / "eval" / name
            out.mkdir(parents=True, exist_ok=True)
            common = ["--model", "tiny", "--dataset", dataset, "--seed", self.seed,
                      "--max-new-tokens", c["eval_max_new_tokens"], "--micro-batch", MICRO_BATCH]
            first = None
            for label, adapter in self.models().items():
                target = out / (label.lower().replace(" ", "_") + ".json")
                if first is None:
                    args = ["evaluation/evaluate_single.py", "--base-label", "base"]
                    first = target
                else:
                    args = ["evaluation/evaluate_finetuned_only.py", "--base-results", first]
                self.run(f"eval_{name}_{target.stem}", [*args, *common, "--adapter", adapter,
                                                        "--label", label, "--output", target],
                         done=target)

    def eval_sets(self) -> dict[str, Path]:
        d = self.work / "data"
        return {"train": self.work / "screen" / "mixed.jsonl",
                "heldout": self.work / "screen_holdout" / "mixed.jsonl",
                "holdout": d / "holdout.jsonl", "ood": d / "ood.jsonl"}

    def report(self) -> None:
        plots = self.out / "plots"
        plots.mkdir(exist_ok=True)
        for run in ("exp7", "exp10", "exp7_passrate"):
            dest = self.out / f"grpo_{run}"
            dest.mkdir(exist_ok=True)
            for name in ("statistics.json", "train_log.jsonl"):
                (dest / name).write_bytes((self.work / run / name).read_bytes())
        for name in self.eval_sets():
            files = sorted((self.out / "eval" / name).glob("*.json"))
            extra = []
            if name == "holdout":  # one call also draws the training curves
                extra = [a for run in ("exp7", "exp10", "exp7_passrate") for a in
                         ("--grpo-log", self.out / f"grpo_{run}" / "train_log.jsonl")]
            self.run(f"compare_{name}", ["evaluation/compare_results.py", *files,
                                         "--base", "base", "--title", SET_TITLES[name],
                                         "--output-md", self.out / f"compare_{name}.md",
                                         "--output-json", self.out / f"compare_{name}.json",
                                         "--plots-dir", plots / name, *extra])
        self.write_report()

    def waste_rows(self) -> list[dict]:
        """Generation waste of the GRPO runs, from their statistics files."""
        rows = []
        for run, label in (("exp7", "exp7, uniform question draws"),
                           ("exp7_passrate", "exp7, pass-rate sampler"),
                           ("exp10", "exp10, uniform question draws")):
            s = read_json(self.out / f"grpo_{run}" / "statistics.json")
            rows.append({"run": label, "useful_steps": s["useful_steps"],
                         "groups": s["total_attempts"], "wasted": s["wasted_steps"],
                         "waste_rate": s["waste_rate"], "best_step": s.get("best_step"),
                         "best_val_accuracy": s.get("best_val_accuracy")})
        return rows

    def write_report(self) -> None:
        label = "FAST demo (a quick look: small data, few steps; not the miniature study)" \
            if self.fast else "Miniature study (`make demo`)"
        parts = [f"# {label}", "",
                 f"Seed {self.seed}. Every number below was computed by the scripts from the "
                 f"files in `{os.path.relpath(self.out, ROOT)}/`; rerun with `python demo.py"
                 f"{' --fast' if self.fast else ''}` to reproduce it.", ""]
        for name in self.eval_sets():
            parts += [(self.out / f"compare_{name}.md").read_text().strip(), ""]
        parts += ["## Dynamic sampling: generated groups that carry no learning signal", "",
                  "Without dynamic sampling every such group would be a zero-gradient update; "
                  "with it (all runs here) they are dropped before the update and redrawn, so the "
                  "waste is paid in generation time instead.", "",
                  "| Run | Useful steps | Groups generated | Zero-signal groups | Waste rate | "
                  "Best validation step (accuracy) |", "|---|---|---|---|---|---|"]
        for r in self.waste_rows():
            best = "-" if r["best_step"] is None else \
                f"{r['best_step']} ({100 * r['best_val_accuracy']:.1f}%)"
            parts.append(f"| {r['run']} | {r['useful_steps']} | {r['groups']} | {r['wasted']} | "
                         f"{100 * r['waste_rate']:.1f}% | {best} |")
        parts += ["", "![training curves](plots/holdout/training.png)", "",
                  "## Stage times (this run)", "", "| Stage | Seconds |", "|---|---|"]
        parts += [f"| {stage} | {sec:.0f} |" for stage, sec in self.timings]
        text = "\n".join(parts) + "\n"
        (self.out / "report.md").write_text(text)
        if not self.fast:
            update_results_md(text)


SET_TITLES = {
    "train": "Mixed training questions (in-distribution, as the study reported)",
    "heldout": "Held-out mixed-style questions (unseen groups, training families)",
    "holdout": "Holdout (unseen groups, training families, all difficulties)",
    "ood": "Out-of-distribution topics (never trained on by SFT or GRPO)",
}


def update_results_md(report: str) -> None:
    """Replace the generated section of RESULTS.md, leaving the hand-written text alone."""
    path = ROOT / "RESULTS.md"
    text = path.read_text()
    start, end = text.index(RESULTS_START), text.index(RESULTS_END)
    body = report.replace("](plots/", "](results/demo/plots/").replace("\n# ", "\n### ", 1)
    path.write_text(text[:start + len(RESULTS_START)] + "\n" + body + text[end:])


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="the 3-minute version (FAST)")
    parser.add_argument("--seed", type=int, default=0, help="one seed for every stage (0)")
    parser.add_argument("--work-dir", default=None,
                        help="datasets, adapters and checkpoints (default runs/demo[-fast])")
    parser.add_argument("--results-dir", default=None,
                        help="result JSONs, tables, plots (default results/demo[-fast])")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    suffix = "-fast" if args.fast else ""
    work = Path(args.work_dir or ROOT / "runs" / f"demo{suffix}").resolve()
    out = Path(args.results_dir or ROOT / "results" / f"demo{suffix}").resolve()
    for folder in (work / "data", work / "logs", out):
        folder.mkdir(parents=True, exist_ok=True)
    demo = Demo(args.fast, args.seed, work, out)
    started = time.time()
    for stage in (demo.data, demo.tiny, demo.screen, demo.sft, demo.grpo, demo.evaluate,
                  demo.report):
        stage()
    print(f"\n[demo] finished in {time.time() - started:.0f} s")
    for stage, seconds in demo.timings:
        print(f"  {stage:<40} {seconds:6.0f} s")
    print(f"[demo] report: {out / 'report.md'}\n[demo] logs: {work / 'logs'}")
    return 0


if __name__ == "__main__":
    run_main(main)
