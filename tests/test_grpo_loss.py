"""The GRPO loss against values worked out by hand."""
import math

import pytest
import torch

from relrl.rl.grpo_loss import LossConfig, batch_counts, group_advantages, overlong_penalty, policy_loss

MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
ADV = torch.tensor([1.0, -0.5])


def leaf(values):
    return torch.tensor(values, dtype=torch.float32, requires_grad=True)


def first_iteration(aggregation, constant=1.0):
    logp = leaf([[-1.0, -2.0, -0.5], [-0.3, -1.2, -9.0]])
    terms = policy_loss(logp, logp.detach(), ADV, MASK, LossConfig(aggregation=aggregation,
                                                                   constant=constant))
    terms.loss.backward()
    return terms, logp.grad


def test_first_iteration_ratio_is_one_and_token_mean():
    terms, grad = first_iteration("token_mean")
    # ratio 1 everywhere: loss = -(1*3 + (-0.5)*2) / 5 tokens
    assert terms.clip_frac == 0.0
    assert terms.loss.item() == pytest.approx(-0.4)
    assert torch.allclose(terms.row_loss, torch.tensor([-0.6, 0.2]))  # each completion's share
    assert torch.allclose(grad, torch.tensor([[-0.2, -0.2, -0.2], [0.1, 0.1, 0.0]]))


def test_sequence_mean_of_token_means():
    terms, grad = first_iteration("seq_mean_token_mean")
    # sequence means -1 and +0.5, averaged over 2 sequences
    assert terms.loss.item() == pytest.approx(-0.25)
    assert torch.allclose(grad, torch.tensor([[-1 / 6, -1 / 6, -1 / 6], [0.125, 0.125, 0.0]]))


def test_sum_normalised_by_constant():
    terms, grad = first_iteration("seq_sum_constant", constant=5.0)
    # token sum -3 + 1 = -2 over 2 sequences * 5
    assert terms.loss.item() == pytest.approx(-0.2)
    assert torch.allclose(grad, torch.tensor([[-0.1, -0.1, -0.1], [0.05, 0.05, 0.0]]))


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_sum_constant"])
def test_micro_batches_add_up_to_the_batch_loss(aggregation):
    torch.manual_seed(0)
    logp = torch.randn(4, 5)
    old = logp + 0.1 * torch.randn(4, 5)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    adv = torch.tensor([0.7, -1.2, 0.3, 0.2])
    cfg = LossConfig(aggregation=aggregation, constant=5.0)
    whole = policy_loss(logp, old, adv, mask, cfg).loss
    parts = sum(policy_loss(logp[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2], cfg,
                            batch_tokens=11, batch_seqs=4).loss for i in (0, 2))
    assert parts.item() == pytest.approx(whole.item(), abs=1e-6)


def one_token(ratio, advantage, cfg=LossConfig()):
    logp = leaf([[math.log(ratio)]])
    terms = policy_loss(logp, torch.zeros(1, 1), torch.tensor([advantage]), torch.ones(1, 1), cfg)
    terms.loss.backward()
    return terms, logp.grad.item()


def test_high_clip_stops_positive_advantage_above_1_plus_clip_high():
    terms, grad = one_token(1.5, 1.0)
    assert terms.loss.item() == pytest.approx(-1.28) and grad == 0.0
    assert terms.row_clip_high.tolist() == [1.0] and terms.row_clip_low.tolist() == [0.0]
    assert terms.clip_frac == 1.0  # one token of one
    terms, grad = one_token(1.1, 1.0)  # inside the range: d(-ratio)/dlogp = -ratio
    assert terms.loss.item() == pytest.approx(-1.1) and grad == pytest.approx(-1.1)
    assert terms.clip_frac == 0.0
    terms, grad = one_token(0.5, 1.0)  # positive advantage is never clipped from below
    assert terms.loss.item() == pytest.approx(-0.5) and grad == pytest.approx(-0.5)


def test_low_clip_stops_negative_advantage_below_1_minus_clip_low():
    terms, grad = one_token(0.5, -1.0)
    assert terms.loss.item() == pytest.approx(0.8) and grad == 0.0
    assert terms.row_clip_low.tolist() == [1.0] and terms.row_clip_high.tolist() == [0.0]
    terms, grad = one_token(0.9, -1.0)
    assert terms.loss.item() == pytest.approx(0.9) and grad == pytest.approx(0.9)
    terms, grad = one_token(1.5, -1.0)  # negative advantage is never clipped from above
    assert terms.loss.item() == pytest.approx(1.5) and grad == pytest.approx(1.5)


