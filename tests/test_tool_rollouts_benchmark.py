"""The tool-rollout benchmark's step-cost fit (benchmarks/tool_rollouts.py), on step logs whose
cost is known."""
import pytest

from benchmarks.tool_rollouts import step_cost


def logs_from(cost, rounds_steps, async_steps, repeats=2):
    """Step logs (seconds, in flight, prefilled tokens) priced by `cost`, repeated."""
    def priced(steps):
        return [(cost(n, p), n, p) for n, p in steps]
    return {"rounds": [priced(rounds_steps)] * repeats, "async": [priced(async_steps)] * repeats}


# rounds: a 64-sequence turn, a tail of 4, then the answered 40 prefilled and decoded;
# async: the same work with the tail overlapped (fewer, fuller steps)
ROUNDS = [(64, 2000)] + [(64, 0)] * 20 + [(4, 0)] * 10 + [(40, 1500)] + [(40, 0)] * 15
ASYNC = [(64, 2000)] + [(64, 0)] * 19 + [(68, 900)] + [(44, 600)] + [(40, 0)] * 14


def direct_ratio(cost):
    return sum(cost(n, p) for n, p in ROUNDS) / sum(cost(n, p) for n, p in ASYNC)


def test_the_fit_recovers_a_step_cost_and_predicts_the_ratio_it_implies():
    def cost(n, p):
        return 0.002 + 0.0005 * n + 0.00001 * p
    fit = step_cost(logs_from(cost, ROUNDS, ASYNC), len(ROUNDS), len(ASYNC))
    assert fit["step_fixed_ms"] == pytest.approx(2.0, abs=1e-3)
    assert fit["step_per_sequence_ms"] == pytest.approx(0.5, abs=1e-4)
    assert fit["step_per_prefill_token_ms"] == pytest.approx(0.01, abs=1e-5)
    assert fit["step_fit_r2"] == pytest.approx(1.0)
    assert fit["async_speedup_predicted"] == pytest.approx(direct_ratio(cost), abs=1e-3)
    fixed_share = 0.002 * len(ROUNDS) / sum(cost(n, p) for n, p in ROUNDS)
    assert fit["step_fixed_share_rounds"] == pytest.approx(fixed_share, abs=1e-3)
    assert fit["async_speedup_if_steps_cost_alike"] == pytest.approx(47 / 36, abs=1e-3)


def test_steps_that_cost_alike_predict_the_step_ratio_and_cost_by_tokens_predicts_less():
    alike = step_cost(logs_from(lambda n, p: 0.01, ROUNDS, ASYNC), len(ROUNDS), len(ASYNC))
    assert alike["async_speedup_predicted"] == pytest.approx(len(ROUNDS) / len(ASYNC), abs=1e-3)
    assert alike["step_fixed_share_rounds"] == pytest.approx(1.0, abs=1e-3)
    by_tokens = step_cost(logs_from(lambda n, p: 0.001 * n + 0.0001 * p, ROUNDS, ASYNC),
                          len(ROUNDS), len(ASYNC))
    assert by_tokens["step_fixed_ms"] == pytest.approx(0.0, abs=1e-3)
    assert by_tokens["async_speedup_predicted"] == pytest.approx(
        direct_ratio(lambda n, p: 0.001 * n + 0.0001 * p), abs=1e-3)
    assert by_tokens["async_speedup_predicted"] < alike["async_speedup_predicted"]
