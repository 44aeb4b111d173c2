"""Truncated importance sampling on trainer/sampler log-probs: the weights, the cap, the stats."""
import pytest
import torch
from test_grpo_trainer import trainer

from relrl.rl.grpo_loss import LossConfig, policy_loss

ADV = torch.tensor([1.0, -0.5])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])


def grads(weight=None, beta=0.0):
    logp = torch.log(torch.tensor([[0.5, 0.2, 0.1], [0.3, 0.6, 0.9]])).requires_grad_()
    old = logp.detach() + torch.tensor([[0.01, -0.02, 0.0], [0.03, 0.0, 0.0]])
    ref = logp.detach() - 0.1 if beta else None
    terms = policy_loss(logp, old, ADV, MASK, LossConfig(beta=beta), ref_logp=ref,
                        tis_weight=weight)
    terms.loss.backward()
    return terms, logp.grad


def test_unit_weights_change_nothing():
    plain_terms, plain = grads()
    ones_terms, ones = grads(torch.ones(2, 3))
    assert torch.equal(plain, ones) and torch.equal(plain_terms.loss, ones_terms.loss)


def test_weights_scale_each_tokens_surrogate_gradient_not_the_kl():
    weight = torch.tensor([[2.0, 0.5, 1.0], [0.0, 1.5, 1.0]], requires_grad=True)
    _, plain = grads()
    _, weighted = grads(weight)
    assert torch.allclose(weighted, plain * weight.detach())
    assert weight.grad is None  # detached: the weight is a constant of the update
    _, kl_only = grads(torch.zeros(2, 3), beta=0.1)  # surrogate weighted away: the KL remains
    assert kl_only.abs().sum() > 0


def test_trainer_caps_the_ratio_and_counts_the_capped_share(tmp_path):
    t = trainer(tmp_path, tis_cap=2.0)
    old = torch.log(torch.tensor([[0.5, 0.5, 0.5], [0.9, 0.1, 0.2]]))
    sampler = torch.log(torch.tensor([[0.5, 0.1, 0.4], [0.3, 0.1, 0.05]]))
    w, rows = t.importance_weights(old, sampler, MASK)
    assert w.flatten().tolist() == pytest.approx([1.0, 2.0, 1.25, 2.0, 1.0, 0.0])
    assert rows["tis_ratio"].tolist() == pytest.approx([1 + 5 + 1.25, 3 + 1])  # uncapped
    assert rows["tis_capped"].tolist() == [1.0, 1.0]  # 5 > 2 and 3 > 2; padding not counted
    t.cfg.tis_cap = 0.0
    w, rows = t.importance_weights(old, sampler, MASK)
    assert w is None
    assert set(rows) == {"tis_ratio"}  # the ratio is still reported with the correction off
