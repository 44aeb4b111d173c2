"""System reliability: series, parallel, series-parallel, k-out-of-n, bridge, standby.

Formulas: Modarres, Kaminskiy & Krivtsov ch. 4; Ebeling ch. 6-7 (standby with switch reliability).
"""
from __future__ import annotations

import math

import numpy as np

from .base import (
    MC_N,
    PROB,
    Family,
    enumerate_states,
    exact,
    integrate_tail,
    mc_fraction,
    nice,
    num,
    pick,
    tex,
    txt,
)

PARTS = ("pump", "valve", "motor", "controller", "sensor", "power supply", "fan", "filter")


def _names(rng, n):
    order = rng.permutation(len(PARTS))[:n]
    return tuple(PARTS[i] for i in order)


def _product(xs):
    out = 1.0
    for x in xs:
        out *= x
    return out


def _paren(values):
    return "".join(f"({v})" for v in values)


# ---------------------------------------------------------------- series (exponential parts)

def _draw_series(rng):
    n = int(rng.integers(2, 6))
    lams = tuple(nice(rng, 1e-6, 2e-4) for _ in range(n))
    total = sum(lams)
    return {"lams": lams, "t": nice(rng, 0.02 / total, 1.5 / total), "_names": _names(rng, n)}


def _solve_series(p):
    total = sum(p["lams"])
    x = total * p["t"]
    return math.exp(-x), [
        f"\\lambda_s = {' + '.join(tex(v) for v in p['lams'])} = {tex(total)} per hour",
        f"R_s = e^{{-\\lambda_s t}} = e^{{-{tex(total)} \\times {txt(p['t'])}}} = e^{{-{tex(x)}}}"
        f" = {tex(math.exp(-x))}"]


def _expr_series(p):
    return f"exp(-({' + '.join(num(v) for v in p['lams'])})*{num(p['t'])})"


SERIES = Family(
    name="series_system", topic="system_reliability", difficulty=1,
    expression=_expr_series,
    asks="reliability of a series system of exponential components for a mission time",
    check_how="simulate component lifetimes; the system life is their minimum",
    draw=_draw_series, solve=_solve_series, bounds=PROB,
    phrasings=(
        lambda p: (f"A system consists of {len(p['lams'])} components in series with constant "
                   f"failure rates " + ", ".join(txt(v) for v in p["lams"]) + " per hour. Find "
                   f"the system reliability for {txt(p['t'])} hours."),
        lambda p: ("Failure rates in failures per million hours: " + "; ".join(
                   f"{n}: {txt(v * 1e6)}" for n, v in zip(p["_names"], p["lams"]))
                   + f". All parts are needed. What is the probability the unit runs "
                   f"{txt(p['t'], True)} hours without failure?"),
        lambda p: ("An assembly fails if any of its parts fails: " + ", ".join(
                   f"a {n} (lambda = {txt(v)}/h)" for n, v in zip(p["_names"], p["lams"]))
                   + f". Assuming exponential lives, compute R(t) for t = {txt(p['t'])} h."),
    ),
    check=lambda p, rng: mc_fraction(np.min(
        rng.exponential(1 / np.array(p["lams"]), (MC_N, len(p["lams"]))), axis=1) > p["t"]),
)


# ---------------------------------------------------------------- active parallel

def _draw_parallel(rng):
    n = int(rng.integers(2, 4))
    return {"rs": tuple(nice(rng, 0.6, 0.98) for _ in range(n)), "_names": _names(rng, 1)}


def _solve_parallel(p):
    q = _product(1 - r for r in p["rs"])
    return 1 - q, [f"Q = \\prod (1 - R_i) = {_paren(tex(1 - r) for r in p['rs'])} = {tex(q)}",
                   f"R = 1 - Q = {tex(1 - q)}"]


def _expr_parallel(p):
    return "1 - " + "*".join(f"(1 - {num(r)})" for r in p["rs"])


