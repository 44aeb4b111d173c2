"""report.md: a design's pooled numbers as sentences and tables, one function per section,
written in the order the design's `sections` names. A section whose numbers the seeds did not
record (guess baselines, mean@k, forgetting without SFT topics) writes nothing."""
from __future__ import annotations

from study.at_k import NOTE as AT_K_NOTE
from study.at_k import cell_text, pass_name
from study.replication.design import Design
from study.replication.mechanism import report_lines


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def ci(c: dict) -> str:
    return f"[{pts(c['ci_low'])}, {pts(c['ci_high'])}]"


def header(design: Design, pooled: dict) -> list[str]:
    seeds = ", ".join(map(str, pooled["seeds"]))
    return [f"# {design.title.format(seeds=seeds)}", "",
            "Every number below is computed from the JSON files in the seed folders "
            "(`study/replication/`); all tests are paired and over paraphrase groups: "
            "exact sign-flip p, 95% stratified cluster-bootstrap interval."]


def primary(design: Design, pooled: dict) -> list[str]:
    pr = pooled["primary"]
    p = pr["pooled"]
    lines = ["", "## Primary endpoint", "",
             f"{design.primary_text}, pooled over seeds: {pct(p['base_accuracy'])} -> "
             f"{pct(p['ft_accuracy'])} ({pts(p['delta'])} points, 95% CI {ci(p)}, p = "
             f"{p['p']:.3g}, {p['groups']} groups). Goal (pooled gain >= "
             f"+{100 * design.target_gain:.0f} points with p < {design.primary_alpha} and a gain "
             f"at every seed): **{'met' if pr['goal_met'] else 'not met'}**.", "",
             f"| Seed | Groups | Base | {design.primary_column} | Delta (points) | 95% CI | p |",
             "|---|---|---|---|---|---|---|"]
    for seed, s in pr["per_seed"].items():
        lines.append(f"| {seed} | {s['groups']} | {pct(s['base_accuracy'])} | "
                     f"{pct(s['ft_accuracy'])} | {pts(s['delta'])} | {ci(s)} | {s['p']:.3g} |")
    lines.append(f"| pooled | {p['groups']} | {pct(p['base_accuracy'])} | {pct(p['ft_accuracy'])}"
                 f" | {pts(p['delta'])} | {ci(p)} | {p['p']:.3g} |")
    return lines


def secondary(design: Design, pooled: dict) -> list[str]:
    lines = ["", f"## Secondary comparisons (pooled; Holm over all {len(pooled['secondary'])})",
             "", "| Set | Model | Against | Delta (points) | 95% CI | p | p (Holm) | Min. detectable |",
             "|---|---|---|---|---|---|---|---|"]
    for row in pooled["secondary"]:
        c = row["pooled"]
        lines.append(f"| {row['set']} | {row['model']} | {row['against']} | {pts(c['delta'])} | "
                     f"{ci(c)} | {c['p']:.3g} | {c['p_holm']:.3g} | {100 * c['mdd']:.1f} |")
    return lines


def retention(design: Design, pooled: dict) -> list[str]:
    ret = pooled["retention_accuracy"]
    lines = ["", "## Retention (questions the base screened right at least half the time, "
             "never trained on)", "", "| Model | Groups | Accuracy | Change (points) | 95% CI | "
             "p (Holm) | Min. detectable drop |", "|---|---|---|---|---|---|---|",
             f"| base | {ret['base']['groups']} | {pct(ret['base']['accuracy'])} | - | - | - | - |"]
    for row in pooled["secondary"]:
        if row["set"] == "retention":
            c = row["pooled"]
            lines.append(f"| {row['model']} | {c['groups']} | {pct(ret[row['model']]['accuracy'])} | "
                         f"{pts(c['delta'])} | {ci(c)} | {c['p_holm']:.3g} | {100 * c['mdd']:.1f} |")
    return lines


