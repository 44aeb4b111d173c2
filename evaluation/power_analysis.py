"""Power of the replicated miniature study, from the variance seen in a finished demo run.

Reads one demo run's per-question records (default results/demo, seed 0, one sample per
question; or a replication seed's folder, K samples) and prints, for K samples per question:
  - the primary comparison (exp7 best vs base on held-out mixed-style questions, tested over
    paraphrase groups): SD of the group difference, groups needed for 80% power at +5 points,
    power and minimum detectable effect with the groups of 1 and of 3 seeds;
  - the retention check (questions the base screened right at least 2 of 4 times): the minimum
    detectable drop at 80% power for SFT, exp7 and exp10, per seed and pooled over 3 seeds.
How the variance for K samples is extrapolated from one-sample data (relrl.evaluation.clustered_stats):
  Var(D_g) = tau2 + omega2 / m + w / (m K), m questions per group. One sample per question
  cannot tell sampling noise (w, shrinks with K) from real differences between questions in
  how much training changed them (tau2 + omega2, does not shrink): base and fine-tuned share
  their sampling seeds, so the two samples are correlated and w cannot be taken from the
  base's screening alone (2 E[p(1-p)] = 0.54 there exceeds the observed Var(d_q) = 0.32).
  So the question-level variance Var(d_q) is split by an assumed share that does not shrink
  (--between-share, default 0.5, the pessimistic case the design is sized on; 0 is the
  optimistic one), and its between-question part into tau2 and omega2 by the ANOVA estimator
  over groups, tau2 = (m Var(group means) - Var(d_q)) / (m - 1). Records with K >= 2 samples
  (the replication's held-out and retention sets) measure the split instead: w is the variance
  of the paired per-sample differences within a question (estimate_variance_model_k).
The normal approximation to the sign-flip test is used throughout (its groups are many and
their differences bounded). RETENTION_SHARE_RIGHT is the share of retention questions that
screen 4/4, estimated from the holdout (see --retention-4of4).

  python evaluation/power_analysis.py [--results results/demo] [--json FILE]
"""
import json
from pathlib import Path

import numpy as np

from relrl.evaluation.clustered_stats import (
    estimate_variance_model,
    estimate_variance_model_k,
    groups_needed,
    min_detectable,
    power,
)
from relrl.evaluation.results_io import read_result
from relrl.runtime.cli import ArgumentParser, UsageError, run_main
from study import pipeline_config

EFFECT, TARGET_POWER, SEEDS = 0.05, 0.8, 3
DEMO_MASTER_ROWS = 1560
ALPHAS = (0.05, 0.01)
KS = (1, 2, 4, 8)
RETENTION_MODELS = ("sft_warm_start", "grpo_exp7_best", "grpo_exp10_best")


def pairs(path: Path) -> tuple[list[dict], list[dict]]:
    data = read_result(path)
    if data.get("kind") != "pair_result":
        raise UsageError(f"{path}: not a pair result (base and fine-tuned) JSON")
    return data["base"]["results"], data["finetuned"]["results"]


def _samples(record: dict) -> list[int]:
    return [int(c["correct"]) for c in record.get("completions") or [record]]


def components(base: list[dict], ft: list[dict], between_share: float, keep=lambda r: True):
    """Variance model, mean group size, groups and questions on the base/ft records that `keep`
    selects. Records with K >= 2 samples measure the split between sampling noise and real
    differences (estimate_variance_model_k); one-sample records split by `between_share`."""
    chosen = [(b, f) for b, f in zip(base, ft) if keep(b)]
    if len(chosen) < 2:
        raise UsageError("too few records left for the variance estimate")
    diffs = [(b["group"], [y_f - y_b for y_b, y_f in zip(_samples(b), _samples(f))])
             for b, f in chosen]
    if len(diffs[0][1]) > 1:
        model = estimate_variance_model_k(diffs)
    else:
        d = [(g, x[0]) for g, x in diffs]
        v_q = float(np.var([x for _, x in d], ddof=1))
        model = estimate_variance_model(d, (1 - between_share) * v_q)
    groups: dict[str, int] = {}
    for b, _ in chosen:
        groups[b["group"]] = groups.get(b["group"], 0) + 1
    m = len(groups) / sum(1 / n for n in groups.values())
    return model, m, len(groups), len(chosen)