PARALLEL = Family(
    name="parallel_active", topic="system_reliability", difficulty=1,
    expression=_expr_parallel,
    asks="reliability of an active parallel (redundant) system",
    check_how="brute-force enumeration of all component states",
    draw=_draw_parallel, solve=_solve_parallel, bounds=PROB,
    phrasings=(
        lambda p: (f"{len(p['rs'])} {p['_names'][0]}s are connected in active parallel with "
                   "reliabilities " + ", ".join(map(str, p["rs"])) + ". What is the "
                   "reliability of the system?"),
        lambda p: (f"A function is performed if at least one of {len(p['rs'])} redundant "
                   f"{p['_names'][0]}s works. Their mission reliabilities are "
                   + " and ".join(map(str, p["rs"])) + ". Find the mission reliability."),
        lambda p: ("Reliability block diagram: blocks in parallel with R = "
                   + ", R = ".join(map(str, reversed(p["rs"])))
                   + f" ({p['_names'][0]} channels). Compute the system reliability."),
    ),
    new_phrasings=(
        lambda p: (f"Redundancy check: {len(p['rs'])} {p['_names'][0]}s run side by side, and the "
                   "duty is lost only once every one of them has failed. Their individual "
                   "reliabilities are " + "; ".join(map(str, p["rs"])) + ". What is the "
                   "probability that the duty is kept up?"),
        lambda p: (f"Each {p['_names'][0]} in a fully redundant bank can carry the whole duty "
                   "alone. Given unit reliabilities of " + ", ".join(map(str, p["rs"][:-1]))
                   + f" and {p['rs'][-1]}, how likely is the bank to complete its mission?"),
    ),
    check=lambda p, rng: exact(enumerate_states(list(p["rs"]), any), "state enumeration"),
)


# ---------------------------------------------------------------- series-parallel stages

def _draw_series_parallel(rng):
    m = int(rng.integers(2, 4))
    while True:
        counts = tuple(int(rng.integers(1, 4)) for _ in range(m))
        if max(counts) > 1:
            break
    return {"counts": counts, "rs": tuple(nice(rng, 0.7, 0.98) for _ in range(m)),
            "_names": _names(rng, m)}


def _stage_words(p):
    return "; ".join(f"{k} {n}{'s' if k > 1 else ''} in parallel, each with reliability {r}"
                     if k > 1 else f"a single {n} with reliability {r}"
                     for k, n, r in zip(p["counts"], p["_names"], p["rs"]))


def _solve_series_parallel(p):
    stages = [1 - (1 - r) ** k for k, r in zip(p["counts"], p["rs"])]
    steps = [f"Stage {i + 1}: 1 - (1 - {r})^{k} = {tex(s)}"
             for i, (k, r, s) in enumerate(zip(p["counts"], p["rs"], stages))]
    total = _product(stages)
    times = " \\times ".join(tex(s) for s in stages)
    steps.append(f"R = {times} = {tex(total)}")
    return total, steps


def _check_series_parallel(p, rng):
    probs, owner = [], []
    for stage, (k, r) in enumerate(zip(p["counts"], p["rs"])):
        probs += [r] * k
        owner += [stage] * k

    def works(state):
        return all(any(s for s, o in zip(state, owner) if o == stage)
                   for stage in range(len(p["counts"])))

    return exact(enumerate_states(probs, works), "state enumeration of every component")


def _expr_series_parallel(p):
    return "*".join(f"(1 - (1 - {num(r)})^{k})" if k > 1 else num(r)
                    for k, r in zip(p["counts"], p["rs"]))


SERIES_PARALLEL = Family(
    name="series_parallel", topic="system_reliability", difficulty=2,
    expression=_expr_series_parallel,
    asks="reliability of stages in series, each stage a group of identical parallel units",
    check_how="brute-force enumeration of all component states",
    draw=_draw_series_parallel, solve=_solve_series_parallel, check=_check_series_parallel,
    bounds=PROB,
    phrasings=(
        lambda p: (f"A process line has {len(p['counts'])} stages in series: "
                   f"{_stage_words(p)}. Components fail independently. Find the line "
                   f"reliability."),
        lambda p: ("Reliability block diagram (series of parallel groups): " + " -> ".join(
                   f"[{k} x R = {r}]" for k, r in zip(p["counts"], p["rs"]))
                   + ". Units within a group are redundant. What is the system reliability?"),
        lambda p: ("The system works only if every stage works, and a stage works if at least "
                   "one of its units works. Stages: " + ", ".join(
                       f"{n}s ({k} units, R = {r} each)" for k, n, r
                       in zip(p["counts"], p["_names"], p["rs"]))
                   + ". Compute the system reliability."),
    ),
    new_phrasings=(
        lambda p: ("The flow passes through every stage in turn, and any one stage stops it if "
                   "all of its units are down. " + " ".join(
                       f"Stage {i + 1} uses {k} redundant {n}s, each {r} reliable." if k > 1
                       else f"Stage {i + 1} relies on a lone {n}, {r} reliable."
                       for i, (k, n, r) in enumerate(zip(p["counts"], p["_names"], p["rs"])))
                   + " How likely is the flow to get through, with failures independent?"),
        lambda p: ("Group sizes: " + ", ".join(map(str, p["counts"])) + ". Unit reliability in "
                   "each group, in the same order: " + ", ".join(map(str, p["rs"])) + ". Each "
                   "group is a bank of identical active-redundant units, and the groups are "
                   "chained end to end, so every group is needed. What is the overall "
                   "reliability of the chain?"),
    ),
)


