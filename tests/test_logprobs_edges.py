"""Edge cases of relrl.modeling.logprobs against independent references: the bf16 autograd function over
several (ragged) vocabulary blocks, logsumexp far from zero, the default chunk sizes, empty
completions, entropy only when asked, checkpointed chunks, what the decoder is called with
(padded and Unsloth-packed rows), and pack_sequences' corner cases.

The model is a one-layer Qwen3 built here from a config (50-token vocabulary, hidden size 16),
so every test runs in a fraction of a second."""
import pytest
import torch

from relrl.modeling import logprobs as L
from relrl.modeling.logprobs import (
    completion_logprobs,
    default_chunk_size,
    head_logprobs,
    naive_logprobs,
    pack_sequences,
)

VOCAB, HIDDEN = 50, 16


@pytest.fixture()
def model():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=8, max_position_embeddings=64, tie_word_embeddings=False,
                         pad_token_id=0, eos_token_id=1, bos_token_id=1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        m = Qwen3ForCausalLM(config)
        with torch.no_grad():  # larger logits than the init's, so the distributions are not flat
            m.lm_head.weight.mul_(20)
    return m.float().eval()


@pytest.fixture()
def batch():
    # Ragged prompts (left padding) and ragged completions (right padding).
    return pack_sequences([[5, 6, 7], [8], [9, 10]], [[11, 12, 13, 14], [15, 16], [17]], pad_id=0)


def _spy_decoder(model, monkeypatch):
    """Record the keyword arguments of every decoder call; packed_seq_lengths (Unsloth's kernels)
    is recorded and not passed on: the real decoder finds the packed sequences from the positions."""
    decoder = model.get_decoder()
    real, calls = decoder.forward, []

    def forward(**kw):
        calls.append(dict(kw))
        kw.pop("packed_seq_lengths", None)
        return real(**kw)

    monkeypatch.setattr(decoder, "forward", forward)
    return calls


def _full_softmax(model, ids, mask, start):
    """(token log-probs, entropies) from one float64 log_softmax over every position."""
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    logp = torch.log_softmax(logits[:, start - 1:-1].double(), dim=-1)
    keep = mask[:, start:].double()
    token = logp.gather(-1, ids[:, start:, None]).squeeze(-1) * keep
    entropy = -(logp.exp() * logp).sum(-1) * keep
    return token, entropy


def test_chunk_size_default_depends_on_device():
    assert default_chunk_size(151_936, torch.device("cuda")) == L.CUDA_CHUNK_TOKENS == 1024
    assert default_chunk_size(50, torch.device("cuda")) == 1024  # not the CPU's logit budget
    assert default_chunk_size(151_936, torch.device("cpu")) == 55  # (1 << 23) // 151,936
    assert default_chunk_size(1000, torch.device("cpu")) == 8388
    # A huge vocabulary still gets 16 tokens a chunk, not one.
    assert default_chunk_size(1 << 20, torch.device("cpu")) == 16
    assert default_chunk_size(1 << 30, torch.device("cpu")) == 16


def test_default_chunk_is_sized_by_the_vocabulary(model, monkeypatch):
    # 20 tokens of a 50-token vocabulary per chunk (the hidden size, 16, would give 62).
    monkeypatch.setattr(L, "LOGITS_PER_CHUNK", 20 * VOCAB)
    rows = []
    model.lm_head.register_forward_hook(lambda mod, args, out: rows.append(args[0].shape[0]))
    ids, mask, start = pack_sequences([[5, 6]] * 9, [[7, 8, 9, 10, 11]] * 9, pad_id=0)
    with torch.no_grad():
        completion_logprobs(model, ids, mask, start, micro_batch=9)
    assert rows == [20, 20, 5]


def test_log_normaliser_is_exact_far_from_zero(monkeypatch):
    # 4-column blocks over 10 columns: two full blocks and a ragged one. The rows sit at very
    # different scales, so a shift by the batch's maximum instead of each row's would underflow.
    monkeypatch.setattr(L, "VOCAB_BLOCK", 4)
    gen = torch.Generator().manual_seed(1)
    offsets = torch.tensor([0.0, -1000.0, 500.0, 3.0])[:, None]
    for dtype in (torch.bfloat16, torch.float32):
        logits = (torch.randn(4, 10, generator=gen) * 3 + offsets).to(dtype)
        logits[3, 9] = 30.0  # the row's maximum in the last, ragged block
        expected = torch.logsumexp(logits.double(), dim=-1)
        got = L._log_normaliser(logits)
        assert got.dtype == torch.float32 and got.shape == (4,)
        assert torch.allclose(got.double(), expected, atol=1e-4, rtol=1e-6), (dtype, got, expected)


