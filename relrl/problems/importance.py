"""Importance measures: Birnbaum (structural sensitivity), Fussell-Vesely (rare-event form),
risk achievement worth.

Formulas: Modarres, Kaminskiy & Krivtsov ch. 4 (importance measures).
"""
from __future__ import annotations

from .base import PROB, Family, enumerate_states, exact, nice, pick, tex
from .fault_trees import (
    TREES,
    cut_lines,
    cut_prob,
    cuts_boolean,
    cuts_sets,
    draw_cuts,
    draw_tree,
    expected_cut_count,
    probs_text,
    tree_check,
    tree_expr,
    tree_gates,
    tree_solve,
)

# (layout in words, number of components, reliability formula, its LaTeX, structure function)
SYSTEMS = (
    ("component 1 in series with the parallel pair of components 2 and 3", 3,
     lambda r: r[0] * (1 - (1 - r[1]) * (1 - r[2])), "R_1[1 - (1 - R_2)(1 - R_3)]",
     lambda s: s[0] and (s[1] or s[2])),
    ("components 1 and 2 in series, with that pair in parallel with component 3", 3,
     lambda r: 1 - (1 - r[0] * r[1]) * (1 - r[2]), "1 - (1 - R_1R_2)(1 - R_3)",
     lambda s: (s[0] and s[1]) or s[2]),
    ("a 2-out-of-3 arrangement of components 1, 2 and 3", 3,
     lambda r: r[0] * r[1] + r[0] * r[2] + r[1] * r[2] - 2 * r[0] * r[1] * r[2],
     "R_1R_2 + R_1R_3 + R_2R_3 - 2R_1R_2R_3", lambda s: sum(s) >= 2),
    ("components 1 and 2 in parallel, in series with components 3 and 4 in parallel", 4,
     lambda r: (1 - (1 - r[0]) * (1 - r[1])) * (1 - (1 - r[2]) * (1 - r[3])),
     "[1 - (1 - R_1)(1 - R_2)][1 - (1 - R_3)(1 - R_4)]",
     lambda s: (s[0] or s[1]) and (s[2] or s[3])),
)


# ---------------------------------------------------------------- Birnbaum

def _draw_birnbaum(rng):
    index = int(rng.integers(0, len(SYSTEMS)))
    n = SYSTEMS[index][1]
    return {"system": index, "rs": tuple(nice(rng, 0.6, 0.98) for _ in range(n)),
            "i": int(rng.integers(1, n + 1))}


def _with(rs, i, value):
    out = list(rs)
    out[i - 1] = value
    return out


def _solve_birnbaum(p):
    _, _, rel, latex, _ = SYSTEMS[p["system"]]
    up, down = rel(_with(p["rs"], p["i"], 1.0)), rel(_with(p["rs"], p["i"], 0.0))
    return up - down, [
        f"R_{{sys}} = {latex}",
        f"With R_{p['i']} = 1: R_{{sys}} = {tex(up)}",
        f"With R_{p['i']} = 0: R_{{sys}} = {tex(down)}",
        f"I_B({p['i']}) = {tex(up)} - {tex(down)} = {tex(up - down)}"]


def _check_birnbaum(p, rng):
    works = SYSTEMS[p["system"]][4]
    h = 1e-3  # R_sys is linear in each R_i, so a central difference is exact

    def rel(x):
        return enumerate_states(_with(p["rs"], p["i"], x), works)

    r = p["rs"][p["i"] - 1]
    return exact((rel(r + h) - rel(r - h)) / (2 * h), "finite-difference derivative of the "
                 "enumerated system reliability", rel=1e-7)


def _rs_text(p):
    return ", ".join(f"R{k + 1} = {r}" for k, r in enumerate(p["rs"]))


BIRNBAUM = Family(
    name="birnbaum", topic="importance", difficulty=2,
    asks="Birnbaum importance of one component in a small series-parallel system",
    check_how="finite-difference derivative of the system reliability found by enumeration",
    draw=_draw_birnbaum, solve=_solve_birnbaum, check=_check_birnbaum, bounds=PROB,
    phrasings=(
        lambda p: (f"A system consists of {SYSTEMS[p['system']][0]}. Component reliabilities "
                   f"are {_rs_text(p)}. Find the Birnbaum importance of component {p['i']}."),
        lambda p: (f"Compute the partial derivative of system reliability with respect to R"
                   f"{p['i']} for {SYSTEMS[p['system']][0]}, where {_rs_text(p)} "
                   f"(independent components)."),
        lambda p: (f"Reliabilities: {_rs_text(p)}. The layout is {SYSTEMS[p['system']][0]}. "
                   f"What is the probability that component {p['i']} is critical, i.e. its "
                   f"Birnbaum importance?"),
    ),
)


