"""Chat-formatted training examples for SFT (and the completions DPO compares).

An example is the prompt the model sees at evaluation time (system + user turn) followed by the
assistant turn: the row's worked solution (`reasoning`) ending in one \\boxed{answer}, then the
end-of-turn token (relrl.data.prompting.build_training_text decides both). Prompt and completion are
tokenised separately, exactly as in generation, where sampled tokens follow the prompt's tokens.

A batch puts every prompt flush against its completion at one column: prompts padded on the
left, completions on the right (the layout of GRPO rollouts), so one log-prob routine scores both.
Labels are -100 on padding and on the prompt; every assistant token, end-of-turn included, counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from relrl.data.prompting import build_training_text
from relrl.modeling.logprobs import pack_sequences

IGNORE = -100  # label of a token the loss skips


@dataclass
class Example:
    id: str
    prompt_ids: list[int]
    completion_ids: list[int]  # assistant tokens, end-of-turn last (unless truncated)


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
    dropped: list[str] = field(default_factory=list)  # ids whose prompt alone fills max_length

    def warnings(self) -> list[str]:
        notes = []
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


def build_examples(rows: list[dict], tokenizer, max_length: int) -> tuple[list[Example],
                                                                          BuildStats]:
    """SFT examples of dataset rows (loaded by relrl.data.dataset_io.load_dataset) and what was bent."""
    stats = BuildStats(rows=len(rows))
    examples = []
    for row in rows:
        text, kind = assistant_text(row)
        stats.answer_only += kind == "answer_only"
        stats.boxed_added += kind == "boxed_added"
        prompt, completion = build_training_text(tokenizer, row["question"], text)
        prompt_ids, completion_ids, cut = encode(tokenizer, prompt, completion, max_length)
        if not completion_ids:
            stats.dropped.append(row["id"])
            continue
        stats.truncated += cut
        examples.append(Example(row["id"], prompt_ids, completion_ids))
    return examples, stats


def collate(pairs: list[tuple[list[int], list[int]]], pad_id: int) -> Batch:
    """Batch (prompt ids, completion ids) pairs in the rollout layout, with labels."""
    input_ids, attention, width_p = pack_sequences([p for p, _ in pairs], [c for _, c in pairs],
                                                   pad_id)
    labels = input_ids.masked_fill(attention == 0, IGNORE)
    labels[:, :width_p] = IGNORE
    return Batch(input_ids, attention, labels, width_p)


def collate_examples(examples: list[Example], pad_id: int) -> Batch:
    return collate([(e.prompt_ids, e.completion_ids) for e in examples], pad_id)


def optimizer_batches(n: int, batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """The item indices of each optimiser step in one epoch (the last one may be short), in an
    order fixed by (seed, epoch): a resumed run visits the items as an uninterrupted one."""
    order = np.random.default_rng([seed, epoch]).permutation(n).tolist()
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]
