"""Check worked solutions: does each item's reasoning support its answer?

Offline, for every item with a `reasoning`:
  * its final value (the last \\boxed{}, else a "final answer" line or the last number) must
    equal `answer` within --tolerance;
  * every simple arithmetic step written as `a op b = c` (also chains such as
    `0.9 × 0.8 × 0.95 = 0.684`, with + - × · * / ÷ ^, parentheses, \\frac{a}{b}, percentages and
    scientific notation) is recomputed; a step is wrong when the written result is off by more
    than --step-tolerance and more than the rounding of its last written digit. Expressions
    inside a function (exp(...), e^(...), ln(...)) are not steps of this kind and are skipped.
With --judge-model an LLM also reads each solution and says whether it is consistent with the
answer (its replies are kept in a progress file, so a rerun pays for none twice).

Writes a JSON report (per item: final value, wrong steps, problems) and, on request, the items
with problems (--flagged) and without (--clean) as JSONL.

  python generators/verify_reasoning.py --input data/master_v4.jsonl --output results/reasoning.json
"""
import ast
import hashlib
import json
import math
import operator
import re
from pathlib import Path

from relrl.data.dataset_io import ProgressFile, atomic_write_json, atomic_write_jsonl, load_dataset
from relrl.evaluation import api_client as api
from relrl.evaluation.api_jobs import run_jobs
from relrl.evaluation.runner import check_rows
from relrl.grading.numbers import normalize
from relrl.grading.scoring import grade
from relrl.grading.target_kind import target_kind_of
from relrl.runtime.cli import ArgumentParser, UsageError, add_tolerance_rule_arg, run_main

JUDGE_PROMPT = """Below is a reliability-engineering problem, a worked solution and the stated \
final answer. Check the solution step by step. Does it correctly arrive at the stated answer?
End your reply with one line: VERDICT: CONSISTENT or VERDICT: INCONSISTENT, then one sentence \
naming the first wrong step if there is one.

PROBLEM: {question}

SOLUTION: {reasoning}

STATED ANSWER: {answer}"""

_NUM = r"(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_RESULT = re.compile(r"\s*(?P<num>[-+]?" + _NUM + r")"
                     r"(?:\s*[×*]\s*10\s*\^\s*\(?\s*(?P<p10>[-+]?\d+)\s*\)?)?(?P<pct>\s*%)?")
_EXPR_CHARS = set("0123456789.,+-*/×÷^()% ")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.Pow: operator.pow}
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_BRACED_POWER = re.compile(r"\^\s*\{([^{}]*)\}")
_SCIENTIFIC = re.compile(r"(" + _NUM + r")\s*×\s*10\s*\^\s*(\(\s*[-+]?\d+\s*\)|[-+]?\d+)")
_BULLET = re.compile(r"^\s*[-+*]\s+(?=[\d(.])")
_TIMES_X = re.compile(r"(?<=[\d)])\s*[xX]\s*(?=[\d(])")
_VERDICT = re.compile(r"VERDICT\W*(CONSISTENT|INCONSISTENT)", re.IGNORECASE)


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="items with `reasoning`, any dataset file")
    parser.add_argument("--output", required=True, help="JSON report to write")
    parser.add_argument("--flagged", default=None, help="also write the items with problems "
                                                        "(JSONL)")
    parser.add_argument("--clean", default=None, help="also write the items without problems "
                                                      "(JSONL)")
    parser.add_argument("--tolerance", type=float, default=0.01,
                        help="relative tolerance, final value vs answer (default 0.01)")
    add_tolerance_rule_arg(parser)
    parser.add_argument("--step-tolerance", type=float, default=0.01,
                        help="relative tolerance for one arithmetic step (default 0.01)")
    parser.add_argument("--judge-model", default=None,
                        help="also ask this model whether each solution supports its answer")
    api.add_api_arguments(parser, note="used only with --judge-model")
    args = parser.parse_args(argv)
    for flag in ("tolerance", "step_tolerance"):
        if not getattr(args, flag) >= 0:
            parser.error(f"--{flag.replace('_', '-')} must be >= 0")
    return args


