"""The demo pipeline's settings (demo.py): one dataclass whose fields carry their help, read
from a YAML recipe (recipes/demo/*.yaml) and written back beside each run as pipeline.yaml.

A recipe names every setting without a default; a key the schema does not know, a value of the
wrong type or out of range, and a key given twice are refused with one line naming the file,
the line and the key (UsageError, exit status 2), before any stage runs: a typo must not cost
an hour of screening before a script refuses it.

The values reach the scripts as the text of their flags, so a recipe that holds the same values
makes the same commands, and the stage ledger (study.stage_inputs) keeps finished stages done.
"""
from __future__ import annotations

import difflib
import math
import os
import textwrap
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import yaml

from relrl.data.dataset_io import atomic_write_text
from relrl.problems.registry import FAMILIES, FAMILY_SETS, TOPICS, expand_sets, select
from relrl.rl.dynamic_sampling import INFORMATIVE_BY, SCHEMES
from relrl.runtime.cli import UsageError
from relrl.tools.protocol import TOOL_CHOICES
from relrl.untrusted import (MAX_YAML_BYTES, UntrustedInputError, compose_yaml, construct_yaml,
                             read_text_file)


def _setting(help: str, default: Any = MISSING, check: Callable[[Any], str | None] | None = None):
    """A field with its help text and an optional check returning what is wrong, or None."""
    return field(default=default, metadata={"help": help, "check": check})