def guess_table(guesses: dict) -> list[str]:
    """The best guess per set and each model's margin over it (empty without baselines)."""
    if not guesses:
        return []
    models = list(next(iter(guesses.values()))["margins"])
    lines = ["", "## Guess baselines (group level, pooled)", "",
             "Answers that read no question: one constant, each family's usual answer (both "
             "fitted on each seed's training rows), and the question's last number, graded by "
             "the same rule. Margin: the model's accuracy minus the best guess's, in points.", "",
             "| Set | Best guess | Its accuracy | " + " | ".join(models) + " |",
             "|---|---|---|" + "---|" * len(models)]
    for set_name, g in guesses.items():
        lines.append(f"| {set_name} | {g['best']} ({g['rule']} rule) | "
                     f"{pct(g['accuracy'][g['best']])} | "
                     + " | ".join(pts(g["margins"][m]) for m in models) + " |")
    return lines


def at_k_table(by_set: dict) -> list[str]:
    """mean@k and pass@K per set and model, pooled over seeds (empty without them)."""
    if not by_set:
        return []
    lines = ["", "## mean@k and pass@K (pooled over seeds)", "",
             "| Set | Model | K | Groups | mean@k | pass@K |", "|---|---|---|---|---|---|"]
    for set_name, models in by_set.items():
        for model, cells in models.items():
            if cells is None:
                lines.append(f"| {set_name} | {model} | - | - | - | - |")
                continue
            passes = pass_name(cells)
            lines.append(f"| {set_name} | {model} | {cells['samples']} | {cells['mean@k']['groups']} | "
                         f"{cell_text(cells['mean@k'])} | {cell_text(cells.get(passes))} |")
    return lines + ["", AT_K_NOTE + " Pooled over seeds: each seed's groups count separately "
                    "and are resampled within their seed. Averaged over questions, not groups as "
                    "the accuracies above, so mean@k can differ from them."]


def waste(design: Design, pooled: dict) -> list[str]:
    w, seeds = pooled["waste"], pooled["seeds"]
    lines = ["", "## Dynamic sampling waste (zero-signal groups / groups generated)", "",
             "| Run | " + " | ".join(f"seed {s}" for s in seeds) + " | pooled |",
             "|---|" + "---|" * (len(seeds) + 1)]
    for run in w["runs"].values():
        cells = [f"{pct(v['waste_rate'])} ({v['wasted']}/{v['generated']})"
                 for v in run["per_seed"].values()]
        lines.append(f"| exp7, {run['label']} | " + " | ".join(cells) +
                     f" | {pct(run['waste_rate'])} ({run['wasted']}/{run['generated']}) |")
    ratio = "-" if w["ratio"] is None else f"{w['ratio']:.2f}"
    return lines + ["", f"Pass-rate / uniform waste, pooled: {ratio} (target <= 0.7). "
                    f"Zero-gradient updates a plain loop would have had (uniform draws, no dynamic "
                    f"sampling): {pct(w['plain_loop_zero_gradient_share'])}."]


def best_steps(design: Design, pooled: dict) -> list[str]:
    seeds = pooled["seeds"]
    lines = ["", "## Best validation step per seed", "",
             "| Run | " + " | ".join(f"seed {s}" for s in seeds) + " |", "|---|" + "---|" * len(seeds)]
    for run, steps in pooled["best_steps"].items():
        lines.append(f"| {run} | " + " | ".join(
            str(v["step"]) + ("" if v["stability"] is None else f" ({pct(v['stability'])})")
            for v in steps.values()) + " |")
    return lines + ["", "In brackets: the share of 2,000 bootstrap resamples of the validation "
                    "groups that choose the same step."]


def run_time(design: Design, pooled: dict) -> list[str]:
    lines = ["", "## Run time and code", "", "| Seed | Busy minutes | Unfinished attempts | Code |",
             "|---|---|---|---|"]
    for seed, t in pooled["run_time"].items():
        # a seed run before stage times were kept has no attempts on record, not zero minutes
        minutes = f"{t['minutes']:.0f}" if t["codes"] else "not recorded"
        lines.append(f"| {seed} | {minutes} | {t['unfinished_attempts']} | "
                     f"{', '.join(t['codes']) or '-'} |")
    return lines


