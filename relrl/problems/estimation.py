"""Estimation from test data: exponential MLE with type I and type II censoring, chi-square
lower bound on MTBF, zero-failure sample size, binomial lower bound on reliability.

Formulas: Modarres, Kaminskiy & Krivtsov ch. 5 (total time on test, chi-square bounds);
O'Connor ch. 14 (success testing, demonstration).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

from .base import PROB, Family, exact, grid, nice, num, num_pct, pct, pick, tex, txt

ITEMS = ("relay", "transistor", "pump", "valve", "heater", "display module")
CONF = (0.8, 0.9, 0.95)


def _times(values) -> str:
    return ", ".join(txt(v) for v in values)


def _mle_rate(failures: list[float], censored: list[float]) -> float:
    """Maximize the exponential log-likelihood numerically (failures + right-censored times)."""
    fail, cens = np.array(failures), np.array(censored)

    def neg_loglik(log_lam):
        lam = math.exp(log_lam)
        return -(fail.size * log_lam - lam * (fail.sum() + cens.sum()))

    total = fail.sum() + cens.sum()
    centre = math.log(fail.size / total)
    res = optimize.minimize_scalar(neg_loglik, bounds=(centre - 8, centre + 8), method="bounded",
                                   options={"xatol": 1e-12})
    return math.exp(res.x)


# ---------------------------------------------------------------- type I (time-terminated)

def _draw_type1(rng):
    while True:
        theta = nice(rng, 500, 20000)
        n = int(rng.integers(8, 31))
        stop = nice(rng, 0.2 * theta, theta)
        lives = np.round(rng.exponential(theta, n))
        fails = sorted(float(x) for x in lives if 0 < x < stop)
        if 2 <= len(fails) <= 8:
            return {"n": n, "stop": stop, "fails": tuple(fails), "_item": pick(rng, ITEMS)}


def _solve_type1(p):
    n, stop, fails = p["n"], p["stop"], p["fails"]
    r = len(fails)
    total = sum(fails) + (n - r) * stop
    return total / r, [
        f"r = {r} failures, {n - r} units survive to T = {txt(stop)} h.",
        f"T^* = \\sum t_i + (n - r)T = {txt(sum(fails))} + {n - r} \\times {txt(stop)} = "
        f"{txt(total)} h",
        f"\\hat\\theta = T^*/r = {txt(total)}/{r} = {tex(total / r)} hours"]


TYPE1 = Family(
    name="exp_mle_type1", topic="estimation", difficulty=2,
    asks="MLE of the exponential mean life from a time-terminated (type I censored) test",
    check_how="maximize the censored exponential log-likelihood numerically",
    draw=_draw_type1, solve=_solve_type1, unit="hours",
    phrasings=(
        lambda p: (f"{p['n']} {p['_item']}s were tested for {txt(p['stop'])} hours without "
                   f"replacement. {len(p['fails'])} failed, at {_times(p['fails'])} hours. "
                   f"Assuming an exponential life, estimate the MTTF by maximum likelihood."),
        lambda p: (f"Type I censored life test of {p['_item']}s: n = {p['n']}, test terminated at "
                   f"T = {txt(p['stop'], True)} h, failure times (h): "
                   f"{_times(reversed(p['fails']))}. Find the maximum likelihood estimate of the "
                   f"mean life in hours (exponential model)."),
        lambda p: (f"A test of {p['n']} {p['_item']}s was stopped after {txt(p['stop'])} h. "
                   f"Failures occurred at {_times(p['fails'])} h; the other "
                   f"{p['n'] - len(p['fails'])} units were still running. What is the MLE of "
                   f"the mean time to failure, in hours, for a constant failure rate?"),
    ),
    check=lambda p, rng: exact(1 / _mle_rate(
        list(p["fails"]), [p["stop"]] * (p["n"] - len(p["fails"]))),
        "numerical maximization of the likelihood", rel=1e-7),
)


# ---------------------------------------------------------------- type II (failure-terminated)

def _draw_type2(rng):
    theta = nice(rng, 500, 20000)
    r = int(rng.integers(3, 9))
    n = int(rng.integers(r + 2, 26))
    while True:
        lives = np.sort(np.round(rng.exponential(theta, n)))
        if lives[0] > 0 and len(set(lives[:r])) == r:
            return {"n": n, "fails": tuple(float(x) for x in lives[:r]),
                    "_item": pick(rng, ITEMS)}


def _solve_type2(p):
    n, fails = p["n"], p["fails"]
    r, last = len(fails), fails[-1]
    total = sum(fails) + (n - r) * last
    lam = r / total
    return lam, [
        f"The test stopped at the r = {r}th failure, t_r = {txt(last)} h; {n - r} units survived.",
        f"T^* = \\sum t_i + (n - r)t_r = {txt(sum(fails))} + {n - r} \\times {txt(last)} = "
        f"{txt(total)} h",
        f"\\hat\\lambda = r/T^* = {r}/{txt(total)} = {tex(lam)} per hour"]


TYPE2 = Family(
    name="exp_mle_type2", topic="estimation", difficulty=2,
    asks="MLE of the exponential failure rate from a failure-terminated (type II censored) test",
    check_how="maximize the censored exponential log-likelihood numerically",
    draw=_draw_type2, solve=_solve_type2, unit="per hour",
    phrasings=(
        lambda p: (f"{p['n']} {p['_item']}s were put on test and the test was stopped at the "
                   f"{len(p['fails'])}th failure. The failure times were {_times(p['fails'])} "
                   f"hours. Estimate the constant failure rate (per hour) by maximum likelihood."),
        lambda p: (f"Type II censored test: n = {p['n']}, r = {len(p['fails'])}, ordered failure "
                   f"times {_times(p['fails'])} h. Find the MLE of lambda for an exponential "
                   f"life of the {p['_item']}, in failures per hour."),
        lambda p: (f"A failure-terminated test of {p['_item']}s (no replacement) ended when the "
                   f"{len(p['fails'])}th of {p['n']} units failed at {txt(p['fails'][-1])} h. "
                   f"Earlier failures: {_times(p['fails'][:-1])} h. What is the maximum "
                   f"likelihood estimate of the failure rate, per hour?"),
    ),
    check=lambda p, rng: exact(_mle_rate(
        list(p["fails"]), [p["fails"][-1]] * (p["n"] - len(p["fails"]))),
        "numerical maximization of the likelihood", rel=1e-7),
)


# ---------------------------------------------------------------- chi-square lower bound

def _draw_chi2(rng):
    return {"T": nice(rng, 5000, 500000), "r": int(rng.integers(0, 7)), "conf": pick(rng, CONF),
            "_item": pick(rng, ITEMS)}


def _solve_chi2(p):
    dof = 2 * p["r"] + 2
    q = stats.chi2.ppf(p["conf"], dof)
    bound = 2 * p["T"] / q
    return bound, [
        f"Time-terminated test: \\nu = 2r + 2 = {dof} degrees of freedom.",
        f"\\chi^2_{{{p['conf']}, {dof}}} = {tex(q)}",
        f"\\theta_L = 2T/\\chi^2 = 2 \\times {txt(p['T'])}/{tex(q)} = {tex(bound)} hours"]


def _poisson_cdf(k: int, mean: float) -> float:
    term, total = math.exp(-mean), 0.0
    for i in range(k + 1):
        total += term
        term *= mean / (i + 1)
    return total


def _check_chi2(p, rng):
    # theta_L is the MTBF at which observing <= r failures in T has probability 1 - C
    theta = optimize.brentq(lambda th: _poisson_cdf(p["r"], p["T"] / th) - (1 - p["conf"]),
                            p["T"] / 1e3, p["T"] * 1e3, rtol=1e-13)
    return exact(theta, "root-find the MTBF where P(N <= r) = 1 - C (Poisson sum)")


def _expr_chi2(p):
    return f"2*{num(p['T'])}/chi2_ppf({num_pct(p['conf'])}, 2*{p['r']} + 2)"


CHI2_LOWER = Family(
    name="chi2_mtbf_lower", topic="estimation", difficulty=2,
    expression=_expr_chi2,
    asks="one-sided lower confidence bound on MTBF from a time-terminated test (chi-square)",
    check_how="root-find the MTBF at which the Poisson probability of <= r failures is 1 - C",
    draw=_draw_chi2, solve=_solve_chi2, check=_check_chi2, unit="hours",
    phrasings=(
        lambda p: (f"A time-terminated reliability test of {p['_item']}s accumulated "
                   f"{txt(p['T'], True)} unit-hours with {p['r']} failures. Find the one-sided "
                   f"{pct(p['conf'])} lower confidence limit on the MTBF (exponential life)."),
        lambda p: (f"Total test time {txt(p['T'])} h, number of failures {p['r']}, test "
                   f"truncated at a fixed time. What MTBF has been demonstrated at "
                   f"{p['conf']} confidence (lower bound, hours)?"),
        lambda p: (f"With {p['r']} failures observed in {txt(p['T'], True)} cumulative hours "
                   f"of testing (time-truncated), compute the lower {pct(p['conf'])} confidence "
                   f"bound on the mean time between failures of the {p['_item']}."),
    ),
)


# ---------------------------------------------------------------- zero-failure sample size

def _draw_zero(rng):
    return {"R": grid(rng, 0.8, 0.99, 0.01), "conf": pick(rng, (0.8, 0.85, 0.9, 0.95, 0.975, 0.99)),
            "_item": pick(rng, ITEMS)}


def _solve_zero(p):
    x = math.log(1 - p["conf"]) / math.log(p["R"])
    n = math.ceil(x)
    return n, ["Zero failures: C = 1 - R^n, so n \\ge \\ln(1 - C)/\\ln R",
               f"n \\ge \\ln({tex(1 - p['conf'])})/\\ln({p['R']}) = {tex(x)}",
               f"Round up: n = {n} units"]


def _check_zero(p, rng):
    n = 1
    while 1 - p["R"] ** n < p["conf"]:
        n += 1
    return exact(n, "search n = 1, 2, ... until 1 - R^n >= C")


ZERO_FAILURE = Family(
    name="zero_failure_sample_size", topic="estimation", difficulty=2,
    asks="number of units to test with zero failures to demonstrate R at confidence C",
    check_how="search n upward until 1 - R^n reaches C",
    draw=_draw_zero, solve=_solve_zero, check=_check_zero, unit="units",
    phrasings=(
        lambda p: (f"How many {p['_item']}s must be tested with no failures allowed to "
                   f"demonstrate a reliability of {p['R']} at {pct(p['conf'])} confidence?"),
        lambda p: (f"A success-run test plan must show R >= {pct(p['R'])} with confidence "
                   f"C = {p['conf']}, accepting zero failures. What sample size is needed?"),
        lambda p: (f"Zero-failure binomial demonstration test: confidence {p['conf']}, "
                   f"reliability to be demonstrated {p['R']}. Find the minimum number of "
                   f"{p['_item']}s to test."),
    ),
)


# ---------------------------------------------------------------- binomial lower bound

def _draw_binom_lb(rng):
    return {"n": int(rng.integers(10, 61)), "f": int(rng.integers(0, 4)),
            "conf": pick(rng, CONF), "_item": pick(rng, ITEMS)}


def _solve_binom_lb(p):
    n, f, c = p["n"], p["f"], p["conf"]
    bound = stats.beta.ppf(1 - c, n - f, f + 1)
    if f == 0:
        return bound, ["With no failures, R_L^n = 1 - C, so R_L = (1 - C)^{1/n}",
                       f"R_L = {tex(1 - c)}^{{1/{n}}} = {tex(bound)}"]
    return bound, [
        f"R_L solves \\sum_{{i=0}}^{{{f}}} C({n}, i)(1 - R_L)^i R_L^{{{n}-i}} = 1 - C = "
        f"{tex(1 - c)}",
        f"Equivalently R_L is the {tex(1 - c)} quantile of Beta({n - f}, {f + 1}).",
        f"R_L = {tex(bound)}"]


def _check_binom_lb(p, rng):
    n, f, c = p["n"], p["f"], p["conf"]

    def tail(r):
        return sum(math.comb(n, i) * (1 - r) ** i * r ** (n - i) for i in range(f + 1))

    root = optimize.brentq(lambda r: tail(r) - (1 - c), 1e-9, 1 - 1e-12, xtol=1e-15, rtol=1e-13)
    return exact(root, "root-find R where P(<= f failures in n) = 1 - C")


def _expr_binom_lb(p):
    n, f = p["n"], p["f"]
    return f"beta_ppf(1 - {num_pct(p['conf'])}, {n} - {f}, {f} + 1)"


BINOMIAL_LB = Family(
    name="binomial_lower_bound", topic="estimation", difficulty=3,
    expression=_expr_binom_lb,
    asks="one-sided lower confidence bound on reliability from n trials with f failures",
    check_how="root-find the binomial cumulative probability equation",
    draw=_draw_binom_lb, solve=_solve_binom_lb, check=_check_binom_lb, bounds=PROB,
    phrasings=(
        lambda p: (f"{p['n']} {p['_item']}s were tested and {p['f']} failed. Find the one-sided "
                   f"{pct(p['conf'])} lower confidence bound on the reliability (exact binomial)."),
        lambda p: (f"In {p['n']} demands, a {p['_item']} failed {p['f']} times. Compute the "
                   f"Clopper-Pearson lower limit of the success probability at confidence "
                   f"{p['conf']}."),
        lambda p: (f"Attribute test: failures {p['f']}, sample size {p['n']}, confidence level "
                   f"{pct(p['conf'])}. What reliability is demonstrated (lower bound)?"),
    ),
)

FAMILIES = [TYPE1, TYPE2, CHI2_LOWER, ZERO_FAILURE, BINOMIAL_LB]
