"""A seed folder's result files as demo.py writes them: eval/<set>/<model>.json pair files
(per-question records of the base and of one fine-tuned model) and pipeline.yaml."""
from __future__ import annotations

from pathlib import Path

from relrl.evaluation.results_io import read_result
from relrl.problems.registry import FAMILIES, expand_sets
from study import pipeline_config


def slug(label: str) -> str:
    """A model's label as its pair file's name: "GRPO exp7 best" -> grpo_exp7_best."""
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


def sft_topics(dirs: dict[int, Path]) -> set[str] | None:
    """The SFT warm start's topics, which every seed's pipeline.yaml must agree on."""
    found = {seed: pipeline_config.load(d / "pipeline.yaml").sft_topics for seed, d in dirs.items()}
    if len(set(found.values())) != 1:
        raise ValueError(f"the seeds' pipeline.yaml name different sft_topics: {found}")
    value = next(iter(found.values()))
    return None if value is None else set(pipeline_config.names(value))


def never_trained(dirs: dict[int, Path]) -> set[str]:
    """The families held out whole (ood_families, or every family of ood_topics), never trained
    on by SFT or GRPO, which every seed's pipeline.yaml must agree on."""
    found = {}
    for seed, d in dirs.items():
        cfg = pipeline_config.load(d / "pipeline.yaml")
        topics = set(pipeline_config.names(cfg.ood_topics))
        found[seed] = frozenset(expand_sets(pipeline_config.names(cfg.ood_families))) | \
            frozenset(name for name, family in FAMILIES.items() if family.topic in topics)
    if len(set(found.values())) != 1:
        raise ValueError(f"the seeds' pipeline.yaml hold out different families: {found}")
    return set(next(iter(found.values())))
