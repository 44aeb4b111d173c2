"""Per set, what a model is measured against besides the base: answers that read no question
(guess baselines) and its own samples' mean@k and pass@K (study.at_k), pooled over seeds."""
from __future__ import annotations

from pathlib import Path

from relrl.evaluation.guess_baselines import GUESSES, fitted_from_block, guess_outcomes
from relrl.evaluation.results_io import read_result
from study.at_k import at_k_cells, samples_of
from study.replication.groups import accuracy, group_means
from study.replication.seed_files import records, records_if_any


def guess_baselines(dirs: dict[int, Path], sets: tuple[str, ...], models: tuple[str, ...]) -> dict:
    """Per set whose result files recorded guess baselines at every seed: each guess's pooled
    group-level accuracy (each seed's guesses, fitted on its own training rows, graded on its
    own questions), the best guess, and each model's margin over it (group level, pooled)."""
    out = {}
    for set_name in sets:
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
                scores[name] += group_means(recs, [float(x) for x in outcomes[name]])
        guessed = {name: sum(v) / len(v) for name, v in scores.items()}
        best = max(GUESSES, key=guessed.get)
        rule = next(iter(blocks.values()))["tolerance_rule"]
        out[set_name] = {"accuracy": guessed, "best": best, "rule": rule,
                         "margins": {m: accuracy(dirs, set_name, m)["accuracy"] - guessed[best]
                                     for m in models}}
    return out


def at_k(dirs: dict[int, Path], sets: tuple[str, ...], models: tuple[str, ...]) -> dict:
    """Per set evaluated at every seed and per model: mean@k and pass@K pooled over seeds, each
    seed's paraphrase groups resampled within that seed (study.at_k); None for a model whose
    records some seed lacks."""
    out: dict = {}
    for set_name in sets:
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
