"""Life distributions: exponential, Weibull (2- and 3-parameter), normal, lognormal, Erlang.

Formulas: Modarres, Kaminskiy & Krivtsov, Reliability Engineering and Risk Analysis, ch. 3;
Ebeling, An Introduction to Reliability and Maintainability Engineering, ch. 4-5.
"""
from __future__ import annotations

import math

from scipy import integrate, optimize, special, stats

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
    pct,
    pick,
    tex,
    txt,
)

ITEMS = ("pump", "valve", "power supply", "controller board", "sensor", "compressor")
# (item, unit, smallest and largest characteristic life in that unit)
WEIBULL_ITEMS = (("ball bearing", "hours", 2000, 50000), ("gearbox", "hours", 5000, 80000),
                 ("pump seal", "hours", 1000, 20000), ("relay", "cycles", 2e4, 1e6),
                 ("solenoid valve", "cycles", 5e4, 2e6), ("brake pad", "km", 2e4, 9e4))
PHI = stats.norm.cdf


def _weibull_draw(rng, with_location=False):
    item, unit, lo, hi = WEIBULL_ITEMS[int(rng.integers(0, len(WEIBULL_ITEMS)))]
    eta = nice(rng, lo, hi)
    p = {"beta": grid(rng, 0.7, 3.5, 0.1), "eta": eta, "_item": item, "_unit": unit}
    if with_location:
        p["gamma"] = nice(rng, 0.05 * eta, 0.5 * eta)
    return p


def _weibull_sample(p, rng, size=MC_N):
    return p.get("gamma", 0.0) + p["eta"] * rng.weibull(p["beta"], size)


# ---------------------------------------------------------------- exponential

def _draw_exp(rng):
    lam = nice(rng, 1e-6, 5e-4)
    return {"lam": lam, "t": nice(rng, max(10.0, 0.01 / lam), 1.5 / lam), "_item": pick(rng, ITEMS)}


def _solve_exp(p):
    x = p["lam"] * p["t"]
    r = math.exp(-x)
    return r, [f"\\lambda t = {tex(p['lam'])} \\times {txt(p['t'])} = {tex(x)}",
               f"R(t) = e^{{-\\lambda t}} = e^{{-{tex(x)}}} = {tex(r)}"]


def _expr_exp(p):
    return f"exp(-{num(p['lam'])}*{num(p['t'])})"


EXP_RELIABILITY = Family(
    name="exp_reliability", topic="distributions", difficulty=1,
    expression=_expr_exp,
    asks="R(t) = exp(-lambda t) with the rate given per hour, per million hours or in FIT",
    check_how="simulate exponential lifetimes and count survivors",
    draw=_draw_exp, solve=_solve_exp, bounds=PROB,
    phrasings=(
        lambda p: (f"A {p['_item']} has a constant failure rate of {txt(p['lam'])} per hour. "
                   f"What is its reliability for a mission of {txt(p['t'], True)} hours?"),
        lambda p: (f"The failure rate of a {p['_item']} is {txt(p['lam'] * 1e6)} failures per "
                   f"million hours and its life is exponentially distributed. Find the "
                   f"probability that it operates {txt(p['t'])} h without failure."),
        lambda p: (f"Find R(t) at t = {txt(p['t'])} hours for a {p['_item']} rated at "
                   f"{txt(p['lam'] * 1e9, True)} FIT (failures per 10^9 hours), assuming a "
                   f"constant hazard rate."),
    ),
    check=lambda p, rng: mc_fraction(rng.exponential(1 / p["lam"], MC_N) > p["t"]),
)


def _draw_exp_mttf(rng):
    return {"r0": pick(rng, (0.8, 0.85, 0.9, 0.92, 0.95, 0.97, 0.98, 0.99, 0.995)),
            "t0": nice(rng, 100, 10000), "_item": pick(rng, ITEMS)}


def _solve_exp_mttf(p):
    lam = -math.log(p["r0"]) / p["t0"]
    return 1 / lam, [
        f"\\lambda = -\\ln R(t_0) / t_0 = -\\ln({p['r0']}) / {txt(p['t0'])} = {tex(lam)} per hour",
        f"MTTF = 1/\\lambda = {tex(1 / lam)} hours"]