def _at_least(minimum: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= minimum else f"must be >= {minimum}"


def _at_least_or_null(minimum: int) -> Callable[[Any], str | None]:
    return lambda v: None if v is None or v >= minimum else f"must be >= {minimum} or null"


def _fraction(v: float) -> str | None:
    return None if 0 < v < 1 else "must lie strictly between 0 and 1"


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be > 0"


def names(v: str | None) -> list[str]:
    """The names of a comma-separated setting."""
    return [t.strip() for t in (v or "").split(",") if t.strip()]


def _topics(v: str) -> str | None:
    given = names(v)
    unknown = [t for t in given if t not in TOPICS]
    if not given:
        return "must name at least one topic"
    return f"unknown topic {', '.join(unknown)} (known: {', '.join(TOPICS)})" if unknown else None


def _families(v: str) -> str | None:
    given = names(v)
    unknown = [n for n in given if n not in FAMILIES and n not in FAMILY_SETS]
    if not given:
        return "must name at least one family or family set"
    return (f"unknown family {', '.join(unknown)} (family sets: {', '.join(FAMILY_SETS)}; "
            "families: generators/FAMILIES.md)") if unknown else None


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: None if v is None or v in choices else f"must be one of {', '.join(choices)}"


MODELS = ("tiny", "tiny-tool")  # the built-in models a pipeline can start from
SFT_FORMS = ("tool", "prose")
EVAL_SETS = ("train", "holdout", "ood", "heldout", "retention", "reworded")  # study.demo_stages.evaluation


def _eval_sets(v: str) -> str | None:
    given = names(v)
    unknown = [n for n in given if n not in EVAL_SETS]
    if not given:
        return "must name at least one set"
    return f"unknown set {', '.join(unknown)} (sets: {', '.join(EVAL_SETS)})" if unknown else None


@dataclass(frozen=True, kw_only=True)  # keyword-only: a setting with a default may come first
class PipelineConfig:
    """Sizes and rates of one demo pipeline. The flag each value becomes is named in its help."""

    # data: generators/build_dataset.py generate, then split
    n_master: int = _setting("master rows generated, before paraphrasing (build_dataset.py "
                             "generate --n)", check=_at_least(1))
    paraphrases: int = _setting("paraphrases per master row (--paraphrases)", check=_at_least(1))
    val_frac: float = _setting("share of paraphrase groups held for validation (split "
                               "--val-frac)", check=_fraction)
    holdout_frac: float = _setting("share of groups held out as test sets (split --holdout-frac)",
                                   check=_fraction)
    ood_topics: str | None = _setting("comma-separated topics held out whole as the "
                                      "out-of-distribution set, never trained on (split "
                                      "--ood-topics); null: ood_families names them",
                                      default=None, check=_topics)
    # screening and every sampling stage
    screen_samples: int = _setting("samples per question when screening the base model into "
                                   "mixed and non-mixed (screen_v4.py --samples)",
                                   check=_at_least(1))
    max_new_tokens: int = _setting("new tokens per completion in screening, GRPO and evaluation "
                                   "(--max-new-tokens)", check=_at_least(1))
    # SFT warm start: training/sft_qwen3_kfold.py
    sft_epochs: int = _setting("SFT epochs on the non-mixed questions (--epochs)",
                               check=_at_least(1))
    sft_lr: float = _setting("SFT learning rate (--learning-rate)", check=_positive)
    # GRPO: training/grpo_exp7_dynamic.py and grpo_exp10_nosft.py
    grpo_steps: int = _setting("useful GRPO steps per run (--max-useful-steps)",
                               check=_at_least(1))
    grpo_val_every: int = _setting("validate and checkpoint every this many useful steps "
                                   "(--val-every and --save-every)", check=_at_least(1))
    grpo_lr: float = _setting("learning rate of exp10, a fresh adapter (--learning-rate)",
                              check=_positive)
    grpo_warm_lr: float = _setting("learning rate of the runs warm-started from the SFT adapter "
                                   "(exp7, exp7 with the pass-rate sampler; --learning-rate)",
                                   check=_positive)
    grpo_grad_accum: int = _setting("groups per GRPO update (--grad-accum)", check=_at_least(1))
    # The replicated study's additions; each default leaves its flag off the commands
    eval_samples: int = _setting("samples per question on the held-out mixed-style and retention "
                                 "sets (evaluation --samples); above 1 the held-out mixed-style "
                                 "set is sampled on its own instead of taken from the holdout's "
                                 "results", default=1, check=_at_least(1))
    retention_samples: int | None = _setting(
        "samples per question on the retention set (evaluation --samples); null: eval_samples. "
        "The retention set is the largest sampled set and a drop is tested over its many groups, "
        "so fewer samples there buy more on the held-out mixed-style set", default=None,
        check=_at_least_or_null(1))
    val_samples: int = _setting("samples per validation question in GRPO (--val-samples)",
                                default=1, check=_at_least(1))
    eval_seed_offset: int = _setting("added to the seed for evaluation, so sets chosen on "
                                     "screening samples are measured on fresh ones", default=0,
                                     check=_at_least(0))
    retention_min_score: int | None = _setting(
        "build a retention set of the holdout questions the base screened right at least this "
        "many times, and evaluate on it; null: no retention set", default=None,
        check=_at_least_or_null(1))
    pass_rate_scheme: str | None = _setting(
        "the pass-rate sampler's scheme in exp7 with the sampler (--pass-rate-scheme); null: "
        "the trainer's default", default=None, check=_one_of(SCHEMES))
    informative_by: str | None = _setting(
        "which groups GRPO trains on (--informative-by); null: the trainer's default",
        default=None, check=_one_of(INFORMATIVE_BY))
    tools: str = _setting(
        "none: the study's single-turn answers; calculator: screening, SFT, GRPO and evaluation "
        "declare the calculator and answer the model's calls between turns (--tools; the DPO "
        "baseline stays without)", default="none", check=_one_of(TOOL_CHOICES))
    # The redone replication's additions (issue 30); each default leaves the pipeline as it was
    model: str = _setting(
        "the built-in model every stage starts from (--model): tiny, which cannot compute, or "
        "tiny-tool, which solves its families' problems with the calculator (tools: "
        "calculator)", default="tiny", check=_one_of(MODELS))
    families: str | None = _setting(
        "comma-separated families or family sets (tiny-tool) the data is drawn from "
        "(build_dataset.py generate --families); null: every family", default=None,
        check=_families)
    sft_topics: str | None = _setting(
        "the SFT warm start trains on the non-mixed questions of these topics only, so that a "
        "forgetting check on the other topics can fail; null: every topic", default=None,
        check=_topics)
    sft_form: str = _setting(
        "the SFT warm start's worked solutions with tools on: tool (the calculator call the "
        "model was built on) or prose (the generator's written-out arithmetic, under the same "
        "prompt: data unlike what tiny-tool knows, as the study's SFT data was unlike Qwen3's)",
        default="tool", check=_one_of(SFT_FORMS))
    # Issue 46's additions; each default leaves the pipeline as it was
    sft_steps: int | None = _setting(
        "the SFT warm start's dose in optimiser steps (--max-steps), the same whatever the "
        "number of its questions; null: sft_epochs passes over them", default=None,
        check=_at_least_or_null(1))
    plain_grpo: bool = _setting(
        "also run exp7 as plain GRPO (--dynamic-sampling off: every generated group trains), "
        "after exp7 and for as many groups as exp7 generated (its total_attempts), so the two "
        "cost the same sampling", default=False)
    matched_arms: bool = _setting(
        "exp10's fresh adapter takes the SFT adapter's rank and alpha and the warm-started runs' "
        "learning rate (grpo_warm_lr; --lora-r, --lora-alpha), so exp7 and exp10 differ in the "
        "warm start alone; false: exp10 keeps its own (r 32, alpha 32, grpo_lr)", default=False)
    # The first demo's (`make demo`); each default leaves the pipeline as it was
    warm_start: bool = _setting(
        "false: no SFT warm start; stage train runs GRPO exp10 alone (a fresh adapter on the "
        "base) and the evaluation compares it alone with the base", default=True)
    eval_sets: str | None = _setting(
        "comma-separated sets evaluated and reported (train, holdout, ood, heldout, retention, "
        "reworded); null: every set the other settings make", default=None, check=_eval_sets)
    # The third miniature's (issue 46); each default leaves the pipeline as it was
    ood_families: str | None = _setting(
        "comma-separated families held out whole as the out-of-distribution set, never trained "
        "on by SFT or GRPO (split --ood-families), instead of ood_topics: several families of "
        "several topics, so transfer is not one topic's", default=None, check=_families)
    exclude_pretraining: bool = _setting(
        "draw no problem the built-in model was pretrained on (build_dataset.py generate "
        "--exclude-pretraining MODEL), so no test question is one of its pretraining rows",
        default=False)
    reworded_rows: int | None = _setting(
        "rows of a further test set phrased only in wordings the built-in model never saw in "
        "pretraining (build_dataset.py generate --wording new), drawn apart from the master "
        "set and evaluated as set reworded; null: no such set", default=None,
        check=_at_least_or_null(1))
    retention_disjoint: bool = _setting(
        "the retention set leaves out every paraphrase group of the held-out mixed-style set, "
        "and takes in the out-of-distribution questions the base screened right as often (the "
        "ood split is screened too), so forgetting is measured apart from the primary set, on "
        "trained and never-trained families alike", default=False)

    def to_yaml(self, header: str = "") -> str:
        """Every setting with its help as a comment; `load` reads it back equal."""
        lines = [f"# {line}" if line else "#" for line in header.splitlines()]
        for f in fields(self):
            lines += ["", *textwrap.wrap(f.metadata["help"], 96, initial_indent="# ",
                                         subsequent_indent="# ")]
            lines.append(yaml.safe_dump({f.name: getattr(self, f.name)},
                                        default_flow_style=False).strip())
        return "\n".join(lines).lstrip("\n") + "\n"

    def changes_from(self, other: PipelineConfig) -> list[str]:
        """`key: old -> new` for every setting that differs from `other`."""
        mine, theirs = asdict(self), asdict(other)
        return [f"{k}: {theirs[k]} -> {v}" for k, v in mine.items() if theirs[k] != v]


def load(path: str | os.PathLike) -> PipelineConfig:
    """A recipe checked against the schema; UsageError naming file, line and key otherwise."""
    path = Path(path)
    try:
        text = read_text_file(path, max_bytes=MAX_YAML_BYTES)
    except UntrustedInputError as exc:
        raise UsageError(f"{path}: cannot read the recipe ({exc.problem})") from None
    try:  # relrl.untrusted: aliases refused, size, nesting and integers bounded
        node = compose_yaml(text, str(path), first_line=1)
    except UntrustedInputError as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(node, yaml.MappingNode):
        raise UsageError(f"{path}: a recipe is a mapping of settings (key: value), one a line")
    schema = {f.name: f for f in fields(PipelineConfig)}
    hints = typing.get_type_hints(PipelineConfig)
    values: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key, line = key_node.value, key_node.start_mark.line + 1
        if not isinstance(key_node, yaml.ScalarNode):
            raise UsageError(f"{path}:{line}: a key is a setting's name, not a list or mapping")
        where = f"{path}:{line}: {key[:60]}"
        if key not in schema:
            near = difflib.get_close_matches(key[:60], schema, n=1)
            hint = f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(schema)})"
            raise UsageError(f"{path}:{line}: unknown key {key[:60]!r}{hint}")
        if key in values:
            raise UsageError(f"{where}: given twice")
        if not isinstance(value_node, yaml.ScalarNode):
            raise UsageError(f"{where}: expected a single value, got a list or mapping")
        try:
            value = construct_yaml(value_node, str(path), first_line=1)
        except UntrustedInputError as exc:
            raise UsageError(f"{exc.where}: {key}: {exc.problem}") from None
        value = _typed(value, hints[key], where)
        problem = schema[key].metadata["check"] and value is not None and \
            schema[key].metadata["check"](value)
        if problem:
            raise UsageError(f"{where}: {problem}, got {value!r}")
        values[key] = value
    missing = [name for name, f in schema.items() if f.default is MISSING and name not in values]
    if missing:
        raise UsageError(f"{path}: missing {', '.join(missing)} (every setting without a default "
                         "is given; see study/pipeline_config.py)")
    config = PipelineConfig(**values)
    if config.val_frac + config.holdout_frac >= 1:
        raise UsageError(f"{path}: val_frac + holdout_frac must be < 1, leaving groups to train "
                         f"on, got {config.val_frac} + {config.holdout_frac}")
    if config.retention_min_score is not None and config.retention_min_score > config.screen_samples:
        raise UsageError(f"{path}: retention_min_score {config.retention_min_score} is more than "
                         f"screen_samples {config.screen_samples}: no question could qualify")
    _check_combination(path, config)
    return config