# ---------------------------------------------------------------- k-out-of-n

def _draw_koon(rng):
    n = int(rng.integers(3, 9))
    return {"n": n, "k": int(rng.integers(2, n)), "r": nice(rng, 0.7, 0.99),
            "_names": _names(rng, 1)}


def _solve_koon(p):
    n, k, r = p["n"], p["k"], p["r"]
    terms = [math.comb(n, i) * r**i * (1 - r) ** (n - i) for i in range(k, n + 1)]
    total = sum(terms)
    return total, [
        f"R = \\sum_{{i={k}}}^{{{n}}} C({n}, i) R^i (1 - R)^{{{n}-i}} with R = {r}",
        f"R = {' + '.join(tex(t) for t in terms)} = {tex(total)}"]


def _expr_koon(p):
    return f"1 - binom_cdf({p['k']} - 1, {p['n']}, {num(p['r'])})"


K_OUT_OF_N = Family(
    name="k_out_of_n", topic="system_reliability", difficulty=2,
    expression=_expr_koon,
    asks="reliability of a k-out-of-n:G system of identical independent units",
    check_how="brute-force enumeration of all 2^n unit states",
    draw=_draw_koon, solve=_solve_koon, bounds=PROB,
    phrasings=(
        lambda p: (f"A {p['k']}-out-of-{p['n']}:G system has identical independent "
                   f"{p['_names'][0]}s, each with reliability {p['r']}. Find the system "
                   f"reliability."),
        lambda p: (f"At least {p['k']} of {p['n']} {p['_names'][0]}s must work for the plant "
                   f"to run. Each works with probability {p['r']}, independently. What is the "
                   f"probability that the plant runs?"),
        lambda p: (f"Unit reliability {p['r']}, number of units {p['n']}, minimum number of "
                   f"good units {p['k']}. Compute the reliability of this voting "
                   f"({p['k']}oo{p['n']}) arrangement."),
    ),
    check=lambda p, rng: exact(enumerate_states([p["r"]] * p["n"],
                                                lambda s: sum(s) >= p["k"]),
                               "state enumeration"),
)


# ---------------------------------------------------------------- 2-out-of-3, non-identical

def _draw_2oo3(rng):
    while True:
        rs = tuple(nice(rng, 0.7, 0.99) for _ in range(3))
        if len(set(rs)) == 3:
            return {"rs": rs, "_names": _names(rng, 1)}


def _solve_2oo3(p):
    r1, r2, r3 = p["rs"]
    pairs = r1 * r2 + r1 * r3 + r2 * r3
    triple = r1 * r2 * r3
    return pairs - 2 * triple, [
        "R = R_1R_2 + R_1R_3 + R_2R_3 - 2R_1R_2R_3",
        f"R_1R_2 + R_1R_3 + R_2R_3 = {tex(r1 * r2)} + {tex(r1 * r3)} + {tex(r2 * r3)} = "
        f"{tex(pairs)}",
        f"R = {tex(pairs)} - 2 \\times {tex(triple)} = {tex(pairs - 2 * triple)}"]


def _expr_2oo3(p):
    r1, r2, r3 = (num(r) for r in p["rs"])
    return f"{r1}*{r2} + {r1}*{r3} + {r2}*{r3} - 2*{r1}*{r2}*{r3}"


