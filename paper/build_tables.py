"""Result files in, the LaTeX tables of paper/main.tex and the slides out.

Every number in the paper's results section comes from this script, and this script reads
numbers only from result files: the JSON that `evaluation/compare_results.py --output-json`
writes (one per question set) and the `statistics.json` of GRPO runs. An input that is missing
gives a table that says "results not yet generated - run make demo", never made-up numbers; an
input that exists but is malformed is an error (exit 2), never a silent placeholder.

  python paper/build_tables.py                       # defaults under results/demo/
  python paper/build_tables.py --compare holdout=results/holdout.json --grpo-stats \\
      "GRPO exp7=outputs/grpo_exp7/statistics.json" --out paper/tables

Writes into --out (default paper/tables/):
  accuracy_<set>.tex  one tabular per question set (train, heldout, holdout, ood)
  summary.tex         accuracy and change vs base of every model on every set, side by side
  difficulty.tex      accuracy by the base model's screening score
  waste.tex           dynamic-sampling waste counters of the GRPO runs
  findings.tex        one sentence per comparison that is significant after Holm correction
  training_figure.tex the training-dynamics plot, or a placeholder box
  sources.tex         which file (and its SHA-256 prefix) each table was made from
  replication_*.tex   the pre-registered replication's pooled report (--replication): primary
                      endpoint per seed and pooled, secondary comparisons, retention, waste,
                      best validation steps
  redone_*.tex        the redone replication's pooled report (--replication-v2): the same five
                      tables, and the study's claims with their verdicts, held-out accuracy by
                      target range, retention by topic, each arm's margin over the best guess
  third_*.tex         the third design's pooled report (--science-v3), once it pools the
                      pre-registered seeds 31-34 (before that a placeholder that says which are
                      in): the five replication tables, the claims with their verdicts, the
                      forgetting strata, transfer, the design's goals, the guess margins
  reanalysis.tex      the post hoc re-analysis of the replication (--reanalysis): accuracy
                      under both tolerance rules beside the best guess
"""
import hashlib
import os
import re
from pathlib import Path

from relrl.data.dataset_io import DatasetError, atomic_write_text, read_json
from relrl.runtime.cli import ArgumentParser, UsageError, run_main, seed_list

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "paper"
ALPHA = 0.05
PLACEHOLDER = r"Results not yet generated --- run \texttt{make demo}"
REPLICATION_PLACEHOLDER = r"Results not yet generated --- run \texttt{python demo.py --seeds 2,3,4}"
REDONE_PLACEHOLDER = (r"Results not yet generated --- run \texttt{python -m study.pooled\_report "
                      r"results/demo-replication-v2 --seeds 21,22,23}")
# results/science-v3/PREREGISTRATION.md: the confirmatory seeds, pooled together or not at all
THIRD_SEEDS = "31,32,33,34"
REANALYSIS_PLACEHOLDER = r"Results not yet generated --- run \texttt{evaluation/reanalyse\_results.py}"

# The question sets of the miniature study: (name, short heading, default file name).
SETS = [
    ("train", "Mixed (train)", "compare_train.json"),
    ("heldout", "Held-out mixed", "compare_heldout.json"),
    ("holdout", "Holdout", "compare_holdout.json"),
    ("ood", "Out-of-dist.", "compare_ood.json"),
]
DEFAULT_STATS = [
    ("GRPO exp7 (SFT warm start)", "grpo_exp7/statistics.json"),
    ("GRPO exp10 (no SFT)", "grpo_exp10/statistics.json"),
    ("GRPO exp7, pass-rate sampler", "grpo_exp7_passrate/statistics.json"),
]
WASTE_KINDS = ("all_correct", "all_wrong", "same_partial")


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", default=str(ROOT / "results" / "demo"),
                        help="where the default inputs live (results/demo/ in the repository)")
    parser.add_argument("--compare", action="append", default=[], metavar="SET=PATH",
                        help="compare_results JSON for one set; SET is one of "
                        + ", ".join(s[0] for s in SETS) + " (default <results-dir>/compare_SET.json)")
    parser.add_argument("--grpo-stats", action="append", default=[], metavar="LABEL=PATH",
                        help="a GRPO run's statistics.json, repeatable; given once, it replaces "
                        "the defaults (<results-dir>/grpo_exp7/ and grpo_exp10/statistics.json)")
    parser.add_argument("--difficulty-set", default=None,
                        help="set whose accuracy-by-screening-score table to show (default: the "
                        "first of heldout, holdout, train, ood that has one)")
    parser.add_argument("--training-plot", default=None,
                        help="PNG of reward and waste by step (default <results-dir>/plots/holdout/training.png)")
    parser.add_argument("--replication", default=str(ROOT / "results" / "demo-replication" / "pooled.json"),
                        help="pooled.json of the replicated study (default "
                        "results/demo-replication/pooled.json)")
    parser.add_argument("--replication-v2",
                        default=str(ROOT / "results" / "demo-replication-v2" / "pooled.json"),
                        help="pooled.json of the redone replication (default "
                        "results/demo-replication-v2/pooled.json)")
    parser.add_argument("--science-v3", default=str(ROOT / "results" / "science-v3" / "pooled.json"),
                        help="pooled.json of the third design (default results/science-v3/pooled.json)")
    parser.add_argument("--third-seeds", type=seed_list("--third-seeds"), default=THIRD_SEEDS,
                        help="the seeds --science-v3 must pool for its tables (default the "
                        f"pre-registered {THIRD_SEEDS}); else they are placeholders")
    parser.add_argument("--reanalysis",
                        default=str(ROOT / "results" / "reanalysis" / "reanalysis.json.gz"),
                        help="the post hoc re-analysis (evaluation/reanalyse_results.py; default "
                        "results/reanalysis/reanalysis.json.gz)")
    parser.add_argument("--note", default=None,
                        help="a line printed under every table, e.g. 'FAST run: not the full miniature'")
    parser.add_argument("--out", default=str(PAPER / "tables"), help="output folder (paper/tables)")
    return parser.parse_args(argv)