def test_clip_ranges_are_separate():
    terms, _ = one_token(1.25, 1.0, LossConfig(clip_low=0.2, clip_high=0.2))
    assert terms.loss.item() == pytest.approx(-1.2)
    terms, _ = one_token(1.25, 1.0, LossConfig(clip_low=0.2, clip_high=0.28))
    assert terms.loss.item() == pytest.approx(-1.25)


def test_k3_kl_on_and_off():
    logp = leaf([[0.0, 0.0]])
    ref = torch.full((1, 2), math.log(2.0))  # k3 = 2 - ln 2 - 1 per token
    k3 = 1.0 - math.log(2.0)
    on = policy_loss(logp, logp.detach(), torch.zeros(1), torch.ones(1, 2),
                     LossConfig(beta=0.1), ref_logp=ref)
    on.loss.backward()
    assert on.kl == pytest.approx(k3)
    assert on.loss.item() == pytest.approx(0.1 * k3)
    # d k3 / d logp = 1 - exp(ref - logp) = -1, times beta, over 2 tokens
    assert torch.allclose(logp.grad, torch.tensor([[-0.05, -0.05]]))
    off = policy_loss(logp, logp.detach(), torch.zeros(1), torch.ones(1, 2),
                      LossConfig(beta=0.0), ref_logp=ref)
    assert off.loss.item() == 0.0 and off.kl == pytest.approx(k3)  # logged, not optimised


def test_zero_advantage_group_gives_zero_gradient():
    torch.manual_seed(1)
    head = torch.nn.Linear(4, 6)
    hidden = torch.randn(4, 3, 4)  # 4 completions of a group, 3 tokens each
    tokens = torch.randint(0, 6, (4, 3))
    logp = torch.log_softmax(head(hidden), -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    adv = group_advantages(torch.tensor([[0.5, 0.5, 0.5, 0.5]]))[0]
    assert torch.equal(adv, torch.zeros(4))
    for aggregation in ("token_mean", "seq_mean_token_mean", "seq_sum_constant"):
        head.zero_grad()
        policy_loss(logp, logp.detach() - 0.3, adv, torch.ones(4, 3),
                    LossConfig(aggregation=aggregation)).loss.backward(retain_graph=True)
        assert all(torch.count_nonzero(p.grad) == 0 for p in head.parameters())


def test_group_advantages_by_hand():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    # mean 0.25, sample std 0.5
    adv = group_advantages(rewards, eps=0.0)
    assert torch.allclose(adv[0], torch.tensor([1.5, -0.5, -0.5, -0.5]))
    assert torch.equal(group_advantages(rewards)[1], torch.zeros(4))
    assert torch.allclose(group_advantages(rewards, "mean_only")[0],
                          torch.tensor([0.75, -0.25, -0.25, -0.25]))
    with pytest.raises(ValueError, match="G >= 2"):
        group_advantages(torch.tensor([[1.0]]))


def test_overlong_penalty_is_soft_then_minus_one():
    assert [overlong_penalty(n, 100, 20) for n in (50, 80, 90, 100, 120)] == [0, 0, -0.5, -1, -1]
    assert overlong_penalty(100, 100, 0) == 0.0


def test_fully_masked_batch_has_zero_loss_and_gradient():
    logp = leaf([[-1.0, -2.0]])
    terms = policy_loss(logp, logp.detach(), torch.ones(1), torch.zeros(1, 2), LossConfig())
    terms.loss.backward()
    assert terms.loss.item() == 0.0 and torch.count_nonzero(logp.grad) == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"clip_low": -0.1}, r"clip_low must be in \[0, 1\), got -0.1"),
    ({"clip_low": 1.0}, r"clip_low must be in \[0, 1\), got 1.0"),
    ({"clip_high": -0.2}, "clip_high must be >= 0, got -0.2"),
    ({"beta": -1.0}, "beta must be >= 0, got -1.0"),
    ({"aggregation": "mean"}, "aggregation must be one of .*got 'mean'"),
    ({"constant": 0.0}, "constant must be > 0, got 0.0"),
])
def test_bad_config_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LossConfig(**kwargs)


def test_boundary_configs_are_allowed():
    assert LossConfig(clip_low=0.0, clip_high=0.0, beta=0.0, constant=0.5).clip_low == 0.0


