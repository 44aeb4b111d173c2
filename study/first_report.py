"""The first demo's result (`make demo`, recipes/demo/first.yaml): GRPO with the calculator
against the base on held-out mixed-style questions, with the gain's interval and the best guess
beside it, read from the files the scripts wrote.

Accuracies are over questions, as the comparison table and plot give them. The paraphrases of
one problem are not independent questions, so the gain's interval resamples whole paraphrase
groups, and p is the exact sign-flip test over groups of each group's summed difference (its
questions' count times its mean), whose total is the gain times the questions: the test of the
same gain (relrl.evaluation.clustered_stats). The verdict follows p. The best guess is the strongest
answer-without-the-model fitted on the training rows (relrl.evaluation.guess_baselines).

  summary(out)        the numbers, as <results>/summary.json holds them
  report(...)         <results>/report.md
  closing_table(s)    the lines demo.py prints when it finishes
"""
from __future__ import annotations

from pathlib import Path

from relrl.evaluation.clustered_stats import cluster_bootstrap_ci, group_differences, sign_flip_test
from relrl.evaluation.results_io import read_result
from study import stage_times
from study.demo_report import stage_table

SET, MODEL = "heldout", "GRPO exp10 best"
RESULT = Path("eval") / SET / "grpo_exp10_best.json"
ALPHA = 0.05


def summary(out: Path) -> dict:
    """The held-out comparison of the GRPO run's best checkpoint with the base."""
    pair = read_result(out / RESULT)
    base, ft = pair["base"], pair["finetuned"]
    diffs = group_differences(base["results"], ft["results"])
    # weighted by questions: the mean over questions, with groups resampled whole
    ci = cluster_bootstrap_ci([float(d.diff) for d in diffs],
                              weights=[d.questions for d in diffs], n_boot=10_000)
    test = sign_flip_test([d.diff * d.questions for d in diffs])
    best = pair["guess_baselines"]["best"]
    return {"set": SET, "model": MODEL, "questions": ft["n"], "samples": ft["samples"],
            "base_accuracy": base["accuracy"], "grpo_accuracy": ft["accuracy"],
            "gain": ci["mean_diff"], "gain_ci": [ci["low"], ci["high"]],
            "p": test["p"], "test": test["test"], "groups": len(diffs),
            "best_guess": {"guess": best["guess"], "accuracy": best["accuracy"]},
            "plot": str(Path("plots") / SET / "accuracy.png"),
            "training_plot": str(Path("plots") / SET / "training.png")}


def verdict(s: dict) -> str:
    """What the numbers say, in one sentence, whichever way they fall (by p at ALPHA)."""
    if s["p"] < ALPHA:
        change = f"gained {100 * s['gain']:.1f}" if s["gain"] > 0 else f"lost {100 * -s['gain']:.1f}"
        return (f"GRPO {change} points, more than chance gives at this size "
                f"(p = {s['p']:.2g} < {ALPHA}).")
    return (f"The change, {100 * s['gain']:+.1f} points, is within what chance gives at this "
            f"size (p = {s['p']:.2g}, not below {ALPHA}).")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def rows(s: dict) -> list[tuple[str, str]]:
    low, high = s["gain_ci"]
    guess = s["best_guess"]
    return [("base (tiny-tool)", _pct(s["base_accuracy"])),
            ("GRPO with the calculator", _pct(s["grpo_accuracy"])),
            ("gain", f"{100 * s['gain']:+.1f} points (95% CI {100 * low:+.1f} to "
                     f"{100 * high:+.1f}; p = {s['p']:.2g})"),
            (f"best guess ({guess['guess'].replace('_', ' ')})", _pct(guess["accuracy"]))]


def report(out: Path, s: dict, *, seed: int, out_name: str, steps: int) -> str:
    lines = [f"# The first demo: GRPO with the calculator on tiny-tool (seed {seed})", "",
             f"Every number was computed by the scripts from the files in `{out_name}/`. "
             f"GRPO (exp10: a fresh LoRA adapter, dynamic sampling, {steps} useful steps) "
             f"trained tiny-tool on the questions screening found mixed; both models then "
             f"answered {s['questions']} held-out mixed-style questions (unseen paraphrase "
             f"groups, {s['groups']} of them) {s['samples']} times each.", "",
             "| | held-out mixed-style accuracy |", "|---|---|",
             *[f"| {name} | {value} |" for name, value in rows(s)], "",
             verdict(s), "",
             f"Accuracies are over questions; the gain's interval resamples whole paraphrase "
             f"groups, and p is from the {s['test']} of each group's summed difference. The "
             "best guess answers without the model, fitted on the training rows. A first demo "
             "of this size measures little; the studies in RESULTS.md are sized for their "
             "claims.", "",
             f"![accuracy]({s['plot']})", "", f"![training curves]({s['training_plot']})", "",
             *stage_table(stage_times.read(out / stage_times.FILE_NAME))]
    return "\n".join(lines) + "\n"


def closing_table(s: dict) -> list[str]:
    """The console's closing lines: the table, the verdict and the plot."""
    width = max(len(name) for name, _ in rows(s))
    return [f"held-out mixed-style questions: {s['questions']} in {s['groups']} groups, "
            f"{s['samples']} samples each",
            *[f"  {name:<{width}}  {value}" for name, value in rows(s)],
            verdict(s)]
