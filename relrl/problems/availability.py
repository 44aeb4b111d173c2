"""Availability and maintainability: inherent, point and series availability, a repairable
pair with one crew (Markov), reliability under preventive maintenance.

Formulas: Ebeling ch. 9-10 (Markov availability, PM reliability R(T)^n R(t - nT));
Modarres, Kaminskiy & Krivtsov ch. 7.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import linalg

from .base import MC_N, PROB, Family, clean, exact, grid, mc_fraction, nice, num, pick, tex, txt

UNITS = ("compressor", "pump", "generator", "conveyor", "router", "chiller")


def _steady_state(q: np.ndarray) -> np.ndarray:
    """Stationary distribution of a CTMC generator: solve pi Q = 0 with sum(pi) = 1."""
    n = q.shape[0]
    a = np.vstack([q.T, np.ones(n)])
    b = np.zeros(n + 1)
    b[-1] = 1.0
    return np.linalg.lstsq(a, b, rcond=None)[0]


# ---------------------------------------------------------------- inherent availability

def _draw_inherent(rng):
    return {"mtbf": nice(rng, 200, 20000), "mttr": nice(rng, 0.5, 48), "_unit": pick(rng, UNITS)}


def _solve_inherent(p):
    a = p["mtbf"] / (p["mtbf"] + p["mttr"])
    return a, [f"A = MTBF/(MTBF + MTTR) = {txt(p['mtbf'])}/({txt(p['mtbf'])} + {txt(p['mttr'])})"
               f" = {tex(a)}"]


def _check_inherent(p, rng):
    lam, mu = 1 / p["mtbf"], 1 / p["mttr"]
    pi = _steady_state(np.array([[-lam, lam], [mu, -mu]]))
    return exact(pi[0], "steady state of the two-state Markov chain by linear algebra")


def _expr_inherent(p):
    return f"{num(p['mtbf'])}/({num(p['mtbf'])} + {num(p['mttr'])})"


INHERENT = Family(
    name="inherent_availability", topic="availability", difficulty=1,
    expression=_expr_inherent,
    asks="inherent (steady-state) availability from MTBF and MTTR",
    check_how="stationary distribution of the two-state Markov chain, solved numerically",
    draw=_draw_inherent, solve=_solve_inherent, check=_check_inherent, bounds=PROB,
    phrasings=(
        lambda p: (f"A {p['_unit']} has an MTBF of {txt(p['mtbf'], True)} hours and an MTTR "
                   f"of {txt(p['mttr'])} hours. What is its inherent availability?"),
        lambda p: (f"On average a {p['_unit']} runs {txt(p['mtbf'])} h between failures, and "
                   f"each corrective repair takes {txt(clean(p['mttr'] * 60))} minutes. What "
                   f"fraction of the time is it available in the long run?"),
        lambda p: (f"Mean time to repair = {txt(p['mttr'])} h, mean time between failures = "
                   f"{txt(p['mtbf'])} h. Compute the steady-state availability of the "
                   f"{p['_unit']}."),
    ),
)


# ---------------------------------------------------------------- point availability A(t)

def _draw_point(rng):
    mu = nice(rng, 0.05, 0.5)
    lam = nice(rng, 0.01 * mu, 0.2 * mu)
    s = lam + mu
    return {"lam": lam, "mu": mu, "t": nice(rng, 0.3 / s, 3 / s), "_unit": pick(rng, UNITS)}


def _solve_point(p):
    lam, mu, t = p["lam"], p["mu"], p["t"]
    s = lam + mu
    a_inf = mu / s
    a = a_inf + lam / s * math.exp(-s * t)
    return a, [f"\\lambda + \\mu = {tex(lam)} + {tex(mu)} = {tex(s)} per hour",
               f"A(\\infty) = \\mu/(\\lambda + \\mu) = {tex(a_inf)}, \\lambda/(\\lambda + \\mu) = "
               f"{tex(lam / s)}",
               f"A(t) = {tex(a_inf)} + {tex(lam / s)} e^{{-{tex(s)} \\times {txt(t)}}} = {tex(a)}"]


def _expr_point(p):
    lam, mu, t = num(p["lam"]), num(p["mu"]), num(p["t"])
    return f"{mu}/({lam} + {mu}) + {lam}/({lam} + {mu})*exp(-({lam} + {mu})*{t})"


POINT = Family(
    name="point_availability", topic="availability", difficulty=2,
    expression=_expr_point,
    asks="point availability A(t) of a repairable unit (two-state Markov model) that starts up",
    check_how="matrix exponential of the Markov generator",
    draw=_draw_point, solve=_solve_point, bounds=PROB,
    phrasings=(
        lambda p: (f"A {p['_unit']} has a constant failure rate of {txt(p['lam'])} per hour "
                   f"and a constant repair rate of {txt(p['mu'])} per hour. It is working at "
                   f"t = 0. What is its availability at t = {txt(p['t'])} hours?"),
        lambda p: (f"Two-state Markov model: lambda = {txt(p['lam'])}/h, mu = {txt(p['mu'])}/h, "
                   f"initial state up. Compute the point availability A({txt(p['t'])} h) of the "
                   f"{p['_unit']}."),
        lambda p: (f"Find the probability that a {p['_unit']}, new at time zero, is in the up "
                   f"state {txt(p['t'])} hours later, given exponential times to repair with "
                   f"rate {txt(p['mu'])}/h and exponential times to failure with rate "
                   f"{txt(p['lam'])}/h."),
    ),
    check=lambda p, rng: exact(linalg.expm(np.array(
        [[-p["lam"], p["lam"]], [p["mu"], -p["mu"]]]) * p["t"])[0, 0],
        "matrix exponential of the generator"),
)


# ---------------------------------------------------------------- series availability

def _draw_series_av(rng):
    n = int(rng.integers(2, 4))
    order = rng.permutation(len(UNITS))[:n]
    return {"mtbf": tuple(nice(rng, 500, 20000) for _ in range(n)),
            "mttr": tuple(nice(rng, 1, 50) for _ in range(n)),
            "_units": tuple(UNITS[i] for i in order)}


def _solve_series_av(p):
    avs = [m / (m + r) for m, r in zip(p["mtbf"], p["mttr"])]
    steps = [f"A_{i + 1} = {txt(m)}/({txt(m)} + {txt(r)}) = {tex(a)}"
             for i, (m, r, a) in enumerate(zip(p["mtbf"], p["mttr"], avs))]
    total = math.prod(avs)
    times = " \\times ".join(tex(a) for a in avs)
    steps.append(f"A_s = {times} = {tex(total)}")
    return total, steps


def _check_series_av(p, rng):
    """Joint Markov chain of all units (each repaired independently), P(all up)."""
    n = len(p["mtbf"])
    states = list(itertools.product((1, 0), repeat=n))
    index = {s: i for i, s in enumerate(states)}
    q = np.zeros((len(states), len(states)))
    for s in states:
        for i in range(n):
            flipped = list(s)
            flipped[i] = 1 - s[i]
            rate = 1 / p["mtbf"][i] if s[i] else 1 / p["mttr"][i]
            q[index[s], index[tuple(flipped)]] += rate
            q[index[s], index[s]] -= rate
    return exact(_steady_state(q)[index[(1,) * n]], "joint Markov chain over all unit states")


def _expr_series_av(p):
    return "*".join(f"{num(m)}/({num(m)} + {num(r)})" for m, r in zip(p["mtbf"], p["mttr"]))


SERIES_AVAILABILITY = Family(
    name="series_availability", topic="availability", difficulty=2,
    expression=_expr_series_av,
    asks="steady-state availability of a series system of independently repaired units",
    check_how="stationary distribution of the joint Markov chain over all 2^n unit states",
    draw=_draw_series_av, solve=_solve_series_av, check=_check_series_av, bounds=PROB,
    phrasings=(
        lambda p: ("A production line needs all of its units: " + "; ".join(
                   f"{u} (MTBF {txt(m, True)} h, MTTR {txt(r)} h)"
                   for u, m, r in zip(p["_units"], p["mtbf"], p["mttr"]))
                   + ". Each unit has its own repair crew. Find the line availability."),
        lambda p: ("Units in series, each repaired independently. MTBF values: " + ", ".join(
                   f"{txt(m)} h" for m in p["mtbf"]) + "; MTTR values in the same order: "
                   + ", ".join(f"{txt(r)} h" for r in p["mttr"])
                   + ". Compute the steady-state system availability."),
        lambda p: ("Compute the inherent availability of a series system whose units have "
                   + ", ".join(f"MTTR = {txt(r)} h and MTBF = {txt(m)} h"
                               for m, r in zip(p["mtbf"], p["mttr"]))
                   + " respectively, assuming independent repairs."),
    ),
    new_phrasings=(
        lambda p: ("Every one of these machines must be running for the plant to produce: "
                   + "; ".join(f"the {u}, which fails on average every {txt(m)} h and takes "
                               f"{txt(r)} h to fix" for u, m, r
                               in zip(p["_units"], p["mtbf"], p["mttr"]))
                   + ". Repairs proceed independently. What long-run fraction of the time is "
                     "the plant producing?"),
        lambda p: (f"For a string of {len(p['mtbf'])} independently maintained units that all "
                   "have to be up, with mean up times of " + ", ".join(
                       txt(m) for m in p["mtbf"]) + " hours and mean down times of "
                   + ", ".join(txt(r) for r in p["mttr"]) + " hours (listed unit by unit), "
                   "what is the steady-state probability that the string is up?"),
    ),
)


# ---------------------------------------------------------------- repairable pair, one crew

def _draw_pair(rng):
    mu = nice(rng, 0.02, 0.5)
    return {"lam": float(f"{mu * nice(rng, 0.02, 0.3):.2g}"), "mu": mu, "_unit": pick(rng, UNITS)}


def _solve_pair(p):
    r = p["lam"] / p["mu"]
    pi2 = 1 / (1 + 2 * r + 2 * r * r)
    pi0 = 2 * r * r * pi2
    return 1 - pi0, [
        f"r = \\lambda/\\mu = {tex(p['lam'])}/{tex(p['mu'])} = {tex(r)}",
        f"Balance: \\pi_1 = 2r \\pi_2, \\pi_0 = r \\pi_1 = 2r^2 \\pi_2, "
        f"so \\pi_2 = 1/(1 + 2r + 2r^2) = {tex(pi2)}",
        f"\\pi_0 = 2r^2 \\pi_2 = {tex(pi0)}",
        f"A = 1 - \\pi_0 = {tex(1 - pi0)}"]


def _check_pair(p, rng):
    lam, mu = p["lam"], p["mu"]
    # states: 2 up, 1 up, 0 up; one repair crew
    q = np.array([[-2 * lam, 2 * lam, 0.0], [mu, -(mu + lam), lam], [0.0, mu, -mu]])
    return exact(1 - _steady_state(q)[2], "stationary distribution of the 3-state chain")


def _expr_pair(p):
    r = f"({num(p['lam'])}/{num(p['mu'])})"
    return f"1 - 2*{r}^2/(1 + 2*{r} + 2*{r}^2)"


REPAIRABLE_PAIR = Family(
    name="repairable_pair", topic="availability", difficulty=3,
    expression=_expr_pair,
    asks="steady-state availability of two active units with a single repair crew (Markov)",
    check_how="stationary distribution of the 3-state generator solved numerically",
    draw=_draw_pair, solve=_solve_pair, check=_check_pair, bounds=PROB,
    phrasings=(
        lambda p: (f"Two identical {p['_unit']}s run in active parallel; the system is up while "
                   f"at least one works. Each fails at a constant rate of {txt(p['lam'])} per "
                   f"hour and one repair crew repairs failed units at rate {txt(p['mu'])} per "
                   f"hour. Find the steady-state availability."),
        lambda p: (f"Markov model of a redundant pair of {p['_unit']}s with a single repairman: "
                   f"failure rate per unit {txt(p['lam'])}/h, repair rate {txt(p['mu'])}/h. "
                   f"What is the long-run probability that at least one unit is up?"),
        lambda p: (f"A single technician repairs two parallel {p['_unit']}s one at a time "
                   f"(repair rate mu = {txt(p['mu'])}/h). Each {p['_unit']} fails at "
                   f"lambda = {txt(p['lam'])}/h when running. Compute the system's steady-state "
                   f"availability."),
    ),
)


# ---------------------------------------------------------------- preventive maintenance

def _draw_pm(rng):
    eta = nice(rng, 1000, 20000)
    tpm = nice(rng, 0.1 * eta, 0.5 * eta)
    while True:
        t = nice(rng, 1.2 * tpm, 5 * tpm)
        if abs(t / tpm - round(t / tpm)) > 0.05:
            return {"beta": grid(rng, 1.5, 3.5, 0.1), "eta": eta, "tpm": tpm, "t": t,
                    "_unit": pick(rng, UNITS)}


def _solve_pm(p):
    b, eta, tpm, t = p["beta"], p["eta"], p["tpm"], p["t"]
    n = int(t // tpm)
    tau = t - n * tpm
    r_t = math.exp(-((tpm / eta) ** b))
    r_tau = math.exp(-((tau / eta) ** b))
    total = r_t**n * r_tau
    return total, [
        f"n = floor(t/T) = floor({txt(t)}/{txt(tpm)}) = {n}, \\tau = t - nT = {tex(tau)} h",
        f"R(T) = e^{{-({txt(tpm)}/{txt(eta)})^{{{b}}}}} = {tex(r_t)}, R(\\tau) = "
        f"e^{{-({tex(tau)}/{txt(eta)})^{{{b}}}}} = {tex(r_tau)}",
        f"R_{{PM}}(t) = R(T)^n R(\\tau) = {tex(r_t)}^{n} \\times {tex(r_tau)} = {tex(total)}"]


def _check_pm(p, rng):
    n = int(p["t"] // p["tpm"])
    tau = p["t"] - n * p["tpm"]
    lives = p["eta"] * rng.weibull(p["beta"], (MC_N, n + 1))  # a fresh life after each PM
    ok = np.all(lives[:, :n] > p["tpm"], axis=1) & (lives[:, n] > tau)
    return mc_fraction(ok, "simulated PM cycles, each renewing the unit")


PM_RELIABILITY = Family(
    name="pm_reliability", topic="availability", difficulty=2,
    asks="reliability at time t of a Weibull unit restored to as-good-as-new every T hours",
    check_how="simulate a fresh Weibull life for every maintenance interval",
    draw=_draw_pm, solve=_solve_pm, check=_check_pm, bounds=PROB,
    phrasings=(
        lambda p: (f"A {p['_unit']} has a Weibull life with beta = {p['beta']} and eta = "
                   f"{txt(p['eta'])} hours. Preventive maintenance every {txt(p['tpm'])} hours "
                   f"restores it to as-good-as-new. What is its reliability at {txt(p['t'])} "
                   f"hours?"),
        lambda p: (f"Every {txt(p['tpm'], True)} h a {p['_unit']} is overhauled to a like-new "
                   f"condition. Its life is Weibull (shape {p['beta']}, scale "
                   f"{txt(p['eta'], True)} h). Find the probability of no failure in the first "
                   f"{txt(p['t'], True)} h."),
        lambda p: (f"Compute R(t) with preventive maintenance for t = {txt(p['t'])} h: PM "
                   f"interval T = {txt(p['tpm'])} h (perfect renewal), Weibull eta = "
                   f"{txt(p['eta'])} h, beta = {p['beta']}, for a {p['_unit']}."),
    ),
)

FAMILIES = [INHERENT, POINT, SERIES_AVAILABILITY, REPAIRABLE_PAIR, PM_RELIABILITY]
