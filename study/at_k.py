"""mean@k and pass@k cells for the study's reports, with 95% intervals over paraphrase groups.

A cell is {value, low, high, groups}: relrl.evaluation.clustered_stats.at_k_interval, the same
estimate and group bootstrap as every evaluation JSON's `at_k_ci` (N_BOOT resamples, seed
SEED), so a report, the compare table and the result file of the same records agree. Records
pooled over seeds resample their groups within each seed (the seed as the stratum). A cell
that cannot be computed (an old result file without records) is None and shows as "-".
"""
from __future__ import annotations

from typing import Sequence

from relrl.evaluation.clustered_stats import at_k_interval
from relrl.evaluation.model_results import AT_K_BOOT as N_BOOT  # the evaluation JSON's own

SEED = 0
KEEP = ("value", "low", "high", "groups")


def samples_of(records: Sequence[dict]) -> int:
    """The k of pass@k: the samples drawn per question (the fewest, should they differ)."""
    return min(int(r["samples"]) for r in records)


def at_k_cells(records: Sequence[dict], strata: Sequence[str] | None = None) -> dict:
    """{"mean@k": cell, "pass@K": cell} with K = the samples per question; pass@K only for
    K > 1 (with one sample it is mean@k)."""
    k = samples_of(records)
    cells = {"mean@k": at_k_interval(records, 1, "mean", n_boot=N_BOOT, seed=SEED, strata=strata)}
    if k > 1:
        cells[f"pass@{k}"] = at_k_interval(records, k, "pass", n_boot=N_BOOT, seed=SEED,
                                           strata=strata)
    return {name: {key: cell[key] for key in KEEP} for name, cell in cells.items()}


def cell_text(cell: dict | None) -> str:
    """ "50.0% (25.0%-75.0%)", or "-" for a cell that could not be computed."""
    if not cell:
        return "-"
    return f"{100 * cell['value']:.1f}% ({100 * cell['low']:.1f}%-{100 * cell['high']:.1f}%)"


def pass_name(cells: dict) -> str | None:
    """The pass@K key among a row's cells, if any."""
    return next((name for name in cells if name.startswith("pass@")), None)


NOTE = ("mean@k: the expected share correct among k samples of a question (the same for every k, "
        "and pass@1); pass@K: the unbiased chance that K samples of a question hold a correct "
        "answer, K = the samples drawn per question (\"-\" with one sample); both averaged over "
        f"questions. In brackets: the 95% interval from {N_BOOT:,} bootstrap resamples (seed "
        f"{SEED}) of whole paraphrase groups, each weighted by its questions.")