def _check_exp_mttf(p, rng):
    lam = optimize.brentq(lambda x: math.exp(-x * p["t0"]) - p["r0"], 1e-14, 50 / p["t0"],
                          xtol=1e-20, rtol=1e-13)
    mttf = integrate_tail(lambda t: math.exp(-lam * t), 0.0, 1 / lam)
    return exact(mttf, "root-find the rate, then integrate R(t) numerically")


def _expr_exp_mttf(p):
    return f"-{num(p['t0'])}/ln({num(p['r0'])})"


EXP_MTTF = Family(
    name="exp_mttf_from_reliability", topic="distributions", difficulty=2,
    expression=_expr_exp_mttf,
    asks="MTTF of an exponential life from one reliability point R(t0)",
    check_how="root-find lambda from R(t0), integrate R(t) from 0 to infinity numerically",
    draw=_draw_exp_mttf, solve=_solve_exp_mttf, check=_check_exp_mttf, unit="hours",
    phrasings=(
        lambda p: (f"A {p['_item']} with an exponentially distributed life has a reliability "
                   f"of {p['r0']} at {txt(p['t0'])} hours. What is its MTTF in hours?"),
        lambda p: (f"Field data show that {pct(p['r0'])} of {p['_item']}s survive "
                   f"{txt(p['t0'], True)} hours of operation. Assuming a constant failure rate, "
                   f"estimate the mean time to failure in hours."),
        lambda p: (f"For an exponential life model, R({txt(p['t0'])} h) = {p['r0']}. Determine "
                   f"the MTTF of the {p['_item']} (hours)."),
    ),
)


# ---------------------------------------------------------------- Weibull

def _draw_weibull(rng):
    p = _weibull_draw(rng)
    p["t"] = nice(rng, 0.1 * p["eta"], 1.5 * p["eta"])
    return p


def _solve_weibull(p):
    x = (p["t"] / p["eta"]) ** p["beta"]
    return math.exp(-x), [
        f"(t/\\eta)^\\beta = ({txt(p['t'])}/{txt(p['eta'])})^{{{p['beta']}}} = {tex(x)}",
        f"R(t) = e^{{-(t/\\eta)^\\beta}} = e^{{-{tex(x)}}} = {tex(math.exp(-x))}"]


def _expr_weibull(p):
    return f"exp(-({num(p['t'])}/{num(p['eta'])})^{num(p['beta'])})"


WEIBULL_RELIABILITY = Family(
    name="weibull_reliability", topic="distributions", difficulty=1,
    expression=_expr_weibull,
    asks="R(t) of a two-parameter Weibull life",
    check_how="simulate Weibull lifetimes and count survivors",
    draw=_draw_weibull, solve=_solve_weibull, bounds=PROB,
    phrasings=(
        lambda p: (f"The life of a {p['_item']} follows a Weibull distribution with shape "
                   f"parameter beta = {p['beta']} and scale parameter eta = {txt(p['eta'])} "
                   f"{p['_unit']}. What is its reliability at {txt(p['t'])} {p['_unit']}?"),
        lambda p: (f"Find the probability that a {p['_item']} survives {txt(p['t'], True)} "
                   f"{p['_unit']}, given a two-parameter Weibull life with characteristic life "
                   f"{txt(p['eta'], True)} {p['_unit']} and slope {p['beta']}."),
        lambda p: (f"Weibull analysis of {p['_item']} failures gave eta = {txt(p['eta'], True)} "
                   f"{p['_unit']} and beta = {p['beta']}. Compute R(t) for t = {txt(p['t'])} "
                   f"{p['_unit']}."),
    ),
    new_phrasings=(
        lambda p: (f"Field failures of the {p['_item']} are well described by a Weibull model "
                   f"whose shape is {p['beta']} and whose scale is {txt(p['eta'])} "
                   f"{p['_unit']}. How likely is a new {p['_item']} to reach {txt(p['t'])} "
                   f"{p['_unit']} without failing?"),
        lambda p: (f"What share of {p['_item']}s should still be working at {txt(p['t'])} "
                   f"{p['_unit']}, given Weibull lifetimes with a scale of {txt(p['eta'])} "
                   f"{p['_unit']} and a shape of {p['beta']}?"),
    ),
    check=lambda p, rng: mc_fraction(_weibull_sample(p, rng) > p["t"]),
)