TWO_OUT_OF_THREE = Family(
    name="two_out_of_three", topic="system_reliability", difficulty=2,
    expression=_expr_2oo3,
    asks="reliability of a 2-out-of-3 system with different unit reliabilities",
    check_how="brute-force enumeration of the 8 unit states",
    draw=_draw_2oo3, solve=_solve_2oo3, bounds=PROB,
    phrasings=(
        lambda p: (f"A 2-out-of-3 voting system has three {p['_names'][0]} channels with "
                   f"reliabilities {p['rs'][0]}, {p['rs'][1]} and {p['rs'][2]}. Find the system "
                   f"reliability."),
        lambda p: (f"Three different {p['_names'][0]}s (R = {p['rs'][2]}, {p['rs'][0]}, "
                   f"{p['rs'][1]}) feed a majority voter, which is assumed perfect. What is the "
                   f"probability that at least two of them work?"),
        lambda p: (f"Triple modular redundancy with non-identical channels: R_A = "
                   f"{p['rs'][1]}, R_B = {p['rs'][2]}, R_C = {p['rs'][0]}. Compute the "
                   f"reliability of the 2oo3 arrangement."),
    ),
    check=lambda p, rng: exact(enumerate_states(list(p["rs"]), lambda s: sum(s) >= 2),
                               "state enumeration"),
)


# ---------------------------------------------------------------- bridge

def _draw_bridge(rng):
    return {"rs": tuple(nice(rng, 0.7, 0.98) for _ in range(5))}


def _solve_bridge(p):
    r1, r2, r3, r4, r5 = p["rs"]
    up = (1 - (1 - r1) * (1 - r2)) * (1 - (1 - r3) * (1 - r4))
    down = 1 - (1 - r1 * r3) * (1 - r2 * r4)
    total = r5 * up + (1 - r5) * down
    return total, [
        "Decompose on the bridge element 5.",
        f"5 works: [1 - (1-R_1)(1-R_2)][1 - (1-R_3)(1-R_4)] = {tex(up)}",
        f"5 failed: 1 - (1 - R_1R_3)(1 - R_2R_4) = {tex(down)}",
        f"R = R_5 \\times {tex(up)} + (1 - R_5) \\times {tex(down)} = {r5} \\times {tex(up)} + "
        f"{tex(1 - r5)} \\times {tex(down)} = {tex(total)}"]


def _bridge_works(s):
    c1, c2, c3, c4, c5 = s
    return bool((c1 and c3) or (c2 and c4) or (c1 and c5 and c4) or (c2 and c5 and c3))


_BRIDGE_LAYOUT = ("Component 1 joins the input to node A, component 2 joins the input to node "
                  "B, component 3 joins A to the output, component 4 joins B to the output, "
                  "and component 5 bridges A and B (it can carry flow either way).")

def _expr_bridge(p):
    r1, r2, r3, r4, r5 = (num(r) for r in p["rs"])
    return (f"{r5}*(1 - (1 - {r1})*(1 - {r2}))*(1 - (1 - {r3})*(1 - {r4}))"
            f" + (1 - {r5})*(1 - (1 - {r1}*{r3})*(1 - {r2}*{r4}))")


BRIDGE = Family(
    name="bridge", topic="system_reliability", difficulty=3,
    expression=_expr_bridge,
    asks="reliability of a five-component bridge network",
    check_how="brute-force enumeration of the 32 states against the minimal path sets",
    draw=_draw_bridge, solve=_solve_bridge, bounds=PROB,
    phrasings=(
        lambda p: (f"{_BRIDGE_LAYOUT} The reliabilities are R1 = {p['rs'][0]}, R2 = "
                   f"{p['rs'][1]}, R3 = {p['rs'][2]}, R4 = {p['rs'][3]}, R5 = {p['rs'][4]}. "
                   f"Find the network reliability from input to output."),
        lambda p: (f"A bridge network has minimal path sets {{1,3}}, {{2,4}}, {{1,5,4}} and "
                   f"{{2,5,3}}. Component reliabilities: 5: {p['rs'][4]}, 4: {p['rs'][3]}, "
                   f"3: {p['rs'][2]}, 2: {p['rs'][1]}, 1: {p['rs'][0]}. Compute the system "
                   f"reliability."),
        lambda p: (f"Compute the reliability of the classic bridge structure. {_BRIDGE_LAYOUT} "
                   f"Independent components with reliabilities "
                   + ", ".join(map(str, p["rs"])) + " for components 1 to 5."),
    ),
    check=lambda p, rng: exact(enumerate_states(list(p["rs"]), _bridge_works),
                               "state enumeration over minimal path sets"),
)


# ---------------------------------------------------------------- standby

def _draw_cold(rng):
    lam = nice(rng, 1e-5, 1e-3)
    return {"lam": lam, "t": nice(rng, 0.2 / lam, 2.5 / lam),
            "ps": pick(rng, (0.9, 0.95, 0.98, 0.99, 1.0)), "_names": _names(rng, 1)}


