"""Grade stored model responses against their ground truth with the shared grader.

INPUT is a JSON array or JSONL of objects. One JSON line per row (index, extracted, value,
target, correct, reward, reason) goes to --output, or to stdout without it; the last line of
stdout is always the summary {"n", "correct", "accuracy", "unextracted", "bad_targets"}.

Example (a frontier model's answers, which end in a FINAL ANSWER section, not \\boxed{}):
  python evaluation/grade_responses.py \\
      ../shared/seed-data/frontier_holdout_54q/o3-mini_results.json \\
      --response-field model_response --answer-field ground_truth --allow-plain
"""
import sys; from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import json
import math

from relrl.cli import ArgumentParser, UsageError, run_main
from relrl.data import DatasetError, atomic_write_jsonl, read_records
from relrl.grading import grade


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", help="JSON array or JSONL of rows holding a response and answer")
    parser.add_argument("--response-field", default="response",
                        help="field with the model's response (default: response)")
    parser.add_argument("--answer-field", default="answer",
                        help="field with the ground-truth answer (default: answer)")
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="relative tolerance for a correct answer (default: 0.05)")
    parser.add_argument("--allow-plain", action="store_true",
                        help="also read a 'final answer' line or the last number, "
                             "not only \\boxed{}")
    parser.add_argument("--truncated-field", default="truncated",
                        help="boolean field: the response hit the token limit, so a stray "
                             "last number is no answer (default: truncated; a row without it "
                             "was not cut off)")
    parser.add_argument("--output", help="write one JSON line per row here (default: stdout)")
    args = parser.parse_args(argv)
    if not math.isfinite(args.tolerance) or args.tolerance < 0:
        raise UsageError(f"--tolerance must be a finite number >= 0, got {args.tolerance}")
    return args


def load_rows(path: str, response_field: str, answer_field: str,
              truncated_field: str = "truncated") -> list[tuple[str, object, bool]]:
    """(response, answer, truncated) per row; a row without the response or the answer is an
    error naming its line. A null response (an API call that returned nothing) grades as an
    empty response."""
    rows = []
    for lineno, row in read_records(path):
        if not isinstance(row, dict):
            raise DatasetError(f"{path}:{lineno}: not a JSON object")
        for field in (response_field, answer_field):
            if field not in row:
                raise DatasetError(f"{path}:{lineno}: no field {field!r} "
                                   f"(fields: {', '.join(sorted(row)) or 'none'})")
        response = row[response_field]
        if response is not None and not isinstance(response, str):
            raise DatasetError(f"{path}:{lineno}: {response_field!r} is not a string")
        truncated = row.get(truncated_field, False)
        if not isinstance(truncated, bool):
            raise DatasetError(f"{path}:{lineno}: {truncated_field!r} is not true or false")
        rows.append((response or "", row[answer_field], truncated))
    return rows


def main():
    args = parse_args()
    rows = load_rows(args.input, args.response_field, args.answer_field, args.truncated_field)
    lines, summary = [], {"n": len(rows), "correct": 0, "unextracted": 0, "bad_targets": 0}
    for index, (response, answer, truncated) in enumerate(rows):
        g = grade(response, answer, tolerance=args.tolerance, allow_plain=args.allow_plain,
                  truncated=truncated)
        summary["correct"] += g.correct
        summary["unextracted"] += g.value is None
        summary["bad_targets"] += g.target is None
        lines.append({"index": index, "extracted": g.extracted, "value": g.value,
                      "target": g.target, "correct": g.correct, "reward": g.reward,
                      "reason": g.reason})
    summary["accuracy"] = round(summary["correct"] / len(rows), 6) if rows else 0.0
    if args.output:
        atomic_write_jsonl(args.output, lines)
    else:
        for line in lines:
            print(json.dumps(line, ensure_ascii=False))
    print(json.dumps({key: summary[key] for key in
                      ("n", "correct", "accuracy", "unextracted", "bad_targets")}))


if __name__ == "__main__":
    run_main(main)