def _per(p):
    return {"hours": "hour", "cycles": "cycle"}.get(p["_unit"], p["_unit"])


def _solve_weibull_hazard(p):
    b, eta, t = p["beta"], p["eta"], p["t"]
    ratio = (t / eta) ** (b - 1)
    h = b / eta * ratio
    return h, [f"(t/\\eta)^{{\\beta-1}} = ({txt(t)}/{txt(eta)})^{{{tex(b - 1)}}} = {tex(ratio)}",
               f"h(t) = (\\beta/\\eta)(t/\\eta)^{{\\beta-1}} = ({b}/{txt(eta)}) \\times "
               f"{tex(ratio)} = {tex(h)} per {_per(p)}"]


def _draw_weibull_hazard(rng):
    p = _draw_weibull(rng)
    while p["beta"] == 1.0:
        p["beta"] = grid(rng, 0.7, 3.5, 0.1)
    return p


WEIBULL_HAZARD = Family(
    name="weibull_hazard", topic="distributions", difficulty=1,
    asks="hazard rate h(t) of a two-parameter Weibull life",
    check_how="ratio of scipy's Weibull density and survival function",
    draw=_draw_weibull_hazard, solve=_solve_weibull_hazard,
    phrasings=(
        lambda p: (f"The life of a {p['_item']} is Weibull with beta = {p['beta']} and "
                   f"eta = {txt(p['eta'])} {p['_unit']}. What is its hazard rate at "
                   f"{txt(p['t'])} {p['_unit']} (failures per {_per(p)})?"),
        lambda p: (f"Compute the instantaneous failure rate h(t) of a {p['_item']} at age "
                   f"{txt(p['t'], True)} {p['_unit']}, given a Weibull life with characteristic "
                   f"life {txt(p['eta'], True)} {p['_unit']} and shape {p['beta']}."),
        lambda p: (f"For Weibull parameters eta = {txt(p['eta'])} {p['_unit']} and beta = "
                   f"{p['beta']}, evaluate the hazard function of the {p['_item']} at "
                   f"t = {txt(p['t'])} {p['_unit']}."),
    ),
    check=lambda p, rng: exact(
        stats.weibull_min.pdf(p["t"], p["beta"], scale=p["eta"])
        / stats.weibull_min.sf(p["t"], p["beta"], scale=p["eta"]), "scipy pdf / sf"),
)


def _draw_weibull3(rng):
    p = _weibull_draw(rng, with_location=True)
    p["t"] = p["gamma"] + nice(rng, 0.1 * p["eta"], 1.5 * p["eta"])
    p["t"] = float(f"{p['t']:.3g}")
    return p


def _solve_weibull3(p):
    g, eta, b, t = p["gamma"], p["eta"], p["beta"], p["t"]
    x = ((t - g) / eta) ** b
    return math.exp(-x), [
        f"t - \\gamma = {txt(t)} - {txt(g)} = {tex(t - g)}",
        f"((t - \\gamma)/\\eta)^\\beta = ({tex(t - g)}/{txt(eta)})^{{{b}}} = {tex(x)}",
        f"R(t) = e^{{-{tex(x)}}} = {tex(math.exp(-x))}"]


def _expr_weibull3(p):
    return (f"exp(-(({num(p['t'])} - {num(p['gamma'])})/{num(p['eta'])})"
            f"^{num(p['beta'])})")


WEIBULL3 = Family(
    name="weibull3_reliability", topic="distributions", difficulty=2,
    expression=_expr_weibull3,
    asks="R(t) of a three-parameter Weibull life (with a failure-free period)",
    check_how="simulate location + Weibull lifetimes and count survivors",
    draw=_draw_weibull3, solve=_solve_weibull3, bounds=PROB,
    phrasings=(
        lambda p: (f"A {p['_item']} has a three-parameter Weibull life: location "
                   f"gamma = {txt(p['gamma'])} {p['_unit']}, scale eta = {txt(p['eta'])} "
                   f"{p['_unit']}, shape beta = {p['beta']}. Find its reliability at "
                   f"{txt(p['t'])} {p['_unit']}."),
        lambda p: (f"No {p['_item']} fails before {txt(p['gamma'], True)} {p['_unit']}; after "
                   f"that, life is Weibull with slope {p['beta']} and characteristic life "
                   f"{txt(p['eta'], True)} {p['_unit']} measured from that point. What fraction "
                   f"survives {txt(p['t'], True)} {p['_unit']}?"),
        lambda p: (f"Compute R({txt(p['t'])}) for a Weibull distribution with beta = "
                   f"{p['beta']}, eta = {txt(p['eta'])} and minimum life (failure-free time) "
                   f"{txt(p['gamma'])}, all times in {p['_unit']}, describing a {p['_item']}."),
    ),
    check=lambda p, rng: mc_fraction(_weibull_sample(p, rng) > p["t"]),
)


