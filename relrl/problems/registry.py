"""The one registry of problem families: name -> Family, plus selection by name, topic and
difficulty. Every family module lists its families in FAMILIES; adding one means adding it there.
"""
from __future__ import annotations

from . import (
    accelerated,
    availability,
    basic,
    bayesian,
    common_cause,
    distributions,
    estimation,
    fault_trees,
    growth,
    importance,
    spares,
    stress_strength,
    system_reliability,
)
from .base import Family

MODULES = (basic, distributions, system_reliability, availability, estimation, bayesian,
           accelerated, stress_strength, fault_trees, importance, common_cause, growth, spares)


def _build() -> dict[str, Family]:
    registry: dict[str, Family] = {}
    for module in MODULES:
        for family in module.FAMILIES:
            if family.name in registry:
                raise RuntimeError(f"two families named {family.name!r}")
            registry[family.name] = family
    return registry


FAMILIES: dict[str, Family] = _build()
TOPICS: tuple[str, ...] = tuple(dict.fromkeys(f.topic for f in FAMILIES.values()))


def select(families=None, topics=None, difficulties=None) -> list[Family]:
    """Families matching every given filter, in registry order. Unknown names raise ValueError."""
    unknown = sorted(set(families or ()) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown family {', '.join(unknown)} (known: {', '.join(FAMILIES)})")
    unknown = sorted(set(topics or ()) - set(TOPICS))
    if unknown:
        raise ValueError(f"unknown topic {', '.join(unknown)} (known: {', '.join(TOPICS)})")
    chosen = [f for f in FAMILIES.values()
              if (not families or f.name in families)
              and (not topics or f.topic in topics)
              and (not difficulties or f.difficulty in difficulties)]
    if not chosen:
        raise ValueError("no family matches the given --families/--topics/--difficulty")
    return chosen
