"""Common-cause failures with the beta-factor model: a redundant pair and a 2-out-of-3 system.

Formulas: Modarres, Kaminskiy & Krivtsov ch. 7 (beta-factor model); IEC 61508-6 annex D.
"""
from __future__ import annotations

import math

from .base import MC_N, PROB, Family, grid, mc_fraction, nice, num, pct, pick, tex, txt

TRAINS = ("emergency pump", "safety relief valve", "pressure transmitter", "diesel generator")


def _draw(rng):
    lam = nice(rng, 1e-5, 1e-3)
    return {"lam": lam, "beta": grid(rng, 0.01, 0.15, 0.01), "t": nice(rng, 0.1 / lam, 2 / lam),
            "_train": pick(rng, TRAINS)}


def _split(p):
    lam_i = (1 - p["beta"]) * p["lam"]
    lam_c = p["beta"] * p["lam"]
    r_i = math.exp(-lam_i * p["t"])
    r_c = math.exp(-lam_c * p["t"])
    lines = [f"\\lambda_I = (1 - \\beta)\\lambda = {tex(1 - p['beta'])} \\times {txt(p['lam'])} = "
             f"{tex(lam_i)}, \\lambda_C = \\beta\\lambda = {tex(lam_c)} per hour",
             f"R_I = e^{{-\\lambda_I t}} = {tex(r_i)}, R_C = e^{{-\\lambda_C t}} = {tex(r_c)}"]
    return r_i, r_c, lines


def _simulate(p, rng, n_units: int, needed: int):
    """Independent lives plus one common shock that fails every unit at once."""
    lam_i, lam_c = (1 - p["beta"]) * p["lam"], p["beta"] * p["lam"]
    indep = rng.exponential(1 / lam_i, (MC_N, n_units))
    shock = rng.exponential(1 / lam_c, MC_N)
    alive = (indep > p["t"]).sum(axis=1)
    return mc_fraction((shock > p["t"]) & (alive >= needed), "simulated independent and "
                       "common-cause failures")


def _solve_pair(p):
    r_i, r_c, lines = _split(p)
    r = r_c * (1 - (1 - r_i) ** 2)
    return r, [*lines, f"R = R_C[1 - (1 - R_I)^2] = {tex(r_c)} \\times [1 - {tex(1 - r_i)}^2] = "
                       f"{tex(r)}"]


def _phrasings(layout: str, short: str):
    return (
        lambda p: (f"{layout.format(train=p['_train'])} Each unit has a total failure rate of "
                   f"{txt(p['lam'])} per hour, of which a fraction beta = {p['beta']} is due to "
                   f"common causes (beta-factor model). Find the system reliability for "
                   f"{txt(p['t'])} hours."),
        lambda p: (f"Beta-factor model: lambda = {txt(p['lam'] * 1e6)} failures per million hours "
                   f"per unit, beta = {pct(p['beta'])}, "
                   f"mission time {txt(p['t'], True)} h. Compute the reliability of {short} of "
                   f"{p['_train']}s."),
        lambda p: (f"Including common-cause failures (beta = {p['beta']}), what is the "
                   f"probability that {short} of {p['_train']}s, each failing at "
                   f"{txt(p['lam'])}/h in total, survives {txt(p['t'])} h?"),
    )


def _expr_pair(p):
    b, lt = num(p["beta"]), f"{num(p['lam'])}*{num(p['t'])}"
    return f"exp(-{b}*{lt})*(1 - (1 - exp(-(1 - {b})*{lt}))^2)"


BETA_PAIR = Family(
    name="beta_factor_pair", topic="common_cause", difficulty=2,
    expression=_expr_pair,
    asks="reliability of a redundant pair with beta-factor common-cause failures",
    check_how="simulate independent lives plus a shared common-cause shock",
    draw=_draw, solve=_solve_pair, check=lambda p, rng: _simulate(p, rng, 2, 1), bounds=PROB,
    phrasings=_phrasings("Two identical {train}s operate in active parallel (1-out-of-2).",
                         "a 1-out-of-2 pair"),
)


def _solve_2oo3(p):
    r_i, r_c, lines = _split(p)
    vote = 3 * r_i**2 - 2 * r_i**3
    r = r_c * vote
    return r, [*lines, f"2oo3 of independent parts: 3R_I^2 - 2R_I^3 = {tex(vote)}",
               f"R = R_C \\times {tex(vote)} = {tex(r)}"]


def _expr_2oo3(p):
    b, lt = num(p["beta"]), f"{num(p['lam'])}*{num(p['t'])}"
    r_i = f"exp(-(1 - {b})*{lt})"
    return f"exp(-{b}*{lt})*(3*{r_i}^2 - 2*{r_i}^3)"


BETA_2OO3 = Family(
    name="beta_factor_2oo3", topic="common_cause", difficulty=3,
    expression=_expr_2oo3,
    asks="reliability of a 2-out-of-3 system with beta-factor common-cause failures",
    check_how="simulate independent lives plus a shared common-cause shock",
    draw=_draw, solve=_solve_2oo3, check=lambda p, rng: _simulate(p, rng, 3, 2), bounds=PROB,
    phrasings=_phrasings("Three identical {train}s form a 2-out-of-3 voting system.",
                         "a 2-out-of-3 system"),
)

FAMILIES = [BETA_PAIR, BETA_2OO3]
