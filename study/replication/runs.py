"""What each seed's GRPO statistics and stage times give: the dynamic sampler's waste, the
best validation step and how stable its choice is, updates without signal, and run time."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from relrl.data.dataset_io import read_json
from study import stage_times


def statistics(folder: Path, run: str) -> dict:
    return read_json(folder / f"grpo_{run}" / "statistics.json")


def waste(dirs: dict[int, Path], sampler_runs: tuple[tuple[str, str], ...]) -> dict:
    """Waste of both samplers, (uniform run, label) then (pass-rate run, label), per seed and
    pooled (wasted groups / groups generated), the ratio pass-rate / uniform, and the share of
    zero-gradient updates a plain loop (uniform draws, every group an update) would have had:
    the uniform run's waste rate."""
    out: dict = {"runs": {}}
    for run, label in sampler_runs:
        seeds = {}
        for seed, folder in dirs.items():
            s = statistics(folder, run)
            seeds[str(seed)] = {"wasted": s["wasted_steps"], "generated": s["total_attempts"],
                                "waste_rate": s["wasted_steps"] / s["total_attempts"]}
        wasted = sum(v["wasted"] for v in seeds.values())
        generated = sum(v["generated"] for v in seeds.values())
        out["runs"][run] = {"label": label, "per_seed": seeds, "wasted": wasted,
                            "generated": generated, "waste_rate": wasted / generated}
    (uniform, _), (passrate, _) = sampler_runs
    u, p = out["runs"][uniform], out["runs"][passrate]
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


def best_steps(dirs: dict[int, Path], runs: tuple[str, ...]) -> dict:
    """The step validation chose as best, per run and seed, and how often a resample of the
    validation groups would have chosen it (is the choice stable?)."""
    out = {}
    for run in runs:
        out[run] = {}
        for seed, folder in dirs.items():
            stats = statistics(folder, run)
            step = stats.get("best_step")
            out[run][str(seed)] = {"step": step, "stability": best_step_stability(
                stats.get("val_history", []), step)}
    return out


def zero_signal(dirs: dict[int, Path], plain: str, dynamic: str) -> dict:
    """Share of updates made of groups without signal: plain GRPO's, measured (its waste
    counters count them though they train), against the dynamic sampler's (its waste is
    redrawn, not trained on). The study reported 42% -> 23% zero-gradient steps."""
    out = {}
    for run in (plain, dynamic):
        stats = [statistics(d, run) for d in dirs.values()]
        generated = sum(s["total_attempts"] for s in stats)
        wasted = sum(s["wasted_steps"] for s in stats)
        out[run] = {"generated": generated, "without_signal": wasted,
                    "trained_without_signal": wasted if run == plain else 0}
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