def measured_share(model) -> float:
    """The share of one sample's difference variance that more samples do not shrink."""
    between = model.tau2 + model.omega2
    return between / (between + model.w) if between + model.w > 0 else 0.0


def primary(results: Path, between_share: float, scale: float = 1.0) -> dict:
    base, ft = pairs(results / "eval" / "heldout" / "grpo_exp7_best.json")
    model, m, n_groups, n_q = components(base, ft, between_share)
    n_groups, n_q = round(scale * n_groups), round(scale * n_q)
    rows = []
    for k in KS:
        sd = model.sd(m, k)
        row = {"K": k, "sd_group_diff": sd}
        for a in ALPHAS:
            row[f"groups_needed_alpha_{a}"] = groups_needed(sd, EFFECT, a, TARGET_POWER)
            row[f"power_1_seed_alpha_{a}"] = power(sd, n_groups, EFFECT, a)
            row[f"power_{SEEDS}_seeds_alpha_{a}"] = power(sd, SEEDS * n_groups, EFFECT, a)
            row[f"mde_{SEEDS}_seeds_alpha_{a}"] = min_detectable(sd, SEEDS * n_groups, a, TARGET_POWER)
        rows.append(row)
    split = "measured from K samples" if len(_samples(base[0])) > 1 else "assumed"
    return {"groups_per_seed": n_groups, "questions_per_seed": n_q, "mean_group_size": m,
            "variance_model": model.to_dict(), "split": split,
            "between_share": measured_share(model), "rows": rows}


def retention(results: Path, share_right: float, between_share: float, scale: float = 1.0,
              alpha: float = 0.05) -> dict:
    """Minimum detectable drop on questions screened >= 2/4: measured on the run's retention
    set where it has one (the replication's), else estimated from the held-out mixed records
    screened 2-3/4, the groups screened 4/4 (a share `share_right` of the set, absent from
    those records) assumed to vary alike."""
    measured = (results / "eval" / "retention").is_dir()
    out = {"alpha": alpha, "source": "retention set" if measured else "held-out, screened 2-3/4",
           "models": {}}
    for name in RETENTION_MODELS:
        if measured:
            base, ft = pairs(results / "eval" / "retention" / f"{name}.json")
            model, m, n_groups, n_q = components(base, ft, between_share)
            n_groups_all = round(scale * n_groups)
        else:
            base, ft = pairs(results / "eval" / "heldout" / f"{name}.json")
            model, m, n_groups, n_q = components(base, ft, between_share,
                                                 keep=lambda r: r["base_score"] >= 2)
            n_groups_all = round(scale * n_groups / (1 - share_right))
        rows = []
        for k in KS:
            sd = model.sd(m, k)
            rows.append({"K": k, "sd_group_diff": sd,
                         "mdd_1_seed": min_detectable(sd, n_groups_all, alpha, TARGET_POWER),
                         f"mdd_{SEEDS}_seeds": min_detectable(sd, SEEDS * n_groups_all, alpha,
                                                              TARGET_POWER)})
        out["models"][name] = {"groups_per_seed": n_groups_all, "variance_model": model.to_dict(),
                               "between_share": measured_share(model), "mean_group_size": m,
                               "rows": rows}
    return out


