"""Tool-using worked solutions for SFT with `--tools calculator`.

A row with an `expression` (one calculator expression written with the question's numbers,
relrl.problems) is solved in three segments, each (text, sampled):
  1. the model's turn: the calculator call, then its end-of-turn token; the expression in bound
     form (relrl.problems.bound_form: the question's numbers copied in order into names, then
     the formula over the names), which spares a small model copying numbers into the
     formula's order;
  2. what the engine inserts after that turn (relrl.data.prompting.tool_turn_text): the tool's
     answer and the next assistant prefix; never sampled, so never trained on;
  3. the model's last turn: `Answer: \\boxed{<the row's answer>}` and its end-of-turn token.
Each segment is tokenised on its own, as the engine tokenises inserted text on its own, so the
ids SFT trains on are the ids a rollout of the same solution holds.
"""
from __future__ import annotations

from relrl.data.prompting import end_of_turn, tool_turn_text
from relrl.problems.bound_form import bound_expression
from relrl.tools.calculator import calculator
from relrl.tools.protocol import calculator_call

Segment = tuple[str, bool]  # (text, sampled by the model?)


def answer_turn(answer) -> str:
    return f"Answer: \\boxed{{{answer}}}"


def tool_solution(tokenizer, row: dict) -> list[Segment] | None:
    """The row's worked solution with one calculator call; None when the row has no expression.
    Raises ValueError when the calculator refuses the expression (a data error: the solution
    would teach a failing call)."""
    expression = str(row.get("expression") or "").strip()
    if not expression:
        return None
    call = bound_expression(row["question"], expression)
    result = calculator(call)
    if result.startswith("error:"):
        raise ValueError(f"row {row.get('id')!r}: the calculator refuses its expression "
                         f"{expression!r} ({result})")
    end = end_of_turn(tokenizer)
    return [(calculator_call(call) + end, True),
            (tool_turn_text(tokenizer, [result]), False),
            (answer_turn(row["answer"]) + end, True)]


def encode_segments(tokenizer, segments: list[Segment]) -> tuple[list[int], list[int]]:
    """(ids, mask): each segment tokenised on its own and concatenated; mask 1 on the ids of
    sampled segments, 0 on inserted ones."""
    ids, mask = [], []
    for text, sampled in segments:
        part = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += part
        mask += [int(sampled)] * len(part)
    return ids, mask
