"""The GRPO loss with truncated importance weights: each token's share of the loss is scaled by
its weight, and the loss keeps the policy's dtype whatever dtype the weights come in."""
import pytest
import torch

from relrl.rl.grpo_loss import LossConfig, policy_loss

ADV = torch.tensor([1.0, -0.5])
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
WEIGHT = [[2.0, 1.0, 1.0], [4.0, 1.0, 3.0]]  # the last one sits on padding


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_importance_weights_scale_each_tokens_share_of_the_loss_in_the_policys_dtype(dtype):
    logp = torch.zeros(2, 3, requires_grad=True)  # first iteration: ratio 1, surrogate = A
    terms = policy_loss(logp, logp.detach(), ADV, MASK, LossConfig(),
                        tis_weight=torch.tensor(WEIGHT, dtype=dtype))
    # row 0: -(2 + 1 + 1) * 1 = -4; row 1: -(4 + 1) * -0.5 = 2.5; 5 tokens
    assert terms.row_loss.tolist() == pytest.approx([-0.8, 0.5])
    assert terms.loss.item() == pytest.approx(-0.3)
    assert terms.loss.dtype == terms.row_loss.dtype == torch.float32
    terms.loss.backward()
    assert logp.grad.dtype == torch.float32
