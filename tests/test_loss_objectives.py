"""GSPO, CISPO and the sequence-level importance mask against values worked out by hand."""
import math

import pytest
import torch

from relrl.rl.grpo_loss import LossConfig, importance_weights, policy_loss

MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
ADV = torch.tensor([1.0, -0.5])


def run(log_ratio, cfg, mask=MASK, adv=ADV, tis_weight=None):
    """policy_loss with logp = old + log_ratio (old = -1 everywhere); terms and d loss / d logp."""
    old = torch.full_like(torch.tensor(log_ratio), -1.0)
    logp = (old + torch.tensor(log_ratio)).requires_grad_()
    terms = policy_loss(logp, old, adv, mask, cfg, tis_weight=tis_weight)
    terms.loss.backward()
    return terms, logp.grad


# ---------------------------------------------------------------------------------- GSPO


def test_gspo_ratio_is_the_geometric_mean_over_the_completions_own_tokens():
    cfg = LossConfig(loss="gspo", aggregation="seq_mean_token_mean")  # clip range [0.8, 1.28]
    # row 0: mean log-ratio 0.3 -> s = e^0.3 = 1.35 > 1.28 with A > 0: clipped to 1.28
    # row 1: mean over its 2 tokens (0.1 + 0.3) / 2 = 0.2 -> s = e^0.2 = 1.22, inside; the 5.0
    # on padding is ignored (counted, s = e^1.8; over 3 tokens, e^0.133; summed, e^0.4 clipped)
    terms, grad = run([[0.3, 0.2, 0.4], [0.1, 0.3, 5.0]], cfg)
    s1 = math.exp(0.2)
    assert terms.row_loss.tolist() == pytest.approx([-1.28 / 2, 0.5 * s1 / 2])
    assert terms.loss.item() == pytest.approx((-1.28 + 0.5 * s1) / 2)
    # clipped completion: no gradient; the other: d/dlogp_t of (1/2)(1/2) sum_t 0.5 s = s / 8
    assert torch.allclose(grad, torch.tensor([[0.0, 0.0, 0.0], [s1 / 8, s1 / 8, 0.0]]))
    assert terms.row_clip_high.tolist() == [3.0, 0.0]  # every token of the clipped completion
    assert terms.row_clip_low.tolist() == [0.0, 0.0]


def test_gspo_clips_the_sequence_ratio_at_its_own_narrow_range():
    cfg = LossConfig(loss="gspo", clip_low=3e-4, clip_high=4e-4,
                     aggregation="seq_mean_token_mean")  # the paper's ranges
    # token ratios e^0.1 and e^-0.1 would each be clipped; their geometric mean is 1: not
    terms, grad = run([[0.1, -0.1, 0.0], [-0.002, 0.0, 0.0]], cfg)
    assert terms.row_loss.tolist() == pytest.approx([-1.0 / 2, 0.5 * (1 - 3e-4) / 2])
    assert terms.row_clip_low.tolist() == [0.0, 2.0] and terms.row_clip_high.tolist() == [0.0, 0.0]
    assert grad[0].tolist() == pytest.approx([-1 / 6, -1 / 6, -1 / 6])  # (1/2)(1/3)(-s A)
    assert grad[1].tolist() == [0.0, 0.0, 0.0]  # A < 0 below 1 - eps_low: clipped


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_sum_constant"])
def test_gspo_token_form_has_the_sequence_level_objectives_value_and_gradient(aggregation):
    """GSPO as the paper writes it: one term per completion, spread over its tokens."""
    torch.manual_seed(0)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 1, 1]], dtype=torch.float32)
    old = torch.randn(3, 4)
    start = old + 0.2 * torch.randn(3, 4)
    adv = torch.tensor([0.8, -1.1, 0.4])
    cfg = LossConfig(loss="gspo", clip_low=0.05, clip_high=0.05, aggregation=aggregation,
                     constant=4.0)
    ours = start.clone().requires_grad_()
    policy_loss(ours, old, adv, mask, cfg).loss.backward()

    direct = start.clone().requires_grad_()
    lengths = mask.sum(1)
    s = torch.exp(((direct - old) * mask).sum(1) / lengths)
    term = -torch.minimum(s * adv, s.clamp(0.95, 1.05) * adv)  # per completion
    weight = {"token_mean": lengths / lengths.sum(), "seq_mean_token_mean": torch.full((3,), 1 / 3),
              "seq_sum_constant": lengths / (3 * 4.0)}[aggregation]
    loss = (term * weight).sum()
    loss.backward()
    assert policy_loss(start, old, adv, mask, cfg).loss.item() == pytest.approx(loss.item())
    assert torch.allclose(ours.grad, direct.grad, atol=1e-6)
    assert (direct.grad != 0).any() and ((s < 0.95) | (s > 1.05)).any()  # a real mix of cases


