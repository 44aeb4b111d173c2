"""A small byte-level BPE tokenizer trained locally, for the built-in models.

Digits are always single tokens (as in Qwen's tokenizer), so a miniature model sees numbers
digit by digit; ChatML special tokens and chat template match what Qwen3 uses, so the same
prompting and stopping code serves the tiny models and the real one.
"""
from __future__ import annotations

from typing import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from relrl.data.prompting import CHATML_TEMPLATE, SYSTEM_PROMPT

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Contractions, words with one optional leading non-letter, one digit at a time, punctuation
# runs, then whitespace.
SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

# Text for `tiny-random`'s tokenizer: enough to give it real merges, fixed so it never changes.
FIXED_TEXT = SYSTEM_PROMPT + """
system user assistant
A component has a constant failure rate of 0.002 per hour. What is its reliability after 500 hours?
The reliability is R(t) = exp(-lambda t) = exp(-0.002 * 500) = exp(-1) = 0.3679.
Two identical units are placed in parallel; the system works if at least one unit works.
The mean time to failure of a Weibull distribution with shape beta and scale eta is eta Gamma(1 + 1/beta).
The steady-state availability is MTBF / (MTBF + MTTR). So the answer is \\boxed{0.9524}.
"""


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts` (deterministic for the same texts and size)."""
    from transformers import PreTrainedTokenizerFast  # after Unsloth where a script uses it

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHATML_TEMPLATE,
        model_max_length=4096,
        padding_side="left",
    )


def fixed_tokenizer() -> PreTrainedTokenizerFast:
    """The tokenizer of `tiny-random`: trained in milliseconds on FIXED_TEXT."""
    return train_tokenizer([FIXED_TEXT] * 4, vocab_size=512)
