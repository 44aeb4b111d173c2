"""Each of a design's claims reproduced, refuted or not settled, by a rule fixed before its
confirmatory seeds run."""
from __future__ import annotations

from pathlib import Path

from relrl.evaluation.stats import holm
from study.replication.difference import difference
from study.replication.groups import comparison


def verdict(c: dict, direction: int, alpha: float, min_effect: float,
            p_key: str = "p_holm") -> str:
    """A claim's mark from its pooled comparison. A gain or drop (direction +1 or -1) is
    reproduced when the test rejects in that direction, refuted when it rejects the other way
    or the 95% interval rules out a change of `min_effect` that way; "no drop" (0) is
    reproduced when the interval rules out a drop of `min_effect` and refuted when the test
    finds a drop. Otherwise the data do not settle it."""
    significant = c[p_key] < alpha
    if direction == 0:
        if significant and c["delta"] < 0:
            return "refuted"
        return "reproduced" if c["ci_low"] > -min_effect else "not settled"
    if significant:
        return "reproduced" if c["delta"] * direction > 0 else "refuted"
    far_end = c["ci_high"] if direction > 0 else -c["ci_low"]
    return "refuted" if far_end < min_effect else "not settled"


def claims(dirs: dict[int, Path], design, filters: dict, guesses: dict | None = None) -> list[dict]:
    """The design's claims, Holm-corrected together at its secondary alpha; a claim on a
    stratum the seeds do not define is not testable, nor (with the design's testable_margin) a
    claim against the base on a set where the base is within that margin of the best guess
    (`guesses`: the pooled guess baselines)."""
    rows = []
    for claim in design.claims:
        if claim.stratum is not None and claim.stratum not in filters:
            rows.append({"claim": claim.text, "verdict": "not testable here",
                         "why": f"no {claim.stratum} stratum (sft_topics not set)"})
            continue
        floor = at_the_floor(claim, design, guesses or {})
        if floor is not None:
            rows.append({"claim": claim.text, "verdict": "not testable here", "why": floor})
            continue
        if claim.minus is not None:
            rows.append(difference_claim(dirs, claim, filters, design))
            continue
        row = comparison(dirs, claim.set, claim.model, claim.against,
                         keep=filters.get(claim.stratum), alpha=design.secondary_alpha,
                         power=design.target_power)
        rows.append({"claim": claim.text, "stratum": claim.stratum or "all",
                     "direction": claim.direction, **row})
    tested = [r for r in rows if "pooled" in r and "minus" not in r]
    for row, adjusted in zip(tested, holm([r["pooled"]["p"] for r in tested])):
        row["pooled"]["p_holm"] = adjusted
        row["verdict"] = verdict(row["pooled"], row["direction"], design.secondary_alpha,
                                 design.min_effect)
    return rows


def at_the_floor(claim, design, guesses: dict) -> str | None:
    """Why a claim against the base cannot be tested on its set (the base's margin over the
    best guess below the design's testable_margin), or None."""
    margin = guesses.get(claim.set, {}).get("margins", {}).get("base")
    if design.testable_margin is None or claim.against != "base" or margin is None \
            or margin >= design.testable_margin:
        return None
    return (f"the base stands {100 * margin:+.1f} points from the best guess on {claim.set}, "
            f"under the {100 * design.testable_margin:.0f} a claim needs")


def difference_claim(dirs: dict[int, Path], claim, filters: dict, design) -> dict:
    """A claim on a difference of changes, tested alone at its own alpha, its interval at
    1 - alpha, so that "decided" means decided at that level."""
    c = difference(dirs, claim.set, claim.model, claim.against, filters[claim.stratum],
                   filters[claim.minus], alpha=claim.alpha, power=design.target_power,
                   confidence=1 - claim.alpha)
    pooled = {**c, "p_holm": c["p"]}  # alone: verdict reads p_holm
    return {"claim": claim.text, "stratum": f"{claim.stratum} minus {claim.minus}",
            "minus": claim.minus, "direction": claim.direction, "set": claim.set,
            "model": claim.model, "against": claim.against, "pooled": pooled,
            "verdict": verdict(pooled, claim.direction, claim.alpha, design.min_effect)}
