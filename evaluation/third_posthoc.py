"""Post hoc, not pre-registered: the third design's two forgetting differences under tests that
let each stratum have its own spread.

The registered test (study.replication.difference) permutes the stratum labels within each
seed. That is exact when a group's change does not depend on its stratum at all, but a
difference of means can be zero while the strata spread differently, and then the permutation
null mixes the two spreads: with a small, widely spread stratum beside a large, tight one (the
SFT-trained families' 66 groups against 1,216) its p comes out far too small. Two tests that
allow each stratum its own variance, beside the registered one:

  welch         t = difference / se, se from each stratum's own variance (the se the power
                analysis uses), Welch-Satterthwaite degrees of freedom, two-sided
  studentized   the registered permutation of labels within each seed, on that t instead of
                the raw difference, which keeps the permutation test valid for large samples
                when the spreads differ (Janssen, 1997, Statistics & Probability Letters 36)

  python evaluation/third_posthoc.py      # writes results/science-v3/posthoc/
"""
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

from relrl.data.dataset_io import atomic_write_json, atomic_write_text
from relrl.runtime.cli import ArgumentParser, UsageError, run_main, seed_list
from study.replication.design import THIRD
from study.replication.difference import N_RESAMPLES, difference_of_changes, stratum_changes
from study.replication.groups import strata
from study.replication.seed_files import never_trained, seed_dirs, sft_topics

ROOT = Path(__file__).resolve().parents[1]
SEEDS = [31, 32, 33, 34]


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", default=str(ROOT / "results" / "science-v3"),
                        help="the third design's folder (seed-N/)")
    parser.add_argument("--seeds", type=seed_list("--seeds"), default=SEEDS,
                        help="comma-separated seeds (default: the confirmatory 31,32,33,34)")
    parser.add_argument("--output-dir", default=None,
                        help="where forgetting_tests.json and .md go (default <results-dir>/posthoc)")
    return parser.parse_args(argv)


def welch(a: np.ndarray, b: np.ndarray) -> dict:
    """mean(a) - mean(b) over its standard error from each sample's own variance, with the
    Welch-Satterthwaite degrees of freedom and a two-sided p."""
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    t = float((a.mean() - b.mean()) / se)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return {"t": t, "df": float(df), "p": float(2 * stats.t.sf(abs(t), df))}


def _t(sum_a, sq_a, na, sum_b, sq_b, nb):
    var_a = (sq_a - sum_a ** 2 / na) / (na - 1)
    var_b = (sq_b - sum_b ** 2 / nb) / (nb - 1)
    return (sum_a / na - sum_b / nb) / np.sqrt(var_a / na + var_b / nb)


def studentized_permutation(xa: list[np.ndarray], xb: list[np.ndarray], *, seed: int = 0,
                            n_resamples: int = N_RESAMPLES) -> dict:
    """Two-sided p of Welch's t over the seeds' pooled groups (xa[i], xb[i]: seed i's group
    changes in the two strata) against its distribution when the labels are permuted within
    each seed, as the registered test permutes them."""
    rng = np.random.default_rng(seed)
    na, nb = sum(map(len, xa)), sum(map(len, xb))
    sums = [0.0, 0.0, 0.0, 0.0]  # a's sum and squares, b's sum and squares, per permutation
    for x, y in zip(xa, xb):
        shuffled = rng.permuted(np.tile(np.concatenate([x, y]), (n_resamples, 1)), axis=1)
        a, b = shuffled[:, :len(x)], shuffled[:, len(x):]
        for i, part in enumerate((a.sum(axis=1), (a ** 2).sum(axis=1), b.sum(axis=1),
                                  (b ** 2).sum(axis=1))):
            sums[i] = sums[i] + part
    a_all, b_all = np.concatenate(xa), np.concatenate(xb)
    observed = _t(a_all.sum(), (a_all ** 2).sum(), na, b_all.sum(), (b_all ** 2).sum(), nb)
    with np.errstate(divide="ignore", invalid="ignore"):  # a draw with no spread: t is nan
        permuted = _t(sums[0], sums[1], na, sums[2], sums[3], nb)
    extreme = int((np.abs(permuted) >= abs(observed) - 1e-12).sum())
    return {"t": float(observed), "p": (extreme + 1) / (n_resamples + 1),
            "n_resamples": n_resamples}


