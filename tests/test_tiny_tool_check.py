"""benchmarks/tiny_tool_check.py's family table: rank correlation over the questions solved at
least once (issue 29's criterion), through relrl.evaluation.strata's pair and correlation."""
import pytest

from benchmarks.tiny_tool_check import family_table


def record(family, target, values, correct):
    completions = [{"value": v, "correct": c} for v, c in zip(values, correct)]
    return {"family": family, "target": str(target), "pass_count": sum(correct),
            "samples": len(correct), "completions": completions}


def test_family_table_correlates_solved_questions_only_and_needs_min_solved():
    rows = [record("a", t, [t * 1.01, t * 3], [True, False]) for t in (1, 2, 3, 4, 5, 6, 7, 8)]
    rows.append(record("a", 9, [0.5, 0.5], [False, False]))  # unsolved: left out of the rho
    rows += [record("b", t, [t], [True]) for t in (1, 2, 3)]  # too few solved for a rho
    table = family_table(rows, min_solved=8)
    assert table["a"]["solved_questions"] == 8 and table["a"]["questions"] == 9
    assert table["a"]["accuracy"] == pytest.approx(8 / 18)
    assert table["a"]["spearman"] == pytest.approx(1.0)  # medians 2.005t keep the targets' order
    assert "spearman" not in table["b"] and table["b"]["accuracy"] == 1.0
