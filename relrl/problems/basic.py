"""Basic probability and failure data: empirical reliability, hazard from counts, binomial
acceptance, Bayes' rule for inspection (O'Connor, Practical Reliability Engineering, ch. 2)."""
from __future__ import annotations

import math

import numpy as np

from .base import MC_N, PROB, Family, exact, mc_fraction, nice, num, num_pct, pct, pick, tex

ITEMS = ("pump", "relay", "valve actuator", "power supply", "sensor", "cooling fan")
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


# ---------------------------------------------------------------- interval failure counts

def _draw_counts(rng):
    n0 = int(pick(rng, (50, 80, 100, 120, 150, 200, 250, 300, 400, 500)))
    dt = int(pick(rng, (100, 200, 250, 500, 1000)))
    m = int(rng.integers(5, 7))
    counts, alive = [], n0
    for _ in range(m):
        k = int(rng.binomial(alive, rng.uniform(0.02, 0.15)))
        counts.append(k)
        alive -= k
    return {"n0": n0, "dt": dt, "counts": tuple(counts), "j": int(rng.integers(2, m + 1)),
            "_item": pick(rng, ITEMS)}


def _lifetimes(p):
    """One entry per unit: the interval index (1-based) it failed in, or inf if it survived."""
    lives = [i + 1 for i, k in enumerate(p["counts"]) for _ in range(k)]
    return np.array(lives + [math.inf] * (p["n0"] - len(lives)))


def _intervals(p, sep="; "):
    dt = p["dt"]
    return sep.join(f"{i * dt}-{(i + 1) * dt} h: {k}" for i, k in enumerate(p["counts"]))


def _solve_empirical(p):
    j, n0 = p["j"], p["n0"]
    failed = sum(p["counts"][:j])
    r = (n0 - failed) / n0
    terms = " + ".join(str(k) for k in p["counts"][:j])
    return r, [
        f"Failures by t = {j * p['dt']} h: {terms} = {failed}.",
        f"R(t) = (N_0 - F)/N_0 = ({n0} - {failed})/{n0} = {tex(r)}",
    ]


def _check_empirical(p, rng):
    lives = _lifetimes(p)
    return exact(np.mean(lives > p["j"]), "count surviving units one by one")


def _expr_empirical(p):
    failed = " + ".join(num(k) for k in p["counts"][: p["j"]])
    return f"({num(p['n0'])} - ({failed}))/{num(p['n0'])}"


EMPIRICAL = Family(
    name="empirical_reliability", topic="basic", difficulty=1,
    expression=_expr_empirical,
    asks="empirical reliability at the end of an interval from grouped failure counts",
    check_how="expand the counts into one lifetime per unit and count survivors",
    draw=_draw_counts, solve=_solve_empirical, bounds=PROB,
    phrasings=(
        lambda p: (f"A batch of {p['n0']} {p['_item']}s was put on test. The numbers of "
                   f"failures in successive {p['dt']}-hour intervals were "
                   f"{', '.join(map(str, p['counts']))}. Estimate the reliability of the "
                   f"{p['_item']} at t = {p['j'] * p['dt']} hours."),
        lambda p: (f"Test data for {p['n0']} {p['_item']}s (interval: failures): "
                   f"{_intervals(p)}. What is the empirical reliability R({p['j'] * p['dt']} h)?"),
        lambda p: (f"{p['n0']} identical {p['_item']}s start operating together and are "
                   f"inspected every {p['dt']} hours. "
                   + " ".join(f"In the {ORDINALS[i]} interval {k} failed."
                              for i, k in enumerate(p["counts"]))
                   + f" Estimate the fraction that survives {p['j'] * p['dt']} hours."),
    ),
    new_phrasings=(
        lambda p: (f"We put {p['n0']} {p['_item']}s into service on the same day and logged "
                   f"the losses for each {p['dt']}-hour period: "
                   + ", ".join(f"period {i + 1} lost {k}" for i, k in enumerate(p["counts"]))
                   + f". What proportion of the original {p['_item']}s is still running after "
                     f"{p['j'] * p['dt']} hours?"),
        lambda p: (f"Out of {p['n0']} {p['_item']}s on a life test, "
                   + "; ".join(f"{k} broke down between hour {i * p['dt']} and hour "
                               f"{(i + 1) * p['dt']}" for i, k in enumerate(p["counts"]))
                   + f". From these counts alone, how likely is a {p['_item']} to last beyond "
                     f"{p['j'] * p['dt']} hours?"),
    ),
    check=_check_empirical,
)


