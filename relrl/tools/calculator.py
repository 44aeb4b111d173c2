"""The calculator tool: one arithmetic expression in, one number or a one-line error out.

The expression may start with named values, `x1 = 23000; x2 = 36000; exp(-(x1/x2)^2.8)`: copying
a question's numbers into names, in the order the question gives them, and writing the formula
with the names is easier for a small model than copying numbers into the formula's order.
Parsing is Python's own `ast` (a home-made parser would have to re-earn the correctness that
`ast` already has); what it parses is then checked against a short list of node kinds (numbers,
+ - * / ^ (and **), unary signs, the names `pi` and `e` and the expression's own, and calls of
the functions in FUNCTIONS with their number of arguments) and evaluated by a loop over an
explicit stack, so no input can reach attributes, subscripts, keywords, strings or comparisons.

The answer is a function of the expression alone (the model's text is untrusted, and a resumed
run must insert the same answers as an uninterrupted one):
- Every error is one of a fixed set of one-line texts, chosen by the kind of failure (the
  exception class or the AST node type, never an exception's or an object's str(), which can hold
  a memory address); where it echoes the model's text (a fragment that does not parse, an unknown
  name) the echo is short, a Python literal, and has `<` escaped, so it can never hold the text
  of a chat-template marker (`<|im_end|>`, `<tool_call>`, `<think>`...).
- Nothing recurses over the expression except `ast.parse` itself, and that runs with a fixed
  headroom above the caller's stack, so the answer does not depend on how deep the caller is.

Bounds, so the work per character is bounded: an expression longer than MAX_CHARS is refused
before anything else; the postfix `!` and every other rewrite is one pass; every number is a float,
so a power or a product overflows at once instead of growing an exact integer; factorial, comb
and the distribution functions evaluate in closed form, through scipy.special with parameters up
to MAX_PARAMETER (past that its iterations grow), or (comb) exactly only when the result fits a
double.
"""
from __future__ import annotations

import ast
import math
import operator
import re
import sys
import warnings
from statistics import NormalDist

MAX_CHARS = 1000
MAX_PARAMETER = 1e7  # shape, degrees of freedom and beta parameters
ECHO_CHARS = 40  # how much of the model's text an error quotes
_PARSE_HEADROOM = 1500  # Python frames above the caller for ast.parse (3 levels of AST each)


# scipy is imported on first use: the engines import this module, and a bare GPU node (torch,
# transformers, peft) must be able to import them.
class _Special:
    """scipy.special, imported on first use."""

    def __getattr__(self, name):
        from scipy import special

        return getattr(special, name)


special = _Special()
_NORMAL = NormalDist()


class CalculatorError(ValueError):
    """A one-line reason the expression has no value."""


def quote(fragment: str, limit: int = ECHO_CHARS) -> str:
    """At most `limit` characters of untrusted text for an error message: a Python literal (so
    line breaks and control characters are escapes), with every `<` written `\\x3c`, so no chat
    marker's text can appear in it."""
    return repr(fragment[:limit]).replace("<", "\\x3c")


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
    k_ = min(k_, n_ - k_)
    # the size first (an exact comb(1e300, 1000) is a 300,000-digit integer): comb >= (n/k)^k,
    # so past the largest double (e^709.8) when k log(n/k) > 710; below that k <= 1025 (n >= 2k)
    # and comb <= (e n/k)^k < e^1735, a few thousand bits to compute exactly
    if k_ and k_ * math.log(n_ / k_) > 710:
        raise CalculatorError("result too large")
    return float(math.comb(n_, k_))  # an OverflowError past the largest double