def _switch_words(p):
    return "switching is perfect" if p["ps"] == 1.0 else \
        f"the switch operates on demand with probability {p['ps']}"


def _solve_cold(p):
    x = p["lam"] * p["t"]
    r = math.exp(-x) * (1 + p["ps"] * x)
    return r, [f"\\lambda t = {tex(p['lam'])} \\times {txt(p['t'])} = {tex(x)}",
               f"R = e^{{-\\lambda t}}(1 + p_s \\lambda t) = e^{{-{tex(x)}}}(1 + {p['ps']} \\times "
               f"{tex(x)}) = {tex(r)}"]


def _check_cold(p, rng):
    first = rng.exponential(1 / p["lam"], MC_N)
    second = rng.exponential(1 / p["lam"], MC_N)
    switched = rng.random(MC_N) < p["ps"]
    return mc_fraction((first > p["t"]) | (switched & (first + second > p["t"])),
                       "simulated standby missions")


def _expr_cold(p):
    lt = f"{num(p['lam'])}*{num(p['t'])}"
    switch = "" if p["ps"] == 1.0 else f"{num(p['ps'])}*"
    return f"exp(-{lt})*(1 + {switch}{lt})"


COLD_STANDBY = Family(
    name="cold_standby", topic="system_reliability", difficulty=2,
    expression=_expr_cold,
    asks="reliability of one active unit with one cold spare and an imperfect switch",
    check_how="simulate the active life, the switch and the spare's life",
    draw=_draw_cold, solve=_solve_cold, check=_check_cold, bounds=PROB,
    phrasings=(
        lambda p: (f"Two identical {p['_names'][0]}s form a cold standby system and "
                   f"{_switch_words(p)}. Each has a constant failure rate of {txt(p['lam'])} per "
                   f"hour when operating and cannot fail in standby. Find the reliability for "
                   f"{txt(p['t'])} hours."),
        lambda p: (f"A spare {p['_names'][0]} is switched in when the operating one fails "
                   f"(switch reliability {p['ps']}). The spare does not age while idle. With "
                   f"MTTF = {txt(1 / p['lam'], True)} h for each unit, what is the probability "
                   f"the function survives a {txt(p['t'], True)} h mission?"),
        lambda p: (f"Cold standby pair: lambda = {txt(p['lam'] * 1e6)} failures per million hours "
                   f"per unit, switching probability {p['ps']}, mission {txt(p['t'])} h. "
                   f"Compute R(t)."),
    ),
)


def _draw_warm(rng):
    lam = nice(rng, 1e-5, 1e-3)
    return {"lam": lam, "lam_sb": float(f"{lam * pick(rng, (0.1, 0.2, 0.25, 0.5)):.2g}"),
            "t": nice(rng, 0.2 / lam, 2.5 / lam), "ps": pick(rng, (0.9, 0.95, 0.98, 0.99, 1.0)),
            "_names": _names(rng, 1)}


def _solve_warm(p):
    lam, lsb, t, ps = p["lam"], p["lam_sb"], p["t"], p["ps"]
    e1 = math.exp(-lam * t)
    extra = lam / lsb * (1 - math.exp(-lsb * t))
    r = e1 * (1 + ps * extra)
    return r, [
        f"e^{{-\\lambda t}} = e^{{-{tex(lam * t)}}} = {tex(e1)}",
        f"(\\lambda/\\lambda_s)(1 - e^{{-\\lambda_s t}}) = ({tex(lam)}/{tex(lsb)})(1 - "
        f"e^{{-{tex(lsb * t)}}}) = {tex(extra)}",
        f"R = e^{{-\\lambda t}}[1 + p_s \\times {tex(extra)}] = {tex(e1)} \\times "
        f"(1 + {ps} \\times "
        f"{tex(extra)}) = {tex(r)}"]


def _check_warm(p, rng):
    first = rng.exponential(1 / p["lam"], MC_N)
    dormant = rng.exponential(1 / p["lam_sb"], MC_N)
    second = rng.exponential(1 / p["lam"], MC_N)
    switched = rng.random(MC_N) < p["ps"]
    rescued = switched & (dormant > first) & (first + second > p["t"])
    return mc_fraction((first > p["t"]) | rescued, "simulated warm standby missions")


