"""Every family's answer agrees with a second computation done another way: Monte Carlo
simulation within five standard errors, numerical integration, brute-force enumeration of
component states, root finding or numerical likelihood maximization (see each family's
`check_how`). A family without such a check is not done."""
import numpy as np
import pytest

from relrl.problems.base import sig
from relrl.problems.registry import FAMILIES

DRAWS = 3


@pytest.fixture(scope="module")
def checked():
    """(problem, check) for DRAWS parameter draws of every family, computed once."""
    out = {}
    for name, family in FAMILIES.items():
        pairs = []
        for draw in range(DRAWS):
            problem = family.generate(np.random.default_rng([draw, 2024]))
            pairs.append((problem, family.check(problem.params, np.random.default_rng([draw, 7]))))
        out[name] = pairs
    return out


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_second_computation_agrees(name, checked):
    for problem, check in checked[name]:
        assert abs(check.value - problem.value) <= check.tol, (
            f"{name}: answer {problem.value!r}, {check.how} gives {check.value!r} "
            f"(tolerance {check.tol:.3g}); params {problem.params}")
        # the stored 4-figure answer is the same number
        assert abs(float(sig(problem.value)) - check.value) <= check.tol + 5e-4 * abs(check.value)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_check_is_sharp_enough_to_catch_a_wrong_answer(name, checked):
    # within the grader's 5% tolerance an answer counts as right, so a useful check must be
    # tighter than that on at least one draw
    best = min(check.tol / abs(problem.value) for problem, check in checked[name])
    assert best < 0.05, f"{name}: loosest check tolerance {best:.1%}"