def _check_combination(path: Path, config: PipelineConfig) -> None:
    """Settings each valid alone that together leave a stage nothing to do."""
    if config.sft_form == "prose" and config.tools == "none":
        raise UsageError(f"{path}: sft_form prose is the worked solutions without the calculator "
                         "when tools are on; with tools: none every SFT solution is prose already")
    if config.model == "tiny-tool" and config.tools != "calculator":
        raise UsageError(f"{path}: model tiny-tool answers through the calculator: set tools: "
                         f"calculator (got {config.tools})")
    if (config.ood_topics is None) == (config.ood_families is None):
        raise UsageError(f"{path}: give one of ood_topics and ood_families (the families or "
                         "topics held out whole), not both or neither")
    families = select(expand_sets(names(config.families)) or None)
    held_out = set(expand_sets(names(config.ood_families)))
    trained = {f.topic for f in families if f.name not in held_out} - set(names(config.ood_topics))
    if not trained:
        key = "ood_topics" if config.ood_topics else "ood_families"
        raise UsageError(f"{path}: {key} {getattr(config, key)} hold out every topic of the "
                         "families: nothing is left to train on")
    if config.retention_disjoint and config.retention_min_score is None:
        raise UsageError(f"{path}: retention_disjoint needs retention_min_score (the retention "
                         "set is built from it)")
    lacking = [f.name for f in families if not f.new_phrasings]
    if config.reworded_rows is not None and lacking:
        raise UsageError(f"{path}: reworded_rows needs families that all have new wordings "
                         f"(families: tiny-tool); {len(lacking)} of the recipe's have none, "
                         f"{lacking[0]} among them")
    if not config.warm_start:
        needs_sft = [k for k in ("sft_topics", "plain_grpo", "matched_arms")
                     if getattr(config, k) not in (None, False)]
        if needs_sft:
            raise UsageError(f"{path}: {', '.join(needs_sft)} need the SFT warm start, which "
                             "warm_start: false leaves out")
    chosen = set(names(config.eval_sets))
    if "heldout" in chosen and "holdout" not in chosen and config.eval_samples == 1:
        raise UsageError(f"{path}: eval_sets heldout without holdout needs eval_samples above 1 "
                         "(with one sample the held-out mixed-style set is taken from the "
                         "holdout's results)")
    if "reworded" in chosen and config.reworded_rows is None:
        raise UsageError(f"{path}: eval_sets reworded needs reworded_rows (the reworded set is "
                         "generated with it)")
    if "retention" in chosen and config.retention_min_score is None:
        raise UsageError(f"{path}: eval_sets retention needs retention_min_score (the retention "
                         "set is built from it)")
    if config.sft_topics is not None and not set(names(config.sft_topics)) & trained:
        raise UsageError(f"{path}: sft_topics {config.sft_topics} name none of the trained "
                         f"topics ({', '.join(sorted(trained))}): SFT would have no question")


def _typed(value: Any, hint: Any, where: str) -> Any:
    """`value` as the field's type, or UsageError. An integer is a float's value too, and so is
    a string such as 2e-4, which YAML 1.1 (PyYAML) reads as text for want of a decimal point."""
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None:
        if type(None) in allowed:
            return None
        raise UsageError(f"{where}: a value is needed here (null is not allowed)")
    if bool in allowed:
        if isinstance(value, bool):
            return value
        raise UsageError(f"{where}: expected true or false, got {value!r}")
    if int in allowed and isinstance(value, int) and not isinstance(value, bool):
        return value
    if float in allowed and not isinstance(value, bool):
        number = value
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
        if isinstance(number, (int, float)) and math.isfinite(number):
            return float(number)
    if str in allowed and isinstance(value, str):
        return value
    names = " or ".join({int: "an integer", float: "a number", str: "text",
                         type(None): "null"}[t] for t in allowed)
    raise UsageError(f"{where}: expected {names}, got {value!r}")


def write(path: Path, config: PipelineConfig, header: str = "") -> None:
    """pipeline.yaml, written whole then renamed, so a kill never leaves half a recipe."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, config.to_yaml(header))