def _expr_warm(p):
    lam, lsb, t = num(p["lam"]), num(p["lam_sb"]), num(p["t"])
    switch = "" if p["ps"] == 1.0 else f"{num(p['ps'])}*"
    return f"exp(-{lam}*{t})*(1 + {switch}{lam}/{lsb}*(1 - exp(-{lsb}*{t})))"


WARM_STANDBY = Family(
    name="warm_standby", topic="system_reliability", difficulty=3,
    expression=_expr_warm,
    asks="reliability of an active unit plus a warm spare that can fail while dormant",
    check_how="simulate active, dormant and switched-in lives and the switch",
    draw=_draw_warm, solve=_solve_warm, check=_check_warm, bounds=PROB,
    phrasings=(
        lambda p: (f"A {p['_names'][0]} operates with an identical warm standby. The operating "
                   f"unit fails at rate {txt(p['lam'])} per hour, the standby unit fails at "
                   f"{txt(p['lam_sb'])} per hour while waiting, and {_switch_words(p)}. Find "
                   f"the reliability for {txt(p['t'])} hours."),
        lambda p: (f"Warm standby pair: dormant failure rate {txt(p['lam_sb'] * 1e6)} per "
                   f"million hours, active failure rate {txt(p['lam'] * 1e6)} per million hours, "
                   f"switch reliability {p['ps']}. Compute the mission reliability for "
                   f"{txt(p['t'], True)} h."),
        lambda p: (f"For {txt(p['t'])} h, what is the probability that a function served by "
                   f"two identical {p['_names'][0]}s survives, if the second unit waits in warm "
                   f"standby (failure rate {txt(p['lam_sb'])}/h) and replaces the first "
                   f"(failure rate {txt(p['lam'])}/h in operation) with switching probability "
                   f"{p['ps']}?"),
    ),
)


# ---------------------------------------------------------------- MTTF of a parallel pair

def _draw_pair_mttf(rng):
    while True:
        lams = (nice(rng, 1e-5, 1e-3), nice(rng, 1e-5, 1e-3))
        if lams[0] != lams[1]:
            return {"lams": lams, "_names": _names(rng, 1)}


def _solve_pair_mttf(p):
    l1, l2 = p["lams"]
    m = 1 / l1 + 1 / l2 - 1 / (l1 + l2)
    return m, ["MTTF = 1/\\lambda_1 + 1/\\lambda_2 - 1/(\\lambda_1 + \\lambda_2)",
               f"= {tex(1 / l1)} + {tex(1 / l2)} - {tex(1 / (l1 + l2))} = {tex(m)} hours"]


def _expr_pair_mttf(p):
    l1, l2 = (num(v) for v in p["lams"])
    return f"1/{l1} + 1/{l2} - 1/({l1} + {l2})"


PARALLEL_MTTF = Family(
    name="parallel_mttf", topic="system_reliability", difficulty=2,
    expression=_expr_pair_mttf,
    asks="MTTF of two different exponential units in active parallel",
    check_how="integrate the system reliability function numerically",
    draw=_draw_pair_mttf, solve=_solve_pair_mttf, unit="hours",
    phrasings=(
        lambda p: (f"Two {p['_names'][0]}s with constant failure rates {txt(p['lams'][0])} and "
                   f"{txt(p['lams'][1])} per hour operate in active parallel. What is the "
                   f"system MTTF in hours?"),
        lambda p: (f"A redundant pair uses two different {p['_names'][0]} designs rated at "
                   f"{txt(p['lams'][1] * 1e9, True)} FIT and {txt(p['lams'][0] * 1e9, True)} FIT. "
                   f"Both run all the time; the pair fails when both have failed. Find the mean "
                   f"time to system failure (hours)."),
        lambda p: (f"Compute the mean life of an active-redundant system of two exponential "
                   f"units, lambda1 = {txt(p['lams'][0] * 1e6)} and lambda2 = "
                   f"{txt(p['lams'][1] * 1e6)} failures per million hours, in hours."),
    ),
    check=lambda p, rng: exact(integrate_tail(
        lambda t: 1 - (1 - math.exp(-p["lams"][0] * t)) * (1 - math.exp(-p["lams"][1] * t)),
        0.0, 1 / min(p["lams"])), "integrate R_sys(t) numerically"),
)

FAMILIES = [SERIES, PARALLEL, SERIES_PARALLEL, K_OUT_OF_N, TWO_OUT_OF_THREE, BRIDGE,
            COLD_STANDBY, WARM_STANDBY, PARALLEL_MTTF]
