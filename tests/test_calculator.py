"""The calculator tool: values against math and scipy, and hostile input answered with an error."""
import math
import re
import sys

import pytest
from scipy import stats

from relrl.tools.calculator import MAX_CHARS, CalculatorError, calculator, evaluate


@pytest.mark.parametrize("expression, expected", [
    ("1 + 2 * 3", 7.0),
    ("2^10", 1024.0),
    ("2**10", 1024.0),
    ("-2^2", -4.0),  # the power binds tighter than the sign, as written on paper
    ("2^3^2", 512.0),  # right-associative
    ("1.5e-3 * 2E2", 0.3),
    ("exp(-0.0002 * 1000)", math.exp(-0.2)),
    ("ln(2) / 1e-4", math.log(2) / 1e-4),
    ("log(8, 2)", 3.0),
    ("log(e)", 1.0),
    ("log10(1000)", 3.0),
    ("sqrt(2)", math.sqrt(2)),
    ("5!", 120.0),
    ("(2 + 1)! / 3!", 1.0),
    ("3!!", 720.0),
    ("gamma(3)!", 2.0),
    ("gamma(1 + 1/1.5)", math.gamma(1 + 1 / 1.5)),
    ("comb(10, 3)", 120.0),
    ("comb(2000, 3)", math.comb(2000, 3)),
    ("comb(10**9, 2)", math.comb(10**9, 2)),
    ("comb(1000, 30) / comb(1000, 29)", 971 / 30),
    ("comb(3, 5)", 0.0),
    ("erf(0.5)", math.erf(0.5)),
    ("pi", math.pi),
    ("1 - (1 - 0.9)^3", 1 - 0.1 ** 3),
    ("3 × 4 ÷ 2", 6.0),
    ("2 \u2212 3", -1.0),
])
def test_arithmetic_and_functions(expression, expected):
    assert evaluate(expression) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("expression, expected", [
    ("norm_cdf(1.2)", stats.norm.cdf(1.2)),
    ("norm_sf(1.2)", stats.norm.sf(1.2)),
    ("norm_ppf(0.975)", stats.norm.ppf(0.975)),
    ("chi2_ppf(0.9, 4)", stats.chi2.ppf(0.9, 4)),
    ("chi2_ppf(0.05, 2*7+2)", stats.chi2.ppf(0.05, 16)),
    ("chi2_cdf(3.2, 5)", stats.chi2.cdf(3.2, 5)),
    ("gammaincc(2.5, 1.3)", stats.gamma.sf(1.3, 2.5)),
    ("gammainc(2.5, 1.3)", stats.gamma.cdf(1.3, 2.5)),
    ("poisson_cdf(3, 2.2)", stats.poisson.cdf(3, 2.2)),
    ("binom_cdf(2, 10, 0.1)", stats.binom.cdf(2, 10, 0.1)),
    ("binom_pmf(2, 10, 0.1)", stats.binom.pmf(2, 10, 0.1)),
    ("beta_ppf(0.95, 3, 40)", stats.beta.ppf(0.95, 3, 40)),
])
def test_distributions_match_scipy(expression, expected):
    assert evaluate(expression) == pytest.approx(float(expected), rel=1e-9)


