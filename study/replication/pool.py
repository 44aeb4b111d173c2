"""pooled.json: every number of a design's report, computed from its seed folders' JSON.

Each comparison is paired and over paraphrase groups (study.replication.groups). The core every
design has: one primary comparison with its goal, secondary ones Holm-corrected together,
retention accuracies, waste, best steps, run time, guess baselines and mean@k; then the parts
the design names (by target range, forgetting by topic, the guess-margin goal, claims, updates
without signal). The keys keep the order the committed files have."""
from __future__ import annotations

from pathlib import Path

from relrl.evaluation.stats import holm
from study.replication import baselines, runs
from study.replication.claims import claims, verdict
from study.replication.design import Design
from study.replication.groups import accuracy, comparison, strata
from study.replication.seed_files import seed_dirs, sft_topics


def pooled_results(design: Design, root: Path, seeds: list[int]) -> dict:
    dirs = seed_dirs(root, seeds)

    def compare(set_name, model, against, keep=None):
        return comparison(dirs, set_name, model, against, keep, design.secondary_alpha,
                          design.target_power)

    primary = compare(*design.primary)
    p = primary["pooled"]
    primary["goal_met"] = bool(p["delta"] >= design.target_gain and p["p"] < design.primary_alpha
                               and all(s["delta"] > 0 for s in primary["per_seed"].values()))
    secondary = [compare(*spec) for spec in design.secondary]
    for row, adjusted in zip(secondary, holm([s["pooled"]["p"] for s in secondary])):
        row["pooled"]["p_holm"] = adjusted
    retention = {m: accuracy(dirs, "retention", m) for m in ("base", *design.retention_models)}
    pooled = {"seeds": seeds, "primary_alpha": design.primary_alpha,
              "secondary_alpha": design.secondary_alpha, "primary": primary,
              "secondary": secondary, "retention_accuracy": retention,
              "waste": runs.waste(dirs, design.sampler_runs),
              "best_steps": runs.best_steps(dirs, design.grpo_runs), "run_time": runs.run_time(dirs),
              "guess_baselines": baselines.guess_baselines(dirs, design.guess_sets, design.models),
              "at_k": baselines.at_k(dirs, design.guess_sets, design.models)}
    filters = strata(sft_topics(dirs) if design.topic_strata else None)
    if design.target_range_models:
        pooled["by_target_range"] = {
            model: {name: compare(design.primary[0], model, "base", filters[name])["pooled"]
                    for name in ("high_range", "rest_range")}
            for model in design.target_range_models}
    if design.topic_strata:
        pooled["forgetting"] = {
            name: {model: compare("retention", model, "base", filters[name])["pooled"]
                   for model in design.retention_models}
            for name in ("sft_topics", "other_topics") if name in filters}
    if design.guess_margin is not None:
        set_name, model, _ = design.primary
        margin = pooled["guess_baselines"].get(set_name, {}).get("margins", {}).get(model)
        primary["guess_margin"] = margin
        primary["verdict"] = verdict(p, +1, design.primary_alpha, design.min_effect, "p")
        # the key the redone design's files (and paper/build_tables.py) know it by
        primary["v2_goal_met"] = bool(primary["goal_met"] and margin is not None
                                      and margin >= design.guess_margin)
    if design.claims:
        pooled["claims"] = claims(dirs, design, filters)
    if design.zero_signal_runs:
        pooled["plain_zero_signal"] = runs.zero_signal(dirs, *design.zero_signal_runs)
    return pooled