def _draw_bx(rng):
    p = _weibull_draw(rng)
    p["p"] = pick(rng, (0.01, 0.05, 0.1, 0.2))
    return p


def _solve_bx(p):
    x = -math.log(1 - p["p"])
    tp = p["eta"] * x ** (1 / p["beta"])
    return tp, [f"-\\ln(1 - p) = -\\ln({tex(1 - p['p'])}) = {tex(x)}",
                f"t_p = \\eta (-\\ln(1-p))^{{1/\\beta}} = {txt(p['eta'])} \\times "
                f"{tex(x)}^{{1/{p['beta']}}} = {tex(tp)} {p['_unit']}"]


def _check_bx(p, rng):
    b, eta = p["beta"], p["eta"]

    def cum_hazard(t):
        return integrate.quad(lambda u: b / eta * (u / eta) ** (b - 1), 0, t, epsrel=1e-12)[0]

    target = -math.log(1 - p["p"])
    t = optimize.brentq(lambda t: cum_hazard(t) - target, 1e-9 * eta, 100 * eta, rtol=1e-12)
    return exact(t, "integrate the hazard numerically and root-find H(t) = -ln(1-p)")


def _bx_name(p):
    return f"B{round(100 * p['p'])}"


def _expr_bx(p):
    return (f"{num(p['eta'])}*(-ln(1 - {round(100 * p['p'])}/100))"
            f"^(1/{num(p['beta'])})")


WEIBULL_BX = Family(
    name="weibull_bx_life", topic="distributions", difficulty=2,
    expression=_expr_bx,
    asks="percentile life B_p (e.g. B10/L10) of a Weibull life",
    check_how="integrate the hazard rate numerically and root-find the cumulative hazard",
    draw=_draw_bx, solve=_solve_bx, check=_check_bx,
    phrasings=(
        lambda p: (f"A {p['_item']} has a Weibull life with beta = {p['beta']} and eta = "
                   f"{txt(p['eta'])} {p['_unit']}. Find its {_bx_name(p)} life in {p['_unit']}."),
        lambda p: (f"By what age, in {p['_unit']}, will {pct(p['p'])} of a population of "
                   f"{p['_item']}s have failed, if life is Weibull with characteristic life "
                   f"{txt(p['eta'], True)} {p['_unit']} and shape {p['beta']}?"),
        lambda p: (f"Weibull parameters of a {p['_item']}: shape {p['beta']}, scale "
                   f"{txt(p['eta'], True)} {p['_unit']}. Determine the life at which the "
                   f"reliability equals {tex(1 - p['p'])}, in {p['_unit']}."),
    ),
)


def _solve_weibull_mttf(p):
    g = math.gamma(1 + 1 / p["beta"])
    return p["eta"] * g, [
        f"\\Gamma(1 + 1/\\beta) = \\Gamma({tex(1 + 1 / p['beta'])}) = {tex(g)}",
        f"MTTF = \\eta \\Gamma(1 + 1/\\beta) = {txt(p['eta'])} \\times {tex(g)} = "
        f"{tex(p['eta'] * g)} {p['_unit']}"]


def _expr_weibull_mttf(p):
    return f"{num(p['eta'])}*gamma(1 + 1/{num(p['beta'])})"