def show(p: dict, r: dict) -> None:
    print(f"Primary: exp7 best vs base, held-out mixed-style questions; {p['questions_per_seed']} "
          f"questions in {p['groups_per_seed']} paraphrase groups per seed (mean group size "
          f"{p['mean_group_size']:.2f}); effect +{100 * EFFECT:.0f} points, power target "
          f"{100 * TARGET_POWER:.0f}%")
    vm = p["variance_model"]
    print(f"  variance components: tau2 {vm['tau2']:.4f}, omega2 {vm['omega2']:.4f}, w {vm['w']:.4f}"
          f" (share that more samples do not shrink: {p['between_share']:.2f}, {p['split']})")
    print(f"  {'K':>2} {'SD(D_g)':>8} {'groups for 80% (a=.05/.01)':>27} "
          f"{'power 1 seed (.05/.01)':>23} {'power 3 seeds (.05/.01)':>24} {'MDE 3 seeds (.05/.01)':>22}")
    for row in p["rows"]:
        a, b = ALPHAS
        print(f"  {row['K']:>2} {row['sd_group_diff']:>8.3f} "
              f"{row[f'groups_needed_alpha_{a}']:>13} / {row[f'groups_needed_alpha_{b}']:<11} "
              f"{100 * row[f'power_1_seed_alpha_{a}']:>10.0f}% / {100 * row[f'power_1_seed_alpha_{b}']:.0f}%      "
              f"{100 * row[f'power_3_seeds_alpha_{a}']:>11.0f}% / {100 * row[f'power_3_seeds_alpha_{b}']:.0f}%      "
              f"{100 * row[f'mde_3_seeds_alpha_{a}']:>8.1f} / {100 * row[f'mde_3_seeds_alpha_{b}']:<.1f} points")
    print(f"\nRetention ({r['source']}): base screened >= 2/4; minimum detectable drop at 80% "
          f"power, alpha {r['alpha']} (two-sided)")
    for name, m in r["models"].items():
        cells = ", ".join(f"K={row['K']}: {100 * row['mdd_1_seed']:.1f} / "
                          f"{100 * row['mdd_3_seeds']:.1f}" for row in m["rows"])
        print(f"  {name:<16} {m['groups_per_seed']} groups per seed, share not shrinking "
              f"{m['between_share']:.2f}; 1 seed / 3 seeds (points): {cells}")


def run_master_rows(results: Path) -> int:
    """The master set's size of the run in `results`: its pipeline.yaml's n_master, or the
    demo's 1560 for a run that predates pipeline.yaml."""
    config = results / "pipeline.yaml"
    return pipeline_config.load(config).n_master if config.is_file() else DEMO_MASTER_ROWS


def parse_args(argv=None):
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default="results/demo", help="a finished demo's results folder")
    p.add_argument("--retention-4of4", type=float, default=0.3,
                   help="share of retention questions screened 4/4 (default 0.3: seed 0's "
                   "holdout has 106 questions at 2-3/4 and about 45 at 4/4)")
    p.add_argument("--between-share", type=float, default=0.5,
                   help="share of the one-sample variance that more samples do not shrink, "
                   "for one-sample records (0.5); K-sample records measure it")
    p.add_argument("--master-rows", type=int, default=None,
                   help="size the sets for a master set of this many rows: the run's groups "
                   "scaled by rows / the run's n_master (its pipeline.yaml; 1560, the demo's, "
                   "for a run without one), e.g. 2800 for the replication")
    p.add_argument("--json", default=None, help="also write the numbers to this file")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    results = Path(args.results)
    if not (results / "eval" / "heldout").is_dir():
        raise UsageError(f"--results: {results}/eval/heldout not found (run demo.py first)")
    if not 0 <= args.retention_4of4 < 1:
        raise UsageError(f"--retention-4of4: must be in [0, 1), got {args.retention_4of4}")
    if not 0 <= args.between_share <= 1:
        raise UsageError(f"--between-share: must be in [0, 1], got {args.between_share}")
    if args.master_rows is not None and args.master_rows <= 0:
        raise UsageError(f"--master-rows: must be > 0, got {args.master_rows}")
    scale = 1.0 if args.master_rows is None else args.master_rows / run_master_rows(results)
    p = primary(results, args.between_share, scale)
    r = retention(results, args.retention_4of4, args.between_share, scale)
    if p["split"] == "assumed":
        print(f"(share of the variance that more samples do not shrink: {args.between_share})")
    show(p, r)
    if args.json:
        Path(args.json).write_text(json.dumps({"primary": p, "retention": r}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run_main(main)
