"""The replicated miniature study's pooled report, computed from each seed's result files.

Input: results/demo-replication/seed-N/ for every confirmatory seed, as demo.py writes them
(eval/<set>/<model>.json pair files, grpo_<run>/statistics.json). Output: pooled.json (every
number) and report.md (the same numbers as sentences and tables). Every comparison is paired
and tested over paraphrase groups (relrl.evaluation.clustered_stats): per seed, and pooled over seeds with
each seed's groups as separate clusters and the seed as the bootstrap stratum.

What is tested is fixed here and in results/demo-replication/PREREGISTRATION.md: one primary
comparison, and the secondary ones Holm-corrected together.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from relrl.data.dataset_io import read_json
from relrl.evaluation.clustered_stats import compare_groups, group_differences, min_detectable
from relrl.evaluation.guess_baselines import GUESSES, fitted_from_block, guess_outcomes
from relrl.evaluation.results_io import read_result
from relrl.evaluation.stats import holm
from study import stage_times
from study.at_k import NOTE as AT_K_NOTE
from study.at_k import at_k_cells, cell_text, pass_name, samples_of

PRIMARY = ("heldout", "GRPO exp7 best", "base")  # (set, model, against)
PRIMARY_ALPHA, SECONDARY_ALPHA, TARGET_GAIN, TARGET_POWER = 0.01, 0.05, 0.05, 0.8
SECONDARY = (
    ("heldout", "GRPO exp10 best", "base"),
    ("heldout", "GRPO exp7 final", "base"),
    ("heldout", "SFT warm start", "base"),
    ("heldout", "GRPO exp7 best", "GRPO exp10 best"),
    ("retention", "SFT warm start", "base"),
    ("retention", "GRPO exp7 best", "base"),
    ("retention", "GRPO exp10 best", "base"),
    ("ood", "SFT warm start", "base"),
    ("ood", "GRPO exp7 best", "base"),
    ("ood", "GRPO exp10 best", "base"),
)
RETENTION_MODELS = ("SFT warm start", "GRPO exp7 best", "GRPO exp10 best")
GUESS_SETS = ("heldout", "retention", "holdout", "ood", "train")
GUESS_MODELS = ("base", "SFT warm start", "GRPO exp7 best", "GRPO exp7 final", "GRPO exp10 best")
SAMPLER_RUNS = (("exp7", "uniform draws"), ("exp7_passrate", "pass-rate sampler"))
GRPO_RUNS = ("exp7", "exp10", "exp7_passrate")
N_BOOT = 10_000


def slug(label: str) -> str:
    return label.lower().replace(" ", "_")


def seed_dirs(root: Path, seeds: list[int]) -> dict[int, Path]:
    return {seed: root / f"seed-{seed}" for seed in seeds}


def records(seed_dir: Path, set_name: str, model: str, keep=None) -> list[dict]:
    """One model's per-question records on one set, those `keep(record)` accepts when given;
    "base" from any of the set's pair files (they share one base run)."""
    folder = seed_dir / "eval" / set_name
    if model == "base":
        recs = read_result(next(iter(sorted(folder.glob("*.json")))))["base"]["results"]
    else:
        recs = read_result(folder / f"{slug(model)}.json")["finetuned"]["results"]
    return recs if keep is None else [r for r in recs if keep(r)]


def comparison(dirs: dict[int, Path], set_name: str, model: str, against: str,
               keep=None) -> dict:
    """Per seed and pooled group-level comparison of `model` against `against`, on the
    questions `keep(record)` accepts when given (a stratum of the set)."""
    per_seed, pooled = {}, []
    for seed, folder in dirs.items():
        diffs = group_differences(records(folder, set_name, against, keep),
                                  records(folder, set_name, model, keep), stratum=str(seed))
        per_seed[str(seed)] = compare_groups(diffs, n_boot=N_BOOT, seed=seed)
        pooled += diffs
    out = compare_groups(pooled, n_boot=N_BOOT, seed=0)
    sd = _sd([float(d.diff) for d in pooled])
    out["mdd"] = min_detectable(sd, len(pooled), SECONDARY_ALPHA, TARGET_POWER) if sd > 0 else 0.0
    return {"set": set_name, "model": model, "against": against, "per_seed": per_seed,
            "pooled": out}


def _sd(x: list[float]) -> float:
    n = len(x)
    if n < 2:
        return 0.0
    mean = sum(x) / n
    return (sum((v - mean) ** 2 for v in x) / (n - 1)) ** 0.5


