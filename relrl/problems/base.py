"""The Family record every problem family is, plus number formatting and check helpers.

A family draws realistic parameters, solves them (value + short worked steps), phrases the
question at least three ways with the same answer, and recomputes the answer another way
(simulation, integration, enumeration, root finding) for the tests. Some families also have
new wordings, kept apart from the usual ones (Family.new_phrasings).
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
from scipy import integrate

MAX_TRIES = 1000


@dataclass(frozen=True)
class Check:
    """A second computation of the answer: `value` must lie within `tol` of the exact one."""

    value: float
    tol: float
    how: str


@dataclass(frozen=True)
class Problem:
    family: str
    topic: str
    difficulty: int
    params: dict
    value: float          # the exact answer
    answer: str           # `value` as Family.answer_text writes it
    questions: tuple[str, ...]
    reasoning: str        # worked steps ending with exactly one \boxed{answer}
    expression: str | None = None  # the answer as one calculator expression, if the family has one

    @property
    def key(self) -> str:
        """Identity of the underlying problem: the numeric parameters, not the wording."""
        items = sorted((k, v) for k, v in self.params.items() if not k.startswith("_"))
        return f"{self.family}:{items!r}"


@dataclass(frozen=True)
class Family:
    """One kind of problem. Params whose names start with '_' are cosmetic (item names)."""

    name: str
    topic: str
    difficulty: int                      # 1 to 3, by number of reasoning steps
    asks: str                            # what is asked, one line for FAMILIES.md
    check_how: str                       # the independent computation, one line
    draw: Callable[[np.random.Generator], dict]
    solve: Callable[[dict], tuple[float, list[str]]]
    phrasings: tuple[Callable[[dict], str], ...]
    check: Callable[[dict, np.random.Generator], Check]
    unit: str = ""                       # printed after the boxed answer
    bounds: tuple[float, float] = (0.0, math.inf)  # answers outside are redrawn
    # the answer as ONE calculator expression (relrl.tools.calculator) written with the numbers
    # of the base phrasing as it states them (num, num_pct); None where the answer needs
    # iteration, root finding or a long enumeration
    expression: Callable[[dict], str] | None = None
    # further wordings of the same question, kept out of `phrasings` and so out of every row
    # generated in the usual wording, the built-in models' pretraining included: a test set in
    # them asks whether a model learnt the problem or its wording (generate --wording new)
    new_phrasings: tuple[Callable[[dict], str], ...] = ()

    @property
    def target_kind(self) -> str:
        """"probability" for a family whose answers lie inside (0, 1) (reliabilities,
        availabilities, probabilities, importance measures that are probabilities, fractions):
        the complement tolerance rule judges them on min(t, 1 - t); else "value"."""
        return "probability" if self.bounds[1] <= 1 else "value"

    def answer_text(self, value: float) -> str:
        """The stored answer: 4 significant figures, on the smaller of p and 1 - p for a
        probability (sig_probability)."""
        return sig_probability(value) if self.target_kind == "probability" else sig(value)

    def generate(self, rng: np.random.Generator) -> Problem:
        for _ in range(MAX_TRIES):
            params = self.draw(rng)
            value, steps = self.solve(params)
            value = float(value)
            if math.isfinite(value) and self.bounds[0] < value < self.bounds[1]:
                break
        else:
            raise RuntimeError(f"family {self.name}: no acceptable draw in {MAX_TRIES} tries")
        answer = self.answer_text(value)
        unit = f" {self.unit}" if self.unit else ""
        reasoning = "\n".join([*steps, f"Answer: \\boxed{{{answer}}}{unit}"])
        questions = tuple(phrase(params) for phrase in self.phrasings)
        expression = self.expression(params) if self.expression else None
        return Problem(self.name, self.topic, self.difficulty, params, value, answer,
                       questions, reasoning, expression)

    def new_questions(self, params: dict) -> tuple[str, ...]:
        """The problem with these parameters in the new wordings (new_phrasings)."""
        return tuple(phrase(params) for phrase in self.new_phrasings)

    def reworded(self, problem: Problem) -> Problem:
        """`problem` asked in the new wordings only: the same answer, solution and expression."""
        return replace(problem, questions=self.new_questions(problem.params))


PROB = (1e-3, 0.9995)  # bounds for probability answers: not trivially 0 or 1 at 4 figures


# ---------------------------------------------------------------- number formatting

def _round_sig(x: float, n: int) -> float:
    return float(f"{x:.{n}g}")


def _mantissa_exponent(x: float, n: int) -> tuple[str, int]:
    mant, exp = f"{x:.{n - 1}e}".split("e")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return mant, int(exp)


def sig(x: float, n: int = 4) -> str:
    """The stored answer: n significant figures, positional for ordinary magnitudes."""
    r = _round_sig(x, n)
    if r == 0:
        return "0"
    if 1e-4 <= abs(r) < 1e6:
        return np.format_float_positional(r, trim="-")
    mant, exp = _mantissa_exponent(r, n)
    return f"{mant}e{exp}"


def sig_probability(p: float, n: int = 4) -> str:
    """A probability answer whose smaller side, p or 1 - p, keeps n significant figures,
    trailing zeros included, so that a reliability near 1 states its failure probability to n
    figures: 0.9991234 -> "0.9991234" (1 - p = 0.0008766), 0.95 -> "0.95000" (0.05000), 0.2 ->
    "0.2000", 1.06e-5 -> "1.060e-5"."""
    small = min(p, 1 - p)
    mantissa, exponent = f"{small:.{n - 1}e}".split("e")
    if p < 1e-4:
        return f"{mantissa}e{int(exponent)}"
    decimals = n - 1 - int(exponent)
    rounded = float(f"{mantissa}e{exponent}")
    return f"{rounded if p <= 0.5 else 1 - rounded:.{decimals}f}"


def tex(x: float, n: int = 5) -> str:
    """A number inside a worked solution (light LaTeX)."""
    r = _round_sig(x, n)
    if r == 0:
        return "0"
    if 1e-4 <= abs(r) < 1e6:
        return np.format_float_positional(r, trim="-")
    mant, exp = _mantissa_exponent(r, n)
    return f"{mant}\\times10^{{{exp}}}"


def txt(x: float, comma: bool = False) -> str:
    """A given value inside a question; float noise from unit conversions is rounded away."""
    x = _round_sig(x, 10)
    if x == 0:
        return "0"
    if 1e-4 <= abs(x) < 1e7:
        if comma and float(x).is_integer():
            return f"{int(x):,}"
        return np.format_float_positional(float(x), trim="-")
    mant, exp = _mantissa_exponent(x, 6)
    return f"{mant} × 10^{exp}"


def pct(p: float) -> str:
    """0.9 -> '90%' (probabilities quoted as percentages in some phrasings)."""
    return np.format_float_positional(_round_sig(100 * p, 8), trim="-") + "%"


def num(x: float) -> str:
    """A given value inside a calculator expression, written as the question writes it (txt);
    bracketed when it is in scientific form, "2.3 × 10^-5", so that it binds as one number."""
    s = txt(x)
    return f"({s})" if "×" in s else s


def num_pct(p: float) -> str:
    """A probability the question quotes as a percentage (pct), inside an expression: "(90/100)"."""
    return f"({pct(p)[:-1]}/100)"


# constants an expression may add to the question's numbers: the small integers of formulas
# (1 - p, x^2, 2T, 3R^2), percent, Celsius to kelvin, Boltzmann's constant in eV/K
EXPRESSION_CONSTANTS = frozenset({1.0, 2.0, 3.0, 100.0, 273.15, 8.617333262e-5})
_EXPRESSION_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_TEXT_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


def stray_numbers(expression: str, question: str) -> set[float]:
    """The numbers of `expression` that are neither in `question` (thousands commas read, as
    "49,000" = 49000) nor EXPRESSION_CONSTANTS: empty when it is written with the question's
    numbers. Signs and the parts of "2.3 × 10^-5" count as separate numbers on both sides."""
    given = {float(m.replace(",", "")) for m in _TEXT_NUMBER.findall(question)}
    used = {float(m) for m in _EXPRESSION_NUMBER.findall(expression)}
    return used - given - EXPRESSION_CONSTANTS


# ---------------------------------------------------------------- parameter draws

def nice(rng: np.random.Generator, lo: float, hi: float, digits: int = 2) -> float:
    """Log-uniform in [lo, hi], rounded to `digits` significant figures."""
    x = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    return _round_sig(x, digits)


def grid(rng: np.random.Generator, lo: float, hi: float, step: float) -> float:
    """Uniform on the grid lo, lo+step, ..., hi, as a clean decimal."""
    k = int(rng.integers(0, int(round((hi - lo) / step)) + 1))
    return _round_sig(lo + k * step, 10)


def pick(rng: np.random.Generator, seq):
    return seq[int(rng.integers(0, len(seq)))]


def clean(x: float) -> float:
    """Strip float noise from a product of decimals (e.g. 2.3e-5 * 1e9)."""
    return _round_sig(x, 10)


# ---------------------------------------------------------------- checks

def exact(value: float, how: str, rel: float = 1e-6) -> Check:
    """A deterministic second computation (integration, enumeration, root finding)."""
    return Check(float(value), rel * abs(value) + 1e-12, how)


def mc_fraction(hits: np.ndarray, how: str = "Monte Carlo") -> Check:
    """Fraction of simulated trials that succeed, tolerance 5 standard errors."""
    hits = np.asarray(hits, dtype=bool)
    m = hits.size
    p = float(hits.mean())
    se = math.sqrt(max(p * (1 - p), 1.0 / m) / m)
    return Check(p, 5 * se, f"{how}, {m} samples")


def mc_mean(values: np.ndarray, how: str = "Monte Carlo mean") -> Check:
    values = np.asarray(values, dtype=float)
    se = float(values.std(ddof=1)) / math.sqrt(values.size)
    return Check(float(values.mean()), 5 * se + 1e-12, f"{how}, {values.size} samples")


def enumerate_states(probs: list[float], works: Callable[[tuple[int, ...]], bool]) -> float:
    """P(works(state)) by brute force over all 2^n states; probs[i] = P(component i is up)."""
    total = 0.0
    for state in itertools.product((0, 1), repeat=len(probs)):
        if works(state):
            weight = 1.0
            for up, p in zip(state, probs):
                weight *= p if up else 1.0 - p
            total += weight
    return total


def integrate_tail(f: Callable[[float], float], start: float, scale: float) -> float:
    """Integral of f from `start` to infinity, computed in units of `scale` so quad converges."""
    value, _ = integrate.quad(lambda u: f(start + scale * u), 0, math.inf, epsabs=0,
                              epsrel=1e-11, limit=200)
    return scale * value


MC_N = 200_000