def analyse(root: Path, seeds: list[int]) -> dict:
    dirs = seed_dirs(root, seeds)
    missing = [s for s, d in dirs.items() if not d.is_dir()]
    if missing:
        raise UsageError(f"--seeds: no seed folder for {', '.join(map(str, missing))} in {root}")
    filters = strata(sft_topics(dirs), never_trained(dirs))
    out = []
    for claim in (c for c in THIRD.claims if c.minus):
        a = stratum_changes(dirs, claim.set, claim.model, claim.against, filters[claim.stratum])
        b = stratum_changes(dirs, claim.set, claim.model, claim.against, filters[claim.minus])
        both = [s for s in seeds if len(a[s]) and len(b[s])]
        xa, xb = [a[s] for s in both], [b[s] for s in both]
        registered = difference_of_changes(xa, xb, alpha=claim.alpha, power=THIRD.target_power,
                                           confidence=1 - claim.alpha)
        pooled_a, pooled_b = np.concatenate(xa), np.concatenate(xb)
        out.append({
            "claim": claim.text, "model": claim.model, "set": claim.set,
            "strata": {name: {"groups": len(x), "mean_change": float(x.mean()),
                              "sd": float(x.std(ddof=1))}
                       for name, x in ((claim.stratum, pooled_a), (claim.minus, pooled_b))},
            "delta": registered["delta"], "alpha": claim.alpha,
            "registered": {k: registered[k] for k in ("p", "ci_low", "ci_high", "confidence",
                                                      "se", "test")},
            "welch": welch(pooled_a, pooled_b),
            "studentized": studentized_permutation(xa, xb),
            "seeds": both})
    return {"seeds": seeds, "differences": out}


def render(result: dict) -> str:
    lines = ["# Post hoc: the third design's forgetting differences, with each stratum's own "
             "spread", "",
             "Not pre-registered (`evaluation/third_posthoc.py`). The registered test permutes "
             "stratum labels within each seed; Welch's t and the studentized permutation let "
             "each stratum have its own variance. Seeds " + ", ".join(map(str, result["seeds"]))
             + ".", "",
             "| Claim | Stratum | Groups | Mean change (points) | SD (points) |",
             "|---|---|---|---|---|"]
    for d in result["differences"]:
        for name, s in d["strata"].items():
            lines.append(f"| {d['claim']} | {name.replace('_', ' ')} | {s['groups']} | "
                         f"{100 * s['mean_change']:+.1f} | {100 * s['sd']:.1f} |")
    lines += ["", "| Claim | Difference (points) | Registered p | 99% CI | Welch t (df) | Welch p "
              "| Studentized permutation p |", "|---|---|---|---|---|---|---|"]
    for d in result["differences"]:
        r, w, s = d["registered"], d["welch"], d["studentized"]
        lines.append(f"| {d['claim']} | {100 * d['delta']:+.1f} | {r['p']:.3g} | "
                     f"[{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}] | "
                     f"{w['t']:.2f} ({w['df']:.0f}) | {w['p']:.3g} | {s['p']:.3g} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    root = Path(args.results_dir)
    if not root.is_dir():
        raise UsageError(f"--results-dir: {root}: no such folder")
    result = analyse(root, args.seeds)
    text = render(result)
    out = Path(args.output_dir) if args.output_dir else root / "posthoc"
    atomic_write_json(out / "forgetting_tests.json", result)
    atomic_write_text(out / "forgetting_tests.md", text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    run_main(main)