def waste(dirs: dict[int, Path]) -> dict:
    """Waste of both samplers per seed and pooled (wasted groups / groups generated), the
    ratio pass-rate / uniform, and the share of zero-gradient updates a plain loop (uniform
    draws, every group an update) would have had: the uniform run's waste rate."""
    out: dict = {"runs": {}}
    for run, label in SAMPLER_RUNS:
        seeds = {}
        for seed, folder in dirs.items():
            s = read_json(folder / f"grpo_{run}" / "statistics.json")
            seeds[str(seed)] = {"wasted": s["wasted_steps"], "generated": s["total_attempts"],
                                "waste_rate": s["wasted_steps"] / s["total_attempts"]}
        wasted = sum(v["wasted"] for v in seeds.values())
        generated = sum(v["generated"] for v in seeds.values())
        out["runs"][run] = {"label": label, "per_seed": seeds, "wasted": wasted,
                            "generated": generated, "waste_rate": wasted / generated}
    u, p = out["runs"]["exp7"], out["runs"]["exp7_passrate"]
    out["ratio"] = p["waste_rate"] / u["waste_rate"] if u["waste_rate"] else None
    out["plain_loop_zero_gradient_share"] = u["waste_rate"]
    return out


def best_step_stability(history: list[dict], best_step, n_boot: int = 2_000, seed: int = 0):
    """Share of bootstrap resamples of the validation groups in which `best_step` (the earliest
    step with the highest validation accuracy, as the trainer chooses) is still the one chosen;
    None for a history without per-group pass counts."""
    steps = [h["step"] for h in history]
    if best_step not in steps or any("group_passes" not in h for h in history):
        return None
    groups = sorted(history[0]["group_passes"])
    passes = np.array([[sum(h["group_passes"][g]) for g in groups] for h in history], dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(groups), size=(n_boot, len(groups)))
    weights = np.stack([np.bincount(row, minlength=len(groups)) for row in picks])
    # a resample's questions are the same at every step, so the most passes is the best accuracy
    chosen = (weights @ passes.T).argmax(axis=1)  # argmax takes the earliest of equals
    return float(np.mean(chosen == steps.index(best_step)))


def best_steps(dirs: dict[int, Path], runs: tuple[str, ...] = GRPO_RUNS) -> dict:
    """The step validation chose as best, per run and seed, and how often a resample of the
    validation groups would have chosen it (is the choice stable?)."""
    out = {}
    for run in runs:
        out[run] = {}
        for seed, folder in dirs.items():
            stats = read_json(folder / f"grpo_{run}" / "statistics.json")
            step = stats.get("best_step")
            out[run][str(seed)] = {"step": step, "stability": best_step_stability(
                stats.get("val_history", []), step)}
    return out


def pooled_results(root: Path, seeds: list[int], secondary_specs=SECONDARY,
                   runs: tuple[str, ...] = GRPO_RUNS, models: tuple[str, ...] = GUESS_MODELS) -> dict:
    """Every pooled number of the report; the redone replication (study.replication_v2_report)
    adds its arms' comparisons and runs."""
    dirs = seed_dirs(root, seeds)
    primary = comparison(dirs, *PRIMARY)
    p = primary["pooled"]
    primary["goal_met"] = bool(p["delta"] >= TARGET_GAIN and p["p"] < PRIMARY_ALPHA and
                               all(s["delta"] > 0 for s in primary["per_seed"].values()))
    secondary = [comparison(dirs, *spec) for spec in secondary_specs]
    for row, adjusted in zip(secondary, holm([s["pooled"]["p"] for s in secondary])):
        row["pooled"]["p_holm"] = adjusted
    retention = {"base": _accuracy(dirs, "retention", "base")}
    retention.update({m: _accuracy(dirs, "retention", m) for m in RETENTION_MODELS})
    return {"seeds": seeds, "primary_alpha": PRIMARY_ALPHA, "secondary_alpha": SECONDARY_ALPHA,
            "primary": primary, "secondary": secondary, "retention_accuracy": retention,
            "waste": waste(dirs), "best_steps": best_steps(dirs, runs), "run_time": run_time(dirs),
            "guess_baselines": guess_baselines(dirs, models), "at_k": at_k(dirs, models)}


def records_if_any(seed_dir: Path, set_name: str, model: str) -> list[dict] | None:
    """records(), or None where the model's file is missing or is older than stored records."""
    folder = seed_dir / "eval" / set_name
    if not any(folder.glob("*.json")) or (model != "base" and
                                          not (folder / f"{slug(model)}.json").is_file()):
        return None
    try:
        return records(seed_dir, set_name, model) or None
    except KeyError:
        return None


