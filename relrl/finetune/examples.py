"""Chat-formatted training examples for SFT (and the completions DPO compares).

An example is the prompt the model sees at evaluation time (system + user turn) followed by the
assistant turn: the row's worked solution (`reasoning`) ending in one \\boxed{answer}, then the
end-of-turn token (relrl.data.prompting.build_training_text decides both). Prompt and completion are
tokenised separately, exactly as in generation, where sampled tokens follow the prompt's tokens.

With `--tools calculator` the prompt declares the tool, and a row with an `expression` trains on
its tool-using solution (relrl.data.tool_solutions): the call, the tool's answer the engine would
insert, the boxed answer. A row without one trains on its plain worked solution.

A batch puts every prompt flush against its completion at one column: prompts padded on the
left, completions on the right (the layout of GRPO rollouts), so one log-prob routine scores both.
Labels are -100 on padding, on the prompt and on inserted tokens (an example's completion_mask
0); every token the model writes, end-of-turn included, counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from relrl.data.prompting import build_prompt, build_training_text
from relrl.data.tool_solutions import Segment, encode_segments, tool_solution
from relrl.modeling.logprobs import pack_sequences

IGNORE = -100  # label of a token the loss skips


@dataclass
class Example:
    id: str
    prompt_ids: list[int]
    completion_ids: list[int]  # assistant tokens, end-of-turn last (unless truncated)
    # 1 where the model writes the token, 0 where the engine inserts it (a tool's answer and
    # the next assistant prefix); None: every token is the model's
    completion_mask: list[int] | None = None

    def __post_init__(self):
        if self.completion_mask is None:
            self.completion_mask = [1] * len(self.completion_ids)
        if len(self.completion_mask) != len(self.completion_ids):
            raise ValueError(f"{self.id}: {len(self.completion_ids)} completion ids but "
                             f"{len(self.completion_mask)} mask values")

    @property
    def trained_tokens(self) -> int:
        """The completion tokens the loss reads."""
        return sum(self.completion_mask)


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, P + C)
    attention_mask: torch.Tensor  # (B, P + C)
    labels: torch.Tensor  # (B, P + C), IGNORE outside the assistant turns
    prompt_width: int  # P: column where every completion starts

    @property
    def completion_mask(self) -> torch.Tensor:
        """(B, C) 1 on assistant tokens: the part of labels the loss reads."""
        return (self.labels[:, self.prompt_width:] != IGNORE).long()


@dataclass
class BuildStats:
    rows: int = 0
    answer_only: int = 0  # rows without a worked solution: trained on the answer line alone
    boxed_added: int = 0  # solutions that lacked \boxed{}: the answer line was appended
    truncated: int = 0  # completions cut at max_length (no end-of-turn token left)
    tools: str = "none"  # --tools the examples were built for
    tool_solutions: int = 0  # rows trained on their tool-using solution (--tools calculator)
    plain_reasoning: int = 0  # with tools, rows without `expression`: their plain solution
    dropped: list[str] = field(default_factory=list)  # ids whose prompt alone fills max_length

    def warnings(self) -> list[str]:
        notes = []
        if self.plain_reasoning:
            notes.append(f"{self.plain_reasoning} of {self.rows} rows have no `expression`: "
                         "trained on their plain worked solution, without a tool call")
        if self.answer_only:
            notes.append(f"{self.answer_only} of {self.rows} rows have no `reasoning`: "
                         "trained on the answer line alone")
        if self.boxed_added:
            notes.append(f"{self.boxed_added} worked solutions had no \\boxed{{}}: "
                         "appended the answer line")
        if self.truncated:
            notes.append(f"{self.truncated} examples cut at max_length")
        if self.dropped:
            notes.append(f"{len(self.dropped)} rows dropped: prompt alone reaches max_length")
        return notes


def answer_line(answer: str) -> str:
    return f"The final answer is \\boxed{{{answer}}}."


def assistant_text(row: dict) -> tuple[str, str]:
    """(text of the assistant turn, kind) where kind is 'reasoning', 'boxed_added' or
    'answer_only'."""
    reasoning = str(row.get("reasoning") or "").strip()
    if not reasoning:
        return answer_line(row["answer"]), "answer_only"
    if "\\boxed{" not in reasoning:
        return f"{reasoning}\n\n{answer_line(row['answer'])}", "boxed_added"
    return reasoning, "reasoning"


def encode(tokenizer, prompt: str, completion: str, max_length: int) -> tuple[list[int],
                                                                           list[int], bool]:
    """(prompt ids, completion ids, truncated): the completion is cut so the whole fits in
    max_length; an empty completion after cutting means the prompt alone is too long."""
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    room = max(0, max_length - len(prompt_ids))
    return prompt_ids, completion_ids[:room], len(completion_ids) > room


def training_segments(tokenizer, row: dict, tools: str,
                      stats: BuildStats) -> tuple[str, list[Segment]]:
    """(prompt, completion segments) of one row, counted in stats: its tool-using solution when
    tools are on and it has an expression, else its plain worked solution (one sampled segment)."""
    if tools != "none":
        segments = tool_solution(tokenizer, row)
        if segments is not None:
            stats.tool_solutions += 1
            return build_prompt(tokenizer, row["question"], tools=tools), segments
        stats.plain_reasoning += 1
    text, kind = assistant_text(row)
    stats.answer_only += kind == "answer_only"
    stats.boxed_added += kind == "boxed_added"
    prompt, completion = build_training_text(tokenizer, row["question"], text)
    if tools != "none":  # the plain solution, under the prompt that declares the tool
        prompt = build_prompt(tokenizer, row["question"], tools=tools)
    return prompt, [(completion, True)]


def build_examples(rows: list[dict], tokenizer, max_length: int,
                   tools: str = "none") -> tuple[list[Example], BuildStats]:
    """SFT examples of dataset rows (loaded by relrl.data.dataset_io.load_dataset) and what was
    bent. The completion is cut (ids and mask together) so the whole fits in max_length."""
    stats = BuildStats(rows=len(rows), tools=tools)
    examples = []
    for row in rows:
        prompt, segments = training_segments(tokenizer, row, tools, stats)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        completion_ids, mask = encode_segments(tokenizer, segments)
        room = max(0, max_length - len(prompt_ids))
        if room == 0:
            stats.dropped.append(row["id"])
            continue
        stats.truncated += len(completion_ids) > room
        examples.append(Example(row["id"], prompt_ids, completion_ids[:room], mask[:room]))
    return examples, stats


def collate(pairs: list[tuple[list[int], list[int]]], pad_id: int,
            masks: list[list[int]] | None = None) -> Batch:
    """Batch (prompt ids, completion ids) pairs in the rollout layout, with labels; `masks`
    (one per pair, 0 on inserted completion tokens) takes those tokens out of the labels too."""
    input_ids, attention, width_p = pack_sequences([p for p, _ in pairs], [c for _, c in pairs],
                                                   pad_id)
    labels = input_ids.masked_fill(attention == 0, IGNORE)
    labels[:, :width_p] = IGNORE
    for k, mask in enumerate(masks or ()):
        inserted = torch.tensor([m == 0 for m in mask], dtype=torch.bool)
        labels[k, width_p:width_p + len(mask)].masked_fill_(inserted, IGNORE)
    return Batch(input_ids, attention, labels, width_p)


def collate_examples(examples: list[Example], pad_id: int) -> Batch:
    return collate([(e.prompt_ids, e.completion_ids) for e in examples], pad_id,
                   [e.completion_mask for e in examples])


def optimizer_batches(n: int, batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """The item indices of each optimiser step in one epoch (the last one may be short), in an
    order fixed by (seed, epoch): a resumed run visits the items as an uninterrupted one."""
    order = np.random.default_rng([seed, epoch]).permutation(n).tolist()
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]
