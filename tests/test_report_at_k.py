"""mean@k and pass@K with intervals over paraphrase groups in the study's reports (issue #31):
the replication report pooled over seeds (groups resampled within their seed) and the demo
report for compare files older than compare_results' table, checked against values worked out
by hand on hand-made result files; old files without records show "-"."""
import json

import pytest

from relrl.evaluation.clustered_stats import at_k_interval
from study import demo_report, reanalysis
from study.replication.baselines import at_k
from study.replication.design import FIRST
from study.replication.sections import at_k_table


def rec(qid, group, passes, samples=4):
    return {"id": qid, "group": group, "samples": samples, "pass_count": passes}


def write_pair(folder, stem, base, ft):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps(
        {"kind": "pair_result", "base": {"results": base}, "finetuned": {"results": ft}}))


def rows_of(lines, heading):
    """The body rows (cells) of the first Markdown table after the line starting `heading`."""
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[first + 2:end]]


def test_strata_keep_same_named_groups_apart_and_resample_within_each():
    # stratum a: g1 = 1.0, g2 = 0.0; stratum b: one group "g1" = 0.5 (two questions)
    recs = [rec("q1", "g1", 4), rec("q2", "g2", 0), rec("q3", "g1", 2), rec("q4", "g1", 2)]
    strata = ["a", "a", "b", "b"]
    cell = at_k_interval(recs, 1, "mean", n_boot=4000, strata=strata)
    assert cell["groups"] == 3 and cell["value"] == pytest.approx(0.5)
    # b's only group is always drawn; a draws {g1,g1}, {g1,g2}, {g2,g2} with 1/4, 1/2, 1/4:
    # (1+1+0.5+0.5)/4, 0.5, (0+0+0.5+0.5)/4
    assert (cell["low"], cell["high"]) == pytest.approx((0.25, 0.75))
    merged = at_k_interval(recs, 1, "mean", n_boot=4000)  # no strata: "g1" is one group of 3
    assert merged["groups"] == 2


def write_replication(root):
    """Seed 2: g1 (q1, 4 of 4 right), g2 (q2, none); seed 3: g1 (q3, q4, 2 of 4 each). The base
    scores two less on every question (at least 0); exp7 final's file predates stored records."""
    seeds = {2: [rec("q1", "g1", 4), rec("q2", "g2", 0)],
             3: [rec("q3", "g1", 2), rec("q4", "g1", 2)]}
    for seed, ft in seeds.items():
        folder = root / f"seed-{seed}" / "eval" / "heldout"
        base = [{**r, "pass_count": max(r["pass_count"] - 2, 0)} for r in ft]
        write_pair(folder, "grpo_exp7_best", base, ft)
        (folder / "grpo_exp7_final.json").write_text(json.dumps({"kind": "pair_result"}))
    return {seed: root / f"seed-{seed}" for seed in seeds}


def test_replication_pools_at_k_over_seeds_with_groups_resampled_within_each(tmp_path):
    by_set = at_k(write_replication(tmp_path), FIRST.guess_sets, FIRST.models)
    assert list(by_set) == ["heldout"]
    exp7 = by_set["heldout"]["GRPO exp7 best"]
    # mean@k: (1 + 0 + 1/2 + 1/2) / 4; seed 2's draws give 3/4, 1/2, 1/4 as in the test above.
    # pass@4: 1, 0, 1, 1 -> 3/4; draws (1+1+1+1)/4, 3/4, (0+0+1+1)/4
    assert exp7 == {"samples": 4,
                    "mean@k": {"value": 0.5, "low": 0.25, "high": 0.75, "groups": 3},
                    "pass@4": {"value": 0.75, "low": 0.5, "high": 1.0, "groups": 3}}
    assert by_set["heldout"]["GRPO exp7 final"] is None  # no records at either seed
    assert by_set["heldout"]["SFT warm start"] is None  # no file
    lines = at_k_table(by_set)
    body = rows_of(lines, "## mean@k and pass@K (pooled over seeds)")
    # base: 2, 0 | 0, 0 of 4 -> mean@k 1/8, draws 1/4, 1/8, 0; pass@4 1, 0 | 0, 0 -> 1/4
    assert body[0] == ["heldout", "base", "4", "3", "12.5% (0.0%-25.0%)", "25.0% (0.0%-50.0%)"]
    assert ["heldout", "GRPO exp7 best", "4", "3", "50.0% (25.0%-75.0%)",
            "75.0% (50.0%-100.0%)"] in body
    assert ["heldout", "GRPO exp7 final", "-", "-", "-", "-"] in body
    assert len(body) == len(FIRST.models)