def split_pair(text: str, flag: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise UsageError(f"{flag}: expected NAME=PATH, got {text!r}")
    return name, path


# ---------------------------------------------------------------------------- reading


def load_compare(path: Path) -> dict | None:
    """compare_results.py's --output-json, checked; None when the file does not exist."""
    if not path.exists():
        return None
    data = read_json(path)
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows or "base" not in data:
        raise DatasetError(f"{path}: not a compare_results JSON (need 'base' and non-empty 'rows')")
    need = {"model", "n", "samples", "correct", "accuracy", "ci_low", "ci_high", "delta", "p", "p_holm"}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not need <= set(row):
            missing = sorted(need - set(row)) if isinstance(row, dict) else sorted(need)
            raise DatasetError(f"{path}: row {i} lacks {', '.join(missing)}")
    if not any(r["model"] == data["base"] for r in rows):
        raise DatasetError(f"{path}: no row for the base {data['base']!r}")
    return data


REPLICATION_KEYS = ("seeds", "primary_alpha", "secondary_alpha", "primary", "secondary",
                    "retention_accuracy", "waste", "best_steps")
COMPARISON_KEYS = ("delta", "ci_low", "ci_high", "p", "groups")


def load_replication(path: Path) -> dict | None:
    """The first replication's pooled.json (study.pooled_report), checked; None when the file
    does not exist."""
    if not path.exists():
        return None
    data = read_json(path)
    if not isinstance(data, dict) or any(k not in data for k in REPLICATION_KEYS):
        raise DatasetError(f"{path}: not a replication pooled.json (need {', '.join(REPLICATION_KEYS)})")
    for i, entry in enumerate([data["primary"], *data["secondary"]]):
        where = "primary" if i == 0 else f"secondary {i - 1}"
        pooled, per_seed = entry.get("pooled"), (entry.get("per_seed") or {}).values()
        rows = [(pooled, (*COMPARISON_KEYS, "mdd")), *((r, COMPARISON_KEYS) for r in per_seed)]
        if not all(isinstance(r, dict) and all(k in r for k in keys) for r, keys in rows):
            raise DatasetError(f"{path}: {where} comparison lacks one of "
                               f"{', '.join(COMPARISON_KEYS)}, mdd (pooled)")
    return data


REDONE_KEYS = ("claims", "by_target_range", "forgetting", "guess_baselines", "plain_zero_signal")


def load_redone(path: Path) -> dict | None:
    """The redone replication's pooled.json (study.pooled_report), checked; None when the file
    does not exist."""
    data = load_replication(path)
    if data is not None and any(k not in data for k in REDONE_KEYS):
        raise DatasetError(f"{path}: not a redone replication's pooled.json (need "
                           f"{', '.join(REDONE_KEYS)})")
    return data


THIRD_KEYS = ("claims", "forgetting", "transfer", "third_goals", "guess_baselines",
              "by_target_range")


def load_third(path: Path) -> dict | None:
    """The third design's pooled.json (study.pooled_report), checked; None when the file does
    not exist."""
    data = load_replication(path)
    if data is not None and any(k not in data for k in THIRD_KEYS):
        raise DatasetError(f"{path}: not the third design's pooled.json (need "
                           f"{', '.join(THIRD_KEYS)})")
    return data


def load_reanalysis(path: Path) -> dict | None:
    """evaluation/reanalyse_results.py's JSON with the replication's folder, checked; None when
    the file does not exist."""
    if not path.exists():
        return None
    data = read_json(path)
    ok = isinstance(data, dict) and data.get("kind") == "reanalysis"
    folder = (data.get("folders") or {}).get("demo-replication") if ok else None
    if not isinstance(folder, dict) or "sets" not in folder:
        raise DatasetError(f"{path}: not a re-analysis JSON with the replication's folder "
                           "(kind 'reanalysis', folders.demo-replication.sets)")
    return data


def load_stats(path: Path) -> dict | None:
    if not path.exists():
        return None
    data = read_json(path)
    need = ("useful_steps", "wasted_steps", "total_attempts", "waste_rate")
    if not isinstance(data, dict) or any(k not in data for k in need):
        raise DatasetError(f"{path}: not a GRPO statistics.json (need {', '.join(need)})")
    return data


# ---------------------------------------------------------------------------- formatting


TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
               "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
               "^": r"\textasciicircum{}"}


