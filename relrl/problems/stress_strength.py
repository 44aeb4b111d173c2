"""Stress-strength interference: normal-normal, exponential-exponential, normal strength with
exponential stress, lognormal-lognormal.

Formulas: O'Connor ch. 4 (load-strength interference); Modarres, Kaminskiy & Krivtsov ch. 6.
"""
from __future__ import annotations

import math

from scipy import stats

from .base import MC_N, PROB, Family, exact, integrate_tail, mc_fraction, nice, num, tex, txt

PHI = stats.norm.cdf
PARTS = (("bolt", "kN"), ("bracket", "MPa"), ("shaft", "MPa"), ("cable", "kN"), ("weld", "MPa"))


def _part(rng):
    return PARTS[int(rng.integers(0, len(PARTS)))]


# ---------------------------------------------------------------- normal-normal

def _draw_nn(rng):
    part, unit = _part(rng)
    mu_strength = nice(rng, 200, 800)
    sd_strength = nice(rng, 0.05 * mu_strength, 0.15 * mu_strength)
    sd_stress = nice(rng, 0.05 * mu_strength, 0.15 * mu_strength)
    spread = math.hypot(sd_strength, sd_stress)
    mu_stress = float(f"{mu_strength - rng.uniform(0.5, 3.5) * spread:.2g}")
    return {"mS": mu_strength, "sS": sd_strength, "ms": mu_stress, "ss": sd_stress,
            "_part": part, "_unit": unit}


def _solve_nn(p):
    spread = math.hypot(p["sS"], p["ss"])
    z = (p["mS"] - p["ms"]) / spread
    return PHI(z), [
        f"\\sqrt{{\\sigma_S^2 + \\sigma_s^2}} = \\sqrt{{{txt(p['sS'])}^2 + {txt(p['ss'])}^2}} = "
        f"{tex(spread)}",
        f"z = (\\mu_S - \\mu_s)/{tex(spread)} = ({txt(p['mS'])} - {txt(p['ms'])})/{tex(spread)} = "
        f"{tex(z)}",
        f"R = \\Phi(z) = {tex(PHI(z))}"]


def _expr_nn(p):
    return (f"norm_cdf(({num(p['mS'])} - {num(p['ms'])})"
            f"/sqrt({num(p['sS'])}^2 + {num(p['ss'])}^2))")


NORMAL_NORMAL = Family(
    name="ss_normal_normal", topic="stress_strength", difficulty=2,
    expression=_expr_nn,
    asks="reliability when stress and strength are both normal",
    check_how="simulate stress and strength pairs, count strength > stress",
    draw=_draw_nn, solve=_solve_nn, bounds=PROB,
    phrasings=(
        lambda p: (f"The strength of a {p['_part']} is normal with mean {txt(p['mS'])} "
                   f"{p['_unit']} and standard deviation {txt(p['sS'])} {p['_unit']}. The "
                   f"applied stress is normal with mean {txt(p['ms'])} {p['_unit']} and standard "
                   f"deviation {txt(p['ss'])} {p['_unit']}. Find the reliability."),
        lambda p: (f"Load on a {p['_part']}: N({txt(p['ms'])}, {txt(p['ss'])}^2) "
                   f"{p['_unit']}. Capacity: N({txt(p['mS'])}, {txt(p['sS'])}^2) {p['_unit']}. "
                   f"What is the probability that capacity exceeds load?"),
        lambda p: (f"Stress-strength interference with normal distributions: stress mean "
                   f"{txt(p['ms'])} {p['_unit']} (sd {txt(p['ss'])}), strength mean "
                   f"{txt(p['mS'])} {p['_unit']} (sd {txt(p['sS'])}). Compute the reliability of "
                   f"the {p['_part']}."),
    ),
    new_phrasings=(
        lambda p: (f"A {p['_part']} must carry a Gaussian load averaging {txt(p['ms'])} "
                   f"{p['_unit']} with a standard deviation of {txt(p['ss'])} {p['_unit']}; its "
                   f"capacity is also Gaussian, averaging {txt(p['mS'])} {p['_unit']} with a "
                   f"standard deviation of {txt(p['sS'])} {p['_unit']}. What is the probability "
                   f"that the {p['_part']} holds?"),
        lambda p: (f"How likely is it that the strength of a {p['_part']} exceeds the load put "
                   f"on it, if strength is Gaussian (average {txt(p['mS'])}, spread "
                   f"{txt(p['sS'])}) and load is Gaussian (average {txt(p['ms'])}, spread "
                   f"{txt(p['ss'])}), all in {p['_unit']}?"),
    ),
    check=lambda p, rng: mc_fraction(
        rng.normal(p["mS"], p["sS"], MC_N) > rng.normal(p["ms"], p["ss"], MC_N)),
)


# ---------------------------------------------------------------- exponential-exponential

def _draw_ee(rng):
    part, unit = _part(rng)
    ms = nice(rng, 10, 100)
    return {"ms": ms, "mS": float(f"{ms * nice(rng, 2, 20):.2g}"), "_part": part, "_unit": unit}