def test_log_normaliser_by_hand():
    # log(e^0 + e^0 + e^0 + e^0) = log 4; log(e^1 + e^2) = 2 + log(1 + e^-1)
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, -1e4, -1e4]], dtype=torch.bfloat16)
    got = L._log_normaliser(logits)
    expected = torch.tensor([torch.log(torch.tensor(4.0)), 2 + torch.log1p(torch.exp(torch.tensor(-1.0)))])
    assert torch.allclose(got, expected, atol=1e-6)


@pytest.mark.parametrize("block", [4, 16384])
def test_bf16_token_logprob_gradient_matches_float64_reference(monkeypatch, block):
    # Small vocabulary; with 4-column blocks the targets fall in the first column, the last
    # (ragged) block and in between. Row 0's target is its argmax with p close to 1, where the
    # target's gradient 1 - p is what a bf16 softmax would get wrong.
    monkeypatch.setattr(L, "VOCAB_BLOCK", block)
    gen = torch.Generator().manual_seed(2)
    logits = (torch.randn(5, 11, generator=gen) * 2).to(torch.bfloat16)
    logits[0, 3] = 12.0
    targets = torch.tensor([3, 0, 10, 5, 8])
    weights = torch.tensor([0.5, -1.0, 2.0, 0.25, 1.5])
    leaf = logits.clone().requires_grad_(True)
    token, entropy = L._TokenLogprob.apply(leaf, targets, True)
    (token * weights).sum().backward()

    reference = logits.double().requires_grad_(True)
    logp = torch.log_softmax(reference, dim=-1)
    expected = logp.gather(-1, targets[:, None]).squeeze(-1)
    (expected * weights).sum().backward()
    assert token.dtype == entropy.dtype == torch.float32
    assert token.shape == entropy.shape == (5,)
    assert torch.allclose(token.double(), expected.detach(), atol=1e-5, rtol=0)
    assert torch.allclose(entropy.double(), -(logp.exp() * logp).sum(-1).detach(), atol=1e-5)
    assert not entropy.requires_grad and token.requires_grad
    assert leaf.grad.dtype == torch.bfloat16 and leaf.grad.shape == logits.shape
    # bf16 keeps 8 bits of mantissa: relative 2^-8 of each entry.
    assert torch.allclose(leaf.grad.double(), reference.grad, atol=1e-6, rtol=2 ** -8)
    # The target column of row 0 is 1 - p (small, computed in float32), not 1 - bf16(p).
    assert 0 < reference.grad[0, 3] < 1e-3
    assert leaf.grad[0, 3].item() == pytest.approx(reference.grad[0, 3].item(), rel=2 ** -8)


def test_bf16_entropy_off_is_zero_and_has_no_gradient():
    logits = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.bfloat16, requires_grad=True)
    token, entropy = L._TokenLogprob.apply(logits, torch.tensor([2]), False)
    expected = 3 - torch.logsumexp(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), 0)
    assert token.item() == pytest.approx(expected.item(), abs=1e-6)
    assert entropy.tolist() == [0.0] and not entropy.requires_grad


def _bf16_head():
    gen = torch.Generator().manual_seed(3)
    head = torch.nn.Linear(HIDDEN, VOCAB, bias=False, dtype=torch.bfloat16)
    with torch.no_grad():
        head.weight.copy_(torch.randn(VOCAB, HIDDEN, generator=gen))
    hidden = torch.randn(7, HIDDEN, generator=gen).to(torch.bfloat16)
    targets = torch.randint(0, VOCAB, (7,), generator=gen)
    return head, hidden, targets