def additions(design: Design, pooled: dict) -> list[str]:
    """The redone design's heading for what it adds, and its goal with the guess margin."""
    p, margin = pooled["primary"], pooled["primary"]["guess_margin"]
    return ["", "## The redone design's additions", "",
            f"Goal ({design.goal_source}): the gain above, and exp7 at least "
            f"{100 * design.guess_margin:.0f} points above the best guess baseline on the held-out "
            f"mixed-style questions (its margin: {'-' if margin is None else pts(margin)} points): "
            f"**{'met' if p['v2_goal_met'] else 'not met'}**."]


def target_range(design: Design, pooled: dict) -> list[str]:
    lines = ["", "### Held-out mixed-style questions by target range", "",
             "A gain only where targets lie in [0.85, 1) could be guesses moving toward 1; the "
             "complement rule grades those on the failure probability.", "",
             "| Model | Targets | Groups | Base | Model | Delta (points) | 95% CI | p |",
             "|---|---|---|---|---|---|---|---|"]
    for model, ranges in pooled["by_target_range"].items():
        for name, c in ranges.items():
            label = "in [0.85, 1)" if name == "high_range" else "elsewhere"
            lines.append(f"| {model} | {label} | {c['groups']} | {pct(c['base_accuracy'])} | "
                         f"{pct(c['ft_accuracy'])} | {pts(c['delta'])} | {ci(c)} | {c['p']:.3g} |")
    return lines


def forgetting(design: Design, pooled: dict) -> list[str]:
    if not pooled["forgetting"]:
        return []
    title = ("Retention by family: the SFT warm start's, those GRPO trained on, and those "
             "never trained on" if "never_trained" in pooled["forgetting"] else
             "Retention by topic: the SFT warm start's topics and the others")
    lines = ["", f"### {title}", "",
             f"| {'Families' if 'never_trained' in pooled['forgetting'] else 'Topics'} | Model | "
             "Groups | Base | Model | Change (points) | 95% CI | p |",
             "|---|---|---|---|---|---|---|---|"]
    for name, models in pooled["forgetting"].items():
        for model, c in models.items():
            lines.append(f"| {name.replace('_', ' ')} | {model} | {c['groups']} | "
                         f"{pct(c['base_accuracy'])} | {pct(c['ft_accuracy'])} | "
                         f"{pts(c['delta'])} | {ci(c)} | {c['p']:.3g} |")
    return lines


def zero_signal(design: Design, pooled: dict) -> list[str]:
    plain_run, dynamic_run = design.zero_signal_runs
    plain, dapo = pooled["plain_zero_signal"][plain_run], pooled["plain_zero_signal"][dynamic_run]
    return ["", "### Updates without signal (the study: 42% -> 23%)", "",
            f"Plain GRPO trained on {plain['trained_without_signal']} groups without signal of "
            f"{plain['generated']} ({pct(plain['trained_without_signal'] / plain['generated'])}); "
            f"exp7 with dynamic sampling drew {dapo['generated']} groups, redrew the "
            f"{dapo['without_signal']} without signal and trained on none of them (0%)."]


def claims(design: Design, pooled: dict) -> list[str]:
    """The primary endpoint as the first claim (tested alone at its own alpha), then the
    design's claims with their Holm-adjusted p."""
    p = pooled["primary"]
    lines = ["", "### The study's claims", "",
             f"Rule (`study/replication/claims.py`, `verdict`): Holm over the claims at "
             f"{pooled['secondary_alpha']}; a change smaller than {100 * design.min_effect:.0f} "
             "points is not the study's effect.", "",
             "| Claim | Set (stratum) | Comparison | Delta (points) | 95% CI | p (Holm) | Verdict |",
             "|---|---|---|---|---|---|---|",
             f"| GRPO (exp7, after SFT) gains on mixed questions | heldout (all) | exp7 best vs "
             f"base | {pts(p['pooled']['delta'])} | {ci(p['pooled'])} | "
             f"{p['pooled']['p']:.3g} (primary, at {pooled['primary_alpha']}) | {p['verdict']} |"]
    for row in pooled["claims"]:
        if "pooled" not in row:
            lines.append(f"| {row['claim']} | - | - | - | - | - | {row['verdict']} ({row['why']}) |")
            continue
        c = row["pooled"]
        own = f" (alone, at {c['alpha']}; {100 * c['confidence']:.0f}% CI)" if "minus" in row else ""
        lines.append(f"| {row['claim']} | {row['set']} ({row['stratum'].replace('_', ' ')}) | "
                     f"{row['model']} vs {row['against']} | {pts(c['delta'])} | {ci(c)} | "
                     f"{c['p_holm']:.3g}{own} | {row['verdict']} |")
    return lines