def _solve_ee(p):
    r = p["mS"] / (p["mS"] + p["ms"])
    return r, ["R = P(S > s) = \\lambda_s/(\\lambda_s + \\lambda_S) = \\mu_S/(\\mu_S + \\mu_s)",
               f"R = {txt(p['mS'])}/({txt(p['mS'])} + {txt(p['ms'])}) = {tex(r)}"]


def _expr_ee(p):
    return f"{num(p['mS'])}/({num(p['mS'])} + {num(p['ms'])})"


EXP_EXP = Family(
    name="ss_exponential", topic="stress_strength", difficulty=1,
    expression=_expr_ee,
    asks="reliability when stress and strength are both exponential",
    check_how="simulate stress and strength pairs, count strength > stress",
    draw=_draw_ee, solve=_solve_ee, bounds=PROB,
    phrasings=(
        lambda p: (f"The stress on a {p['_part']} is exponentially distributed with mean "
                   f"{txt(p['ms'])} {p['_unit']}, and its strength is exponentially distributed "
                   f"with mean {txt(p['mS'])} {p['_unit']}. Find the reliability."),
        lambda p: (f"Exponential strength (mean {txt(p['mS'])} {p['_unit']}) versus exponential "
                   f"load (mean {txt(p['ms'])} {p['_unit']}): what is the probability that the "
                   f"{p['_part']} survives one load application?"),
        lambda p: (f"Compute P(strength > stress) for a {p['_part']} when the stress rate "
                   f"parameter is 1/{txt(p['ms'])} per {p['_unit']} and the strength rate "
                   f"parameter is 1/{txt(p['mS'])} per {p['_unit']} (both exponential)."),
    ),
    new_phrasings=(
        lambda p: (f"Both the load on a {p['_part']} and its strength are exponential random "
                   f"variables: the load averages {txt(p['ms'])} {p['_unit']} and the strength "
                   f"averages {txt(p['mS'])} {p['_unit']}. Determine the probability that the "
                   f"strength is the larger of the two."),
        lambda p: (f"What is the chance that a {p['_part']} withstands a single applied load "
                   f"when the load has an exponential distribution with an average of "
                   f"{txt(p['ms'])} {p['_unit']} and the part's strength has one with an average "
                   f"of {txt(p['mS'])} {p['_unit']}?"),
    ),
    check=lambda p, rng: mc_fraction(
        rng.exponential(p["mS"], MC_N) > rng.exponential(p["ms"], MC_N)),
)


# ---------------------------------------------------------------- normal strength, exp stress

def _draw_ne(rng):
    part, unit = _part(rng)
    mu = nice(rng, 100, 500)
    return {"mu": mu, "sd": nice(rng, 0.1 * mu, 0.3 * mu),
            "ms": float(f"{mu / nice(rng, 1.2, 4):.2g}"), "_part": part, "_unit": unit}


def _solve_ne(p):
    lam, mu, sd = 1 / p["ms"], p["mu"], p["sd"]
    a = PHI(mu / sd)
    e = math.exp(-lam * mu + (lam * sd) ** 2 / 2)
    b = PHI((mu - lam * sd**2) / sd)
    r = a - e * b
    return r, [
        f"\\lambda = 1/{txt(p['ms'])} = {tex(lam)} per {p['_unit']}",
        f"\\Phi(\\mu/\\sigma) = \\Phi({tex(mu / sd)}) = {tex(a)}",
        f"e^{{-\\lambda\\mu + \\lambda^2\\sigma^2/2}} = {tex(e)}, \\Phi((\\mu - \\lambda\\sigma^2)/"
        f"\\sigma) = \\Phi({tex((mu - lam * sd**2) / sd)}) = {tex(b)}",
        f"R = {tex(a)} - {tex(e)} \\times {tex(b)} = {tex(r)}"]


def _check_ne(p, rng):
    def integrand(x):  # stress density times P(strength > x)
        return math.exp(-x / p["ms"]) / p["ms"] * stats.norm.sf(x, p["mu"], p["sd"])

    return exact(integrate_tail(integrand, 0.0, p["ms"]), "integrate the interference integral")


def _expr_ne(p):
    mu, sd, ms = num(p["mu"]), num(p["sd"]), num(p["ms"])
    return (f"norm_cdf({mu}/{sd}) - exp(-{mu}/{ms} + ({sd}/{ms})^2/2)"
            f"*norm_cdf(({mu} - {sd}^2/{ms})/{sd})")