WEIBULL_MTTF = Family(
    name="weibull_mttf", topic="distributions", difficulty=2,
    expression=_expr_weibull_mttf,
    asks="mean life of a two-parameter Weibull distribution",
    check_how="integrate R(t) from 0 to infinity numerically",
    draw=_weibull_draw, solve=_solve_weibull_mttf,
    phrasings=(
        lambda p: (f"The life of a {p['_item']} is Weibull distributed with beta = {p['beta']} "
                   f"and eta = {txt(p['eta'])} {p['_unit']}. What is its mean time to failure "
                   f"in {p['_unit']}?"),
        lambda p: (f"Compute the expected life, in {p['_unit']}, of a {p['_item']} whose "
                   f"Weibull characteristic life is {txt(p['eta'], True)} {p['_unit']} and "
                   f"whose Weibull slope is {p['beta']}."),
        lambda p: (f"Weibull fit for a {p['_item']}: scale {txt(p['eta'], True)} "
                   f"{p['_unit']}, shape {p['beta']}. Find the MTTF ({p['_unit']})."),
    ),
    new_phrasings=(
        lambda p: (f"The time to failure of a {p['_item']} obeys a Weibull law (shape factor "
                   f"{p['beta']}, scale {txt(p['eta'])} {p['_unit']}). On average, how many "
                   f"{p['_unit']} does one last before it fails?"),
        lambda p: (f"Estimate the average life of a population of {p['_item']}s whose failure "
                   f"data follow a Weibull distribution with β = {p['beta']} and η = "
                   f"{txt(p['eta'])} {p['_unit']}; give it in {p['_unit']}."),
    ),
    check=lambda p, rng: exact(integrate_tail(
        lambda t: math.exp(-((t / p["eta"]) ** p["beta"])), 0.0, p["eta"]),
        "integrate R(t) numerically"),
)


def _draw_conditional(rng):
    while True:
        p = _weibull_draw(rng)
        p["age"] = nice(rng, 0.1 * p["eta"], p["eta"])
        p["x"] = nice(rng, 0.05 * p["eta"], 0.5 * p["eta"])
        if (p["age"] / p["eta"]) ** p["beta"] < 1.2:  # enough survivors to simulate
            return p


def _solve_conditional(p):
    b, eta, t, x = p["beta"], p["eta"], p["age"], p["x"]
    r_t = math.exp(-((t / eta) ** b))
    r_tx = math.exp(-(((t + x) / eta) ** b))
    return r_tx / r_t, [
        f"R(T) = e^{{-({txt(t)}/{txt(eta)})^{{{b}}}}} = {tex(r_t)}",
        f"R(T + x) = e^{{-({tex(t + x)}/{txt(eta)})^{{{b}}}}} = {tex(r_tx)}",
        f"R(x | T) = R(T + x)/R(T) = {tex(r_tx)}/{tex(r_t)} = {tex(r_tx / r_t)}"]


def _check_conditional(p, rng):
    life = _weibull_sample(p, rng, 4 * MC_N)
    survivors = life[life > p["age"]]
    return mc_fraction(survivors > p["age"] + p["x"], "simulated lifetimes, survivors of T only")


def _expr_conditional(p):
    b, eta, t, x = num(p["beta"]), num(p["eta"]), num(p["age"]), num(p["x"])
    return f"exp(-(({t} + {x})/{eta})^{b})/exp(-({t}/{eta})^{b})"


WEIBULL_CONDITIONAL = Family(
    name="weibull_conditional", topic="distributions", difficulty=2,
    expression=_expr_conditional,
    asks="conditional reliability R(x | T) of a Weibull item that has survived T",
    check_how="simulate lifetimes, keep those past T, count those past T + x",
    draw=_draw_conditional, solve=_solve_conditional, check=_check_conditional, bounds=PROB,
    phrasings=(
        lambda p: (f"A {p['_item']} with a Weibull life (beta = {p['beta']}, eta = "
                   f"{txt(p['eta'])} {p['_unit']}) has already operated {txt(p['age'])} "
                   f"{p['_unit']}. What is the probability it survives a further {txt(p['x'])} "
                   f"{p['_unit']}?"),
        lambda p: (f"Find the conditional reliability R(x | T) for x = {txt(p['x'], True)} "
                   f"{p['_unit']} and T = {txt(p['age'], True)} {p['_unit']}, for a {p['_item']} "
                   f"whose life is Weibull with shape {p['beta']} and scale "
                   f"{txt(p['eta'], True)} {p['_unit']}."),
        lambda p: (f"Used {p['_item']}s with {txt(p['age'])} {p['_unit']} on them are put back "
                   f"into service for a mission of {txt(p['x'])} {p['_unit']}. Life is Weibull, "
                   f"eta = {txt(p['eta'])} {p['_unit']}, beta = {p['beta']}. What fraction "
                   f"completes the mission?"),
    ),
)