# -- edges the hand-worked cases above miss (found by mutation testing) ------------------------
def test_fully_masked_rows_are_not_sequences():
    assert batch_counts(torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])) == (3, 2)
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]])
    old = logp - 0.1
    cfg = LossConfig(aggregation="seq_mean_token_mean")
    with_empty = policy_loss(logp, old, torch.tensor([1.0, 1.0]),
                             torch.tensor([[1.0, 1.0], [0.0, 0.0]]), cfg)
    alone = policy_loss(logp[:1], old[:1], torch.tensor([1.0]), torch.ones(1, 2), cfg)
    assert with_empty.loss.item() == pytest.approx(alone.loss.item())


def test_one_sequence_of_one_token_is_its_own_mean():
    logp = torch.tensor([[math.log(1.1), -5.0, -5.0]])
    for aggregation in ("token_mean", "seq_mean_token_mean"):
        terms = policy_loss(logp, torch.zeros(1, 3), torch.tensor([1.0]),
                            torch.tensor([[1.0, 0.0, 0.0]]), LossConfig(aggregation=aggregation))
        assert terms.loss.item() == pytest.approx(-1.1)


def test_clip_counts_need_the_advantage_sign_and_a_ratio_beyond_the_range():
    for ratio, advantage in ((1.5, 0.0), (0.5, 0.0), (0.5, 0.5), (1.5, -0.5)):
        terms, _ = one_token(ratio, advantage)
        assert terms.row_clip_low.tolist() == [0.0] and terms.row_clip_high.tolist() == [0.0]
    zero_range = LossConfig(clip_low=0.0, clip_high=0.0)
    for advantage in (1.0, -1.0):  # ratio exactly 1: both surrogates agree, nothing is clipped
        terms, _ = one_token(1.0, advantage, zero_range)
        assert terms.clip_frac == 0.0


def test_row_kl_is_each_rows_masked_sum():
    logp = torch.zeros(2, 2)
    ref = torch.full((2, 2), math.log(2.0))
    k3 = 1.0 - math.log(2.0)
    terms = policy_loss(logp, logp, torch.zeros(2), torch.tensor([[1.0, 1.0], [1.0, 0.0]]),
                        LossConfig(), ref_logp=ref)
    assert terms.row_kl.tolist() == pytest.approx([2 * k3, k3])


def test_beta_zero_ignores_even_an_overflowing_reference():
    logp = leaf([[-1.0, -1.0]])
    ref = torch.full((1, 2), 1000.0)  # k3 = exp(1001) - ... overflows to inf
    terms = policy_loss(logp, logp.detach(), torch.tensor([1.0]), torch.ones(1, 2),
                        LossConfig(beta=0.0), ref_logp=ref)
    terms.loss.backward()
    assert terms.loss.item() == pytest.approx(-1.0) and torch.isfinite(logp.grad).all()


def test_dtypes_follow_the_policy_whatever_the_mask_and_advantages():
    logp = torch.zeros(1, 2)
    terms = policy_loss(logp, logp, torch.tensor([1.0], dtype=torch.float64),
                        torch.tensor([[1, 0]]), LossConfig())
    # the trainer adds row_tokens into float accumulators: an integer count would not fit
    assert terms.loss.dtype == terms.row_tokens.dtype == torch.float32
    assert terms.row_tokens.tolist() == [1.0]


def test_group_advantages_default_eps_pairs_and_integer_rewards():
    adv = group_advantages([[1, 0, 0, 0]])  # python ints, as a reward function may return
    assert adv.dtype == torch.float32
    assert adv[0].tolist() == pytest.approx([0.75 / (0.5 + 1e-4), -0.25 / (0.5 + 1e-4),
                                             -0.25 / (0.5 + 1e-4), -0.25 / (0.5 + 1e-4)])
    pair = group_advantages(torch.tensor([[1.0, 0.0]], dtype=torch.float64), eps=0.0)
    assert pair.dtype == torch.float32  # G = 2 is the smallest group
    assert pair[0].tolist() == pytest.approx([2 ** -0.5, -(2 ** -0.5)])
    with pytest.raises(ValueError, match="advantage mode must be one of .*got 'median'"):
        group_advantages(torch.tensor([[1.0, 0.0]]), "median")


def test_overlong_penalty_off_with_no_buffer_and_full_with_a_one_token_buffer():
    assert overlong_penalty(120, 100, 0) == 0.0  # buffer 0: the penalty is off at any length
    assert overlong_penalty(100, 100, 1) == -1.0
    assert overlong_penalty(99, 100, 1) == 0.0