def _log(x: float, base: float | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


def _probability(p: float, what: str) -> float:
    if not 0 < p < 1:
        raise CalculatorError(f"{what} needs a probability strictly between 0 and 1, got {p:g}")
    return p


def _positive(x: float, what: str) -> float:
    if not 0 < x <= MAX_PARAMETER:
        raise CalculatorError(f"{what} needs a positive parameter at most {MAX_PARAMETER:g}, "
                              f"got {x:g}")
    return x


FUNCTIONS = {
    "exp": math.exp, "ln": math.log, "log": _log, "log10": math.log10, "log2": math.log2,
    "sqrt": math.sqrt, "abs": abs, "min": lambda *xs: min(xs), "max": lambda *xs: max(xs),
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
# (fewest, most) arguments of each function; None: any number
ARITY = {name: (1, 1) for name in FUNCTIONS}
ARITY.update({"ln": (1, 2), "log": (1, 2), "min": (1, None), "max": (1, None), "comb": (2, 2),
              "chi2_cdf": (2, 2), "chi2_ppf": (2, 2), "gammainc": (2, 2), "gammaincc": (2, 2),
              "poisson_cdf": (2, 2), "binom_cdf": (3, 3), "binom_pmf": (3, 3),
              "beta_ppf": (3, 3)})
NAMES = {"pi": math.pi, "e": math.e}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: math.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
# what an error calls a node or operator the calculator refuses (others: their AST type's name)
_REFUSED = {
    ast.Mod: "'%'", ast.FloorDiv: "'//'", ast.MatMult: "'@'", ast.BitAnd: "'&'",
    ast.BitOr: "'|'", ast.BitXor: "bitwise xor", ast.LShift: "shifts", ast.RShift: "shifts",
    ast.Invert: "'~'", ast.Not: "'not'", ast.Compare: "comparisons", ast.BoolOp: "'and'/'or'",
    ast.IfExp: "'if'", ast.Attribute: "attributes", ast.Subscript: "subscripts",
    ast.List: "lists", ast.Tuple: "tuples", ast.Set: "sets", ast.Dict: "dicts",
    ast.Lambda: "lambdas", ast.Starred: "'*' arguments", ast.NamedExpr: "':='",
    ast.JoinedStr: "strings", ast.ListComp: "comprehensions", ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions", ast.GeneratorExp: "comprehensions",
}
_SPELLINGS = (("^", "**"), ("×", "*"), ("·", "*"), ("÷", "/"), ("\u2212", "-"), ("π", "pi"))


def _refused(node: ast.AST) -> CalculatorError:
    kind = _REFUSED.get(type(node), type(node).__name__)
    return CalculatorError(f"{kind} not supported: numbers, + - * / ^ !, names and the "
                           "calculator's functions only")


def _not_a_number(value: object) -> CalculatorError:
    if isinstance(value, bool) or value is None:
        kind = repr(value)
    else:
        kind = {str: "a string", bytes: "bytes", complex: "a complex number"}.get(
            type(value), type(value).__name__)
    return CalculatorError(f"not a number: {kind}")


def _check(tree: ast.AST, names: dict[str, float]) -> None:
    """Raise CalculatorError at the first node (in reading order) that the calculator does not
    evaluate: a node kind, an operator, a name or a function it lacks, a wrong number of
    arguments. Iterative: no recursion, however deep the tree."""
    stack = [tree]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Constant:
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise _not_a_number(node.value)
        elif kind is ast.Name:
            if node.id not in names:
                if node.id in FUNCTIONS:
                    raise CalculatorError(f"{quote(node.id)} is a function: call it, e.g. "
                                          f"{node.id}(1)")
                raise CalculatorError(f"unknown name {quote(node.id)}")
        elif kind is ast.BinOp:
            if type(node.op) not in _BINARY:
                raise _refused(node.op)
            stack += (node.right, node.left)
        elif kind is ast.UnaryOp:
            if type(node.op) not in _UNARY:
                raise _refused(node.op)
            stack.append(node.operand)
        elif kind is ast.Call:
            if type(node.func) is not ast.Name:
                raise CalculatorError("only the calculator's functions can be called")
            name = node.func.id
            if name not in FUNCTIONS:
                raise CalculatorError(f"unknown function {quote(name)}")
            if node.keywords:
                raise CalculatorError("functions take positional arguments only")
            fewest, most = ARITY[name]
            count = len(node.args)
            if count < fewest or (most is not None and count > most):
                wanted = f"{fewest} or more" if most is None else (
                    f"{fewest}" if fewest == most else f"{fewest} or {most}")
                raise CalculatorError(f"{name} takes {wanted} argument"
                                      f"{'' if wanted == '1' else 's'}, got {count}")
            stack += reversed(node.args)
        else:
            raise _refused(node)


def _run(tree: ast.AST, names: dict[str, float]) -> float:
    """The value of a tree that passed _check, by post-order over an explicit stack."""
    values: list = []
    stack: list = [(tree, False)]
    while stack:
        node, ready = stack.pop()
        kind = type(node)
        if kind is ast.Constant:
            values.append(float(node.value))  # never an exact integer: 9^9^9 overflows instead
        elif kind is ast.Name:
            values.append(names[node.id])
        elif not ready:
            stack.append((node, True))
            if kind is ast.BinOp:
                stack += ((node.right, False), (node.left, False))
            elif kind is ast.UnaryOp:
                stack.append((node.operand, False))
            else:
                stack += ((arg, False) for arg in reversed(node.args))
        elif kind is ast.BinOp:
            right = values.pop()
            values[-1] = _BINARY[type(node.op)](values[-1], right)
        elif kind is ast.UnaryOp:
            values[-1] = _UNARY[type(node.op)](values[-1])
        else:
            count = len(node.args)
            args = values[len(values) - count:]
            del values[len(values) - count:]
            values.append(FUNCTIONS[node.func.id](*args))
    return values[0]


def _postfix_factorials(text: str) -> str:
    """`5!`, `x!` and `(n-1)!` (also `gamma(3)!`, `3!!`) as factorial(...), in one pass: the
    operand is the run of letters, digits, `.` and `_` before the `!`, or the bracketed group
    there with the name of a call before it."""
    if "!" not in text:
        return text
    pieces: list[str] = []
    wraps: dict[int, int] = {}  # piece index -> `factorial(` to write before that piece
    opens: list[int] = []  # piece index of each unclosed `(`
    run = -1  # piece index where the current run of name characters began (-1: none)
    operand = -1  # piece index where the operand ending at the last piece begins (-1: none)
    unbalanced = False  # the last piece is a `)` without its `(`
    for c in text:
        if c.isalnum() or c in "._":
            if run < 0:
                run = len(pieces)
            operand, unbalanced = run, False
        elif c == "(":
            opens.append(run if run >= 0 else len(pieces))
            run, operand, unbalanced = -1, -1, False
        elif c == ")":
            run = -1
            operand, unbalanced = (opens.pop(), False) if opens else (-1, True)
        elif c == "!" and operand >= 0:
            wraps[operand] = wraps.get(operand, 0) + 1
            run, c = -1, ")"
        elif c == "!":
            raise CalculatorError("unbalanced parentheses before '!'" if unbalanced else
                                  "'!' needs a number or a bracketed expression before it")
        else:
            run, operand, unbalanced = -1, -1, False
        pieces.append(c)
    for index, count in wraps.items():
        pieces[index] = "factorial(" * count + pieces[index]
    return "".join(pieces)


def _parse(text: str, echo: str) -> ast.AST:
    try:
        with warnings.catch_warnings():  # an invalid escape in a string literal warns
            warnings.simplefilter("ignore")
            return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        raise CalculatorError(f"cannot parse {quote(echo)}") from None


_BINDING = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]{0,19})\s*=(?!=)(.*)", re.S)