def _draw_mrl(rng):
    p = _weibull_draw(rng)
    p["age"] = nice(rng, 0.1 * p["eta"], 1.5 * p["eta"])
    return p


def _solve_mrl(p):
    b, eta, t = p["beta"], p["eta"], p["age"]
    z = (t / eta) ** b
    g = math.gamma(1 + 1 / b)
    q = special.gammaincc(1 / b, z)
    tail = eta * g * q
    mrl = tail * math.exp(z)
    return mrl, [
        f"z = (t/\\eta)^\\beta = ({txt(t)}/{txt(eta)})^{{{b}}} = {tex(z)}, R(t) = e^{{-z}} = "
        f"{tex(math.exp(-z))}",
        f"\\int_t^\\infty R(u) du = \\eta \\Gamma(1+1/\\beta) Q(1/\\beta, z) = {txt(eta)} \\times "
        f"{tex(g)} \\times {tex(q)} = {tex(tail)}",
        f"MRL(t) = \\int_t^\\infty R(u) du / R(t) = {tex(tail)} / {tex(math.exp(-z))} = "
        f"{tex(mrl)} {p['_unit']}"]


def _check_mrl(p, rng):
    def rel(u):
        return math.exp(-((u / p["eta"]) ** p["beta"]))

    tail = integrate_tail(rel, p["age"], p["eta"])
    return exact(tail / rel(p["age"]), "integrate R(u) from t to infinity numerically",
                 rel=1e-5)


def _expr_mrl(p):
    b, eta, t = num(p["beta"]), num(p["eta"]), num(p["age"])
    return (f"{eta}*gamma(1 + 1/{b})*gammaincc(1/{b}, ({t}/{eta})^{b})"
            f"*exp(({t}/{eta})^{b})")


WEIBULL_MRL = Family(
    name="weibull_mrl", topic="distributions", difficulty=3,
    expression=_expr_mrl,
    asks="mean residual life at age t of a Weibull item",
    check_how="integrate R(u) from t to infinity numerically, divide by R(t)",
    draw=_draw_mrl, solve=_solve_mrl, check=_check_mrl,
    phrasings=(
        lambda p: (f"A {p['_item']} has a Weibull life with beta = {p['beta']} and eta = "
                   f"{txt(p['eta'])} {p['_unit']}. It has survived {txt(p['age'])} "
                   f"{p['_unit']}. What is its mean residual life, in {p['_unit']}?"),
        lambda p: (f"Given a Weibull life (shape {p['beta']}, characteristic life "
                   f"{txt(p['eta'], True)} {p['_unit']}), find the expected remaining life of "
                   f"a {p['_item']} aged {txt(p['age'], True)} {p['_unit']}."),
        lambda p: (f"Compute MRL(t) = E[T - t | T > t] at t = {txt(p['age'])} {p['_unit']} "
                   f"for a {p['_item']} with Weibull parameters eta = {txt(p['eta'])} "
                   f"{p['_unit']}, beta = {p['beta']}."),
    ),
)


# ---------------------------------------------------------------- normal and lognormal

def _draw_normal(rng):
    mu = nice(rng, 1000, 20000)
    sigma = nice(rng, 0.05 * mu, 0.3 * mu)
    t = float(f"{mu + rng.uniform(-2.5, 2.5) * sigma:.2g}")
    return {"mu": mu, "sigma": sigma, "t": t, "_item": pick(rng, ("cutting tool", "brake lining",
                                                                   "filament lamp", "belt"))}


def _solve_normal(p):
    z = (p["t"] - p["mu"]) / p["sigma"]
    r = 1 - PHI(z)
    return r, [f"z = (t - \\mu)/\\sigma = ({txt(p['t'])} - {txt(p['mu'])})/{txt(p['sigma'])} = "
               f"{tex(z)}",
               f"R(t) = 1 - \\Phi(z) = 1 - \\Phi({tex(z)}) = {tex(r)}"]


