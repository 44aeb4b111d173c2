"""relrl/engines/base.py without a model: seeds, prompt encoding, completions, stop tokens,
sampling settings and the engine's context manager (what every engine relies on)."""
import pytest

from relrl.engines.base import (
    Engine,
    SamplingConfig,
    encode_prompts,
    question_seed,
    sample_seed,
    stop_token_ids,
)
from relrl.runtime.cli import UsageError


class FakeTokenizer:
    """Characters as token ids; like Llama's, it adds a BOS (id 1) unless told not to."""

    eos_token_id = 2

    def __init__(self, vocab=None):
        self.vocab = vocab if vocab is not None else {"<|im_end|>": 7, "<s>": 1, "</s>": 2}

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": ([1] if add_special_tokens else []) + [ord(c) for c in text]}

    def get_vocab(self):
        return self.vocab

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids if not (skip_special_tokens and i in (1, 2, 7)))


def test_seeds_are_stable_numbers():
    assert sample_seed(0, 0) == sample_seed(0, 0) != sample_seed(0, 1)
    assert question_seed(0, "abc") != question_seed(1, "abc")
    assert 0 <= sample_seed(123, 4) < 2**63
    # fixed values (odd and even): a change here changes every recorded run
    assert question_seed(0, "q1") == 5568507183783364966
    assert question_seed(3, "q1") == 6650628386474301277
    assert sample_seed(7, 3) == 9161638648049325543
    assert sample_seed(0, 1) == 7099920048601774850


def test_prompts_are_encoded_without_added_special_tokens():
    # the chat template already holds its special tokens; a second BOS would shift every prompt
    assert encode_prompts(FakeTokenizer(), ["ab", "c"], 2, [0, 1]) == [[97, 98], [99]]


@pytest.mark.parametrize("prompts, n, seeds, error, message", [
    (["a", "b", "c"], 1, [0, 1], ValueError, "3 prompts but 2 seeds"),
    (["a"], 0, [0], UsageError, "--samples: must be >= 1, got 0"),
    (["a", ""], 1, [0, 1], UsageError, "empty prompt"),
])
def test_bad_prompts_are_refused_with_what_is_wrong(prompts, n, seeds, error, message):
    with pytest.raises(error) as exc:
        encode_prompts(FakeTokenizer(), prompts, n, seeds)
    assert str(exc.value) == message


def test_stop_tokens_are_the_chat_end_tokens_the_vocabulary_has_and_eos():
    assert stop_token_ids(FakeTokenizer()) == [2, 7]
    assert stop_token_ids(FakeTokenizer({"<|endoftext|>": 9})) == [2, 9]
    no_eos = FakeTokenizer({"<|im_end|>": 7})
    no_eos.eos_token_id = None
    assert stop_token_ids(no_eos) == [7]


def test_sampling_settings_accept_their_boundaries():
    assert SamplingConfig(max_new_tokens=1, top_p=1.0, micro_batch=1).top_p == 1.0


@pytest.mark.parametrize("kwargs, message", [
    ({"top_p": 1.01}, "--top-p: must be in (0, 1], got 1.01"),
    ({"temperature": 0.0}, "--temperature: must be > 0 when sampling, got 0.0 (use greedy "
                           "decoding for a deterministic answer)"),
])
def test_bad_sampling_settings_say_what_is_allowed(kwargs, message):
    with pytest.raises(UsageError) as exc:
        SamplingConfig(**kwargs)
    assert str(exc.value) == message


def test_an_engine_block_closes_it_and_lets_errors_through():
    closed = []

    class Recording(Engine):
        def close(self):
            closed.append(True)

    with pytest.raises(KeyError):
        with Recording():
            raise KeyError("from inside the block")
    assert closed == [True]
