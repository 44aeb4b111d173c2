"""Bayesian updating: gamma-Poisson for failure rates, beta-binomial for per-demand reliability.

Formulas: Modarres, Kaminskiy & Krivtsov ch. 5 (conjugate priors, credible bounds via chi-square).
"""
from __future__ import annotations

import math

from scipy import integrate, optimize, stats

from .base import (
    MC_N,
    PROB,
    Family,
    exact,
    grid,
    integrate_tail,
    mc_fraction,
    nice,
    num,
    num_pct,
    pct,
    pick,
    tex,
    txt,
)

ITEMS = ("diesel generator", "pressure transmitter", "circuit breaker", "check valve",
         "smoke detector", "pump")


# ---------------------------------------------------------------- gamma-Poisson

def _draw_gp(rng):
    return {"a": grid(rng, 1, 5, 0.5), "b": nice(rng, 1000, 100000), "r": int(rng.integers(0, 9)),
            "T": nice(rng, 1000, 200000), "_item": pick(rng, ITEMS)}


def _post_gp(p):
    return p["a"] + p["r"], p["b"] + p["T"]


def _posterior_density(p):
    """Unnormalized posterior of lambda from scipy's prior pdf times the Poisson likelihood."""
    prior = stats.gamma(p["a"], scale=1 / p["b"])
    return lambda lam: prior.pdf(lam) * stats.poisson.pmf(p["r"], lam * p["T"])


def _solve_gp_mean(p):
    a2, b2 = _post_gp(p)
    return a2 / b2, [
        f"Posterior: \\alpha' = \\alpha + r = {txt(p['a'])} + {p['r']} = {txt(a2)}, "
        f"\\beta' = \\beta + T = {txt(p['b'])} + {txt(p['T'])} = {txt(b2)} h",
        f"E[\\lambda | data] = \\alpha'/\\beta' = {txt(a2)}/{txt(b2)} = {tex(a2 / b2)} per hour"]


def _check_gp_mean(p, rng):
    f = _posterior_density(p)
    scale = 1 / _post_gp(p)[1]
    norm = integrate_tail(f, 0.0, scale)
    mean = integrate_tail(lambda lam: lam * f(lam), 0.0, scale)
    return exact(mean / norm, "integrate prior x likelihood numerically", rel=1e-6)


def _expr_gp_mean(p):
    return f"({num(p['a'])} + {p['r']})/({num(p['b'])} + {num(p['T'])})"


GP_MEAN = Family(
    name="gamma_poisson_mean", topic="bayesian", difficulty=2,
    expression=_expr_gp_mean,
    asks="posterior mean failure rate with a gamma prior and Poisson failure data",
    check_how="normalize prior x likelihood and integrate lambda against it numerically",
    draw=_draw_gp, solve=_solve_gp_mean, check=_check_gp_mean, unit="per hour",
    phrasings=(
        lambda p: (f"The failure rate of a {p['_item']} has a gamma prior with shape "
                   f"alpha = {txt(p['a'])} and rate beta = {txt(p['b'], True)} hours. In "
                   f"{txt(p['T'], True)} hours of operation {p['r']} failures were observed. Find "
                   f"the posterior mean of the failure rate (per hour)."),
        lambda p: (f"Prior knowledge about a {p['_item']} is equivalent to {txt(p['a'])} "
                   f"failures in {txt(p['b'])} hours (gamma prior). Field data then show "
                   f"{p['r']} failures in {txt(p['T'])} hours. What is the Bayesian point "
                   f"estimate (posterior mean) of lambda, per hour?"),
        lambda p: (f"Observed: {p['r']} failures during {txt(p['T'])} h of operation of "
                   f"{p['_item']}s. Using the conjugate prior Gamma(alpha = {txt(p['a'])}, "
                   f"beta = {txt(p['b'])} h), compute E[lambda | data] in failures per hour."),
    ),
    new_phrasings=(
        lambda p: (f"Before any field data, engineers judged the {p['_item']}'s failure rate to "
                   f"be gamma distributed with shape {txt(p['a'])} and rate {txt(p['b'])} "
                   f"hours. A further {txt(p['T'])} operating hours then produced {p['r']} "
                   f"failures. Update that belief and report the expected failure rate per "
                   f"hour."),
        lambda p: (f"Combine a conjugate gamma prior on the {p['_item']} failure rate (shape "
                   f"{txt(p['a'])}, rate {txt(p['b'], True)} h) with {p['r']} failures seen over "
                   f"{txt(p['T'], True)} h of exposure. What is the expected failure rate per "
                   f"hour afterwards?"),
    ),
)