def _expr_normal(p):
    return f"norm_sf(({num(p['t'])} - {num(p['mu'])})/{num(p['sigma'])})"


NORMAL = Family(
    name="normal_reliability", topic="distributions", difficulty=1,
    expression=_expr_normal,
    asks="R(t) of a normally distributed wear-out life",
    check_how="simulate normal lifetimes and count survivors",
    draw=_draw_normal, solve=_solve_normal, bounds=PROB,
    phrasings=(
        lambda p: (f"The wear-out life of a {p['_item']} is normally distributed with mean "
                   f"{txt(p['mu'])} hours and standard deviation {txt(p['sigma'])} hours. What "
                   f"is its reliability at {txt(p['t'])} hours?"),
        lambda p: (f"What fraction of {p['_item']}s survive {txt(p['t'], True)} h if life is "
                   f"normal with sigma = {txt(p['sigma'], True)} h and mu = "
                   f"{txt(p['mu'], True)} h?"),
        lambda p: (f"Life of a {p['_item']} ~ N(mean = {txt(p['mu'])} h, sd = "
                   f"{txt(p['sigma'])} h). Compute R({txt(p['t'])} h)."),
    ),
    new_phrasings=(
        lambda p: (f"Wear-out of {p['_item']}s is modelled as Gaussian, centred on "
                   f"{txt(p['mu'])} hours with a spread (one standard deviation) of "
                   f"{txt(p['sigma'])} hours. What is the chance that one is still serviceable "
                   f"after {txt(p['t'])} hours?"),
        lambda p: (f"If {p['_item']} lifetimes average {txt(p['mu'])} h, scatter with a standard "
                   f"deviation of {txt(p['sigma'])} h and follow a bell curve, what proportion "
                   f"is expected to outlive {txt(p['t'])} h?"),
    ),
    check=lambda p, rng: mc_fraction(rng.normal(p["mu"], p["sigma"], MC_N) > p["t"]),
)


def _draw_lognormal(rng):
    t50 = nice(rng, 1000, 1e5)
    return {"t50": t50, "s": grid(rng, 0.3, 1.5, 0.05), "t": nice(rng, 0.2 * t50, 3 * t50),
            "_item": pick(rng, ("capacitor", "solder joint", "lamp driver", "winding insulation"))}


def _solve_lognormal(p):
    mu = math.log(p["t50"])
    z = (math.log(p["t"]) - mu) / p["s"]
    r = 1 - PHI(z)
    return r, [f"\\mu = \\ln t_{{50}} = \\ln({txt(p['t50'])}) = {tex(mu)}",
               f"z = (\\ln t - \\mu)/\\sigma = ({tex(math.log(p['t']))} - {tex(mu)})/{p['s']} = "
               f"{tex(z)}",
               f"R(t) = 1 - \\Phi(z) = {tex(r)}"]


def _expr_lognormal(p):
    return f"norm_sf((ln({num(p['t'])}) - ln({num(p['t50'])}))/{num(p['s'])})"


LOGNORMAL = Family(
    name="lognormal_reliability", topic="distributions", difficulty=2,
    expression=_expr_lognormal,
    asks="R(t) of a lognormal life given the median life and log standard deviation",
    check_how="simulate lognormal lifetimes and count survivors",
    draw=_draw_lognormal, solve=_solve_lognormal, bounds=PROB,
    phrasings=(
        lambda p: (f"The life of a {p['_item']} is lognormal with median {txt(p['t50'])} hours "
                   f"and shape parameter sigma = {p['s']} (standard deviation of ln T). Find "
                   f"its reliability at {txt(p['t'])} hours."),
        lambda p: (f"Half of all {p['_item']}s fail by {txt(p['t50'], True)} h and ln(life) "
                   f"has standard deviation {p['s']}. Assuming a lognormal life, what is "
                   f"R({txt(p['t'], True)} h)?"),
        lambda p: (f"Lognormal life model for a {p['_item']}: sigma = {p['s']}, T50 = "
                   f"{txt(p['t50'])} h. Compute the probability of surviving {txt(p['t'])} h."),
    ),
    new_phrasings=(
        lambda p: (f"The median time to failure of a {p['_item']} is {txt(p['t50'])} hours, and "
                   f"the logarithm of its life is normally distributed with a standard deviation "
                   f"of {p['s']}. Estimate the probability that it is still working at "
                   f"{txt(p['t'])} hours."),
        lambda p: (f"What is the survival probability at {txt(p['t'])} h for {p['_item']}s whose "
                   f"lives are lognormal, with a median life of {txt(p['t50'])} h and a "
                   f"log-scale spread of {p['s']}?"),
    ),
    check=lambda p, rng: mc_fraction(
        rng.lognormal(math.log(p["t50"]), p["s"], MC_N) > p["t"]),
)