def _solve_hazard(p):
    j, n0, dt = p["j"], p["n0"], p["dt"]
    before = sum(p["counts"][: j - 1])
    at_risk = n0 - before
    nj = p["counts"][j - 1]
    h = nj / (at_risk * dt)
    return h, [
        f"Interval {j} runs from {(j - 1) * dt} h to {j * dt} h.",
        f"Units at risk at its start: N = {n0} - {before} = {at_risk}.",
        f"h = n_j / (N \\Delta t) = {nj} / ({at_risk} \\times {dt}) = {tex(h)} per hour",
    ]


def _check_hazard(p, rng):
    lives, j = _lifetimes(p), p["j"]
    at_risk = np.sum(lives > j - 1)
    failed = np.sum(lives == j)
    return exact(failed / (at_risk * p["dt"]), "count units at risk and failing one by one")


def _expr_hazard(p):
    j = p["j"]
    before = " - ".join([num(p["n0"]), *(num(k) for k in p["counts"][: j - 1])])
    return f"{num(p['counts'][j - 1])}/(({before})*{num(p['dt'])})"


HAZARD_COUNTS = Family(
    name="hazard_from_counts", topic="basic", difficulty=2,
    expression=_expr_hazard,
    asks="average hazard rate (per hour) in one interval from grouped failure counts",
    check_how="expand the counts into one lifetime per unit and count those at risk",
    draw=_draw_counts, solve=_solve_hazard, unit="per hour",
    phrasings=(
        lambda p: (f"A batch of {p['n0']} {p['_item']}s was put on test. The numbers of "
                   f"failures in successive {p['dt']}-hour intervals were "
                   f"{', '.join(map(str, p['counts']))}. Estimate the hazard rate (failures "
                   f"per hour) in interval {p['j']}."),
        lambda p: (f"Test data for {p['n0']} {p['_item']}s (interval: failures): "
                   f"{_intervals(p)}. Estimate the average hazard rate per hour between "
                   f"{(p['j'] - 1) * p['dt']} h and {p['j'] * p['dt']} h."),
        lambda p: (f"{p['n0']} identical {p['_item']}s start operating together and are "
                   f"inspected every {p['dt']} hours. "
                   + " ".join(f"In the {ORDINALS[i]} interval {k} failed."
                              for i, k in enumerate(p["counts"]))
                   + f" What is the empirical hazard rate, per hour, in the "
                     f"{ORDINALS[p['j'] - 1]} interval?"),
    ),
    new_phrasings=(
        lambda p: (f"Failure log of {p['n0']} {p['_item']}s that all entered service together, "
                   f"one entry per {p['dt']}-hour period: "
                   + " / ".join(f"period {i + 1}, {k} lost" for i, k in enumerate(p["counts"]))
                   + f". Among the units still working when period {p['j']} began, at what rate "
                     f"per unit-hour did failures occur during that period?"),
        lambda p: (f"How fast, in failures per unit-hour, were the surviving {p['_item']}s "
                   f"failing from hour {(p['j'] - 1) * p['dt']} to hour {p['j'] * p['dt']}? The "
                   f"population started at {p['n0']} units, and the failure counts for each "
                   f"{p['dt']}-hour block were, in order, {' then '.join(map(str, p['counts']))}."),
    ),
    check=_check_hazard,
)


# ---------------------------------------------------------------- binomial acceptance

def _draw_lot(rng):
    return {"n": int(rng.integers(5, 21)), "q": nice(rng, 0.005, 0.15),
            "k": int(rng.integers(0, 3)), "_item": pick(rng, ITEMS)}


def _solve_lot(p):
    n, q, k = p["n"], p["q"], p["k"]
    steps = [f"X ~ Binomial(n = {n}, p = {q}); P(X = i) = C({n}, i) p^i (1-p)^{{{n}-i}}."]
    total = 0.0
    for i in range(k + 1):
        term = math.comb(n, i) * q**i * (1 - q) ** (n - i)
        total += term
        steps.append(f"P(X = {i}) = {math.comb(n, i)} \\times {q}^{i} \\times "
                     f"{tex(1 - q)}^{{{n - i}}} = {tex(term)}")
    if k:
        steps.append(f"P(X \\le {k}) = {' + '.join(f'P(X = {i})' for i in range(k + 1))}"
                     f" = {tex(total)}")
    return total, steps