def tex(text) -> str:
    """Escape a label (model name, path) for LaTeX text mode."""
    return "".join(TEX_ESCAPES.get(c, c) for c in str(text))


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def signed_pp(x: float) -> str:
    return f"{100 * x:+.1f}".replace("-", "$-$")


def pval(p) -> str:
    if p is None:
        return "--"
    return "$<$0.001" if p < 0.001 else f"{p:.3f}"


def header(sources: list[Path]) -> str:
    names = ", ".join(rel(p) for p in sources) or "no input"
    return f"% Generated by paper/build_tables.py from {names}. Do not edit: rerun the script.\n"


def rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def placeholder(missing: list[Path], message: str = PLACEHOLDER) -> str:
    shown = [r"{\footnotesize missing: \texttt{" + tex(rel(p)) + r"}}\\" for p in missing]
    lines = [r"\begin{tabular}{c}", r"\toprule", r"\textbf{" + message + r"}\\", *shown,
             r"\bottomrule", r"\end{tabular}"]
    why = f"{', '.join(rel(p) for p in missing)} not found" if missing else "inputs incomplete"
    return f"% PLACEHOLDER: {why}\n" + "\n".join(lines) + "\n"


def with_note(lines: list[str], ncols: int, note: str | None) -> list[str]:
    if note:
        lines.insert(-1, rf"\multicolumn{{{ncols}}}{{l}}{{\footnotesize\emph{{{tex(note)}}}}}\\")
    return lines


# ---------------------------------------------------------------------------- tables


def accuracy_table(data: dict, note: str | None) -> str:
    base = data["base"]
    lines = [r"\begin{tabular}{lrrcrrrrr}", r"\toprule",
             r"Model & Correct/$n$ & Acc.\ (\%) & 95\% CI & Trunc. & $\Delta$ (pp) & "
             r"$b_{01}/b_{10}$ & $p$ & $p_{\mathrm{Holm}}$\\", r"\midrule"]
    tests = set()
    for r in data["rows"]:
        n = f"{r['n']}" if r["samples"] == 1 else rf"{r['n']}$\times${r['samples']}"
        is_base = r["model"] == base
        disc = f"{r['b01']}/{r['b10']}" if "b01" in r and "b10" in r else "--"
        tests.add(r.get("test"))
        cells = [tex(r["model"]) + (" (base)" if is_base else ""), f"{r['correct']}/{n}",
                 pct(r["accuracy"]), f"[{pct(r['ci_low'])}, {pct(r['ci_high'])}]",
                 str(r.get("truncated", "--")), "--" if is_base else signed_pp(r["delta"]),
                 "--" if is_base else disc, pval(r["p"]), pval(r["p_holm"])]
        lines.append(" & ".join(cells) + r"\\")
    lines.append(r"\bottomrule")
    if "permutation" in tests:
        lines.append(r"\multicolumn{9}{l}{\footnotesize $p$ for $K>1$ samples per question: "
                     r"exact paired sign-flip permutation test; CI: percentile bootstrap.}\\")
    lines.append(r"\end{tabular}")
    return "\n".join(with_note(lines, 9, note)) + "\n"


def summary_table(compares: dict[str, dict | None], note: str | None) -> str:
    present = [(name, head) for name, head, _ in SETS if compares.get(name)]
    models: list[str] = []
    for name, _ in present:
        models += [r["model"] for r in compares[name]["rows"] if r["model"] not in models]
    lines = [r"\begin{tabular}{l" + "r" * len(present) + "}", r"\toprule",
             "Model & " + " & ".join(head for _, head in present) + r"\\", r"\midrule"]
    for model in models:
        cells = [tex(model)]
        for name, _ in present:
            data = compares[name]
            row = next((r for r in data["rows"] if r["model"] == model), None)
            if row is None:
                cells.append("--")
            elif model == data["base"]:
                cells.append(pct(row["accuracy"]))
            else:
                star = "$^{*}$" if row["p_holm"] is not None and row["p_holm"] < ALPHA else ""
                cells.append(f"{pct(row['accuracy'])} ({signed_pp(row['delta'])}){star}")
        lines.append(" & ".join(cells) + r"\\")
    lines += [r"\bottomrule",
              rf"\multicolumn{{{len(present) + 1}}}{{l}}{{\footnotesize Accuracy (\%), change vs "
              rf"base in pp; $^{{*}}$: Holm-adjusted $p<{ALPHA}$.}}\\", r"\end{tabular}"]
    return "\n".join(with_note(lines, len(present) + 1, note)) + "\n"