def test_bf16_head_gives_float32_logprobs_and_entropies():
    head, hidden, targets = _bf16_head()
    with torch.no_grad():
        token, entropy = head_logprobs(head, hidden, targets, chunk_size=3, with_entropy=True)
        logp = torch.log_softmax(head(hidden).double(), dim=-1)  # the same bf16 logits, in float64
    assert token.dtype == entropy.dtype == torch.float32
    assert torch.allclose(token.double(), logp.gather(-1, targets[:, None]).squeeze(-1), atol=1e-5)
    # H = log Z - E[z] in float32, with logits of size ~20: about 1e-5 of cancellation.
    assert torch.allclose(entropy.double(), -(logp.exp() * logp).sum(-1), atol=1e-4)


def test_entropy_is_returned_only_when_asked():
    head, hidden, targets = _bf16_head()
    float_head = torch.nn.Linear(HIDDEN, VOCAB, bias=False).float()
    with torch.no_grad():
        for h, x in ((head, hidden), (float_head, hidden.float())):
            token, entropy = head_logprobs(h, x, targets, chunk_size=4)  # the default
            assert entropy is None and token.shape == (7,)
            token, entropy = head_logprobs(h, x, targets, chunk_size=4, with_entropy=False)
            assert entropy is None
            _, entropy = head_logprobs(h, x, targets, chunk_size=4, with_entropy=True)
            assert entropy.shape == (7,) and (entropy > 0).all()


def test_empty_completion_gives_an_empty_tensor(model):
    # No completion token at all: no chunk runs, and the empty results are still float32.
    head, hidden, _ = _bf16_head()
    none = torch.zeros(0, dtype=torch.long)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            token, entropy = head_logprobs(head, hidden[:0], none, chunk_size=4, with_entropy=True)
            assert token.shape == entropy.shape == (0,)
            assert token.dtype == entropy.dtype == torch.float32
            token, entropy = head_logprobs(head, hidden[:0], none, chunk_size=4)
            assert token.shape == (0,) and token.dtype == torch.float32 and entropy is None
    # Every completion empty: pack_sequences leaves one padding column; all zeros come back.
    ids, mask, start = pack_sequences([[5, 6], [7]], [[], []], pad_id=0)
    assert ids.shape == (2, 3) and start == 2
    with torch.no_grad():
        token, entropy = completion_logprobs(model, ids, mask, start, return_entropy=True)
    assert token.tolist() == [[0.0], [0.0]] and entropy.tolist() == [[0.0], [0.0]]


def test_frozen_hidden_still_trains_the_head_through_checkpointed_chunks():
    # Only the head's weight requires grad: a reentrant checkpoint would drop its gradient.
    gen = torch.Generator().manual_seed(4)
    head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)
    hidden = torch.randn(9, HIDDEN, generator=gen)
    targets = torch.randint(0, VOCAB, (9,), generator=gen)
    weights = torch.rand(9, generator=gen)
    token, _ = head_logprobs(head, hidden, targets, chunk_size=4)
    (token * weights).sum().backward()
    got = head.weight.grad.clone()
    head.weight.grad = None
    logp = torch.log_softmax(head(hidden), dim=-1).gather(-1, targets[:, None]).squeeze(-1)
    (logp * weights).sum().backward()
    assert torch.allclose(got, head.weight.grad, atol=1e-6)


def test_autograd_recomputes_chunk_logits_instead_of_keeping_them():
    # Under autograd each chunk is checkpointed: lm_head runs again in backward (3 chunks of
    # 9 tokens: 3 calls forward, 3 more backward); without autograd it runs once per chunk.
    gen = torch.Generator().manual_seed(5)
    head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)
    calls = []
    head.register_forward_hook(lambda mod, args, out: calls.append(args[0].shape[0]))
    hidden = torch.randn(9, HIDDEN, generator=gen, requires_grad=True)
    targets = torch.randint(0, VOCAB, (9,), generator=gen)
    token, _ = head_logprobs(head, hidden, targets, chunk_size=4)
    assert calls == [4, 4, 1]
    token.sum().backward()
    assert sorted(calls) == [1, 1, 4, 4, 4, 4]
    calls.clear()
    with torch.no_grad():
        token, _ = head_logprobs(head, hidden, targets, chunk_size=4)
    assert calls == [4, 4, 1] and token.grad_fn is None


