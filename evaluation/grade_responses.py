"""Grade stored model responses against their ground truth with the shared grader.

INPUT is a JSON array or JSONL of objects. One JSON line per row (index, extracted, value,
target, correct, reward, reason) goes to --output, or to stdout without it; the last line of
stdout is always the summary {"n", "correct", "accuracy", "unextracted", "bad_targets",
"tolerance_rule"}. Under `--tolerance-rule complement` a row's target kind is its
--target-kind-field, else inferred from its --question-field (relrl.grading.target_kind.target_kind_of).

Example (a frontier model's answers, which end in a FINAL ANSWER section, not \\boxed{}):
  python evaluation/grade_responses.py \\
      ../shared/seed-data/frontier_holdout_54q/o3-mini_results.json \\
      --response-field model_response --answer-field ground_truth --allow-plain
"""

import json

from relrl.data.dataset_io import DatasetError, atomic_write_jsonl, read_records
from relrl.grading.scoring import grade
from relrl.grading.target_kind import target_kind_of
from relrl.evaluation.settings import eval_range
from relrl.runtime.cli import ArgumentParser, add_tolerance_rule_arg, number_type, run_main


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", help="JSON array or JSONL of rows holding a response and answer")
    parser.add_argument("--response-field", default="response",
                        help="field with the model's response (default: response)")
    parser.add_argument("--answer-field", default="answer",
                        help="field with the ground-truth answer (default: answer)")
    parser.add_argument("--tolerance", type=number_type("--tolerance", float, eval_range("tolerance")),
                        default=0.05,
                        help="relative tolerance for a correct answer (default: 0.05)")
    add_tolerance_rule_arg(parser)
    parser.add_argument("--question-field", default="question",
                        help="field with the question, read for its target kind when the row "
                             "has no --target-kind-field (default: question)")
    parser.add_argument("--target-kind-field", default="target_kind",
                        help="field naming the target kind, probability or value (default: "
                             "target_kind)")
    parser.add_argument("--allow-plain", action="store_true",
                        help="also read a 'final answer' line or the last number, "
                             "not only \\boxed{}")
    parser.add_argument("--truncated-field", default="truncated",
                        help="boolean field: the response hit the token limit, so a stray "
                             "last number is no answer (default: truncated; a row without it "
                             "was not cut off)")
    parser.add_argument("--output", help="write one JSON line per row here (default: stdout)")
    return parser.parse_args(argv)


def load_rows(path: str, response_field: str, answer_field: str,
              truncated_field: str = "truncated", question_field: str = "question",
              kind_field: str = "target_kind") -> list[tuple[str, object, bool, str]]:
    """(response, answer, truncated, target kind) per row; a row without the response or the
    answer, or with a bad target kind, is an error naming its line. A null response (an API
    call that returned nothing) grades as an empty response."""
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
        try:
            kind = target_kind_of({"question": row.get(question_field),
                                   "answer": row[answer_field], "target_kind": row.get(kind_field)})
        except ValueError as exc:
            raise DatasetError(f"{path}:{lineno}: {kind_field!r}: {exc}") from None
        rows.append((response or "", row[answer_field], truncated, kind))
    return rows


def main():
    args = parse_args()
    rows = load_rows(args.input, args.response_field, args.answer_field, args.truncated_field,
                     args.question_field, args.target_kind_field)
    lines, summary = [], {"n": len(rows), "correct": 0, "unextracted": 0, "bad_targets": 0}
    for index, (response, answer, truncated, kind) in enumerate(rows):
        g = grade(response, answer, tolerance=args.tolerance, rule=args.tolerance_rule,
                  target_kind=kind, allow_plain=args.allow_plain, truncated=truncated)
        summary["correct"] += g.correct
        summary["unextracted"] += g.value is None
        summary["bad_targets"] += g.target is None
        lines.append({"index": index, "extracted": g.extracted, "value": g.value,
                      "target": g.target, "correct": g.correct, "reward": g.reward,
                      "reason": g.reason})
    summary["accuracy"] = round(summary["correct"] / len(rows), 6) if rows else 0.0
    summary["tolerance_rule"] = args.tolerance_rule
    if args.output:
        atomic_write_jsonl(args.output, lines)
    else:
        for line in lines:
            print(json.dumps(line, ensure_ascii=False))
    print(json.dumps({key: summary[key] for key in
                      ("n", "correct", "accuracy", "unextracted", "bad_targets",
                       "tolerance_rule")}))


if __name__ == "__main__":
    run_main(main)