def at_k(dirs: dict[int, Path], models: tuple[str, ...] = GUESS_MODELS) -> dict:
    """Per set evaluated at every seed and per model: mean@k and pass@K pooled over seeds, each
    seed's paraphrase groups resampled within that seed (study.at_k); None for a model whose
    records some seed lacks."""
    out: dict = {}
    for set_name in GUESS_SETS:
        if not all((d / "eval" / set_name).is_dir() for d in dirs.values()):
            continue
        out[set_name] = {}
        for model in models:
            per_seed = {seed: records_if_any(d, set_name, model) for seed, d in dirs.items()}
            if not all(per_seed.values()):
                out[set_name][model] = None
                continue
            recs = [r for seed_recs in per_seed.values() for r in seed_recs]
            strata = [str(seed) for seed, seed_recs in per_seed.items() for _ in seed_recs]
            out[set_name][model] = {"samples": samples_of(recs), **at_k_cells(recs, strata)}
    return out


def run_time(dirs: dict[int, Path]) -> dict:
    """Per seed: busy wall-clock minutes over every recorded stage attempt, attempts that did
    not finish, and the commits the stages ran from (study.stage_times)."""
    out = {}
    for seed, folder in dirs.items():
        recs = stage_times.read(folder / stage_times.FILE_NAME)
        out[str(seed)] = {"minutes": stage_times.busy_seconds(recs) / 60,
                          "unfinished_attempts": sum(r["status"] != 0 for r in recs),
                          "codes": sorted({r["code"] for r in recs})}
    return out


def _group_means(recs: list[dict], scores: list[float]) -> list[float]:
    by: dict[str, list[float]] = {}
    for r, score in zip(recs, scores):
        by.setdefault(str(r.get("group") or r["id"]), []).append(score)
    return [sum(v) / len(v) for v in by.values()]


def _accuracy(dirs: dict[int, Path], set_name: str, model: str) -> dict:
    """Group-level accuracy (mean over groups of the group's mean accuracy), pooled."""
    scores = []
    for folder in dirs.values():
        recs = records(folder, set_name, model)
        scores += _group_means(recs, [r["pass_count"] / r["samples"] for r in recs])
    return {"groups": len(scores), "accuracy": sum(scores) / len(scores)}


def guess_baselines(dirs: dict[int, Path], models: tuple[str, ...] = GUESS_MODELS) -> dict:
    """Per set whose result files recorded guess baselines at every seed: each guess's pooled
    group-level accuracy (each seed's guesses, fitted on its own training rows, graded on its
    own questions), the best guess, and each model's margin over it (group level, pooled)."""
    out = {}
    for set_name in GUESS_SETS:
        folders = {seed: d / "eval" / set_name for seed, d in dirs.items()}
        if not all(f.is_dir() and any(f.glob("*.json")) for f in folders.values()):
            continue
        blocks = {seed: read_result(next(iter(sorted(f.glob("*.json"))))).get("guess_baselines")
                  for seed, f in folders.items()}
        if not all(blocks.values()):
            continue
        scores: dict[str, list[float]] = {name: [] for name in GUESSES}
        for seed, block in blocks.items():
            recs = records(dirs[seed], set_name, "base")
            outcomes = guess_outcomes(recs, fitted_from_block(block), tolerance=block["tolerance"],
                                      rule=block["tolerance_rule"])
            for name in GUESSES:
                scores[name] += _group_means(recs, [float(x) for x in outcomes[name]])
        accuracy = {name: sum(v) / len(v) for name, v in scores.items()}
        best = max(GUESSES, key=accuracy.get)
        rule = next(iter(blocks.values()))["tolerance_rule"]
        out[set_name] = {"accuracy": accuracy, "best": best, "rule": rule,
                         "margins": {m: _accuracy(dirs, set_name, m)["accuracy"] - accuracy[best]
                                     for m in models}}
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def _ci(c: dict) -> str:
    return f"[{_pts(c['ci_low'])}, {_pts(c['ci_high'])}]"


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
                     f"{_pct(g['accuracy'][g['best']])} | "
                     + " | ".join(_pts(g["margins"][m]) for m in models) + " |")
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