def _draw_gp_upper(rng):
    p = _draw_gp(rng)
    p["conf"] = pick(rng, (0.9, 0.95))
    return p


def _solve_gp_upper(p):
    a2, b2 = _post_gp(p)
    q = stats.chi2.ppf(p["conf"], 2 * a2)
    upper = q / (2 * b2)
    return upper, [
        f"Posterior Gamma(\\alpha' = {txt(p['a'])} + {p['r']} = {txt(a2)}, \\beta' = "
        f"{txt(p['b'])} + {txt(p['T'])} = {txt(b2)} h)",
        f"\\lambda_U = \\chi^2_{{{p['conf']}, 2\\alpha'}}/(2\\beta') with 2\\alpha' = "
        f"{txt(2 * a2)}: \\chi^2 = {tex(q)}",
        f"\\lambda_U = {tex(q)}/(2 \\times {txt(b2)}) = {tex(upper)} per hour"]


def _check_gp_upper(p, rng):
    f = _posterior_density(p)
    scale = 1 / _post_gp(p)[1]
    norm = integrate_tail(f, 0.0, scale)

    def cdf(x):
        return integrate.quad(f, 0, x, epsabs=0, epsrel=1e-11, limit=200)[0] / norm

    root = optimize.brentq(lambda x: cdf(x) - p["conf"], scale * 1e-6, scale * 200, rtol=1e-12)
    return exact(root, "root-find the numerically integrated posterior CDF", rel=1e-6)


def _expr_gp_upper(p):
    a, b = f"({num(p['a'])} + {p['r']})", f"({num(p['b'])} + {num(p['T'])})"
    return f"chi2_ppf({num_pct(p['conf'])}, 2*{a})/(2*{b})"


GP_UPPER = Family(
    name="gamma_poisson_upper", topic="bayesian", difficulty=3,
    expression=_expr_gp_upper,
    asks="posterior upper credible bound on a failure rate (gamma prior, Poisson data)",
    check_how="root-find the numerically integrated posterior CDF",
    draw=_draw_gp_upper, solve=_solve_gp_upper, check=_check_gp_upper, unit="per hour",
    phrasings=(
        lambda p: (f"The failure rate of a {p['_item']} has a gamma prior with shape "
                   f"{txt(p['a'])} and rate {txt(p['b'], True)} hours. {p['r']} failures occur "
                   f"in {txt(p['T'], True)} hours. Find the {pct(p['conf'])} upper credible "
                   f"bound on the failure rate (per hour)."),
        lambda p: (f"Gamma(alpha = {txt(p['a'])}, beta = {txt(p['b'])} h) prior, evidence "
                   f"{p['r']} failures in {txt(p['T'])} h. Compute the one-sided "
                   f"{p['conf']} posterior upper limit of lambda for the {p['_item']}."),
        lambda p: (f"After observing {p['r']} failures in {txt(p['T'])} operating hours, what "
                   f"failure rate (per hour) is exceeded with posterior probability only "
                   f"{tex(1 - p['conf'])}, if the prior was gamma with alpha = {txt(p['a'])} and "
                   f"beta = {txt(p['b'])} hours? The item is a {p['_item']}."),
    ),
)


# ---------------------------------------------------------------- beta-binomial

def _draw_bb(rng):
    n = int(rng.integers(5, 61))
    return {"a0": int(rng.integers(1, 11)), "b0": int(rng.integers(1, 6)), "n": n,
            "s": n - int(rng.integers(0, min(5, n) + 1)), "_item": pick(rng, ITEMS)}