def third_goals(design: Design, pooled: dict) -> list[str]:
    """The third design's goals (issue 46) and whether these seeds meet them."""
    g = pooled["third_goals"]
    mark = lambda met: "**met**" if met else "**not met**"
    lines = ["", "## The third design's goals", "",
             f"Goals ({design.goal_source}): each forgetting claim decided at its alpha with "
             f"{100 * design.target_power:.0f}% power for a {100 * design.min_effect:.0f}-point "
             "difference; the gain on never-trained families within "
             f"+-{100 * design.transfer_half_width:.0f} points (95%); every GRPO arm at least "
             f"{100 * design.guess_margin:.0f} points above the best guess on every set but the "
             "transfer sets (never-trained families, new wordings).", ""]
    for claim, f in g["forgetting"].items():
        lines.append(f"- {claim}: {f['verdict']}, smallest detectable difference "
                     f"{100 * f['mdd']:.1f} points: {mark(f['met'])}.")
    t, m = g["transfer"], g["guess_margin"]
    lines.append(f"- {t['model']} on the never-trained families: 95% interval +-"
                 f"{100 * t['half_width']:.1f} points: {mark(t['met'])}.")
    lowest = "-" if m["lowest_grpo_margin"] is None else pts(m["lowest_grpo_margin"])
    reported = "; ".join(f"{name}: " + (", ".join(f"{k} {pts(v)}" for k, v in ms.items())
                                         if ms else "-")
                         for name, ms in m["transfer_sets"].items())
    lines.append(f"- The lowest GRPO margin over the best guess: {lowest} points: "
                 f"{mark(m['met'])} (the transfer sets, reported: {reported}).")
    return lines


def transfer(design: Design, pooled: dict) -> list[str]:
    lines = ["", "### Transfer: never-trained families and wordings never seen", "",
             "| Set (stratum) | Model | Groups | Base | Model | Delta (points) | 95% CI | "
             "Half-width | p |", "|---|---|---|---|---|---|---|---|---|"]
    for name, models in pooled["transfer"].items():
        for model, c in models.items():
            lines.append(f"| {name} | {model} | {c['groups']} | {pct(c['base_accuracy'])} | "
                         f"{pct(c['ft_accuracy'])} | {pts(c['delta'])} | {ci(c)} | "
                         f"{100 * c['half_width']:.1f} | {c['p']:.3g} |")
    return lines


SECTIONS = {
    "primary": primary, "secondary": secondary, "retention": retention,
    "guess_baselines": lambda design, pooled: guess_table(pooled.get("guess_baselines") or {}),
    "at_k": lambda design, pooled: at_k_table(pooled.get("at_k") or {}),
    "waste": waste, "best_steps": best_steps, "run_time": run_time, "additions": additions,
    "target_range": target_range, "forgetting": forgetting, "zero_signal": zero_signal,
    "claims": claims, "third_goals": third_goals, "transfer": transfer,
    "mechanism": lambda design, pooled: [line for block in pooled["mechanism"].values()
                                         for line in report_lines(block)],
}


def build_report(design: Design, pooled: dict) -> str:
    lines = header(design, pooled)
    for name in design.sections:
        lines += SECTIONS[name](design, pooled)
    return "\n".join(lines) + "\n"
