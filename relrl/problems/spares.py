"""Spares provisioning with Poisson demand: probability of sufficiency, spares needed for a
target confidence, expected backorders.

Formulas: O'Connor ch. 16 (spares); Sherbrooke, Optimal Inventory Modeling (backorders).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .base import MC_N, PROB, Family, exact, mc_fraction, mc_mean, nice, num, pct, pick, tex, txt

ITEMS = ("circuit card", "hydraulic pump", "radar module", "fuel injector", "battery pack")


def _draw_fleet(rng, lo, hi):
    n = int(rng.integers(1, 21))
    lam = nice(rng, 1e-5, 1e-3)
    t = nice(rng, lo / (n * lam), hi / (n * lam))
    return {"n": n, "lam": lam, "t": t, "_item": pick(rng, ITEMS)}


def _mean(p):
    return p["n"] * p["lam"] * p["t"]


def _pmf(m, k):
    return math.exp(-m) * m**k / math.factorial(k)


def _mean_line(p):
    return (f"m = n\\lambda t = {p['n']} \\times {txt(p['lam'])} \\times {txt(p['t'])} = "
            f"{tex(_mean(p))} expected failures")


def _fleet_text(p):
    unit = "unit" if p["n"] == 1 else "units"
    return f"{p['n']} {p['_item']} {unit}"


# ---------------------------------------------------------------- probability of sufficiency

def _draw_sufficiency(rng):
    p = _draw_fleet(rng, 0.2, 5)
    m = _mean(p)
    p["s"] = int(rng.integers(max(0, math.floor(m) - 1), math.ceil(m) + 3))
    return p


def _solve_sufficiency(p):
    m, s = _mean(p), p["s"]
    terms = [m**k / math.factorial(k) for k in range(s + 1)]
    total = math.exp(-m) * sum(terms)
    return total, [
        _mean_line(p),
        f"P(N \\le {s}) = e^{{-m}} \\sum_{{k=0}}^{{{s}}} m^k/k! = e^{{-{tex(m)}}}"
        f"({' + '.join(tex(x) for x in terms)})",
        f"= {tex(math.exp(-m))} \\times {tex(sum(terms))} = {tex(total)}"]


def _check_sufficiency(p, rng):
    # replacements arrive as the superposition of n renewal processes: exponential gaps at n*lam
    gaps = rng.exponential(1 / (p["n"] * p["lam"]), (MC_N, p["s"] + 1))
    return mc_fraction(gaps.sum(axis=1) > p["t"], "simulated failure arrivals")


def _expr_sufficiency(p):
    return f"poisson_cdf({p['s']}, {p['n']}*{num(p['lam'])}*{num(p['t'])})"


SUFFICIENCY = Family(
    name="spares_sufficiency", topic="spares", difficulty=2,
    expression=_expr_sufficiency,
    asks="probability that s spares cover all failures of n units over a period (Poisson)",
    check_how="simulate exponential failure arrivals and check the (s+1)th comes too late",
    draw=_draw_sufficiency, solve=_solve_sufficiency, check=_check_sufficiency, bounds=PROB,
    phrasings=(
        lambda p: (f"A site operates {_fleet_text(p)}, each with a constant failure rate of "
                   f"{txt(p['lam'])} per hour; failed units are replaced from stock. What is the "
                   f"probability that {p['s']} spares are enough for {txt(p['t'], True)} hours?"),
        lambda p: (f"Spares kit: {p['s']} {p['_item']}s. Installed base: {p['n']}. Failure "
                   f"rate {txt(p['lam'] * 1e6)} per million hours each. Period without resupply: "
                   f"{txt(p['t'])} h. Find the probability of no stock-out."),
        lambda p: (f"For a mission of {txt(p['t'])} hours with {_fleet_text(p)} failing at "
                   f"{txt(p['lam'])}/h each (Poisson demand), compute the probability that "
                   f"demand for replacements does not exceed {p['s']}."),
    ),
)


# ---------------------------------------------------------------- spares for a target

def _draw_required(rng):
    p = _draw_fleet(rng, 0.5, 4)
    p["conf"] = pick(rng, (0.9, 0.95, 0.99))
    return p


def _solve_required(p):
    m, k, cum, lines = _mean(p), 0, 0.0, [_mean_line(p)]
    while True:
        cum += _pmf(m, k)
        lines.append(f"P(N \\le {k}) = {tex(cum)}")
        if cum >= p["conf"]:
            break
        k += 1
    lines.append(f"The smallest s with P(N \\le s) \\ge {p['conf']} is s = {k}")
    return k, lines


REQUIRED = Family(
    name="spares_required", topic="spares", difficulty=2,
    asks="smallest number of spares giving a target probability of sufficiency",
    check_how="scipy's Poisson percent-point function",
    draw=_draw_required, solve=_solve_required, unit="spares",
    phrasings=(
        lambda p: (f"How many spares are needed so that {_fleet_text(p)}, each failing at "
                   f"{txt(p['lam'])} per hour, can be kept running for {txt(p['t'], True)} hours "
                   f"with at least {pct(p['conf'])} probability of not running out?"),
        lambda p: (f"Poisson spares calculation: installed units {p['n']}, failure rate "
                   f"{txt(p['lam'] * 1e6)} per million hours, period {txt(p['t'])} h, "
                   f"required confidence {p['conf']}. Find the number of {p['_item']} spares."),
        lambda p: (f"Find the minimum stock of {p['_item']}s that meets demand with probability "
                   f"{pct(p['conf'])} over {txt(p['t'])} h, if {p['n']} units are in service and "
                   f"each fails at a constant rate of {txt(p['lam'])}/h."),
    ),
    check=lambda p, rng: exact(stats.poisson.ppf(p["conf"], _mean(p)), "scipy Poisson ppf"),
)


# ---------------------------------------------------------------- expected backorders

def _draw_backorders(rng):
    p = _draw_fleet(rng, 0.5, 5)
    p["s"] = int(rng.integers(0, math.ceil(_mean(p)) + 2))
    return p


def _solve_backorders(p):
    m, s = _mean(p), p["s"]
    probs = [_pmf(m, k) for k in range(s + 1)]
    inner = sum((s - k) * pk for k, pk in enumerate(probs))
    ebo = m - s + inner
    lines = [_mean_line(p), "EBO(s) = m - s + \\sum_{k=0}^{s} (s - k) P(N = k)"]
    if s:
        lines.append(", ".join(f"P(N = {k}) = {tex(pk)}" for k, pk in enumerate(probs[:-1])))
    lines.append(f"EBO({s}) = {tex(m)} - {s} + {tex(inner)} = {tex(ebo)}")
    return ebo, lines


BACKORDERS = Family(
    name="expected_backorders", topic="spares", difficulty=3,
    asks="expected number of backorders (unfilled demands) with s spares and Poisson demand",
    check_how="simulate Poisson demands and average the shortfall",
    draw=_draw_backorders, solve=_solve_backorders, unit="backorders",
    phrasings=(
        lambda p: (f"{_fleet_text(p).capitalize()} each fail at a constant rate of "
                   f"{txt(p['lam'])} per hour, and {p['s']} spares are stocked for a period of "
                   f"{txt(p['t'], True)} hours with no resupply. What is the expected number of "
                   f"backorders at the end of the period?"),
        lambda p: (f"Expected backorders calculation: stock level s = {p['s']}, Poisson demand "
                   f"from {p['n']} installed {p['_item']}s with failure rate "
                   f"{txt(p['lam'] * 1e6)} per million hours over {txt(p['t'])} h. Find EBO(s)."),
        lambda p: (f"Over {txt(p['t'])} h, failures of {_fleet_text(p)} (rate {txt(p['lam'])}/h "
                   f"each) are replaced from a stock of {p['s']}. Compute the expected number of "
                   f"demands that cannot be met, E[max(N - s, 0)]."),
    ),
    check=lambda p, rng: mc_mean(np.maximum(rng.poisson(_mean(p), 20 * MC_N) - p["s"], 0),
                                 "simulated Poisson demand shortfall"),
)

FAMILIES = [SUFFICIENCY, REQUIRED, BACKORDERS]