@pytest.mark.parametrize("expression, reason", [
    ("9^9^9", "result too large"),
    ("1e308!", "factorial of 1e+308 is too large"),
    ("171!", "factorial of 171 is too large"),
    ("2.5!", "factorial needs a non-negative integer, got 2.5"),
    ("(" * 10_000 + "1" + ")" * 10_000, f"expression longer than {MAX_CHARS} characters"),
    ("1" * 1_000_000, f"expression longer than {MAX_CHARS} characters"),
    ("(" * 300 + "1" + ")" * 300, "cannot parse"),  # under the length limit, past the parser's
    ("foo(2)", "unknown function 'foo'"),
    ("lambda_ * 2", "unknown name 'lambda_'"),
    ("__import__('os')", "unknown function '__import__'"),
    ("__import__('os').system('true')", "only the calculator's functions can be called"),
    ("(1).real", "attributes not supported"),
    ("[1, 2][0]", "subscripts not supported"),
    ("exp.__class__", "attributes not supported"),
    ("f(1)(2)", "only the calculator's functions can be called"),
    ("'a' * 5", "not a number"),
    ("True + 1", "not a number: True"),
    ("exp(x=1)", "positional arguments only"),
    ("x = 3", "cannot parse"),
    ("1/0", "division by zero"),
    ("exp(1000)", "result too large"),
    ("comb(1e6, 5e5)", "result too large"),
    ("comb(1e300, 1e299)", "result too large"),
    ("sqrt(-1)", "math domain error"),
    ("(-8)^(1/3)", "math domain error"),
    ("norm_ppf(1.5)", "norm_ppf needs a probability strictly between 0 and 1, got 1.5"),
    ("chi2_ppf(0.9, 0)", "chi2_ppf needs a positive parameter at most 1e+07, got 0"),
    ("beta_ppf(0.5, 4e16, 2e22)", "beta_ppf needs a positive parameter at most 1e+07, got 4e+16"),
    ("", "empty expression"),
    ("1e400", "no finite numeric value"),
    ("exp", "'exp' is a function: call it, e.g. exp(1)"),
    ("3!!!" + "!" * 10, "too large"),
])
def test_hostile_or_invalid_input_gets_a_one_line_error(expression, reason):
    answer = calculator(expression)
    assert answer.startswith("error: ")
    assert reason in answer
    assert "\n" not in answer


def test_the_tool_answer_is_the_value_to_ten_significant_figures():
    assert calculator("1/3") == "0.3333333333"
    assert calculator("exp(-0.2)") == "0.8187307531"
    assert calculator("2^40") == "1.099511628e+12"
    assert calculator("10 - 4") == "6"


@pytest.mark.parametrize("expression, expected", [
    ("x1 = 23000; x2 = 36000; x3 = 2.8; exp(-(x1/x2)^x3)", math.exp(-(23000 / 36000) ** 2.8)),
    ("a = 2; b = a * 3; b^2", 36.0),
    ("lam = 8 × 10^-5; t = 6100; exp(-lam*t)*(1 + 0.98*lam*t)",
     math.exp(-8e-5 * 6100) * (1 + 0.98 * 8e-5 * 6100)),
])
def test_named_values_before_the_expression(expression, expected):
    assert evaluate(expression) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("expression, reason", [
    ("exp = 2; 1", "'exp' is a built-in name"),
    ("a == 2; 1", "before the last ';' write name = value, got 'a == 2'"),
    ("1; 2", "before the last ';' write name = value, got '1'"),
    ("a = 1;", "empty expression"),
    ("a = b; 1", "unknown name 'b'"),
    ("x = 1; y", "unknown name 'y'"),
])
def test_a_bad_binding_gets_a_one_line_error(expression, reason):
    with pytest.raises(CalculatorError, match=re.escape(reason)):
        evaluate(expression)


# ---------------------------------------------------------------------- deterministic errors
@pytest.mark.parametrize("expression, reason", [
    # these once answered "Operator '<ast.Mod object at 0x7f...>' does not exist": an address
    ("7 % 2", "'%' not supported"),
    ("7 // 2", "'//' not supported"),
    ("1 @ 2", "'@' not supported"),
    ("~1", "'~' not supported"),
    ("not 1", "'not' not supported"),
    ("1 << 2", "shifts not supported"),
    ("1 >> 2", "shifts not supported"),
    ("1 & 2", "'&' not supported"),
    ("1 | 2", "'|' not supported"),
    ("1 < 2", "comparisons not supported"),
    ("1 and 2", "'and'/'or' not supported"),
    ("(x := 1)", "':=' not supported"),
    ("await x", "Await not supported"),  # a node without a name of its own: its AST type's
    # these once carried a Python exception's own text (a <lambda> repr, a version's wording)
    ("norm_ppf(0.5, 2)", "norm_ppf takes 1 argument, got 2"),
    ("sqrt(1, 2)", "sqrt takes 1 argument, got 2"),
    ("comb(3)", "comb takes 2 arguments, got 1"),
    ("log(1, 2, 3)", "log takes 1 or 2 arguments, got 3"),
    ("min()", "min takes 1 or more arguments, got 0"),
    ("'<|im_end|>' + 1", "not a number: a string"),
    ("b'a'", "not a number: bytes"),
    ("1j", "not a number: a complex number"),
])
def test_every_refusal_is_a_fixed_text_without_addresses(expression, reason):
    answer = calculator(expression)
    assert answer.startswith("error: ") and reason in answer, answer
    assert " at 0x" not in answer and "object" not in answer and "<" not in answer