# --------------------------------------------------------------------------------- CISPO


def one_token(ratio, advantage, cfg):
    terms, grad = run([[math.log(ratio)]], cfg, mask=torch.ones(1, 1),
                      adv=torch.tensor([advantage]))
    return terms, grad.item()


@pytest.mark.parametrize("ratio, advantage, weight", [
    (1.5, 1.0, 1.28),  # clipped above
    (0.5, -1.0, 0.8),  # clipped below
    (1.5, -1.0, 1.28),  # clipped above whatever the advantage's sign
    (1.1, 1.0, 1.1),  # inside the range: the ratio itself
])
def test_cispo_value_is_minus_clipped_weight_times_advantage_and_every_token_keeps_a_gradient(
        ratio, advantage, weight):
    terms, grad = one_token(ratio, advantage, LossConfig(loss="cispo"))
    assert terms.loss.item() == pytest.approx(-weight * advantage)
    assert grad == pytest.approx(-weight * advantage)  # sg(w) A d logp / d logp
    clipped = weight != ratio
    assert terms.clip_frac == (1.0 if clipped else 0.0)


def test_on_a_clipped_token_grpo_has_no_gradient_and_cispo_has_one():
    for ratio, advantage in ((1.5, 1.0), (0.5, -1.0)):
        _, grpo = one_token(ratio, advantage, LossConfig())
        _, cispo = one_token(ratio, advantage, LossConfig(loss="cispo"))
        assert grpo == 0.0 and cispo != 0.0
    _, grpo = one_token(1.1, 1.0, LossConfig())  # unclipped: the two gradients agree
    _, cispo = one_token(1.1, 1.0, LossConfig(loss="cispo"))
    assert cispo == pytest.approx(grpo)


def test_cispo_without_a_lower_bound_takes_the_ratio_as_it_is():
    terms, grad = one_token(0.01, -1.0, LossConfig(loss="cispo", clip_low=1.0, clip_high=3.0))
    assert terms.loss.item() == pytest.approx(0.01) and grad == pytest.approx(0.01)
    assert terms.clip_frac == 0.0
    terms, _ = one_token(5.0, 1.0, LossConfig(loss="cispo", clip_low=1.0, clip_high=3.0))
    assert terms.loss.item() == pytest.approx(-4.0)  # the upper cap still holds


def test_cispo_batch_by_hand_with_the_token_mean():
    # row 0 ratios e^0, e^0.5 (clipped to 1.28), e^-0.1; row 1 ratios 1, e^-1 (clipped to 0.8)
    terms, grad = run([[0.0, 0.5, -0.1], [0.0, -1.0, 9.0]], LossConfig(loss="cispo"))
    w = [[1.0, 1.28, math.exp(-0.1)], [1.0, 0.8, 0.0]]
    expected = [-(w[0][0] + w[0][1] + w[0][2]) / 5, 0.5 * (w[1][0] + w[1][1]) / 5]
    assert terms.row_loss.tolist() == pytest.approx(expected)
    assert torch.allclose(grad, torch.tensor([[-1.0, -1.28, -math.exp(-0.1)],
                                              [0.5, 0.4, 0.0]]) / 5)
    assert terms.row_clip_high.tolist() == [1.0, 0.0] and terms.row_clip_low.tolist() == [0.0, 1.0]