def _expr_lot(p):
    return f"binom_cdf({p['k']}, {p['n']}, {num(p['q'])})"


LOT = Family(
    name="binomial_lot", topic="basic", difficulty=2,
    expression=_expr_lot,
    asks="probability that at most k of n items are defective (binomial acceptance)",
    check_how="simulate n Bernoulli items per lot and count accepted lots",
    draw=_draw_lot, solve=_solve_lot, bounds=PROB,
    phrasings=(
        lambda p: (f"Each {p['_item']} in a lot of {p['n']} fails its acceptance test "
                   f"independently with probability {p['q']}. What is the probability that at "
                   f"most {p['k']} of them fail?"),
        lambda p: (f"A lot of {p['n']} {p['_item']}s is accepted if no more than {p['k']} "
                   f"defectives are found when every unit is tested. With a defect rate of "
                   f"{pct(p['q'])}, find the probability that the lot is accepted."),
        lambda p: (f"Acceptance plan: acceptance number c = {p['k']}, sample size n = {p['n']}, "
                   f"fraction defective p = {p['q']}. Compute the probability of acceptance."),
    ),
    check=lambda p, rng: mc_fraction(
        (rng.random((MC_N, p["n"])) < p["q"]).sum(axis=1) <= p["k"], "simulated lots"),
)


# ---------------------------------------------------------------- Bayes' rule, inspection

def _draw_inspection(rng):
    return {"prev": nice(rng, 0.005, 0.1), "sens": nice(rng, 0.85, 0.995, 2),
            "fa": nice(rng, 0.01, 0.1), "_item": pick(rng, ITEMS)}


def _solve_inspection(p):
    prev, sens, fa = p["prev"], p["sens"], p["fa"]
    alarm = prev * sens + (1 - prev) * fa
    post = prev * sens / alarm
    return post, [
        f"P(alarm) = p s + (1 - p) f = {prev} \\times {sens} + {tex(1 - prev)} \\times {fa}"
        f" = {tex(alarm)}",
        f"P(defective | alarm) = p s / P(alarm) = {tex(prev * sens)} / {tex(alarm)} = {tex(post)}",
    ]


def _check_inspection(p, rng):
    m = 20 * MC_N  # only flagged units count, and they are few
    defective = rng.random(m) < p["prev"]
    alarm = np.where(defective, rng.random(m) < p["sens"], rng.random(m) < p["fa"])
    return mc_fraction(defective[alarm], "simulated inspections, alarms only")


def _expr_inspection(p):
    prev, sens, fa = num_pct(p["prev"]), num(p["sens"]), num(p["fa"])
    return f"{prev}*{sens}/({prev}*{sens} + (1 - {prev})*{fa})"


INSPECTION = Family(
    name="inspection_bayes", topic="basic", difficulty=2,
    expression=_expr_inspection,
    asks="probability a unit is defective given that the inspection flagged it (Bayes' rule)",
    check_how="simulate units and inspections, keep flagged units",
    draw=_draw_inspection, solve=_solve_inspection, check=_check_inspection, bounds=PROB,
    phrasings=(
        lambda p: (f"{pct(p['prev'])} of {p['_item']}s leaving a line are defective. An "
                   f"inspection flags a defective unit with probability {p['sens']} and a good "
                   f"unit with probability {p['fa']}. A unit is flagged: what is the probability "
                   f"that it is defective?"),
        lambda p: (f"An automated test has a detection probability of {pct(p['sens'])} and a "
                   f"false-alarm probability of {pct(p['fa'])}. The defect rate of the "
                   f"{p['_item']}s is {p['prev']}. Find P(defective | test alarm)."),
        lambda p: (f"Given: prior probability of a defective {p['_item']} {p['prev']}, "
                   f"P(alarm | good) = {p['fa']}, P(alarm | defective) = {p['sens']}. Compute the "
                   f"posterior probability that an alarmed unit is defective."),
    ),
)

FAMILIES = [EMPIRICAL, HAZARD_COUNTS, LOT, INSPECTION]
