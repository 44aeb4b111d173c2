"""demo.py's settings for the third miniature (issue 46), checked on the commands its stages
would run and on the retention set it builds, without running a model: several families held
out whole, and a retention set apart from the held-out mixed-style set that takes in the
never-trained families."""
import json
from dataclasses import replace

import pytest
from test_demo_v2_stages import flag, recording_demo

V3 = dict(model="tiny-tool", tools="calculator", families="tiny-tool", ood_topics=None,
          ood_families="lognormal_reliability,duane_mtbf", retention_min_score=2,
          retention_disjoint=True)


def write_rows(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def v3(tmp_path, monkeypatch):
    return recording_demo(tmp_path, monkeypatch, V3)


def test_split_holds_out_the_recipes_families_whole(v3):
    d, ran = v3
    d.data()
    split = dict(ran)["split"]
    assert flag(split, "--ood-families") == "lognormal_reliability,duane_mtbf"
    assert "--ood-topics" not in split


def screened(rows, scores):
    return [{**r, "base_score": s, "base_samples": 4} for r, s in zip(rows, scores)]


def test_retention_leaves_out_mixed_groups_and_takes_in_never_trained_families(v3, tmp_path):
    d, ran = v3
    q = lambda i, group, family: {"id": f"{group}-{i}", "group": group, "family": family,
                                  "question": "?", "answer": "1"}
    holdout = [q(0, "a", "weibull_mttf"), q(1, "a", "weibull_mttf"), q(0, "b", "weibull_mttf"),
               q(1, "b", "weibull_mttf"), q(0, "c", "series_parallel")]
    ood = [q(0, "o1", "duane_mtbf"), q(1, "o1", "duane_mtbf"), q(0, "o2", "duane_mtbf"),
           q(0, "o3", "lognormal_reliability")]
    write_rows(tmp_path / "data" / "holdout.jsonl", holdout)
    write_rows(tmp_path / "data" / "ood.jsonl", ood)
    # holdout: a-1 mixed (3 of 4) takes a-0 (4 of 4) with it; b right; c wrong every time
    h = screened(holdout, [4, 3, 4, 4, 0])
    write_rows(tmp_path / "screen_holdout" / "mixed.jsonl", [h[1]])
    write_rows(tmp_path / "screen_holdout" / "non_mixed.jsonl", [h[0], *h[2:]])
    # ood: o1-1 mixed (2 of 4) takes o1-0 with it; o2 right; o3 wrong
    o = screened(ood, [4, 2, 4, 0])
    write_rows(tmp_path / "screen_ood" / "mixed.jsonl", [o[1]])
    write_rows(tmp_path / "screen_ood" / "non_mixed.jsonl", [o[0], *o[2:]])
    d.screen()
    assert [stage for stage, _ in ran] == ["screen_holdout", "screen", "screen_ood"]
    assert flag(dict(ran)["screen_ood"], "--dataset") == str(tmp_path / "data" / "ood.jsonl")
    kept = [json.loads(line) for line in (tmp_path / "data" / "retention.jsonl").open()]
    assert [r["id"] for r in kept] == ["b-0", "b-1", "o2-0"]
    assert all(r["base_score"] == 4 for r in kept)


def test_without_retention_disjoint_the_ood_split_is_not_screened(v3, tmp_path):
    d, ran = v3
    d.cfg = replace(d.cfg, retention_disjoint=False, retention_min_score=None)
    d.screen()
    assert [stage for stage, _ in ran] == ["screen_holdout", "screen"]