# ------------------------------------------------------------------------------ the mask


@pytest.mark.parametrize("loss", ["grpo", "gspo", "cispo"])
def test_tokens_off_the_mask_change_nothing(loss):
    """Padding and a token inserted mid-completion (a tool's output) under mask 0."""
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    cfg = LossConfig(loss=loss)
    base = [[0.1, 0.0, -0.2, 0.05], [0.3, -0.1, 0.0, 0.0]]
    noisy = [[0.1, 4.0, -0.2, 0.05], [0.3, -0.1, -3.0, 7.0]]
    a, grad_a = run(base, cfg, mask=mask)
    b, grad_b = run(noisy, cfg, mask=mask)
    assert b.loss.item() == pytest.approx(a.loss.item())
    assert torch.allclose(grad_a, grad_b)
    assert (grad_b * (1 - mask)).abs().sum() == 0  # no gradient off the mask
    assert b.row_tokens.tolist() == [3.0, 2.0]


@pytest.mark.parametrize("loss", ["gspo", "cispo"])
@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_sum_constant"])
def test_micro_batches_add_up_to_the_batch_loss(loss, aggregation):
    torch.manual_seed(0)
    logp = torch.randn(4, 5)
    old = logp + 0.1 * torch.randn(4, 5)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    adv = torch.tensor([0.7, -1.2, 0.3, 0.2])
    cfg = LossConfig(loss=loss, aggregation=aggregation, constant=5.0)
    whole = policy_loss(logp, old, adv, mask, cfg).loss
    parts = sum(policy_loss(logp[i:i + 2], old[i:i + 2], adv[i:i + 2], mask[i:i + 2], cfg,
                            batch_tokens=11, batch_seqs=4).loss for i in (0, 2))
    assert parts.item() == pytest.approx(whole.item(), abs=1e-6)


# ------------------------------------------------------------- trainer/sampler correction


OLD = torch.log(torch.tensor([[0.5, 0.5, 0.5], [0.9, 0.1, 0.2]]))
SAMPLER = torch.log(torch.tensor([[0.5, 0.1, 0.4], [0.3, 0.1, 0.05]]))  # p_t: 1 5 1.25 | 3 1 (4)


def test_token_mode_truncates_each_tokens_ratio_at_the_cap():
    w = importance_weights(OLD, SAMPLER, MASK, cap=2.0)
    assert w.weight.flatten().tolist() == pytest.approx([1.0, 2.0, 1.25, 2.0, 1.0, 0.0])
    assert w.row_ratio.tolist() == pytest.approx([7.25, 4.0])  # uncapped, padding left out
    assert w.row_capped.tolist() == [1.0, 1.0]


def test_sequence_mask_weighs_each_completion_by_its_ratio_and_drops_those_over_the_cap():
    # completion ratios: 1 * 5 * 1.25 = 6.25 and 3 * 1 = 3 (the padding's 4 left out)
    w = importance_weights(OLD, SAMPLER, MASK, cap=4.0, mode="sequence-mask")
    assert w.weight.flatten().tolist() == pytest.approx([0.0, 0.0, 0.0, 3.0, 3.0, 0.0])
    assert w.row_capped.tolist() == [3.0, 0.0]  # every token of the dropped completion
    assert w.row_ratio.tolist() == pytest.approx([7.25, 4.0])
    kept = importance_weights(OLD, SAMPLER, MASK, cap=7.0, mode="sequence-mask")
    assert kept.weight.flatten().tolist() == pytest.approx([6.25] * 3 + [3.0, 3.0, 0.0])
    assert kept.row_capped.tolist() == [0.0, 0.0]


