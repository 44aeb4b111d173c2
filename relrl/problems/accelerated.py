"""Accelerated life testing: Arrhenius and Eyring acceleration factors, extrapolation of life
from two stress levels (Arrhenius, inverse power law), Weibull reliability at use conditions.

Formulas: Modarres, Kaminskiy & Krivtsov ch. 6; NIST/SEMATECH e-Handbook 8.1.5 (Eyring).
The checks rebuild each factor from physical constants in molar units (gas constant, Faraday,
Planck) instead of Boltzmann's constant in eV/K.
"""
from __future__ import annotations

import math

import numpy as np

from .base import MC_N, PROB, Family, exact, grid, mc_fraction, nice, num, pick, tex, txt

K_EV = 8.617333262e-5          # Boltzmann constant, eV/K
GAS_R = 8.314462618            # J/(mol K)
FARADAY = 96485.33212          # C/mol: 1 eV per particle = FARADAY J/mol
K_B_SI, PLANCK = 1.380649e-23, 6.62607015e-34
ITEMS = ("microcontroller", "light-emitting diode", "power MOSFET", "tantalum capacitor",
         "laser diode")


def _kelvin(c: float) -> float:
    return c + 273.15


def _arrhenius_rate(ea_ev: float, celsius: float) -> float:
    """Arrhenius reaction rate in molar units (arbitrary prefactor)."""
    return 1e13 * math.exp(-ea_ev * FARADAY / (GAS_R * _kelvin(celsius)))


def _eyring_rate(ea_ev: float, celsius: float) -> float:
    """Transition-state (Eyring) rate k_B T / h exp(-Ea / RT)."""
    t = _kelvin(celsius)
    return K_B_SI * t / PLANCK * math.exp(-ea_ev * FARADAY / (GAS_R * t))


def _af(ea, tu, ts):
    return math.exp(ea / K_EV * (1 / _kelvin(tu) - 1 / _kelvin(ts)))


def _af_steps(p):
    tu, ts = _kelvin(p["tu"]), _kelvin(p["ts"])
    x = p["ea"] / K_EV * (1 / tu - 1 / ts)
    return x, [f"T_u = {txt(p['tu'])} + 273.15 = {tex(tu, 6)} K, T_s = {txt(p['ts'])} + 273.15 = "
               f"{tex(ts, 6)} K",
               f"(E_a/k)(1/T_u - 1/T_s) = ({p['ea']}/8.617\\times10^{{-5}})({tex(1 / tu)} - "
               f"{tex(1 / ts)}) = {tex(x)}"]


def _draw_temps(rng):
    tu = grid(rng, 25, 60, 5)
    return {"ea": grid(rng, 0.3, 1.0, 0.05), "tu": tu, "ts": tu + grid(rng, 30, 80, 5),
            "_item": pick(rng, ITEMS)}


# ---------------------------------------------------------------- Arrhenius AF

def _solve_arrhenius(p):
    x, steps = _af_steps(p)
    return math.exp(x), [*steps, f"AF = e^{{{tex(x)}}} = {tex(math.exp(x))}"]


def _kelvin_expr(c):
    return f"({num(c)} + 273.15)"


def _af_expr(p):
    """The Arrhenius factor between p['tu'] and p['ts'], with Boltzmann's constant in eV/K."""
    return (f"exp({num(p['ea'])}/{K_EV!r}*(1/{_kelvin_expr(p['tu'])}"
            f" - 1/{_kelvin_expr(p['ts'])}))")


ARRHENIUS_AF = Family(
    name="arrhenius_af", topic="accelerated", difficulty=1,
    expression=_af_expr,
    asks="Arrhenius acceleration factor between a use and a test temperature",
    check_how="ratio of two Arrhenius rates in molar units (gas constant, Faraday)",
    draw=_draw_temps, solve=_solve_arrhenius,
    phrasings=(
        lambda p: (f"A {p['_item']} failure mechanism has an activation energy of {p['ea']} eV. "
                   f"What is the Arrhenius acceleration factor between a use temperature of "
                   f"{txt(p['tu'])} °C and a test temperature of {txt(p['ts'])} °C?"),
        lambda p: (f"Accelerated test at {txt(p['ts'])} °C, field use at {txt(p['tu'])} °C, "
                   f"Ea = {p['ea']} eV (Boltzmann constant 8.617e-5 eV/K). Compute the "
                   f"acceleration factor for the {p['_item']}."),
        lambda p: (f"By how many times does raising the temperature of a {p['_item']} from "
                   f"{txt(p['tu'])} °C to {txt(p['ts'])} °C shorten its life, if the Arrhenius "
                   f"model holds with activation energy {p['ea']} eV?"),
    ),
    check=lambda p, rng: exact(
        _arrhenius_rate(p["ea"], p["ts"]) / _arrhenius_rate(p["ea"], p["tu"]),
        "ratio of Arrhenius rates in molar units"),
)


