"""A replication's design as data: its arms, what is compared and claimed, and which parts of
the pooled report it has. The first replication (results/demo-replication, its
PREREGISTRATION.md) and the redone one (issue 30, results/demo-replication-v2) are two values
of `Design`; `for_seeds` picks one from the seeds' own settings."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from study import pipeline_config

Spec = tuple[str, str, str]  # (set, model, against)


@dataclass(frozen=True)
class Claim:
    text: str
    set: str
    model: str
    against: str
    stratum: str | None  # a record filter of groups.strata; None: the whole set
    direction: int  # +1 a gain is claimed, -1 a drop, 0 no drop
    # A difference of changes (study.replication.difference): the change on `stratum` minus
    # that on `minus`, tested alone at `alpha` instead of Holm-corrected with the others
    minus: str | None = None
    alpha: float | None = None


@dataclass(frozen=True)
class Design:
    title: str  # report.md's title, with {seeds}
    primary: Spec
    primary_text: str  # the primary comparison in words, for the report
    primary_column: str  # the primary model's column in the per-seed table
    secondary: tuple[Spec, ...]  # Holm-corrected together
    retention_models: tuple[str, ...]
    models: tuple[str, ...]  # base and every arm: guess margins and mean@k rows
    sampler_runs: tuple[tuple[str, str], ...]  # (uniform run, label), (pass-rate run, label)
    grpo_runs: tuple[str, ...]  # best validation step per run
    sections: tuple[str, ...]  # report.md's sections in order (study.replication.sections)
    primary_alpha: float = 0.01
    secondary_alpha: float = 0.05
    target_gain: float = 0.05  # the primary goal's smallest pooled gain
    target_power: float = 0.8  # for the smallest detectable change of each comparison
    guess_sets: tuple[str, ...] = ("heldout", "retention", "holdout", "ood", "train")
    # parts a design may add; empty or None where it has none
    target_range_models: tuple[str, ...] = ()  # against the base, by target range
    topic_strata: bool = False  # retention split by the SFT warm start's topics
    guess_margin: float | None = None  # the primary model's lead over the best guess, a goal
    goal_source: str = ""  # where that goal was set
    claims: tuple[Claim, ...] = ()
    min_effect: float = 0.05  # smaller changes are not the study's effects (claims.verdict)
    zero_signal_runs: tuple[str, str] | None = None  # (plain GRPO run, dynamic sampling run)
    # the widest 95% interval half-width of the gain on never-trained families, a goal
    transfer_half_width: float | None = None
    mechanism_sets: tuple[str, ...] = ()  # sets with the mechanism tables (study.replication.mechanism)
    # a claim against the base is testable only on a set where the base stands this far above
    # the best guess: at the floor nothing can be lost and a gain is a guess's
    testable_margin: float | None = None
    transfer_sets: tuple[str, ...] = ()  # margins reported whatever they are (third_goals)


CORE_SECTIONS = ("primary", "secondary", "retention", "guess_baselines", "at_k", "waste",
                 "best_steps", "run_time")

FIRST = Design(
    title="Miniature study, replicated (seeds {seeds})",
    primary=("heldout", "GRPO exp7 best", "base"),
    primary_text="GRPO exp7 (best validation checkpoint) against the base on held-out "
                 "mixed-style questions",
    primary_column="exp7 best",
    secondary=(
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
    ),
    retention_models=("SFT warm start", "GRPO exp7 best", "GRPO exp10 best"),
    models=("base", "SFT warm start", "GRPO exp7 best", "GRPO exp7 final", "GRPO exp10 best"),
    sampler_runs=(("exp7", "uniform draws"), ("exp7_passrate", "pass-rate sampler")),
    grpo_runs=("exp7", "exp10", "exp7_passrate"),
    sections=CORE_SECTIONS,
)

PLAIN = "GRPO exp7 plain best"  # exp7 without dynamic sampling, as many generated groups
REDONE = Design(
    title="Miniature study, redone (seeds {seeds})",
    primary=FIRST.primary,
    primary_text=FIRST.primary_text,
    primary_column=FIRST.primary_column,
    # the first replication's comparisons, and plain GRPO against the base and against exp7
    secondary=(*FIRST.secondary, ("heldout", PLAIN, "base"), ("heldout", "GRPO exp7 best", PLAIN)),
    retention_models=FIRST.retention_models,
    models=(*FIRST.models, PLAIN),
    sampler_runs=FIRST.sampler_runs,
    grpo_runs=(*FIRST.grpo_runs, "exp7_plain"),
    sections=(*CORE_SECTIONS, "additions", "target_range", "forgetting", "zero_signal", "claims"),
    target_range_models=FIRST.models[1:] + (PLAIN,),
    topic_strata=True,
    guess_margin=0.10,
    goal_source="issue 30",
    claims=(
        Claim("SFT alone makes the model forget what it knew", "retention", "SFT warm start",
              "base", "other_topics", -1),
        Claim("GRPO after SFT keeps what the model knew", "retention", "GRPO exp7 best", "base",
              None, 0),
        Claim("The SFT warm start makes GRPO gain more", "heldout", "GRPO exp7 best",
              "GRPO exp10 best", None, +1),
        Claim("Dynamic sampling makes GRPO gain more for the same sampling", "heldout",
              "GRPO exp7 best", PLAIN, None, +1),
    ),
    zero_signal_runs=("exp7_plain", "exp7"),
)


EXP10 = "GRPO exp10 best"  # GRPO alone, from the same base as SFT
THIRD = Design(
    title="Miniature study, third design (seeds {seeds})",
    primary=FIRST.primary,
    primary_text=FIRST.primary_text,
    primary_column=FIRST.primary_column,
    secondary=(*REDONE.secondary, ("reworded", "SFT warm start", "base"),
               ("reworded", "GRPO exp7 best", "base"), ("reworded", EXP10, "base")),
    retention_models=FIRST.retention_models,
    models=REDONE.models,
    sampler_runs=FIRST.sampler_runs,
    grpo_runs=REDONE.grpo_runs,
    sections=(*CORE_SECTIONS, "third_goals", "target_range", "forgetting", "transfer",
              "mechanism", "zero_signal", "claims"),
    mechanism_sets=("heldout", "ood", "reworded"),
    testable_margin=0.10,
    transfer_sets=("ood", "reworded"),
    guess_sets=(*FIRST.guess_sets, "reworded"),
    target_range_models=REDONE.target_range_models,
    topic_strata=True,
    guess_margin=0.10,
    goal_source="issue 46",
    claims=(
        Claim("The SFT warm start improves its own topics (the positive control)", "heldout",
              "SFT warm start", "base", "sft_trained", +1),
        Claim("SFT alone makes the model forget what it knew", "retention", "SFT warm start",
              "base", "sft_untrained", -1, minus="sft_trained", alpha=0.01),
        Claim("GRPO keeps what the model knew", "retention", EXP10, "base", "never_trained", 0,
              minus="grpo_trained", alpha=0.01),
        Claim("The SFT warm start makes GRPO gain more", "heldout", "GRPO exp7 best", EXP10,
              None, +1),
        Claim("Dynamic sampling makes GRPO gain more for the same sampling", "heldout",
              "GRPO exp7 best", PLAIN, None, +1),
        Claim("GRPO gains on families it never trained on", "ood", EXP10, "base", None, +1),
        Claim("GRPO's gain holds in wordings the model never saw", "reworded", EXP10, "base",
              "grpo_trained", +1),
    ),
    zero_signal_runs=REDONE.zero_signal_runs,
    transfer_half_width=0.05,
)


def for_seeds(out: Path, seeds: list[int]) -> Design:
    """The design these seeds ran, from the first seed's pipeline.yaml: the third when its
    retention set is apart from the held-out set (retention_disjoint), the redone one when
    plain GRPO ran beside exp7; else (runs older than pipeline.yaml too) the first."""
    settings = out / f"seed-{seeds[0]}" / "pipeline.yaml"
    cfg = pipeline_config.load(settings) if settings.is_file() else None
    if cfg is not None and cfg.retention_disjoint:
        return THIRD
    return REDONE if cfg is not None and cfg.plain_grpo else FIRST