# ---------------------------------------------------------------- Erlang (gamma, integer shape)

def _draw_erlang(rng):
    k = int(rng.integers(2, 5))
    theta = nice(rng, 100, 5000)
    return {"k": k, "theta": theta, "t": nice(rng, 0.3 * k * theta, 2 * k * theta),
            "_item": pick(rng, ITEMS)}


def _solve_erlang(p):
    k, x = p["k"], p["t"] / p["theta"]
    terms = [x**j / math.factorial(j) for j in range(k)]
    s = sum(terms)
    r = math.exp(-x) * s
    shown = " + ".join(["1", "x", "x^2/2", "x^3/6"][:k])
    return r, [f"x = t/\\theta = {txt(p['t'])}/{txt(p['theta'])} = {tex(x)}",
               f"\\sum_{{j=0}}^{{{k - 1}}} x^j/j! = {shown} = {tex(s)}",
               f"R(t) = e^{{-x}} \\times {tex(s)} = {tex(math.exp(-x))} \\times {tex(s)} = "
               f"{tex(r)}"]


def _expr_erlang(p):
    return f"poisson_cdf({p['k']} - 1, {num(p['t'])}/{num(p['theta'])})"


ERLANG = Family(
    name="erlang_reliability", topic="distributions", difficulty=2,
    expression=_expr_erlang,
    asks="R(t) of a gamma (Erlang) life with integer shape: k-th shock or k-unit cold standby",
    check_how="simulate sums of k exponential times and count survivors",
    draw=_draw_erlang, solve=_solve_erlang, bounds=PROB,
    phrasings=(
        lambda p: (f"The life of a {p['_item']} follows a gamma distribution with integer shape "
                   f"k = {p['k']} and scale theta = {txt(p['theta'])} hours. What is its "
                   f"reliability at {txt(p['t'])} hours?"),
        lambda p: (f"A {p['_item']} fails at the {p['k']}th damaging shock; shocks arrive as a "
                   f"Poisson process with a mean of {txt(p['theta'], True)} hours between shocks. "
                   f"Find the probability that it survives {txt(p['t'], True)} hours."),
        lambda p: (f"A system has {p['k']} identical {p['_item']}s: one operating and "
                   f"{p['k'] - 1} in cold standby with perfect switching. Each has an exponential "
                   f"life with MTTF {txt(p['theta'])} h. Find the system reliability for "
                   f"{txt(p['t'])} h."),
    ),
    new_phrasings=(
        lambda p: (f"A {p['_item']} can absorb {p['k'] - 1} damaging events but fails on event "
                   f"number {p['k']}; the events arrive at random (Poisson) with an average "
                   f"spacing of {txt(p['theta'])} hours. What is the probability that it is "
                   f"still working after {txt(p['t'])} hours?"),
        lambda p: (f"Spares policy: a {p['_item']} is swapped for a new one each time it fails, "
                   f"lives being exponential with a mean of {txt(p['theta'])} hours, and "
                   f"{p['k'] - 1} spares are on hand, so {p['k']} units in all. How likely is "
                   f"the supply to last at least {txt(p['t'])} hours?"),
    ),
    check=lambda p, rng: mc_fraction(
        rng.exponential(p["theta"], (MC_N, p["k"])).sum(axis=1) > p["t"]),
)

FAMILIES = [EXP_RELIABILITY, EXP_MTTF, WEIBULL_RELIABILITY, WEIBULL_HAZARD, WEIBULL3, WEIBULL_BX,
            WEIBULL_MTTF, WEIBULL_CONDITIONAL, WEIBULL_MRL, NORMAL, LOGNORMAL, ERLANG]