# ---------------------------------------------------------------- Eyring AF

def _solve_eyring(p):
    x, steps = _af_steps(p)
    ratio = _kelvin(p["ts"]) / _kelvin(p["tu"])
    af = ratio * math.exp(x)
    return af, [*steps, f"T_s/T_u = {tex(ratio, 6)}",
                f"AF = (T_s/T_u) e^{{{tex(x)}}} = {tex(ratio, 6)} \\times {tex(math.exp(x))} = "
                f"{tex(af)}"]


def _expr_eyring(p):
    return f"{_kelvin_expr(p['ts'])}/{_kelvin_expr(p['tu'])}*{_af_expr(p)}"


EYRING_AF = Family(
    name="eyring_af", topic="accelerated", difficulty=2,
    expression=_expr_eyring,
    asks="Eyring acceleration factor (temperature pre-factor times Arrhenius term)",
    check_how="ratio of transition-state rates k_B T/h exp(-Ea/RT) in SI units",
    draw=_draw_temps, solve=_solve_eyring,
    phrasings=(
        lambda p: (f"Using the Eyring model, life L(T) = (A/T) exp(Ea/(kT)), find the "
                   f"acceleration factor of a {p['_item']} between {txt(p['tu'])} °C (use) and "
                   f"{txt(p['ts'])} °C (test), with Ea = {p['ea']} eV."),
        lambda p: (f"Eyring life-stress relation, activation energy {p['ea']} eV, test "
                   f"temperature {txt(p['ts'])} °C, operating temperature {txt(p['tu'])} °C. "
                   f"What acceleration factor applies to the {p['_item']}?"),
        lambda p: (f"A {p['_item']} degrades at a rate proportional to T exp(-Ea/(kT)) "
                   f"(Eyring), with Ea = {p['ea']} eV. How much faster does it age at "
                   f"{txt(p['ts'])} °C than at {txt(p['tu'])} °C?"),
    ),
    check=lambda p, rng: exact(_eyring_rate(p["ea"], p["ts"]) / _eyring_rate(p["ea"], p["tu"]),
                               "ratio of Eyring transition-state rates"),
)


# ---------------------------------------------------------------- Arrhenius from two tests

def _draw_two_temp(rng):
    t1 = grid(rng, 85, 125, 5)
    t2 = t1 + grid(rng, 20, 40, 5)
    ea = grid(rng, 0.4, 1.0, 0.05)
    l1 = nice(rng, 500, 5000)
    l2 = float(f"{l1 / _af(ea, t1, t2):.3g}")
    return {"t1": t1, "t2": t2, "l1": l1, "l2": l2, "tu": grid(rng, 25, 55, 5),
            "_item": pick(rng, ITEMS)}


def _solve_two_temp(p):
    x1, x2, xu = (1 / _kelvin(p[k]) for k in ("t1", "t2", "tu"))
    b = math.log(p["l1"] / p["l2"]) / (x1 - x2)
    lu = p["l1"] * math.exp(b * (xu - x1))
    return lu, [
        f"1/T_1 = {tex(x1)}, 1/T_2 = {tex(x2)}, 1/T_u = {tex(xu)} (K^{{-1}})",
        f"B = \\ln(L_1/L_2)/(1/T_1 - 1/T_2) = \\ln({txt(p['l1'])}/{txt(p['l2'])})/{tex(x1 - x2)}"
        f" = {tex(b)} K (E_a = Bk = {tex(b * K_EV)} eV)",
        f"L_u = L_1 e^{{B(1/T_u - 1/T_1)}} = {txt(p['l1'])} \\times e^{{{tex(b * (xu - x1))}}} = "
        f"{tex(lu)} hours"]


def _check_two_temp(p, rng):
    xs = [1 / _kelvin(p["t1"]), 1 / _kelvin(p["t2"])]
    slope, icpt = np.polyfit(xs, [math.log(p["l1"]), math.log(p["l2"])], 1)
    return exact(math.exp(icpt + slope / _kelvin(p["tu"])),
                 "least-squares line of ln L against 1/T")