def test_a_pooled_result_without_at_k_renders_no_such_section():
    assert at_k_table({}) == []


def write_demo(out, compare_md):
    """Held-out set, one sample a question: base 1, 0 (g1) and 0, 0 (g2); exp7 best 1, 1, 1, 0;
    SFT listed in the compare table without a file; exp7 final's file has no records."""
    folder = out / "eval" / "heldout"
    base = [rec("q1", "g1", 1, 1), rec("q2", "g1", 0, 1), rec("q3", "g2", 0, 1), rec("q4", "g2", 0, 1)]
    ft = [{**r, "pass_count": p} for r, p in zip(base, (1, 1, 1, 0))]
    write_pair(folder, "grpo_exp7_best", base, ft)
    (folder / "grpo_exp7_final.json").write_text(json.dumps({"kind": "pair_result"}))
    rows = [{"model": m} for m in ("base", "GRPO exp7 best", "GRPO exp7 final", "SFT warm start")]
    (out / "compare_heldout.json").write_text(json.dumps({"rows": rows}))
    return compare_md


def test_demo_report_adds_at_k_from_records_under_an_old_compare_table(tmp_path):
    md = write_demo(tmp_path, "## Held-out\n\n| Model | Correct / n |")
    lines = demo_report.at_k_lines(tmp_path, "heldout", md)
    # base: groups 1/2 and 0 -> 1/4, draws 1/2, 1/4, 0; exp7 best: groups 1 and 1/2 -> 3/4
    assert rows_of(lines, "### mean@k and pass@K") == [
        ["base", "1", "2", "25.0% (0.0%-50.0%)", "-"],
        ["GRPO exp7 best", "1", "2", "75.0% (50.0%-100.0%)", "-"],
        ["GRPO exp7 final", "-", "-", "-", "-"],
        ["SFT warm start", "-", "-", "-", "-"]]
    assert "predates mean@k" in lines[-1]


def test_demo_report_adds_nothing_when_compare_results_already_shows_at_k(tmp_path):
    md = write_demo(tmp_path, "## Held-out\n\n### mean@k and pass@k, with 95% intervals over "
                              "paraphrase groups\n\n| Model | Groups | mean@k |")
    assert demo_report.at_k_lines(tmp_path, "heldout", md) == []


RELIABILITY = "A pump has a constant failure rate. What is its reliability at 910 hours?"


def graded(qid, group, passes, samples=2, target=0.96):
    """A committed record: `passes` of its samples answered the target, the rest 0.1."""
    return {**rec(qid, group, passes, samples), "question": RELIABILITY, "target": str(target),
            "family": "f", "correct": passes > 0,
            "completions": [{"value": target if k < passes else 0.1, "correct": k < passes,
                             "truncated": False, "response": ""} for k in range(samples)]}


def test_the_reanalysis_shows_at_k_per_rule_pooled_over_seeds_and_old_files_render_without():
    # the layout of the replication test above at K = 2: seed 0 a (2 of 2) and b (0 of 2),
    # seed 1 a (1 of 2 twice); both rules grade these answers alike
    train = [{"id": f"t{i}", "group": f"t{i}", "question": RELIABILITY, "answer": "0.5",
              "family": "f"} for i in range(4)]
    per_seed = {0: [graded("q0", "a", 2), graded("q1", "b", 0)],
                1: [graded("q2", "a", 1), graded("q3", "a", 1)]}
    seeds = {seed: {"sets": {"heldout": {m: recs for m in reanalysis.MODELS}}, "train_rows": train}
             for seed, recs in per_seed.items()}
    sets = reanalysis.reanalyse(seeds)
    for rule in reanalysis.RULES:
        assert sets["heldout"]["rules"][rule]["at_k"]["base"] == {
            "samples": 2, "mean@k": {"value": 0.5, "low": 0.25, "high": 0.75, "groups": 3},
            "pass@2": {"value": 0.75, "low": 0.5, "high": 1.0, "groups": 3}}
    lines = reanalysis.folder_tables({"label": "L", "sets": sets})
    body = rows_of(lines, "| Set | Rule | Metric |")
    assert body[:2] == [["held-out mixed-style", "study", "mean@k"] + ["50.0% (25.0%-75.0%)"] * 4,
                        ["held-out mixed-style", "study", "pass@2"] + ["75.0% (50.0%-100.0%)"] * 4]
    for rule in sets["heldout"]["rules"].values():
        del rule["at_k"]  # a reanalysis.json written before issue #31
    assert not any(line.startswith("| Set | Rule | Metric |")
                   for line in reanalysis.folder_tables({"label": "L", "sets": sets}))