NORMAL_EXP = Family(
    name="ss_normal_exp", topic="stress_strength", difficulty=3,
    expression=_expr_ne,
    asks="reliability with normal strength and exponential stress",
    check_how="numerical integration of the interference integral",
    draw=_draw_ne, solve=_solve_ne, check=_check_ne, bounds=PROB,
    phrasings=(
        lambda p: (f"The strength of a {p['_part']} is normal with mean {txt(p['mu'])} "
                   f"{p['_unit']} and standard deviation {txt(p['sd'])} {p['_unit']}. The "
                   f"stress is exponential with mean {txt(p['ms'])} {p['_unit']}. Find the "
                   f"reliability."),
        lambda p: (f"Exponentially distributed load (mean {txt(p['ms'])} {p['_unit']}) acts on "
                   f"a {p['_part']} whose capacity is N(mean {txt(p['mu'])}, sd {txt(p['sd'])}) "
                   f"{p['_unit']}. Compute P(capacity > load)."),
        lambda p: (f"Stress-strength interference: stress ~ exponential, mean {txt(p['ms'])} "
                   f"{p['_unit']}; strength ~ normal, sd {txt(p['sd'])} {p['_unit']}, mean "
                   f"{txt(p['mu'])} {p['_unit']}. What is the reliability of the {p['_part']}?"),
    ),
)


# ---------------------------------------------------------------- lognormal-lognormal

def _draw_ll(rng):
    part, unit = _part(rng)
    med_stress = nice(rng, 50, 300)
    return {"mS": float(f"{med_stress * nice(rng, 1.2, 4):.2g}"), "sS": nice(rng, 0.05, 0.3),
            "ms": med_stress, "ss": nice(rng, 0.1, 0.4), "_part": part, "_unit": unit}


def _solve_ll(p):
    num = math.log(p["mS"] / p["ms"])
    den = math.hypot(p["sS"], p["ss"])
    z = num / den
    return PHI(z), [
        f"\\ln(\\tilde S/\\tilde s) = \\ln({txt(p['mS'])}/{txt(p['ms'])}) = {tex(num)}",
        f"\\sqrt{{\\sigma_S^2 + \\sigma_s^2}} = \\sqrt{{{txt(p['sS'])}^2 + {txt(p['ss'])}^2}} = "
        f"{tex(den)}",
        f"R = \\Phi({tex(num)}/{tex(den)}) = \\Phi({tex(z)}) = {tex(PHI(z))}"]


def _expr_ll(p):
    return (f"norm_cdf(ln({num(p['mS'])}/{num(p['ms'])})"
            f"/sqrt({num(p['sS'])}^2 + {num(p['ss'])}^2))")


LOGNORMAL_LOGNORMAL = Family(
    name="ss_lognormal", topic="stress_strength", difficulty=2,
    expression=_expr_ll,
    asks="reliability when stress and strength are both lognormal (medians and log-sds)",
    check_how="simulate stress and strength pairs, count strength > stress",
    draw=_draw_ll, solve=_solve_ll, bounds=PROB,
    phrasings=(
        lambda p: (f"The strength of a {p['_part']} is lognormal with median {txt(p['mS'])} "
                   f"{p['_unit']} and log-standard deviation {txt(p['sS'])}; the stress is "
                   f"lognormal with median {txt(p['ms'])} {p['_unit']} and log-standard "
                   f"deviation {txt(p['ss'])}. Find the reliability."),
        lambda p: (f"Lognormal load (median {txt(p['ms'])} {p['_unit']}, sigma of ln load "
                   f"{txt(p['ss'])}) and lognormal capacity (median {txt(p['mS'])} {p['_unit']}, "
                   f"sigma of ln capacity {txt(p['sS'])}). Compute the probability that the "
                   f"{p['_part']} does not fail."),
        lambda p: (f"For a {p['_part']}, ln(strength) ~ N(ln {txt(p['mS'])}, {txt(p['sS'])}^2) and "
                   f"ln(stress) ~ N(ln {txt(p['ms'])}, {txt(p['ss'])}^2), stresses in "
                   f"{p['_unit']}. What is P(strength > stress)?"),
    ),
    new_phrasings=(
        lambda p: (f"The load and the resistance of a {p['_part']} are both lognormally "
                   f"distributed. Load: median {txt(p['ms'])} {p['_unit']}, logarithmic standard "
                   f"deviation {txt(p['ss'])}. Resistance: median {txt(p['mS'])} {p['_unit']}, "
                   f"logarithmic standard deviation {txt(p['sS'])}. Find the probability that "
                   f"resistance exceeds load."),
        lambda p: (f"Estimate the probability of survival of a {p['_part']} whose capacity has a "
                   f"median of {txt(p['mS'])} {p['_unit']} and whose applied stress has a median "
                   f"of {txt(p['ms'])} {p['_unit']}, both lognormal, with a scatter (standard "
                   f"deviation of the natural log) of {txt(p['sS'])} for capacity and "
                   f"{txt(p['ss'])} for stress."),
    ),
    check=lambda p, rng: mc_fraction(
        rng.lognormal(math.log(p["mS"]), p["sS"], MC_N)
        > rng.lognormal(math.log(p["ms"]), p["ss"], MC_N)),
)

FAMILIES = [NORMAL_NORMAL, EXP_EXP, NORMAL_EXP, LOGNORMAL_LOGNORMAL]
