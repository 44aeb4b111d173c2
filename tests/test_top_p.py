"""Top-p filtering on logits in vocabulary order (not sorted): the kept set is the most likely
tokens, wherever they sit in the vocabulary."""
import torch

from relrl.engines.hf import filter_top_p


def test_top_p_keeps_the_most_likely_tokens_when_logits_are_not_sorted():
    # probabilities by token: 0 -> 0.087, 1 -> 0.644, 2 -> 0.032, 3 -> 0.237
    logits = torch.tensor([[1.0, 3.0, 0.0, 2.0]])
    kept = ~torch.isinf(filter_top_p(logits, 0.7))
    assert kept.tolist() == [[False, True, False, True]]
    # the kept logits are unchanged
    assert filter_top_p(logits, 0.7)[0, [1, 3]].tolist() == [3.0, 2.0]


def test_top_p_maps_each_rows_mask_back_through_its_own_order():
    # two rows with the same values in different vocabulary positions
    logits = torch.tensor([[0.0, 2.0, 3.0, 1.0],
                           [3.0, 1.0, 0.0, 2.0]])
    kept = ~torch.isinf(filter_top_p(logits, 0.7))
    assert kept.tolist() == [[False, True, True, False],
                             [True, False, False, True]]
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):  # random vocabulary orders: the kept set is the top of each row
        logits = torch.randn(3, 50, generator=gen)
        kept = ~torch.isinf(filter_top_p(logits, 0.9))
        probs = logits.softmax(-1)
        for row in range(3):
            k = int(kept[row].sum())
            top = probs[row].topk(k).indices
            assert set(top.tolist()) == set(kept[row].nonzero().flatten().tolist())
            mass_without_last = probs[row].topk(k).values[:-1].sum()
            assert probs[row][kept[row]].sum() >= 0.9 > mass_without_last
