"""Memory-lean completion log-probs equal the naive computation, with and without adapters."""
import pytest
import torch

from relrl.data.prompting import build_prompt
from relrl.engines.base import SamplingConfig
from relrl.engines.hf import generate
from relrl.modeling.loading import attach_lora, reference_policy
from relrl.modeling.logprobs import completion_logprobs, naive_logprobs, pack_sequences
from relrl.models.by_name import load_model


@pytest.fixture(scope="module")
def batch():
    model, tok = load_model("tiny-random")
    prompts = [build_prompt(tok, q) for q in ["Find R(100 h) for lambda = 1e-3 per hour.",
                                               "Series system of 3 units with R = 0.95 each?", "B10?"]]
    rows = generate(model, tok, prompts, 2, [1, 2, 3], SamplingConfig(max_new_tokens=20))
    flat = [c for row in rows for c in row]
    # Ragged completions, so right padding inside the batch is exercised too.
    completions = [c.token_ids[: 8 + 2 * k] for k, c in enumerate(flat)]
    ids, mask, start = pack_sequences([c.prompt_ids for c in flat], completions, tok.pad_token_id)
    return model, tok, ids, mask, start


def _perturbed_lora(model, seed=0):
    lora = attach_lora(model, r=4, alpha=8)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in lora.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.1)
    return lora


@pytest.mark.parametrize("micro_batch, chunk", [(1, 1), (2, 5), (8, 256)])
def test_lean_equals_naive(batch, micro_batch, chunk):
    model, _, ids, mask, start = batch
    with torch.no_grad():
        lean = completion_logprobs(model, ids, mask, start, micro_batch, chunk_size=chunk)
        naive = naive_logprobs(model, ids, mask, start)
    assert lean.shape == (ids.shape[0], ids.shape[1] - start)
    assert torch.allclose(lean, naive, atol=1e-5, rtol=0)
    assert (lean[mask[:, start:] == 0] == 0).all()
    assert (lean[mask[:, start:] == 1] < 0).all()


def test_lean_gradients_equal_naive(batch):
    model, _, ids, mask, start = batch
    lora = _perturbed_lora(load_model("tiny-random")[0])
    weights = torch.rand(ids.shape[0], ids.shape[1] - start, generator=torch.Generator().manual_seed(0))

    def grads(fn):
        lora.zero_grad()
        (fn() * weights).sum().backward()
        return {n: p.grad.clone() for n, p in lora.named_parameters() if p.requires_grad}

    lean = grads(lambda: completion_logprobs(lora, ids, mask, start, micro_batch=2, chunk_size=3))
    naive = grads(lambda: naive_logprobs(lora, ids, mask, start))
    assert lean.keys() == naive.keys() and len(lean) > 0
    for name in lean:
        assert torch.allclose(lean[name], naive[name], atol=1e-5, rtol=1e-4), name


def test_entropy_matches_full_softmax(batch):
    model, _, ids, mask, start = batch
    with torch.no_grad():
        _, entropy = completion_logprobs(model, ids, mask, start, chunk_size=4, return_entropy=True)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, start - 1:-1]
        full = torch.distributions.Categorical(logits=logits).entropy() * mask[:, start:]
    assert torch.allclose(entropy, full, atol=1e-4)


def test_reference_policy_is_base_model_exactly(batch):
    model, _, ids, mask, start = batch
    with torch.no_grad():
        base = completion_logprobs(model, ids, mask, start)
        lora = _perturbed_lora(load_model("tiny-random")[0])
        with reference_policy(lora):
            reference = completion_logprobs(lora, ids, mask, start)
        policy = completion_logprobs(lora, ids, mask, start)
    assert torch.equal(reference, base)
    assert not torch.allclose(policy, base, atol=1e-3)  # the adapter is back on after the block


def test_matches_the_logits_generate_sampled_from():
    # Training and sampling see the same distribution, so GRPO's first importance ratio is 1.
    model, tok = load_model("tiny-random")
    prompts = [build_prompt(tok, "short"), build_prompt(tok, "a much longer question about a pump")]
    enc = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    width = max(map(len, enc))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(e)) + e for e in enc])
    mask = (torch.arange(width) >= torch.tensor([width - len(e) for e in enc])[:, None]).long()
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=False,
                         output_logits=True, return_dict_in_generate=True,
                         eos_token_id=None, pad_token_id=tok.pad_token_id)
    sampled = out.sequences[:, width:]
    expected = torch.stack([torch.log_softmax(step, -1).gather(-1, sampled[:, k:k + 1]).squeeze(-1)
                            for k, step in enumerate(out.logits)], dim=1)
    full_mask = torch.cat([mask, torch.ones_like(sampled)], dim=1)
    with torch.no_grad():
        got = completion_logprobs(model, out.sequences, full_mask, width)
    assert torch.allclose(got, expected, atol=1e-5)


def test_pack_sequences_layout():
    ids, mask, start = pack_sequences([[5, 6], [7]], [[1, 2, 3], [4]], pad_id=0)
    assert start == 2
    assert ids.tolist() == [[5, 6, 1, 2, 3], [0, 7, 4, 0, 0]]
    assert mask.tolist() == [[1, 1, 1, 1, 1], [0, 1, 1, 0, 0]]


def test_logits_start_must_leave_a_completion(batch):
    model, _, ids, mask, _ = batch
    with pytest.raises(ValueError, match="logits_start"):
        completion_logprobs(model, ids, mask, 0)