# ---------------------------------------------------------------- Fussell-Vesely

def _draw_fv(rng):
    p = draw_cuts(rng, (3, 4), 0.001, 0.05)
    p["event"] = pick(rng, [e for e, _ in p["q"]])
    return p


def _solve_fv(p):
    q, e = dict(p["q"]), p["event"]
    total = sum(cut_prob(c, q) for c in p["cuts"])
    mine = [c for c in p["cuts"] if e in c]
    part = sum(cut_prob(c, q) for c in mine)
    return part / total, [
        *cut_lines(p["cuts"], q),
        f"Cut sets containing {e}: {cuts_sets(mine)}, sum = {tex(part)}",
        f"P(TOP) \\approx \\sum P(C_i) = {tex(total)}",
        f"FV({e}) = {tex(part)}/{tex(total)} = {tex(part / total)}"]


def _check_fv(p, rng):
    q, e = dict(p["q"]), p["event"]
    part = expected_cut_count(p["cuts"], q, weight=lambda c: 1.0 if e in c else 0.0)
    return exact(part / expected_cut_count(p["cuts"], q),
                 "enumeration: expected number of occurring cut sets with and without the event")


FUSSELL_VESELY = Family(
    name="fussell_vesely", topic="importance", difficulty=3,
    asks="Fussell-Vesely importance of a basic event (rare-event approximation)",
    check_how="enumerate event states: expected occurring cut sets containing the event / all",
    draw=_draw_fv, solve=_solve_fv, check=_check_fv, bounds=PROB,
    phrasings=(
        lambda p: (f"A system has minimal cut sets {cuts_sets(p['cuts'])} with independent "
                   f"basic events {probs_text(p['q'])}. Using the rare-event approximation, "
                   f"find the Fussell-Vesely importance of event {p['event']}."),
        lambda p: (f"TOP = {cuts_boolean(p['cuts'])}; {probs_text(reversed(p['q']))}. What "
                   f"fraction of the top-event probability (rare-event approximation) comes from "
                   f"cut sets that contain {p['event']}?"),
        lambda p: (f"Compute FV({p['event']}), the Fussell-Vesely measure, for a fault tree "
                   f"whose minimal cut sets are {cuts_sets(p['cuts'])}, given "
                   f"{probs_text(p['q'])}. Sum cut set probabilities as in the rare-event "
                   f"approximation."),
    ),
)


# ---------------------------------------------------------------- risk achievement worth

def _draw_raw(rng):
    p = draw_tree(rng)
    p["event"] = pick(rng, [e for e, _ in p["q"]])
    return p


def _solve_raw(p):
    tree, q = TREES[p["tree"]], dict(p["q"])
    base, base_lines = tree_solve(tree, q)
    worst, worst_lines = tree_solve(tree, {**q, p["event"]: 1.0})
    return worst / base, [
        "Baseline:", *base_lines,
        f"With P({p['event']}) = 1:", *worst_lines,
        f"RAW({p['event']}) = {tex(worst)}/{tex(base)} = {tex(worst / base)}"]


RAW = Family(
    name="risk_achievement_worth", topic="importance", difficulty=3,
    asks="risk achievement worth of a basic event in a small fault tree",
    check_how="brute-force enumeration with and without the event forced to occur",
    draw=_draw_raw, solve=_solve_raw,
    phrasings=(
        lambda p: (f"A fault tree has TOP = {tree_expr(TREES[p['tree']])} with independent "
                   f"basic events {probs_text(p['q'])}. Find the risk achievement worth of "
                   f"event {p['event']}."),
        lambda p: (f"By what factor does the top-event probability grow if basic event "
                   f"{p['event']} is certain to occur? Gates: {tree_gates(TREES[p['tree']])}; "
                   f"{probs_text(reversed(p['q']))}."),
        lambda p: (f"Compute RAW({p['event']}) = P(TOP | {p['event']} occurs)/P(TOP) for "
                   f"TOP = {tree_expr(TREES[p['tree']])}, where {probs_text(p['q'])}."),
    ),
    check=lambda p, rng: exact(
        tree_check(TREES[p["tree"]], {**dict(p["q"]), p["event"]: 1.0})
        / tree_check(TREES[p["tree"]], dict(p["q"])), "state enumeration, event forced on"),
)

FAMILIES = [BIRNBAUM, FUSSELL_VESELY, RAW]