def evaluate(expression: str) -> float:
    """The value of one expression, optionally after named values: `x1 = 2.3e-5; x2 = 8760;
    exp(-x1*x2)` (each name bound to the value of its own expression, usable after it); a
    CalculatorError (one line) when it has none."""
    if not isinstance(expression, str):
        raise CalculatorError("the expression must be a string")
    if len(expression) > MAX_CHARS:
        raise CalculatorError(f"expression longer than {MAX_CHARS} characters")
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    limit = sys.getrecursionlimit()
    raise_limit = depth + _PARSE_HEADROOM > limit
    if raise_limit:
        sys.setrecursionlimit(depth + _PARSE_HEADROOM)
    try:
        *bindings, final = expression.split(";")
        names = dict(NAMES)
        for statement in bindings:
            match = _BINDING.fullmatch(statement)
            if match is None:
                raise CalculatorError(f"before the last ';' write name = value, got "
                                      f"{quote(statement.strip())}")
            name, text = match.groups()
            if name in FUNCTIONS or name in NAMES:
                raise CalculatorError(f"{quote(name)} is a built-in name")
            names[name] = _value(text, names)
        return _value(final, names)
    finally:
        if raise_limit:
            sys.setrecursionlimit(limit)


def _value(expression: str, names: dict[str, float]) -> float:
    text = expression.strip()
    if not text:
        raise CalculatorError("empty expression")
    for spelling, python in _SPELLINGS:
        text = text.replace(spelling, python)
    text = _postfix_factorials(text)
    tree = _parse(text, expression.strip())
    _check(tree, names)
    # each kind of failure has one fixed text: str() of an exception may differ between Python
    # versions, and a library's may hold an address
    try:
        value = _run(tree, names)
    except CalculatorError:
        raise
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        raise CalculatorError("result too large") from None
    except ValueError:
        raise CalculatorError("math domain error") from None
    except Exception:
        raise CalculatorError("invalid arguments") from None
    if not isinstance(value, float) or not math.isfinite(value):
        raise CalculatorError("the expression has no finite numeric value")
    return value


def calculator(expression: str) -> str:
    """The tool's answer as the model sees it: the value to 10 significant figures, or
    'error: <reason>' (one line, at most a few hundred characters). Never raises."""
    try:
        return f"{evaluate(expression):.10g}"
    except CalculatorError as e:
        return f"error: {e}"
    except (RecursionError, MemoryError):
        return "error: expression too complex"
    except Exception:
        return "error: cannot evaluate the expression"
