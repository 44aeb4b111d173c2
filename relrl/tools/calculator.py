"""The calculator tool: one arithmetic expression in, one number or a one-line error out.

The expression may start with named values, `x1 = 23000; x2 = 36000; exp(-(x1/x2)^2.8)`: copying
a question's numbers into names, in the order the question gives them, and writing the formula
with the names is easier for a small model than copying numbers into the formula's order.
Parsing and evaluation go through simpleeval (a maintained, single-purpose safe evaluator built on
Python's own `ast`), restricted further here: only numbers, + - * / ^ (and **), parentheses, a
postfix `!`, the names `pi` and `e` and the expression's own, and the functions in FUNCTIONS. No
attributes, subscripts, keywords, strings or comparisons. A home-made parser would have to re-earn the
correctness that `ast` already has; simpleeval's own defaults (string methods, comparisons,
integer powers up to 4,000,000) are wider than a calculator needs, so they are replaced.

Bounds: an expression longer than MAX_CHARS is refused before parsing, so nesting, a megabyte
string and parser recursion are all cut off there; every number is a float, so a power or a
product overflows at once instead of growing an exact integer; factorial, comb and the
distribution functions evaluate in closed form or through scipy.special, in constant time.
"""
from __future__ import annotations

import ast
import functools
import math
import operator
import re
from statistics import NormalDist

MAX_CHARS = 1000


# scipy and simpleeval are imported on first use: the engines import this module, and a bare GPU
# node (torch, transformers, peft) must be able to import them.
class _Special:
    """scipy.special, imported on first use."""

    def __getattr__(self, name):
        from scipy import special

        return getattr(special, name)


special = _Special()
_NORMAL = NormalDist()


class CalculatorError(ValueError):
    """A one-line reason the expression has no value."""


def _integer(x: float, what: str) -> int:
    if not math.isfinite(x) or x != int(x) or x < 0:
        raise CalculatorError(f"{what} needs a non-negative integer, got {x:g}")
    return int(x)


def _factorial(n: float) -> float:
    k = _integer(n, "factorial")
    if k > 170:  # 171! is beyond the largest double
        raise CalculatorError(f"factorial of {n:g} is too large")
    return float(math.factorial(k))


def _comb(n: float, k: float) -> float:
    n_, k_ = _integer(n, "comb"), _integer(k, "comb")
    if k_ > n_:
        return 0.0
    if min(k_, n_ - k_) > 1030:  # comb(2062, 1031) already exceeds the largest double
        raise CalculatorError("result too large")
    return float(math.comb(n_, k_))  # exact, and cheap while min(k, n - k) is this small


def _log(x: float, base: float | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


def _probability(p: float, what: str) -> float:
    if not 0 < p < 1:
        raise CalculatorError(f"{what} needs a probability strictly between 0 and 1, got {p:g}")
    return p


def _positive(x: float, what: str) -> float:
    if not x > 0:
        raise CalculatorError(f"{what} needs a positive parameter, got {x:g}")
    return x


FUNCTIONS = {
    "exp": math.exp, "ln": math.log, "log": _log, "log10": math.log10, "log2": math.log2,
    "sqrt": math.sqrt, "abs": abs, "min": min, "max": max,
    "factorial": _factorial, "gamma": math.gamma, "lgamma": math.lgamma, "comb": _comb,
    "erf": math.erf, "erfc": math.erfc,
    # the standard normal: cdf, survival function and quantile
    "norm_cdf": _NORMAL.cdf,
    "norm_sf": lambda x: _NORMAL.cdf(-x),
    "norm_ppf": lambda p: _NORMAL.inv_cdf(_probability(p, "norm_ppf")),
    # chi-square with df degrees of freedom: cdf and quantile (confidence bounds on MTBF)
    "chi2_cdf": lambda x, df: float(special.chdtr(_positive(df, "chi2_cdf"), x)),
    "chi2_ppf": lambda p, df: float(special.chdtri(_positive(df, "chi2_ppf"),
                                                   1 - _probability(p, "chi2_ppf"))),
    # regularised incomplete gamma functions P(a, x) and Q(a, x) (Weibull residual life)
    "gammainc": lambda a, x: float(special.gammainc(_positive(a, "gammainc"), x)),
    "gammaincc": lambda a, x: float(special.gammaincc(_positive(a, "gammaincc"), x)),
    # counts: Poisson and binomial cumulative probabilities P(X <= k)
    "poisson_cdf": lambda k, mu: float(special.pdtr(_integer(k, "poisson_cdf"), mu)),
    "binom_cdf": lambda k, n, p: float(special.bdtr(_integer(k, "binom_cdf"),
                                                    _integer(n, "binom_cdf"), p)),
    "binom_pmf": lambda k, n, p: _comb(n, k) * p ** k * (1 - p) ** (n - k),
    # the beta quantile (Bayesian bounds with a beta posterior)
    "beta_ppf": lambda q, a, b: float(special.betaincinv(_positive(a, "beta_ppf"),
                                                         _positive(b, "beta_ppf"),
                                                         _probability(q, "beta_ppf"))),
}
NAMES = {"pi": math.pi, "e": math.e}
_OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: math.pow, ast.USub: operator.neg, ast.UAdd: operator.pos,
}
_SPELLINGS = (("^", "**"), ("×", "*"), ("·", "*"), ("÷", "/"), ("\u2212", "-"), ("π", "pi"))


