"""The tolerance rule where data is read and where tiny's build is checked: a dataset's
`target_kind` field is validated with its file and line, and tiny's accuracy report says which
rule graded it."""
import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from relrl.data.dataset_io import DatasetError, load_dataset

ROW = {"question": "Determine the reliability of the pump.", "answer": "0.9355"}


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_target_kind_field_is_kept_and_checked(tmp_path):
    good = write(tmp_path / "good.jsonl", [{**ROW, "target_kind": "probability"},
                                           {**ROW, "target_kind": "value"}, ROW])
    assert [r.get("target_kind") for r in load_dataset(good)] == ["probability", "value", None]
    bad = write(tmp_path / "bad.jsonl", [ROW, {**ROW, "target_kind": "Probability"}])
    with pytest.raises(DatasetError, match=r"bad.jsonl:2: 'target_kind' must be one of "
                                           r"probability, value, got 'Probability'"):
        load_dataset(bad)


def test_a_bad_target_kind_stops_a_script_with_status_2(tmp_path):
    bad = write(tmp_path / "bad.jsonl", [{**ROW, "target_kind": 1}])
    out = tmp_path / "verl"
    out.mkdir()
    run = subprocess.run([sys.executable, str(ROOT / "generators" / "build_dataset.py"),
                          "export-verl", "--train", str(bad), "--out-dir", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "bad.jsonl:1: 'target_kind' must be one of probability, value, got '1'" in run.stderr
    assert not list(out.iterdir())


REPORT = {"samples_per_question": 4, "questions": 2, "overall": 0.5, "truncated": 0.0,
          "share_all_wrong": 0.5, "share_mixed": 0.0, "share_all_right": 0.5,
          "by_family": {"series": 1.0, "weibull": 0.0}, "recipe": {"version": "v2"}}


def test_tiny_build_prints_the_check_of_the_rule_asked(tmp_path):
    from relrl.models.tiny_build import RECIPE

    folder = tmp_path / f"tiny-{RECIPE.version}"
    folder.mkdir()
    (folder / "accuracy.json").write_text(json.dumps(REPORT))  # a report from before the rule
    (folder / "accuracy-complement.json").write_text(json.dumps(
        {**REPORT, "overall": 0.25, "tolerance_rule": "complement"}))

    def tiny_build(*args):
        run = subprocess.run([sys.executable, "-m", "relrl.models.tiny_build", *args], cwd=ROOT,
                             capture_output=True, text=True, timeout=120,
                             env={**os.environ, "RELRL_CACHE": str(tmp_path)})
        assert run.returncode == 0, run.stderr
        return run.stdout

    assert "overall 0.500 on 2 questions x 4 samples at T=1.0 (study tolerance rule)" \
        in tiny_build()
    assert "overall 0.250 on 2 questions x 4 samples at T=1.0 (complement tolerance rule)" \
        in tiny_build("--tolerance-rule", "complement")
