"""evaluation/third_posthoc.py: Welch's t against scipy, the studentized permutation against an
exhaustive enumeration of labels, the two against the registered test under unequal spreads,
and the committed post hoc tables against the committed results."""
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from relrl.runtime.cli import run_main
from study.replication.difference import difference_of_changes

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evaluation"))
import third_posthoc as posthoc  # noqa: E402


def test_welch_is_scipys_unequal_variance_t_test():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.1, 1.0, 40), rng.normal(0.0, 3.0, 9)
    ours = posthoc.welch(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert ours["t"] == pytest.approx(ref.statistic, rel=1e-12)
    assert ours["p"] == pytest.approx(ref.pvalue, rel=1e-10)


def exact_p(xa, xb):
    """Every relabelling within each seed, enumerated: the share whose |t| reaches the observed."""
    def t(a, b):
        return posthoc.welch(np.array(a), np.array(b))["t"]
    observed = abs(t(np.concatenate(xa), np.concatenate(xb)))
    per_seed = []
    for x, y in zip(xa, xb):
        values = list(x) + list(y)
        per_seed.append([([values[i] for i in pick],
                          [values[i] for i in range(len(values)) if i not in pick])
                         for pick in itertools.combinations(range(len(values)), len(x))])
    hits = total = 0
    for choice in itertools.product(*per_seed):
        a = [v for part in choice for v in part[0]]
        b = [v for part in choice for v in part[1]]
        hits += abs(t(a, b)) >= observed - 1e-12
        total += 1
    return hits / total


def test_studentized_permutation_matches_exhaustive_relabelling():
    xa = [np.array([0.0, 0.5, 1.0]), np.array([0.25, 1.0])]
    xb = [np.array([-1.0, 0.0]), np.array([-0.5, 0.75, -0.25])]
    exact = exact_p(xa, xb)  # 10 x 10 relabellings
    got = posthoc.studentized_permutation(xa, xb, seed=1, n_resamples=20_000)
    assert got["p"] == pytest.approx(exact, abs=0.01)
    assert got["t"] == pytest.approx(posthoc.welch(np.concatenate(xa), np.concatenate(xb))["t"])


def test_under_no_difference_with_unequal_spreads_only_the_studentized_tests_hold_their_level():
    """A large tight stratum beside a small wide one, the same mean: the registered
    permutation rejects at 0.05 most of the time, Welch and the studentized permutation near 5%."""
    rng = np.random.default_rng(0)
    rejected = {"registered": 0, "welch": 0, "studentized": 0}
    runs = 100
    for i in range(runs):
        xa, xb = [rng.normal(0, 0.05, 400)], [rng.normal(0, 1.0, 20)]
        rejected["registered"] += difference_of_changes(xa, xb, n_resamples=499, seed=i)["p"] < 0.05
        rejected["welch"] += posthoc.welch(xa[0], xb[0])["p"] < 0.05
        rejected["studentized"] += posthoc.studentized_permutation(
            xa, xb, seed=i, n_resamples=499)["p"] < 0.05
    assert rejected["registered"] / runs > 0.4
    assert rejected["welch"] / runs < 0.12
    assert rejected["studentized"] / runs < 0.12


def run(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        run_main(lambda: posthoc.main([str(a) for a in argv]))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_a_missing_seed_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    code, _, err = run(["--seeds", "31,99", "--output-dir", out], capsys)
    assert code == 2 and "--seeds: no seed folder for 99" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_committed_tables_are_what_the_committed_results_give(tmp_path, capsys):
    committed = ROOT / "results" / "science-v3" / "posthoc"
    code, out, err = run(["--output-dir", tmp_path], capsys)
    assert code == 0, err
    fresh = json.loads((tmp_path / "forgetting_tests.json").read_text())
    assert fresh == json.loads((committed / "forgetting_tests.json").read_text())
    assert out == (committed / "forgetting_tests.md").read_text()
    # the registered columns are the pooled report's own
    claims = {c["claim"]: c for c in json.loads(
        (ROOT / "results" / "science-v3" / "pooled.json").read_text())["claims"]}
    for d in fresh["differences"]:
        pooled = claims[d["claim"]]["pooled"]
        assert d["delta"] == pooled["delta"] and d["registered"]["p"] == pooled["p"]
        assert d["registered"]["ci_low"] == pooled["ci_low"]