def difficulty_table(data: dict, set_head: str, note: str | None) -> str:
    per_model = data.get("by_base_score") or {}
    models = [r["model"] for r in data["rows"] if per_model.get(r["model"])]
    levels = sorted({lvl for m in models for lvl in per_model[m]},
                    key=lambda s: tuple(int(x) for x in s.split("/")))
    lines = [r"\begin{tabular}{l" + "r" * len(models) + "}", r"\toprule",
             rf"\multicolumn{{{len(models) + 1}}}{{l}}{{Questions: {tex(set_head)}}}\\", r"\midrule",
             "Base score & " + " & ".join(tex(m) for m in models) + r"\\", r"\midrule"]
    for level in levels:
        cells = [level]
        for m in models:
            cell = per_model[m].get(level)
            cells.append("--" if cell is None else
                         f"{pct(cell['accuracy'])} ({cell['correct']}/{cell['total']})")
        lines.append(" & ".join(cells) + r"\\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(with_note(lines, len(models) + 1, note)) + "\n"


def waste_table(stats: list[tuple[str, dict]], note: str | None) -> str:
    lines = [r"\begin{tabular}{lrrrrrrr}", r"\toprule",
             r"Run & Generated & Useful & All right & All wrong & Same partial & Waste (\%) & "
             r"Best\\", r"\midrule"]
    for label, s in stats:
        kinds = s.get("waste_by_kind") or {}
        best = s.get("best_step")
        cells = [tex(label), str(s["total_attempts"]), str(s["useful_steps"]),
                 *(str(kinds.get(k, "--")) for k in WASTE_KINDS), pct(s["waste_rate"]),
                 "--" if best is None else str(best)]
        lines.append(" & ".join(cells) + r"\\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(with_note(lines, 8, note)) + "\n"


def findings(compares: dict[str, dict | None]) -> str:
    """An itemised list, one line per set, of the changes that survive Holm correction."""
    items = []
    for name, head, _ in SETS:
        data = compares.get(name)
        if data is None:
            continue
        sig = [r for r in data["rows"] if r["model"] != data["base"]
               and r["p_holm"] is not None and r["p_holm"] < ALPHA]
        if sig:
            parts = [f"{tex(r['model'])} {signed_pp(r['delta'])}\\,pp "
                     f"($p_{{\\mathrm{{Holm}}}}={pval(r['p_holm'])}$)" for r in sig]
            text = "significant changes vs.\\ the base: " + "; ".join(parts) + "."
        else:
            text = rf"no model differs from the base at Holm-adjusted $p<{ALPHA}$."
        items.append(rf"\item \textbf{{{head}}} ({data['rows'][0]['n']} questions): {text}")
    if not items:
        return r"\begin{itemize}\item \textbf{" + PLACEHOLDER + r"}\end{itemize}" + "\n"
    return "\\begin{itemize}\n" + "\n".join(items) + "\n\\end{itemize}\n"


def ci(c: dict) -> str:
    return f"[{signed_pp(c['ci_low'])}, {signed_pp(c['ci_high'])}]"


def tabular(spec: str, head: str, rows: list[str], foot: list[str] | None = None) -> str:
    ncols = len(re.sub(r"\{[^}]*\}", "", spec))  # p{4cm} is one column
    lines = [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", head + r"\\", r"\midrule",
             *(row + r"\\" for row in rows), r"\bottomrule"]
    lines += [rf"\multicolumn{{{ncols}}}{{l}}{{\footnotesize {text}}}\\" for text in foot or []]
    return "\n".join(lines + [r"\end{tabular}"]) + "\n"


def replication_primary(rep: dict) -> str:
    """The pre-registered primary endpoint at each seed and pooled."""
    pr = rep["primary"]
    rows = []
    for seed, c in [*pr["per_seed"].items(), ("pooled", pr["pooled"])]:
        cells = [str(seed), str(c["groups"]), pct(c["base_accuracy"]), pct(c["ft_accuracy"]),
                 signed_pp(c["delta"]), ci(c), pval(c["p"])]
        rows.append(" & ".join(rf"\textbf{{{x}}}" if seed == "pooled" else x for x in cells))
    goal = rf"pooled $\Delta \geq +5$ pp, $p < {rep['primary_alpha']}$, a gain at every seed"
    met = pr.get("goal_met")
    if "v2_goal_met" in pr:  # the redone design's goal also asks for a margin over guessing
        goal += r", $\geq 10$ pp above the best guess"
        met = pr["v2_goal_met"]
    return tabular("lrrrrcr", rf"Seed & Groups & {tex(pr['against'])} (\%) & {tex(pr['model'])} (\%) & "
                   r"$\Delta$ (pp) & 95\% CI & $p$", rows,
                   [rf"Goal ({goal}): {'met' if met else 'not met'}. $p$: exact paired sign-flip "
                    r"test over paraphrase groups."])


def replication_secondary(rep: dict) -> str:
    rows = [" & ".join([tex(s["set"]), tex(s["model"]), tex(s["against"]),
                        signed_pp(s["pooled"]["delta"]), ci(s["pooled"]), pval(s["pooled"]["p"]),
                        pval(s["pooled"]["p_holm"]), pct(s["pooled"]["mdd"])])
            for s in rep["secondary"]]
    return tabular("lllrcrrr", r"Set & Model & Against & $\Delta$ (pp) & 95\% CI & $p$ & "
                   r"$p_{\mathrm{Holm}}$ & MDE (pp)", rows,
                   [rf"Pooled over seeds {', '.join(map(str, rep['seeds']))}; Holm over all "
                    f"{len(rep['secondary'])} secondary comparisons. MDE: minimum detectable "
                    rf"effect at 80\% power, $\alpha = {rep['secondary_alpha']}$."])


def replication_retention(rep: dict) -> str:
    """Accuracy on the retention set (questions the base often gets right, never trained on)."""
    change = {s["model"]: s["pooled"] for s in rep["secondary"]
              if s["set"] == "retention" and s["against"] == "base"}
    rows = []
    for model, acc in rep["retention_accuracy"].items():
        c = change.get(model)
        rows.append(" & ".join([tex(model), str(acc["groups"]), pct(acc["accuracy"]),
                                *(["--"] * 4 if c is None else
                                  [signed_pp(c["delta"]), ci(c), pval(c["p_holm"]), pct(c["mdd"])])]))
    return tabular("lrrrcrr", r"Model & Groups & Acc.\ (\%) & $\Delta$ (pp) & 95\% CI & "
                   r"$p_{\mathrm{Holm}}$ & Min.\ drop (pp)", rows,
                   [r"Questions the base screened right at least half the time, never trained on. "
                    r"Min.\ drop: the smallest loss detected at 80\% power, "
                    rf"$\alpha = {rep['secondary_alpha']}$."])


def replication_waste(rep: dict) -> str:
    seeds = [str(s) for s in rep["seeds"]]
    w = rep["waste"]

    def cell(r: dict) -> str:
        return f"{pct(r['waste_rate'])} ({r['wasted']}/{r['generated']})"
    rows = [" & ".join([tex(run["label"]), *(cell(run["per_seed"][s]) if s in run["per_seed"]
                                                      else "--" for s in seeds), cell(run)])
            for run in w["runs"].values()]
    ratio = "--" if w["ratio"] is None else f"{w['ratio']:.2f}"
    foot = [rf"Waste (\%): zero-signal groups / groups generated. Pass-rate / uniform, pooled: {ratio}.",
            rf"Zero-gradient updates a plain loop would have had: {pct(w['plain_loop_zero_gradient_share'])}\%."]
    plain = (rep.get("plain_zero_signal") or {}).get("exp7_plain")
    if plain:  # the redone design ran the plain loop: its share is measured
        # its counters cover every generated group, the surplus of batch generation included
        share = pct(plain["without_signal"] / plain["generated"])
        foot.append(rf"Plain GRPO, measured: {plain['without_signal']} of its {plain['generated']} "
                    rf"generated groups without signal ({share}\%).")
    return tabular("l" + "r" * (len(seeds) + 1), "Sampler & " + " & ".join(
        f"Seed {s}" for s in seeds) + " & Pooled", rows, foot)


def replication_best_steps(rep: dict) -> str:
    seeds = [str(s) for s in rep["seeds"]]
    rows = [" & ".join([tex(run), *(f"{by[s]['step']} ({pct(by[s]['stability'])}\\%)" if s in by else "--"
                                    for s in seeds)])
            for run, by in rep["best_steps"].items()]
    return tabular("l" + "r" * len(seeds), "Run & " + " & ".join(f"Seed {s}" for s in seeds), rows,
                   [r"Useful step of the best validation checkpoint; in brackets, the share of "
                    r"bootstrap resamples of the validation groups that choose the same step."])


def comparison_cells(c: dict) -> list[str]:
    return [str(c["groups"]), pct(c["base_accuracy"]), pct(c["ft_accuracy"]), signed_pp(c["delta"]),
            ci(c), pval(c["p"])]


def claim_rows(rep: dict, primary_p: str, stratum_text, interval) -> list[str]:
    """The primary, then each claim: set (and stratum), comparison, change, interval, p and
    verdict; a claim with no test says why."""
    pr = rep["primary"]
    c = pr["pooled"]
    rows = [" & ".join(["GRPO after SFT gains on mixed questions (primary)", "held-out mixed",
                        f"{tex(pr['model'])} vs {tex(pr['against'])}", signed_pp(c["delta"]),
                        interval(c), primary_p, tex(pr["verdict"])])]
    for row in rep["claims"]:
        if "pooled" not in row:
            rows.append(" & ".join([tex(row["claim"]), *["--"] * 5,
                                    f"{tex(row['verdict'])} ({tex(row['why'])})"]))
            continue
        c = row["pooled"]
        where = "held-out mixed" if row["set"] == "heldout" else tex(row["set"])
        if row["stratum"] != "all":
            where += f" ({stratum_text(row['stratum'])})"
        rows.append(" & ".join([tex(row["claim"]), where, f"{tex(row['model'])} vs {tex(row['against'])}",
                                signed_pp(c["delta"]), interval(c), pval(c["p_holm"]),
                                tex(row["verdict"])]))
    return rows


def redone_claims(rep: dict) -> str:
    """The study's claims, each with its pooled test and the pre-registered verdict."""
    p = pval(rep["primary"]["pooled"]["p"])
    rows = claim_rows(rep, rf"{p} ($\alpha$ {rep['primary_alpha']})",
                      lambda stratum: tex(stratum.replace("_", " ")), ci)
    return tabular("p{5cm}llrcrl", r"Claim (the study's) & Set & Comparison & $\Delta$ (pp) & "
                   r"95\% CI & $p$ (Holm) & Verdict", rows,
                   [rf"Pooled over seeds {', '.join(map(str, rep['seeds']))}, over paraphrase groups; "
                    rf"the four claims below the primary Holm-corrected together at "
                    rf"$\alpha = {rep['secondary_alpha']}$.",
                    r"Rule fixed before the confirmatory seeds: a change under 5 pp is not the "
                    r"study's effect (\texttt{study/replication\_v2\_report.py}, \texttt{verdict})."])


def redone_target_range(rep: dict) -> str:
    """Every arm against the base on the held-out mixed questions, split by target range."""
    rows = [" & ".join([tex(model), "[0.85, 1)" if name == "high_range" else "elsewhere",
                        *comparison_cells(c)])
            for model, ranges in rep["by_target_range"].items() for name, c in ranges.items()]
    return tabular("llrrrrcr", r"Model & Targets & Groups & Base (\%) & Model (\%) & $\Delta$ (pp) & "
                   r"95\% CI & $p$", rows,
                   [r"Held-out mixed-style questions; the complement rule grades a target in "
                    r"[0.85, 1) on its failure probability, so a drift toward 1 is not rewarded."])


def split_comparisons(head: str, splits: dict, name_of, note: str) -> str:
    """Each model against the base on each split of a set, one row per (split, model)."""
    rows = [" & ".join([name_of(name), tex(model), *comparison_cells(c)])
            for name, models in splits.items() for model, c in models.items()]
    return tabular("llrrrrcr", rf"{head} & Model & Groups & Base (\%) & Model (\%) & $\Delta$ (pp) & "
                   r"95\% CI & $p$", rows, [note])


def redone_forgetting(rep: dict) -> str:
    """Retention on the SFT warm start's topics and on the topics it never trained on."""
    topics = {"sft_topics": "SFT's", "other_topics": "the others"}
    return split_comparisons("Topics", rep["forgetting"], lambda name: topics.get(name, tex(name)),
                             r"Retention questions (the base screened right at least half the "
                             r"time), split by whether SFT trained on their topic.")


GUESS_NAMES = {"constant": "constant", "family_mode": "family mode", "copy": "copy"}


def redone_guesses(rep: dict) -> str:
    """Each arm's accuracy minus the best guess's, on every set."""
    sets = rep["guess_baselines"]
    models = list(next(iter(sets.values()))["margins"]) if sets else []
    rows = [" & ".join([tex(name), f"{GUESS_NAMES.get(g['best'], tex(g['best']))} "
                                   f"({pct(g['accuracy'][g['best']])})",
                        *(signed_pp(g["margins"][m]) if m in g["margins"] else "--" for m in models)])
            for name, g in sets.items()]
    return tabular("ll" + "r" * len(models), r"Set & Best guess (\%) & " + " & ".join(
        tex(m) for m in models), rows,
        [r"Margin: accuracy minus the best guess's, in pp, over groups. Guesses (one constant, "
         r"each family's usual answer, the question's last number) are fitted on each seed's "
         r"training rows and graded by the same rule."])


REDONE_TABLES = {"claims": redone_claims, "target_range": redone_target_range,
                 "forgetting": redone_forgetting, "guesses": redone_guesses}


STRATA = {"sft_trained": "SFT's families", "sft_untrained": "families SFT never trained on",
          "grpo_trained": "families GRPO trained on", "never_trained": "never-trained families"}


def stratum_name(stratum: str) -> str:
    """A claim's or a split's stratum in words; a difference reads "A minus B"."""
    return " minus ".join(STRATA.get(part, tex(part)) for part in stratum.split(" minus "))


def third_claims(rep: dict) -> str:
    """The study's claims under the third design, each with its test and its verdict by the
    pre-registered rule."""
    rows = claim_rows(rep, pval(rep["primary"]["pooled"]["p"]), stratum_name,
                      lambda c: rf"{ci(c)} ({round(100 * c.get('confidence', 0.95))}\%)")
    return tabular("p{4.2cm}p{3.4cm}lrcrl", r"Claim (the study's) & Set & Comparison & "
                   r"$\Delta$ (pp) & CI & $p$ & Verdict", rows,
                   [rf"Pooled over seeds {', '.join(map(str, rep['seeds']))}, over paraphrase groups. "
                    rf"The primary alone at $\alpha = {rep['primary_alpha']}$; each forgetting",
                    r"difference (the change on one stratum minus that on another) alone at "
                    r"$\alpha = 0.01$ with its 99\% interval; the rest Holm-corrected",
                    rf"together at $\alpha = {rep['secondary_alpha']}$ ($p$ is Holm's). A change "
                    r"under 5 pp is not the study's effect (\texttt{study/replication/claims.py})."])


def third_forgetting(rep: dict) -> str:
    """Retention split by whether SFT, or GRPO, trained on a question's family."""
    return split_comparisons("Families", rep["forgetting"], stratum_name,
                             r"Retention questions (the base screened right at least 2 of 4 "
                             r"times, in paraphrase groups apart from the held-out mixed set).")


def third_transfer(rep: dict) -> str:
    """Every arm against the base on families never trained on and in wordings never seen."""
    return split_comparisons("Set", rep["transfer"], tex,
                             r"ood: five families of four topics no arm trained on; reworded: "
                             r"every family in wordings \texttt{tiny-tool} never saw, split by "
                             r"whether GRPO trained on it.")


def third_goals(rep: dict) -> str:
    """The design's goals (issue 46), each with its figure and whether it was met."""
    g = rep["third_goals"]

    def met(ok: bool) -> str:
        return "met" if ok else "not met"
    rows = [" & ".join([rf"{tex(claim)}: decided at 0.01 with 80\% power for 5 pp",
                        rf"smallest detectable difference {pct(f['mdd'])} pp", met(f["met"])])
            for claim, f in g["forgetting"].items()]
    t = g["transfer"]
    rows.append(" & ".join([rf"The gain on never-trained families within $\pm$5 pp (95\%), "
                            f"{tex(t['model'])}", rf"half-width {pct(t['half_width'])} pp",
                            met(t["met"])]))
    m = g["guess_margin"]
    rows.append(" & ".join([r"Every GRPO arm $\geq 10$ pp above the best guess on every set but "
                            r"the transfer sets", f"lowest margin {signed_pp(m['lowest_grpo_margin'])} pp",
                            met(m["met"])]))
    for name, margins in m["transfer_sets"].items():
        low, high = min(margins.values()), max(margins.values())
        rows.append(" & ".join([f"Margin over the best guess on {tex(name)} (reported, no goal)",
                                f"{signed_pp(low)} to {signed_pp(high)} pp", "--"]))
    return tabular("p{7.5cm}lr", r"Goal (issue 46) & Figure & Met", rows,
                   [rf"Pooled over seeds {', '.join(map(str, rep['seeds']))}."])


THIRD_TABLES = {"claims": third_claims, "target_range": redone_target_range,
                "forgetting": third_forgetting, "transfer": third_transfer, "goals": third_goals,
                "guesses": redone_guesses}


REPLICATION_TABLES = {"primary": replication_primary, "secondary": replication_secondary,
                      "retention": replication_retention, "waste": replication_waste,
                      "best_steps": replication_best_steps}


def reanalysis_table(data: dict) -> str:
    """The replication's group-level accuracies under both tolerance rules, pooled over seeds,
    beside the best guess fitted on training rows (post hoc)."""
    models = ("base", "SFT warm start", "GRPO exp7 best", "GRPO exp10 best")
    names = {"constant": "constant", "family_mode": "family mode", "copy": "copy"}
    rows = []
    for set_name, entry in data["folders"]["demo-replication"]["sets"].items():
        for rule, r in entry["rules"].items():
            best = r["best_guess"]
            rows.append(" & ".join([tex(set_name), rule, *(pct(r["accuracy"][m]) for m in models),
                                    signed_pp(r["gain_over_base"]["GRPO exp7 best"]),
                                    f"{pct(r['guesses'][best])} ({names[best]})",
                                    signed_pp(r["margin_over_best_guess"]["GRPO exp7 best"])]))
    return tabular("llrrrrrrr", r"Set & Rule & Base & SFT & exp7 & exp10 & exp7 $\Delta$ (pp) & "
                   r"Best guess (\%) & exp7 $-$ guess (pp)", rows,
                   [r"Post hoc, not pre-registered. Group-level accuracy (\%), pooled over seeds "
                    r"2, 3, 4. study: relative error $\leq 5\%$ (the measured grades);",
                    r"complement: a probability target $t$ judged on $\min(t, 1-t)$. Guesses "
                    r"fitted on each seed's training rows, graded by the same rule."])


def training_figure(plot: Path) -> str:
    if not plot.exists():
        return (f"% PLACEHOLDER: {rel(plot)} not found\n"
                r"\fbox{\textbf{" + PLACEHOLDER + r"}}" + "\n")
    # Paths relative to paper/, where main.tex is built; the slides add ../ via \graphicspath.
    path = Path(os.path.relpath(plot.resolve(), PAPER)).as_posix()
    return rf"\includegraphics[width=\linewidth]{{{path}}}" + "\n"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def sources_list(used: list[tuple[str, Path]]) -> str:
    rows = []
    for what, path in used:
        state = rf"SHA-256 \texttt{{{sha(path)}}}" if path.exists() else "not yet generated"
        rows.append(rf"\item {what}: \texttt{{{tex(rel(path))}}} ({state})")
    return "\\begin{itemize}\n" + "\n".join(rows) + "\n\\end{itemize}\n"


# ---------------------------------------------------------------------------- main


def main(argv=None):
    args = parse_args(argv)
    results = Path(args.results_dir)
    known = {name for name, _, _ in SETS}
    paths = {name: results / default for name, _, default in SETS}
    for item in args.compare:
        name, path = split_pair(item, "--compare")
        if name not in known:
            raise UsageError(f"--compare: unknown set {name!r} (sets: {', '.join(sorted(known))})")
        paths[name] = Path(path)
    stat_paths = [split_pair(s, "--grpo-stats") for s in args.grpo_stats] or \
        [(label, str(results / p)) for label, p in DEFAULT_STATS]
    if args.difficulty_set is not None and args.difficulty_set not in known:
        raise UsageError(f"--difficulty-set: unknown set {args.difficulty_set!r}")
    out = Path(args.out)
    if not out.parent.is_dir():
        raise UsageError(f"--out: folder {out.parent} does not exist")
    plot = Path(args.training_plot) if args.training_plot else results / "plots" / "holdout" / "training.png"

    # Read and check everything before writing anything.
    compares = {name: load_compare(path) for name, path in paths.items()}
    stats = [(label, Path(p), load_stats(Path(p))) for label, p in stat_paths]
    rep_path = Path(args.replication)
    rep = load_replication(rep_path)
    redone_path = Path(args.replication_v2)
    redone = load_redone(redone_path)
    third_path = Path(args.science_v3)
    third = load_third(third_path)
    re_path = Path(args.reanalysis)
    reanalysis = load_reanalysis(re_path)

    files: dict[str, str] = {}
    for name, _, _ in SETS:
        body = (placeholder([paths[name]]) if compares[name] is None
                else accuracy_table(compares[name], args.note))
        files[f"accuracy_{name}.tex"] = header([paths[name]]) + body
    present = [paths[n] for n, _, _ in SETS if compares[n]]
    files["summary.tex"] = header(present) + (
        summary_table(compares, args.note) if present else placeholder(list(paths.values())))
    order = [args.difficulty_set] if args.difficulty_set else ["heldout", "holdout", "train", "ood"]
    diff = next((n for n in order if compares[n] and compares[n].get("by_base_score")), None)
    heads = {name: head for name, head, _ in SETS}
    if diff:
        files["difficulty.tex"] = header([paths[diff]]) + difficulty_table(
            compares[diff], heads[diff], args.note)
    elif present:  # results exist, but no question carries a screening score
        files["difficulty.tex"] = header(present) + (
            "\\begin{tabular}{c}\\toprule\n"
            "No question in the evaluated sets carries a base screening score.\\\\\n"
            "\\bottomrule\n\\end{tabular}\n")
    else:
        files["difficulty.tex"] = header([]) + placeholder([paths[n] for n in order])
    found = [(label, s) for label, _, s in stats if s is not None]
    files["waste.tex"] = header([p for _, p, s in stats if s is not None]) + (
        waste_table(found, args.note) if found else placeholder([p for _, p, _ in stats]))
    files["findings.tex"] = header(present) + findings(compares)
    files["training_figure.tex"] = header([plot] if plot.exists() else []) + training_figure(plot)
    for name, table in REPLICATION_TABLES.items():
        files[f"replication_{name}.tex"] = header([rep_path] if rep else []) + (
            table(rep) if rep else placeholder([rep_path], REPLICATION_PLACEHOLDER))
    for name, table in {**REPLICATION_TABLES, **REDONE_TABLES}.items():
        files[f"redone_{name}.tex"] = header([redone_path] if redone else []) + (
            table(redone) if redone else placeholder([redone_path], REDONE_PLACEHOLDER))
    seeds = ",".join(map(str, args.third_seeds))
    pooled_all = third is not None and third["seeds"] == args.third_seeds
    waiting = (f"Seeds {seeds} not pooled yet"
               + (f" (pooled: {','.join(map(str, third['seeds']))})" if third else "")
               + rf" --- run \texttt{{python -m study.pooled\_report results/science-v3 --seeds {seeds}}}")
    for name, table in {**REPLICATION_TABLES, **THIRD_TABLES}.items():
        files[f"third_{name}.tex"] = header([third_path] if pooled_all else []) + (
            table(third) if pooled_all else placeholder([] if third else [third_path], waiting))
    files["reanalysis.tex"] = header([re_path] if reanalysis else []) + (
        reanalysis_table(reanalysis) if reanalysis
        else placeholder([re_path], REANALYSIS_PLACEHOLDER))
    files["sources.tex"] = header([]) + sources_list(
        [(f"Table, {head}", paths[name]) for name, head, _ in SETS]
        + [(f"Waste, {label}", path) for label, path, _ in stats] + [("Training plot", plot)]
        + [("Replication tables", rep_path), ("Redone replication tables", redone_path),
           ("Third design tables", third_path), ("Post hoc re-analysis", re_path)])

    out.mkdir(exist_ok=True)
    for name, text in files.items():
        atomic_write_text(out / name, text)
    missing = [n for n, _, _ in SETS if compares[n] is None]
    print(f"wrote {len(files)} files to {out}"
          + (f"; placeholders for missing sets: {', '.join(missing)}" if missing else ""))
    return 0


if __name__ == "__main__":
    run_main(main)