def _expr_two_temp(p):
    k1, k2, ku = (_kelvin_expr(p[k]) for k in ("t1", "t2", "tu"))
    l1, l2 = num(p["l1"]), num(p["l2"])
    return f"{l1}*exp(ln({l1}/{l2})/(1/{k1} - 1/{k2})*(1/{ku} - 1/{k1}))"


ARRHENIUS_TWO_TEMP = Family(
    name="arrhenius_two_temp", topic="accelerated", difficulty=3,
    expression=_expr_two_temp,
    asks="life at use temperature extrapolated from mean lives at two test temperatures",
    check_how="least-squares fit of ln(life) against 1/T, evaluated at the use temperature",
    draw=_draw_two_temp, solve=_solve_two_temp, check=_check_two_temp, unit="hours",
    phrasings=(
        lambda p: (f"Accelerated tests of a {p['_item']} gave a mean life of {txt(p['l1'])} "
                   f"hours at {txt(p['t1'])} °C and {txt(p['l2'])} hours at {txt(p['t2'])} °C. "
                   f"Assuming the Arrhenius model, estimate the mean life at {txt(p['tu'])} °C."),
        lambda p: (f"Arrhenius extrapolation: L = {txt(p['l2'])} h at {txt(p['t2'])} °C, "
                   f"L = {txt(p['l1'])} h at {txt(p['t1'])} °C. What life (hours) is expected "
                   f"at the operating temperature of {txt(p['tu'])} °C?"),
        lambda p: (f"Find the expected life in hours of a {p['_item']} operating at "
                   f"{txt(p['tu'])} °C, given test results of {txt(p['l1'], True)} h mean life "
                   f"at {txt(p['t1'])} °C and {txt(p['l2'], True)} h at {txt(p['t2'])} °C, "
                   f"with life following ln L = a + B/T."),
    ),
)


# ---------------------------------------------------------------- inverse power law

IPL_ITEMS = (("film capacitor", "V", 50, 400), ("power cable", "kV", 5, 30),
             ("roller bearing", "kN", 2, 20))


def _draw_ipl(rng):
    item, unit, lo, hi = IPL_ITEMS[int(rng.integers(0, len(IPL_ITEMS)))]
    vu = nice(rng, lo, hi)
    v1 = float(f"{vu * grid(rng, 1.2, 2.0, 0.1):.3g}")
    v2 = float(f"{v1 * grid(rng, 1.1, 1.5, 0.05):.3g}")
    n = grid(rng, 2, 12, 0.5)
    l1 = nice(rng, 100, 5000)
    return {"vu": vu, "v1": v1, "v2": v2, "l1": l1, "l2": float(f"{l1 * (v1 / v2) ** n:.3g}"),
            "_item": item, "_unit": unit}


def _solve_ipl(p):
    n = math.log(p["l1"] / p["l2"]) / math.log(p["v2"] / p["v1"])
    lu = p["l1"] * (p["v1"] / p["vu"]) ** n
    return lu, [
        f"n = \\ln(L_1/L_2)/\\ln(V_2/V_1) = \\ln({txt(p['l1'])}/{txt(p['l2'])})/"
        f"\\ln({txt(p['v2'])}/{txt(p['v1'])}) = {tex(n)}",
        f"L_u = L_1 (V_1/V_u)^n = {txt(p['l1'])} \\times ({txt(p['v1'])}/{txt(p['vu'])})"
        f"^{{{tex(n)}}} = {tex(lu)} hours"]


def _check_ipl(p, rng):
    slope, icpt = np.polyfit(np.log([p["v1"], p["v2"]]), np.log([p["l1"], p["l2"]]), 1)
    return exact(math.exp(icpt + slope * math.log(p["vu"])), "least-squares line in log-log")


def _expr_ipl(p):
    l1, l2, v1, v2, vu = (num(p[k]) for k in ("l1", "l2", "v1", "v2", "vu"))
    return f"{l1}*({v1}/{vu})^(ln({l1}/{l2})/ln({v2}/{v1}))"