# -- arithmetic steps ---------------------------------------------------------------------------
def _prepare(text: str) -> str:
    """Plain text whose arithmetic Python could read: fractions in parentheses, one × sign."""
    text = _FRAC.sub(r"((\1)/(\2))", text)
    text = _BRACED_POWER.sub(r"^(\1)", text)  # 10^{-2/3}: the braces group the exponent
    text = normalize(text).replace("≈", "=")
    text = _TIMES_X.sub(" × ", text)
    return text


def _evaluate(node):
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return float(node.value)  # floats overflow quickly instead of building huge integers
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError("not arithmetic")


def compute(expression: str) -> float | None:
    """The value of an arithmetic expression as written in a solution, or None."""
    text = _SCIENTIFIC.sub(r"(\1*10^\2)", expression)  # 1/4×10^3 is 1/4000
    text = re.sub(r"(" + _NUM + r")\s*%", r"(\1/100)", text)
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    text = text.replace("×", "*").replace("÷", "/").replace("^", "**")
    text = re.sub(r"\)\s*\(", ")*(", text)
    text = re.sub(r"(?<=[\d.])\s*\(", "*(", text)
    text = re.sub(_NUM, lambda m: repr(float(m.group())), text)  # 05 and 1.5e3 as floats
    try:
        value = _evaluate(ast.parse(text.strip(), mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None
    return value if isinstance(value, float) and math.isfinite(value) else None


def _scan_start(text: str, end: int) -> int:
    """Where the run of arithmetic characters ending at `end` starts."""
    i = end
    while i > 0 and _arithmetic_char(text, i - 1):
        i -= 1
    return i


def _scan_end(text: str, start: int) -> int:
    """Where the run of arithmetic characters starting at `start` ends."""
    i = start
    while i < len(text) and _arithmetic_char(text, i):
        i += 1
    return i


def _arithmetic_char(text: str, i: int) -> bool:
    ch = text[i]
    if ch in "eE":  # the e of 1.5e-3
        return 0 < i < len(text) - 1 and text[i - 1].isdigit() and text[i + 1] in "0123456789+-"
    if ch == ",":  # a thousands separator, not a comma between values
        return bool(re.match(r",\d{3}(?!\d)", text[i:i + 5])) and i > 0 and text[i - 1].isdigit()
    return ch in _EXPR_CHARS


def _glued(text: str, start: int, end: int) -> bool:
    """True when an expression touches a name: exp(...), e^(...), R_1(...), √..., 0.5 × ln(..."""
    expr = text[start:end]
    before = start > 0 and expr == expr.lstrip() and not (
        text[start - 1].isspace() or text[start - 1] in "=:;,[{<>")
    after = end < len(text) and expr == expr.rstrip() and not (
        text[end].isspace() or text[end] in "=:;,]}<>")
    return before or after


def arithmetic_steps(text: str, step_tolerance: float) -> list[dict]:
    """Every `expression = result` step in a solution, recomputed. The result is a number
    (rounding to its written digits is allowed) or, inside a chain such as
    `0.5 - 0.2 = 0.3 - 0.1 = 0.2`, another expression (compared within the tolerance)."""
    text = _prepare(text)
    steps = []
    for relation in re.finditer("=", text):
        start = _scan_start(text, relation.start())
        if _glued(text, start, relation.start()):
            continue
        expr = text[start:relation.start()]
        if start == 0 or text[start - 1] == "\n":
            expr = _BULLET.sub("", expr)  # "- 40 + 45 = 85" in a list
        elif re.match(r"\s*[-+*/×÷^]", expr) and text[:start].rstrip()[-1:] not in "=:;,([{":
            continue  # "λ^2 + 1000λ - 2 × 10^6 = 0": the tail of a longer expression
        value = _step_value(expr)
        if value is None:
            continue
        result = _RESULT.match(text, relation.end())
        if result is None or re.match(r"[A-Za-z(λμθβη]", text[result.end():result.end() + 1]):
            continue  # "= 0.999R - 0.90R" or "= 2(...)": a product, not a result
        readings = _written(result)
        shown = result.group().strip()
        if re.match(r"\s*[-+*/×÷^]\s*[\d(.]", text[result.end():]):
            # A chain: "0.5 - 0.2 = 0.3 - 0.1" means the two sides are equal; the run-on
            # "0.9 × 0.8 = 0.72 × 0.95" means 0.72 is this step's result. Either reading passes.
            end = _scan_end(text, relation.end())
            right = text[relation.end():end]
            other = None if _glued(text, relation.end(), end) else compute(right)
            if other is None:
                continue
            # Its numbers are often rounded: allow the tolerance of its largest term.
            largest = max((abs(float(n.replace(",", ""))) for n in re.findall(_NUM, right)),
                          default=0.0)
            readings.append((other, step_tolerance * largest))
            shown = " ".join(right.split())
        steps.append(_judge_step(" ".join(expr.split()), shown, value, readings, step_tolerance))
    return steps


def _is_expression(expr: str) -> bool:
    """At least one operator between operands (a bare -0.5 or 1e-3 is a number, not a step)."""
    body = expr.strip().lstrip("+-").strip()
    return bool(re.search(r"\d", body)) and bool(re.search(r"(?<=[\d)%\s])\s*[-+*/×÷^]", body))


def _step_value(expr: str) -> float | None:
    """The expression's value; list numbering and stray words before it are dropped."""
    if not _is_expression(expr):
        return None
    value = compute(expr)
    tokens = [m.start() for m in re.finditer(r"(?<=\s)\S", expr)]
    for cut in tokens:  # "2. 0.9 × 0.8": retry without leading tokens
        if value is not None:
            break
        if _is_expression(expr[cut:]):
            value = compute(expr[cut:])
    return value


def _written(result: re.Match) -> list[tuple[float, float]]:
    """The values a written result may mean, each with the rounding of its last digit:
    5% after `0.05 × 100` may be 5 or 0.05."""
    mantissa = result["num"].replace(",", "")
    base, _, exp_text = mantissa.lower().partition("e")
    decimals = len(base.split(".")[1]) if "." in base else 0
    exponent = (int(result["p10"]) if result["p10"] else 0) + (int(exp_text) if exp_text else 0)
    half = 0.5 * 10.0 ** (exponent - decimals) if (decimals or exponent < 0) else 0.0
    value = float(mantissa) * 10.0 ** (int(result["p10"]) if result["p10"] else 0)
    readings = [(value, half)]
    if result["pct"]:
        readings.append((value / 100, half / 100))
    return readings


def _judge_step(expr: str, shown: str, value: float, readings: list, tol: float) -> dict:
    ok = any(abs(value - v) <= max(tol * abs(v), half) + 1e-12 * abs(v) for v, half in readings)
    return {"expr": expr, "written": shown, "computed": float(f"{value:.6g}"), "ok": ok}


# -- items --------------------------------------------------------------------------------------
def reasoning_of(row: dict) -> str:
    reasoning = row.get("reasoning") or ""
    return reasoning if isinstance(reasoning, str) else json.dumps(reasoning)


def check_item(row: dict, args) -> dict:
    reasoning = reasoning_of(row)
    report = {"id": row["id"], "answer": row["answer"], "problems": []}
    if not reasoning.strip():
        report["status"] = "no reasoning"
        return report
    g = grade(reasoning, row["answer"], tolerance=args.tolerance, rule=args.tolerance_rule,
              target_kind=target_kind_of(row), allow_plain=True)
    steps = arithmetic_steps(reasoning, args.step_tolerance)
    report.update(final_value=g.value, final_source=g.source, steps_checked=len(steps),
                  wrong_steps=[s for s in steps if not s["ok"]])
    if g.value is None:
        report["problems"].append(f"no final value in the reasoning ({g.reason})")
    elif not g.correct:
        report["problems"].append(f"final value {g.extracted} contradicts the answer "
                                  f"{row['answer']} ({g.reason})")
    for step in report["wrong_steps"]:
        report["problems"].append(f"step {step['expr']} = {step['written']} computes to "
                                  f"{step['computed']:g}")
    report["status"] = "flagged" if report["problems"] else "ok"
    return report


def run_judge(args, client: api.ChatClient, rows: list[dict], reports: dict[str, dict],
              output: Path) -> list:
    """Ask the judge about every item with reasoning; returns the request failures."""
    progress = ProgressFile(output.with_name(output.name + ".judge.progress.jsonl"), key="id")
    done = progress.load()

    def digest(row):
        parts = (args.judge_model, row["question"], reasoning_of(row), str(row["answer"]))
        return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:12]

    todo = [row for row in rows if reasoning_of(row).strip()
            and done.get(str(row["id"]), {}).get("q") != digest(row)]

    def ask(row):
        prompt = JUDGE_PROMPT.format(question=row["question"], reasoning=reasoning_of(row),
                                     answer=row["answer"])
        return client.chat([{"role": "user", "content": prompt}])

    def save(row, result):
        record = {"id": str(row["id"]), "q": digest(row), "text": result.text,
                  "usage": result.usage()}
        progress.append(record)
        done[record["id"]] = record

    try:
        report = run_jobs(todo, ask, save, workers=args.workers,
                          should_stop=lambda _: api.over_budget(args, client))
    finally:
        api.log(f"judge: {client.totals.line()}")
    for row in rows:
        record = done.get(str(row["id"]))
        item = reports[str(row["id"])]
        if record is None or record["q"] != digest(row) or item["status"] == "no reasoning":
            continue
        verdicts = _VERDICT.findall(record["text"])
        verdict = verdicts[-1].upper() if verdicts else None
        item["judge"] = {"model": args.judge_model, "verdict": verdict,
                         "reply": record["text"][-600:]}
        if verdict == "INCONSISTENT":
            item["problems"].append("LLM judge: the solution does not support the answer")
            item["status"] = "flagged"
    return report.failures


def main(argv=None):
    args = parse_args(argv)
    rows = load_dataset(args.input)
    output = Path(args.output)
    for flag, path in (("--output", output), ("--flagged", args.flagged),
                       ("--clean", args.clean)):
        if path is not None and not Path(path).parent.is_dir():
            raise UsageError(f"{flag}: folder {Path(path).parent} does not exist")
    check_rows(rows, args.input)
    client = api.client_from_args(args, args.judge_model) if args.judge_model else None
    reports = {str(row["id"]): check_item(row, args) for row in rows}
    failures = run_judge(args, client, rows, reports, output) if client else []
    items = [reports[str(row["id"])] for row in rows]
    counts = {status: sum(r["status"] == status for r in items)
              for status in ("ok", "flagged", "no reasoning")}
    unjudged = [r["id"] for r in items
                if client and r["status"] != "no reasoning" and "judge" not in r]
    atomic_write_json(output, {
        "kind": "reasoning_check", "input": args.input, "n": len(rows), **counts,
        "steps_checked": sum(r.get("steps_checked", 0) for r in items),
        "wrong_steps": sum(len(r.get("wrong_steps", [])) for r in items),
        "tolerance": args.tolerance, "tolerance_rule": args.tolerance_rule,
        "step_tolerance": args.step_tolerance,
        "judge_model": args.judge_model, "judge_missing": len(unjudged), "items": items})
    if args.flagged:
        atomic_write_jsonl(args.flagged, [{**row, "problems": reports[str(row["id"])]["problems"]}
                                          for row in rows
                                          if reports[str(row["id"])]["status"] == "flagged"])
    if args.clean:
        atomic_write_jsonl(args.clean, [row for row in rows
                                        if reports[str(row["id"])]["status"] == "ok"])
    print(f"{counts['ok']} consistent, {counts['flagged']} flagged, {counts['no reasoning']} "
          f"without reasoning -> {output}", flush=True)
    for row, reason in failures:
        api.log(f"judge failed for {row['id']}: {reason}")
    if unjudged:
        api.log(f"{len(unjudged)} items have no judge verdict yet; rerun to ask for them")
        return 1
    return 0


if __name__ == "__main__":
    run_main(main)