def build_report(pooled: dict, title: str | None = None) -> str:
    pr = pooled["primary"]
    p = pr["pooled"]
    seeds = ", ".join(map(str, pooled["seeds"]))
    lines = [f"# {title or f'Miniature study, replicated (seeds {seeds})'}", "",
             "Every number below is computed from the JSON files in the seed folders "
             "(`study/replication_report.py`); all tests are paired and over paraphrase groups: "
             "exact sign-flip p, 95% stratified cluster-bootstrap interval.", "",
             "## Primary endpoint", "",
             f"GRPO exp7 (best validation checkpoint) against the base on held-out mixed-style "
             f"questions, pooled over seeds: {_pct(p['base_accuracy'])} -> {_pct(p['ft_accuracy'])}"
             f" ({_pts(p['delta'])} points, 95% CI {_ci(p)}, p = {p['p']:.3g}, {p['groups']} groups)."
             f" Goal (pooled gain >= +{100 * TARGET_GAIN:.0f} points with p < {PRIMARY_ALPHA} and a "
             f"gain at every seed): **{'met' if pr['goal_met'] else 'not met'}**.", "",
             "| Seed | Groups | Base | exp7 best | Delta (points) | 95% CI | p |",
             "|---|---|---|---|---|---|---|"]
    for seed, s in pr["per_seed"].items():
        lines.append(f"| {seed} | {s['groups']} | {_pct(s['base_accuracy'])} | "
                     f"{_pct(s['ft_accuracy'])} | {_pts(s['delta'])} | {_ci(s)} | {s['p']:.3g} |")
    lines.append(f"| pooled | {p['groups']} | {_pct(p['base_accuracy'])} | {_pct(p['ft_accuracy'])}"
                 f" | {_pts(p['delta'])} | {_ci(p)} | {p['p']:.3g} |")
    lines += ["", f"## Secondary comparisons (pooled; Holm over all {len(pooled['secondary'])})", "",
              "| Set | Model | Against | Delta (points) | 95% CI | p | p (Holm) | Min. detectable |",
              "|---|---|---|---|---|---|---|---|"]
    for row in pooled["secondary"]:
        c = row["pooled"]
        lines.append(f"| {row['set']} | {row['model']} | {row['against']} | {_pts(c['delta'])} | "
                     f"{_ci(c)} | {c['p']:.3g} | {c['p_holm']:.3g} | {100 * c['mdd']:.1f} |")
    ret = pooled["retention_accuracy"]
    lines += ["", "## Retention (questions the base screened right at least half the time, "
              "never trained on)", "", "| Model | Groups | Accuracy | Change (points) | 95% CI | "
              "p (Holm) | Min. detectable drop |", "|---|---|---|---|---|---|---|",
              f"| base | {ret['base']['groups']} | {_pct(ret['base']['accuracy'])} | - | - | - | - |"]
    for row in pooled["secondary"]:
        if row["set"] == "retention":
            c = row["pooled"]
            lines.append(f"| {row['model']} | {c['groups']} | {_pct(ret[row['model']]['accuracy'])} | "
                         f"{_pts(c['delta'])} | {_ci(c)} | {c['p_holm']:.3g} | {100 * c['mdd']:.1f} |")
    lines += guess_table(pooled.get("guess_baselines") or {})
    lines += at_k_table(pooled.get("at_k") or {})
    w = pooled["waste"]
    lines += ["", "## Dynamic sampling waste (zero-signal groups / groups generated)", "",
              "| Run | " + " | ".join(f"seed {s}" for s in pooled["seeds"]) + " | pooled |",
              "|---|" + "---|" * (len(pooled["seeds"]) + 1)]
    for run in w["runs"].values():
        cells = [f"{_pct(v['waste_rate'])} ({v['wasted']}/{v['generated']})"
                 for v in run["per_seed"].values()]
        lines.append(f"| exp7, {run['label']} | " + " | ".join(cells) +
                     f" | {_pct(run['waste_rate'])} ({run['wasted']}/{run['generated']}) |")
    ratio = "-" if w["ratio"] is None else f"{w['ratio']:.2f}"
    lines += ["", f"Pass-rate / uniform waste, pooled: {ratio} (target <= 0.7). "
              f"Zero-gradient updates a plain loop would have had (uniform draws, no dynamic "
              f"sampling): {_pct(w['plain_loop_zero_gradient_share'])}.", "",
              "## Best validation step per seed", "", "| Run | " +
              " | ".join(f"seed {s}" for s in pooled["seeds"]) + " |",
              "|---|" + "---|" * len(pooled["seeds"])]
    for run, steps in pooled["best_steps"].items():
        lines.append(f"| {run} | " + " | ".join(
            str(v["step"]) + ("" if v["stability"] is None else f" ({_pct(v['stability'])})")
            for v in steps.values()) + " |")
    lines += ["", "In brackets: the share of 2,000 bootstrap resamples of the validation groups "
              "that choose the same step.", "", "## Run time and code", "",
              "| Seed | Busy minutes | Unfinished attempts | Code |", "|---|---|---|---|"]
    for seed, t in pooled["run_time"].items():
        lines.append(f"| {seed} | {t['minutes']:.0f} | {t['unfinished_attempts']} | "
                     f"{', '.join(t['codes']) or '-'} |")
    return "\n".join(lines) + "\n"