def test_decoder_gets_the_padding_mask_generate_positions_and_no_cache(model, batch, monkeypatch):
    # The positions count real tokens only (what generate() used), the mask goes with them, and
    # no KV cache is built for a scoring pass; the same for the naive reference.
    ids, mask, start = batch
    calls = _spy_decoder(model, monkeypatch)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    assert positions.tolist() == [[0, 1, 2, 3, 4, 5, 6], [0, 0, 0, 1, 2, 2, 2], [0, 0, 1, 2, 2, 2, 2]]
    with torch.no_grad():
        completion_logprobs(model, ids, mask, start, micro_batch=2)
        naive_logprobs(model, ids, mask, start)
    assert len(calls) == 3
    for call, rows in zip(calls, (slice(0, 2), slice(2, 3), slice(0, 3))):
        assert torch.equal(call["input_ids"], ids[rows])
        assert torch.equal(call["attention_mask"], mask[rows])
        assert torch.equal(call["position_ids"], positions[rows])
        assert call["use_cache"] is False
        assert "packed_seq_lengths" not in call


def test_unsloth_decoder_gets_one_packed_row_per_micro_batch(model, batch, monkeypatch):
    ids, mask, start = batch
    calls = _spy_decoder(model, monkeypatch)
    model._relrl_unsloth = True
    with torch.no_grad():
        completion_logprobs(model, ids, mask, start, micro_batch=2)
    assert len(calls) == 2
    for call, rows in zip(calls, (slice(0, 2), slice(2, 3))):
        real = mask[rows].bool()
        assert call.get("attention_mask") is None
        assert call["input_ids"].tolist() == [ids[rows][real].tolist()]
        expected_positions = [p for n in mask[rows].sum(1).tolist() for p in range(n)]
        assert call["position_ids"].tolist() == [expected_positions]
        lengths = call["packed_seq_lengths"]
        assert lengths.dtype == torch.int32 and lengths.tolist() == mask[rows].sum(1).tolist()
        assert call["use_cache"] is False
    assert calls[0]["packed_seq_lengths"].tolist() == [7, 3]


@pytest.mark.parametrize("micro_batch", [1, 2, 8])
def test_packed_rows_give_the_same_logprobs_as_padded_rows(model, batch, monkeypatch, micro_batch):
    ids, mask, start = batch
    expected_token, expected_entropy = _full_softmax(model, ids, mask, start)
    _spy_decoder(model, monkeypatch)
    with torch.no_grad():
        padded = completion_logprobs(model, ids, mask, start, micro_batch, chunk_size=3,
                                     return_entropy=True)
        model._relrl_unsloth = True
        packed = completion_logprobs(model, ids, mask, start, micro_batch, chunk_size=3,
                                     return_entropy=True)
    for token, entropy in (padded, packed):
        assert token.shape == entropy.shape == (3, ids.shape[1] - start)
        assert torch.allclose(token.double(), expected_token, atol=1e-5)
        assert torch.allclose(entropy.double(), expected_entropy, atol=1e-5)
        assert (token[mask[:, start:] == 0] == 0).all() and (entropy[mask[:, start:] == 0] == 0).all()
    assert (expected_token[mask[:, start:] == 1] < -0.01).all()  # not trivially zero


def test_one_token_prompt_is_a_valid_logits_start(model):
    # logits_start = 1: the first token alone predicts the rest; T itself leaves nothing to score.
    ids = torch.tensor([[5, 6, 7, 8]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        got = completion_logprobs(model, ids, mask, 1)
    expected, _ = _full_softmax(model, ids, mask, 1)
    assert got.shape == (1, 3) and torch.allclose(got.double(), expected, atol=1e-5)
    with torch.no_grad():
        assert torch.allclose(naive_logprobs(model, ids, mask, 1).double(), expected, atol=1e-5)
    for bad in (0, 4, 5):
        with pytest.raises(ValueError, match=r"logits_start must be in \[1, 4\)"):
            completion_logprobs(model, ids, mask, bad)


def test_pack_sequences_with_short_and_empty_completions():
    # Completions of at most one token give a single completion column.
    ids, mask, start = pack_sequences([[5], [6, 7]], [[8], []], pad_id=0)
    assert start == 2
    assert ids.tolist() == [[0, 5, 8], [6, 7, 0]]
    assert mask.tolist() == [[0, 1, 1], [1, 1, 0]]
    assert ids.dtype == mask.dtype == torch.long


def test_pack_sequences_refuses_unmatched_lists():
    with pytest.raises(ValueError, match="^2 prompts but 1 completions$"):
        pack_sequences([[1], [2]], [[3]], pad_id=0)