def _post_bb(p):
    return p["a0"] + p["s"], p["b0"] + p["n"] - p["s"]


def _solve_bb_mean(p):
    a2, b2 = _post_bb(p)
    return a2 / (a2 + b2), [
        f"Posterior Beta(\\alpha + s, \\beta + n - s) = Beta({a2}, {b2})",
        f"E[R | data] = {a2}/({a2} + {b2}) = {tex(a2 / (a2 + b2))}"]


def _check_bb_mean(p, rng):
    prior = stats.beta(p["a0"], p["b0"])

    def post(r):
        return prior.pdf(r) * stats.binom.pmf(p["s"], p["n"], r)

    norm = integrate.quad(post, 0, 1, epsabs=0, epsrel=1e-12, limit=200)[0]
    mean = integrate.quad(lambda r: r * post(r), 0, 1, epsabs=0, epsrel=1e-12, limit=200)[0]
    return exact(mean / norm, "integrate prior x likelihood numerically")


def _bb_phrasings(tail):
    return (
        lambda p: (f"The per-demand reliability of a {p['_item']} has a Beta({p['a0']}, "
                   f"{p['b0']}) prior. In {p['n']} demands it succeeded {p['s']} times. "
                   + tail(p)),
        lambda p: (f"Prior belief about a {p['_item']} is worth {p['a0']} successes and "
                   f"{p['b0']} failures (beta prior). A test then gives {p['n'] - p['s']} "
                   f"failures in {p['n']} demands. " + tail(p)),
        lambda p: (f"Test result: {p['s']} successes out of {p['n']} demands on a "
                   f"{p['_item']}. Prior for the success probability: beta with alpha = "
                   f"{p['a0']}, beta = {p['b0']}. " + tail(p)),
    )


def _expr_bb_mean(p):
    return f"({p['a0']} + {p['s']})/({p['a0']} + {p['b0']} + {p['n']})"


BB_MEAN = Family(
    name="beta_binomial_mean", topic="bayesian", difficulty=1,
    expression=_expr_bb_mean,
    asks="posterior mean per-demand reliability with a beta prior and pass/fail data",
    check_how="normalize prior x likelihood and integrate R against it numerically",
    draw=_draw_bb, solve=_solve_bb_mean, check=_check_bb_mean, bounds=PROB,
    phrasings=_bb_phrasings(lambda p: "Find the posterior mean of the reliability."),
)


def _draw_bb_pred(rng):
    p = _draw_bb(rng)
    p["m"] = int(rng.integers(2, 5))
    return p


def _solve_bb_pred(p):
    a2, b2 = _post_bb(p)
    factors = [(a2 + j) / (a2 + b2 + j) for j in range(p["m"])]
    shown = " \\times ".join(f"({a2 + j}/{a2 + b2 + j})" for j in range(p["m"]))
    return math.prod(factors), [
        f"Posterior Beta({a2}, {b2}).",
        f"P(next {p['m']} succeed) = \\prod_{{j=0}}^{{{p['m'] - 1}}} (\\alpha' + j)/(\\alpha' + "
        f"\\beta' + j) = {shown}",
        f"= {tex(math.prod(factors))}"]


def _check_bb_pred(p, rng):
    a2, b2 = _post_bb(p)
    r = rng.beta(a2, b2, MC_N)
    demands = rng.random((MC_N, p["m"])) < r[:, None]
    return mc_fraction(demands.all(axis=1), "draw R from the posterior, simulate the demands")


BB_PREDICTIVE = Family(
    name="beta_binomial_predictive", topic="bayesian", difficulty=3,
    asks="posterior predictive probability that the next m demands all succeed",
    check_how="draw R from the posterior beta, simulate m demands",
    draw=_draw_bb_pred, solve=_solve_bb_pred, check=_check_bb_pred, bounds=PROB,
    phrasings=_bb_phrasings(lambda p: (f"What is the posterior predictive probability that "
                                       f"the next {p['m']} demands all succeed?")),
)

FAMILIES = [GP_MEAN, GP_UPPER, BB_MEAN, BB_PREDICTIVE]