def test_sequence_mask_drops_exactly_the_completions_over_the_cap():
    log_ratio = torch.log(torch.tensor([0.5, 1.9, 2.1, 50.0]))
    old = torch.zeros(5, 2)
    sampler = torch.zeros(5, 2)
    sampler[:4, 0] = -log_ratio  # each completion's ratio sits on its first token
    sampler[4] = -500.0  # ratio e^1000: overflows to inf, and is dropped, not NaN
    mask = torch.ones(5, 2)
    w = importance_weights(old, sampler, mask, cap=2.0, mode="sequence-mask")
    assert w.weight[:, 0].tolist() == pytest.approx([0.5, 1.9, 0.0, 0.0, 0.0])
    assert torch.isfinite(w.weight).all()
    assert w.row_capped.tolist() == [0.0, 0.0, 2.0, 2.0, 2.0]
    # in the loss: the dropped completions add nothing, and their tokens still count
    logp = torch.zeros(5, 2, requires_grad=True)
    terms = policy_loss(logp, logp.detach(), torch.ones(5), mask, LossConfig(), tis_weight=w.weight)
    terms.loss.backward()
    assert terms.row_loss.tolist() == pytest.approx([-1.0 / 10, -3.8 / 10, 0.0, 0.0, 0.0])
    assert logp.grad[2:].abs().sum() == 0 and logp.grad[:2].abs().sum() > 0


def test_sequence_mask_also_drops_the_completions_below_one_over_the_cap():
    """The bounds are [1/C, C]: a completion the sampler found far likelier than the trainer
    (ratio near 0, or underflowing to 0) is left out too, not kept with a tiny weight; at a
    cap of 1 or below there is no lower bound."""
    ratios = torch.tensor([0.49, 0.5, 0.51, 1.0, 1.99, 2.01])
    old = torch.zeros(7, 2)
    sampler = torch.zeros(7, 2)
    sampler[:6, 0] = -torch.log(ratios)
    sampler[6] = 500.0  # ratio e^-1000: underflows to 0, and is dropped
    mask = torch.ones(7, 2)
    w = importance_weights(old, sampler, mask, cap=2.0, mode="sequence-mask")
    assert w.weight[:, 0].tolist() == pytest.approx([0.0, 0.5, 0.51, 1.0, 1.99, 0.0, 0.0])
    assert w.weight[:, 1].tolist() == w.weight[:, 0].tolist()  # every token of a completion
    assert w.row_capped.tolist() == [2.0, 0.0, 0.0, 0.0, 0.0, 2.0, 2.0]
    low = importance_weights(old, sampler, mask, cap=1.0, mode="sequence-mask")
    assert low.weight[:, 0].tolist() == pytest.approx([0.49, 0.5, 0.51, 1.0, 0.0, 0.0, 0.0])


def test_no_cap_no_weights_and_a_bad_mode_is_refused():
    off = importance_weights(OLD, SAMPLER, MASK, cap=0.0, mode="sequence-mask")
    assert off.weight is None and off.row_capped is None
    assert off.row_ratio.tolist() == pytest.approx([7.25, 4.0])  # still reported
    with pytest.raises(ValueError, match="tis_mode must be one of .*got 'sequence'"):
        importance_weights(OLD, SAMPLER, MASK, cap=2.0, mode="sequence")


@pytest.mark.parametrize("kwargs, message", [
    ({"loss": "ppo"}, "loss must be one of .*got 'ppo'"),
    ({"tis_mode": "sequence_mask"}, "tis_mode must be one of .*got 'sequence_mask'"),
    ({"loss": "gspo", "clip_low": 1.0}, r"clip_low must be in \[0, 1\), got 1.0"),
    ({"loss": "cispo", "clip_low": 1.5}, r"clip_low must be in \[0, 1\] for cispo, got 1.5"),
])
def test_bad_objective_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LossConfig(**kwargs)


def test_defaults_are_the_studys():
    cfg = LossConfig()
    assert (cfg.loss, cfg.tis_mode) == ("grpo", "token")
