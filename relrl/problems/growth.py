"""Reliability growth: Duane model and Crow-AMSAA (power-law NHPP) estimation and prediction.

Formulas: Modarres, Kaminskiy & Krivtsov ch. 8; MIL-HDBK-189C (Crow-AMSAA MLE, time-terminated).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import integrate, optimize

from .base import Family, exact, grid, nice, num, pick, tex, txt

SYSTEMS = ("prototype gearbox", "radar transmitter", "fuel control unit", "engine prototype",
           "medical infusion pump design")


# ---------------------------------------------------------------- Duane

def _draw_duane(rng):
    t1 = nice(rng, 200, 2000)
    return {"mc1": nice(rng, 20, 300), "t1": t1, "alpha": grid(rng, 0.2, 0.6, 0.05),
            "t2": float(f"{t1 * nice(rng, 3, 30):.2g}"), "_sys": pick(rng, SYSTEMS)}


def _solve_duane(p):
    mc2 = p["mc1"] * (p["t2"] / p["t1"]) ** p["alpha"]
    mi = mc2 / (1 - p["alpha"])
    return mi, [
        f"\\theta_c(t_2) = \\theta_c(t_1)(t_2/t_1)^\\alpha = {txt(p['mc1'])} \\times "
        f"({txt(p['t2'])}/{txt(p['t1'])})^{{{p['alpha']}}} = {tex(mc2)} h",
        f"\\theta_i(t_2) = \\theta_c(t_2)/(1 - \\alpha) = {tex(mc2)}/{tex(1 - p['alpha'])} = "
        f"{tex(mi)} hours"]


def _check_duane(p, rng):
    def failures(t):  # cumulative failures N(t) = t / theta_c(t)
        return t / (p["mc1"] * (t / p["t1"]) ** p["alpha"])

    h = p["t2"] * 1e-5
    rate = (failures(p["t2"] + h) - failures(p["t2"] - h)) / (2 * h)
    return exact(1 / rate, "numerical derivative of the cumulative failure count", rel=1e-7)


def _expr_duane(p):
    a = num(p["alpha"])
    return f"{num(p['mc1'])}*({num(p['t2'])}/{num(p['t1'])})^{a}/(1 - {a})"


DUANE = Family(
    name="duane_mtbf", topic="growth", difficulty=2,
    expression=_expr_duane,
    asks="instantaneous MTBF later in a Duane growth programme from one cumulative MTBF",
    check_how="numerical derivative of the cumulative number of failures",
    draw=_draw_duane, solve=_solve_duane, check=_check_duane, unit="hours",
    phrasings=(
        lambda p: (f"During development of a {p['_sys']}, the cumulative MTBF was "
                   f"{txt(p['mc1'])} hours after {txt(p['t1'])} test hours. The Duane growth "
                   f"rate is alpha = {p['alpha']}. What instantaneous MTBF is expected at "
                   f"{txt(p['t2'], True)} test hours?"),
        lambda p: (f"Duane model, growth slope {p['alpha']}: cumulative MTBF {txt(p['mc1'])} h "
                   f"at T = {txt(p['t1'])} h. Predict the current (instantaneous) MTBF of the "
                   f"{p['_sys']} at T = {txt(p['t2'])} h."),
        lambda p: (f"A {p['_sys']} reliability growth test is planned to {txt(p['t2'], True)} "
                   f"hours. At {txt(p['t1'], True)} hours the cumulative MTBF stood at "
                   f"{txt(p['mc1'])} hours, and the Duane plot slope is {p['alpha']}. Find the "
                   f"instantaneous MTBF at the end of the test."),
    ),
    new_phrasings=(
        lambda p: (f"Test-analyse-and-fix on a {p['_sys']} has so far logged {txt(p['t1'])} "
                   f"hours, over which the average time between failures came to "
                   f"{txt(p['mc1'])} hours. Assuming Duane growth with exponent {p['alpha']}, "
                   f"estimate the instantaneous mean time between failures once the test clock "
                   f"reaches {txt(p['t2'])} hours."),
        lambda p: (f"Growth tracking for a {p['_sys']}: accumulated test time {txt(p['t1'])} h, "
                   f"cumulative mean time between failures {txt(p['mc1'])} h, Duane slope "
                   f"{p['alpha']}. If the trend holds, what will the point (instantaneous) "
                   f"mean time between failures be after {txt(p['t2'], True)} h in total?"),
    ),
)


# ---------------------------------------------------------------- Crow-AMSAA MLE

def _draw_crow(rng):
    n = int(rng.integers(8, 13))
    stop = nice(rng, 500, 5000)
    beta = grid(rng, 0.4, 0.9, 0.05)
    while True:  # given n failures by T, the times are iid with CDF (t/T)^beta
        times = np.sort(np.round(stop * rng.random(n) ** (1 / beta)))
        if times[0] > 0 and times[-1] < stop and len(set(times)) == n:
            return {"stop": stop, "times": tuple(float(x) for x in times),
                    "_sys": pick(rng, SYSTEMS)}


def _solve_crow(p):
    n, stop = len(p["times"]), p["stop"]
    s = sum(math.log(stop / t) for t in p["times"])
    beta = n / s
    lam = n / stop**beta
    mtbf = stop / (n * beta)
    return mtbf, [
        f"n = {n}, T = {txt(stop)} h, \\sum \\ln(T/t_i) = {tex(s)}",
        f"\\hat\\beta = n/\\sum \\ln(T/t_i) = {n}/{tex(s)} = {tex(beta)}",
        f"\\hat\\lambda = n/T^{{\\hat\\beta}} = {tex(lam)}",
        f"MTBF_i(T) = 1/(\\hat\\lambda \\hat\\beta T^{{\\hat\\beta - 1}}) = T/(n\\hat\\beta) = "
        f"{txt(stop)}/({n} \\times {tex(beta)}) = {tex(mtbf)} hours"]


def _check_crow(p, rng):
    t, stop, n = np.array(p["times"]), p["stop"], len(p["times"])

    def neg_loglik(x):  # x = (log lambda, beta): power-law NHPP observed on (0, T]
        log_lam, beta = x
        if beta <= 0:
            return math.inf
        return -(n * log_lam + n * math.log(beta) + (beta - 1) * np.log(t).sum()
                 - math.exp(log_lam) * stop**beta)

    start = np.array([math.log(n / stop**0.7), 0.7])
    res = optimize.minimize(neg_loglik, start, method="Nelder-Mead",
                            options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 20000})
    lam, beta = math.exp(res.x[0]), res.x[1]
    return exact(1 / (lam * beta * stop ** (beta - 1)), "numerical maximization of the NHPP "
                 "likelihood", rel=1e-5)


CROW_MLE = Family(
    name="crow_amsaa_mle", topic="growth", difficulty=3,
    asks="Crow-AMSAA MLE of the instantaneous MTBF at the end of a time-terminated test",
    check_how="maximize the power-law NHPP likelihood numerically (Nelder-Mead)",
    draw=_draw_crow, solve=_solve_crow, check=_check_crow, unit="hours",
    phrasings=(
        lambda p: (f"A {p['_sys']} growth test ran for {txt(p['stop'])} hours (time-terminated) "
                   f"with failures at {', '.join(txt(x) for x in p['times'])} hours. Fitting the "
                   f"Crow-AMSAA model by maximum likelihood, estimate the instantaneous MTBF at "
                   f"the end of the test."),
        lambda p: (f"Crow-AMSAA (power-law NHPP) analysis. Test time T = "
                   f"{txt(p['stop'], True)} h; cumulative failure times (h): "
                   f"{', '.join(txt(x) for x in p['times'])}. Find the MLE of the current MTBF "
                   f"at T, in hours."),
        lambda p: (f"Failure times of a {p['_sys']} during reliability growth testing were "
                   f"{', '.join(txt(x) for x in p['times'])} h, and testing stopped at "
                   f"{txt(p['stop'])} h. What is the demonstrated (instantaneous) MTBF at the "
                   f"end of testing under the AMSAA model?"),
    ),
)


# ---------------------------------------------------------------- Crow-AMSAA prediction

def _draw_crow_expected(rng):
    t1 = nice(rng, 100, 2000)
    return {"lam": nice(rng, 0.2, 3), "beta": grid(rng, 0.3, 0.9, 0.05), "t1": t1,
            "t2": float(f"{t1 + nice(rng, 0.2 * t1, 3 * t1):.2g}"), "_sys": pick(rng, SYSTEMS)}


def _solve_crow_expected(p):
    n1 = p["lam"] * p["t1"] ** p["beta"]
    n2 = p["lam"] * p["t2"] ** p["beta"]
    return n2 - n1, [
        f"N(t_2) = \\lambda t_2^\\beta = {txt(p['lam'])} \\times {txt(p['t2'])}^{{{p['beta']}}} = "
        f"{tex(n2)}",
        f"N(t_1) = {txt(p['lam'])} \\times {txt(p['t1'])}^{{{p['beta']}}} = {tex(n1)}",
        f"E[N(t_1, t_2)] = {tex(n2)} - {tex(n1)} = {tex(n2 - n1)} failures"]


def _expr_crow_expected(p):
    lam, b = num(p["lam"]), num(p["beta"])
    return f"{lam}*{num(p['t2'])}^{b} - {lam}*{num(p['t1'])}^{b}"


CROW_EXPECTED = Family(
    name="crow_amsaa_expected", topic="growth", difficulty=2,
    expression=_expr_crow_expected,
    asks="expected number of failures in a test interval under the power-law NHPP",
    check_how="integrate the failure intensity lambda beta t^(beta-1) numerically",
    draw=_draw_crow_expected, solve=_solve_crow_expected, unit="failures",
    phrasings=(
        lambda p: (f"The failures of a {p['_sys']} follow a Crow-AMSAA model with lambda = "
                   f"{txt(p['lam'])} and beta = {p['beta']} (time in hours). How many failures "
                   f"are expected between {txt(p['t1'])} and {txt(p['t2'])} test hours?"),
        lambda p: (f"Power-law NHPP with cumulative mean N(t) = {txt(p['lam'])} t^{p['beta']} "
                   f"(t in hours). Compute the expected number of failures of the {p['_sys']} "
                   f"in the interval ({txt(p['t1'])} h, {txt(p['t2'])} h]."),
        lambda p: (f"A {p['_sys']} has failure intensity u(t) = lambda beta t^(beta - 1) with "
                   f"beta = {p['beta']} and lambda = {txt(p['lam'])}, t in hours. Find the "
                   f"expected failures from t = {txt(p['t1'], True)} h to t = "
                   f"{txt(p['t2'], True)} h."),
    ),
    new_phrasings=(
        lambda p: (f"For a {p['_sys']} in reliability growth testing, the cumulative number of "
                   f"failures by time t (in hours) is modelled as {txt(p['lam'])} × "
                   f"t^{p['beta']}. How many failures should be expected from hour "
                   f"{txt(p['t1'])} to hour {txt(p['t2'])} of the test?"),
        lambda p: (f"Using a Crow-AMSAA model with scale {txt(p['lam'])} and shape {p['beta']}, "
                   f"time in hours, estimate how many {p['_sys']} failures will occur after the "
                   f"test has passed {txt(p['t1'], True)} hours and before it reaches "
                   f"{txt(p['t2'], True)} hours."),
    ),
    check=lambda p, rng: exact(integrate.quad(
        lambda t: p["lam"] * p["beta"] * t ** (p["beta"] - 1), p["t1"], p["t2"],
        epsabs=0, epsrel=1e-12)[0], "integrate the intensity numerically"),
)

FAMILIES = [DUANE, CROW_MLE, CROW_EXPECTED]