IPL = Family(
    name="ipl_extrapolate", topic="accelerated", difficulty=2,
    expression=_expr_ipl,
    asks="life at use stress extrapolated from two stress levels (inverse power law)",
    check_how="least-squares fit of ln(life) against ln(stress), evaluated at use stress",
    draw=_draw_ipl, solve=_solve_ipl, check=_check_ipl, unit="hours",
    phrasings=(
        lambda p: (f"A {p['_item']} lasted {txt(p['l1'])} hours at a stress of {txt(p['v1'])} "
                   f"{p['_unit']} and {txt(p['l2'])} hours at {txt(p['v2'])} {p['_unit']}. "
                   f"Using the inverse power law, estimate its life at the use stress of "
                   f"{txt(p['vu'])} {p['_unit']}."),
        lambda p: (f"Inverse power law L = C/V^n. Test data: V = {txt(p['v2'])} {p['_unit']} "
                   f"-> L = {txt(p['l2'])} h; V = {txt(p['v1'])} {p['_unit']} -> L = "
                   f"{txt(p['l1'])} h. Find L at V = {txt(p['vu'])} {p['_unit']} in hours."),
        lambda p: (f"What life (hours) should a {p['_item']} have at {txt(p['vu'])} "
                   f"{p['_unit']}, if accelerated tests gave {txt(p['l2'], True)} h at "
                   f"{txt(p['v2'])} {p['_unit']} and {txt(p['l1'], True)} h at {txt(p['v1'])} "
                   f"{p['_unit']}, and life follows an inverse power law in the stress?"),
    ),
)


# ---------------------------------------------------------------- Weibull at use conditions

def _draw_accel_weibull(rng):
    p = _draw_temps(rng)
    p["beta"] = grid(rng, 1.0, 3.0, 0.1)
    p["eta_s"] = nice(rng, 200, 5000)
    p["t"] = nice(rng, 1000, 100000)  # answers near 1 are redrawn through `bounds`
    return p


def _solve_accel_weibull(p):
    x, steps = _af_steps(p)
    af = math.exp(x)
    eta_u = af * p["eta_s"]
    z = (p["t"] / eta_u) ** p["beta"]
    return math.exp(-z), [
        *steps, f"AF = e^{{{tex(x)}}} = {tex(af)}",
        f"\\eta_u = AF \\times \\eta_s = {tex(af)} \\times {txt(p['eta_s'])} = {tex(eta_u)} h",
        f"R(t) = e^{{-(t/\\eta_u)^\\beta}} = e^{{-({txt(p['t'])}/{tex(eta_u)})^{{{p['beta']}}}}} = "
        f"{tex(math.exp(-z))}"]


def _check_accel_weibull(p, rng):
    af = _arrhenius_rate(p["ea"], p["ts"]) / _arrhenius_rate(p["ea"], p["tu"])
    stress_lives = p["eta_s"] * rng.weibull(p["beta"], MC_N)
    return mc_fraction(af * stress_lives > p["t"], "simulated test lives scaled by the AF")


def _expr_accel_weibull(p):
    return f"exp(-({num(p['t'])}/({_af_expr(p)}*{num(p['eta_s'])}))^{num(p['beta'])})"


ACCEL_WEIBULL = Family(
    name="accel_weibull_use", topic="accelerated", difficulty=3,
    expression=_expr_accel_weibull,
    asks="reliability at use temperature from a Weibull fit at test temperature (Arrhenius)",
    check_how="simulate test-temperature Weibull lives, scale by the molar-unit AF, count",
    draw=_draw_accel_weibull, solve=_solve_accel_weibull, check=_check_accel_weibull,
    bounds=PROB,
    phrasings=(
        lambda p: (f"At {txt(p['ts'])} °C, {p['_item']} lives follow a Weibull distribution "
                   f"with beta = {p['beta']} and eta = {txt(p['eta_s'])} hours. With an "
                   f"Arrhenius activation energy of {p['ea']} eV and the same beta at use, what "
                   f"is the reliability for {txt(p['t'], True)} hours at {txt(p['tu'])} °C?"),
        lambda p: (f"Weibull fit of accelerated test data ({txt(p['ts'])} °C): shape "
                   f"{p['beta']}, scale {txt(p['eta_s'])} h. Use temperature {txt(p['tu'])} °C, "
                   f"Ea = {p['ea']} eV. Compute R({txt(p['t'])} h) in the field for the "
                   f"{p['_item']}."),
        lambda p: (f"A {p['_item']} will run at {txt(p['tu'])} °C for {txt(p['t'])} h. Tests at "
                   f"{txt(p['ts'])} °C gave Weibull eta = {txt(p['eta_s'], True)} h and beta = "
                   f"{p['beta']}. Assuming Arrhenius acceleration (Ea = {p['ea']} eV) that "
                   f"scales eta only, find the field reliability."),
    ),
)

FAMILIES = [ARRHENIUS_AF, EYRING_AF, ARRHENIUS_TWO_TEMP, IPL, ACCEL_WEIBULL]