@functools.cache
def _evaluator_type():
    from simpleeval import SimpleEval

    class Evaluator(SimpleEval):
        """simpleeval with only the node kinds an arithmetic expression has."""

        def __init__(self, names: dict[str, float]):
            super().__init__(operators=_OPERATORS, functions=FUNCTIONS, names=names)
            self.nodes = {ast.Expr: self._eval_expr, ast.Name: self._eval_name,
                          ast.UnaryOp: self._eval_unaryop, ast.BinOp: self._eval_binop,
                          ast.Call: self._eval_call, ast.Constant: self._number}

        @staticmethod
        def _number(node: ast.Constant) -> float:
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise CalculatorError(f"not a number: {value!r}"[:80])
            return float(value)  # never an exact integer: 9^9^9 overflows instead of growing

        def _eval_call(self, node: ast.Call):
            if node.keywords:
                raise CalculatorError("functions take positional arguments only")
            return super()._eval_call(node)

    return Evaluator


def _postfix_factorials(text: str) -> str:
    """`5!` and `(n-1)!` as factorial(...); the operand is a number, a name or a bracketed group."""
    out = text
    while (i := out.find("!")) >= 0:
        j = i
        if j > 0 and out[j - 1] == ")":
            depth = 0
            while j > 0:
                j -= 1
                depth += {")": 1, "(": -1}.get(out[j], 0)
                if depth == 0:
                    break
            if depth:
                raise CalculatorError("unbalanced parentheses before '!'")
        while j > 0 and (out[j - 1].isalnum() or out[j - 1] in "._"):  # a number, name or call
            j -= 1
        if j == i:
            raise CalculatorError("'!' needs a number or a bracketed expression before it")
        out = f"{out[:j]}factorial({out[j:i]}){out[i + 1:]}"
    return out


_BINDING = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]{0,19})\s*=(?!=)(.*)", re.S)


def evaluate(expression: str) -> float:
    """The value of one expression, optionally after named values: `x1 = 2.3e-5; x2 = 8760;
    exp(-x1*x2)` (each name bound to the value of its own expression, usable after it); a
    CalculatorError (one line) when it has none."""
    if not isinstance(expression, str):
        raise CalculatorError("the expression must be a string")
    if len(expression) > MAX_CHARS:
        raise CalculatorError(f"expression longer than {MAX_CHARS} characters")
    *bindings, final = expression.split(";")
    names = dict(NAMES)
    for statement in bindings:
        match = _BINDING.fullmatch(statement)
        if match is None:
            raise CalculatorError(f"before the last ';' write name = value, got {statement.strip()[:40]!r}")
        name, text = match.groups()
        if name in FUNCTIONS or name in NAMES:
            raise CalculatorError(f"{name!r} is a built-in name")
        names[name] = _value(text, names)
    return _value(final, names)


def _value(expression: str, names: dict[str, float]) -> float:
    text = expression.strip()
    if not text:
        raise CalculatorError("empty expression")
    for spelling, python in _SPELLINGS:
        text = text.replace(spelling, python)
    text = _postfix_factorials(text)
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise CalculatorError(f"cannot parse {expression.strip()[:60]!r}") from None
    from simpleeval import FunctionNotDefined, InvalidExpression, NameNotDefined

    evaluator = _evaluator_type()(names)
    evaluator.expr = text
    try:
        value = evaluator._eval(tree.body)
    except CalculatorError:
        raise
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        raise CalculatorError("result too large") from None
    except FunctionNotDefined as e:
        raise CalculatorError(f"unknown function {e.func_name!r}") from None
    except NameNotDefined as e:
        raise CalculatorError(f"unknown name {e.name!r}") from None
    except InvalidExpression as e:
        raise CalculatorError(_one_line(e)) from None
    except (ValueError, TypeError, RecursionError) as e:
        raise CalculatorError(_one_line(e) or "invalid arguments") from None
    if not isinstance(value, float) or not math.isfinite(value):
        raise CalculatorError("the expression has no finite numeric value")
    return value


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())[:120]


def calculator(expression: str) -> str:
    """The tool's answer as the model sees it: the value to 10 significant figures, or
    'error: <reason>'."""
    try:
        return f"{evaluate(expression):.10g}"
    except CalculatorError as e:
        return f"error: {e}"