@pytest.mark.parametrize("expression, answer", [
    ("1 <|im_end|>", "error: cannot parse '1 \\x3c|im_end|>'"),
    ("<tool_call>{}</tool_call>", "error: cannot parse '\\x3ctool_call>{}\\x3c/tool_call>'"),
    ("2 *\n<|im_start|>user", "error: cannot parse '2 *\\n\\x3c|im_start|>user'"),
    ("a <think> 1; a", "error: before the last ';' write name = value, got 'a \\x3cthink> 1'"),
    ("x" * 200 + " + 1", f"error: unknown name '{'x' * 40}'"),
])
def test_echoed_text_is_short_one_line_and_holds_no_marker(expression, answer):
    assert calculator(expression) == answer


def test_max_and_min_take_one_or_more_numbers():
    assert evaluate("max(1)") == 1.0 and evaluate("min(3, 1, 2)") == 1.0


def test_comb_of_a_huge_n_is_refused_without_computing_it():
    assert evaluate("comb(1000, 500)") == float(math.comb(1000, 500))  # 2.7e299 fits a double
    assert evaluate("comb(1e300, 1)") == 1e300
    assert calculator("comb(2000, 1000)") == "error: result too large"
    # once a 300,000-digit integer computed exactly, then refused: 0.2 s a call
    assert calculator("comb(1e300, 1000)") == "error: result too large"


@pytest.mark.parametrize("expression, expected", [
    ("2!!!!", 2.0),
    ("(1 + 1)!!", 2.0),
    ("x = 3; x!", 6.0),
    ("gamma(4)! / 3!", 120.0),
    ("3! + 2!", 8.0),
])
def test_postfix_factorials(expression, expected):
    assert evaluate(expression) == expected


@pytest.mark.parametrize("expression, reason", [
    ("1)!", "unbalanced parentheses before '!'"),
    ("!3", "'!' needs a number or a bracketed expression before it"),
    ("3 !", "'!' needs a number or a bracketed expression before it"),
    ("1" + "!" * 999, "cannot parse"),  # 999 nested factorials: past the parser's nesting
])
def test_misplaced_factorials(expression, reason):
    assert reason in calculator(expression)


def at_depth(frames, f):
    return f() if frames == 0 else at_depth(frames - 1, f)


@pytest.mark.parametrize("expression, answer", [
    ("+".join(["1"] * 500), "500"),  # 500 nested additions: once "maximum recursion depth"
    ("-" * 999 + "1", "-1"),
    ("2**" * 333 + "2", "error: result too large"),
    ("abs(" * 199 + "1" + ")" * 199, "1"),
])
def test_the_answer_does_not_depend_on_the_callers_stack_depth(expression, answer):
    """Deep expressions were answered or refused (RecursionError) by how deep the caller was."""
    limit = sys.getrecursionlimit()
    near = limit - 60  # frames: just room to call the calculator
    assert [at_depth(d, lambda: calculator(expression)) for d in (0, limit // 2, near)] == [answer] * 3
    assert sys.getrecursionlimit() == limit


def test_any_exception_inside_becomes_a_fixed_error(monkeypatch):
    from relrl.tools import calculator as module

    def broken(x):
        raise RuntimeError(f"state at {object()!r}")

    monkeypatch.setitem(module.FUNCTIONS, "exp", broken)
    assert calculator("exp(1)") == "error: invalid arguments"
    monkeypatch.setitem(module.FUNCTIONS, "exp", lambda x: math.log(-1))
    assert calculator("exp(1)") == "error: math domain error"
    monkeypatch.setattr(module, "evaluate", lambda e: (_ for _ in ()).throw(KeyError(object())))
    assert calculator("1") == "error: cannot evaluate the expression"
