"""The committed replication results are what their own JSON files give: each pooled number is
recomputed from the seed folders' per-question records and GRPO statistics by the one report
generator (study.pooled_report, study.replication), and pooled.json and report.md are what it
writes, byte for byte."""
import json
import shutil
from pathlib import Path

import pytest

import demo
from study import pooled_report
from study.demo_report import splice_results_md

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = sorted(p.parent for pattern in ("*/pooled.json", "*/development/pooled.json")
                 for p in (ROOT / "results").glob(pattern))


def assert_close(fresh, saved, where="pooled.json"):
    if isinstance(saved, dict):
        assert set(saved) <= set(fresh), f"{where}: missing {set(saved) - set(fresh)}"
        for key, value in saved.items():
            assert_close(fresh[key], value, f"{where}.{key}")
    elif isinstance(saved, list):
        assert len(fresh) == len(saved), where
        for i, (a, b) in enumerate(zip(fresh, saved)):
            assert_close(a, b, f"{where}[{i}]")
    elif isinstance(saved, float):
        assert fresh == pytest.approx(saved, rel=1e-9, abs=1e-12), where
    else:
        assert fresh == saved, where


def test_there_are_committed_results_to_check():
    assert {"dev-100", "demo-replication", "development"} <= {f.name for f in FOLDERS}


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_pooled_json_and_report_regenerate_byte_for_byte(folder):
    """Every committed pooled.json and report.md is what study.pooled_report writes from the
    seed folders now, byte for byte: a change to the report code that would change a committed
    report shows here, and the files are regenerated with it."""
    seeds = json.loads((folder / "pooled.json").read_text())["seeds"]
    fresh = pooled_report.texts(folder, seeds)
    # number by number first, so a difference names its key
    assert_close(json.loads(fresh["pooled.json"]), json.loads((folder / "pooled.json").read_text()))
    assert fresh["pooled.json"] == (folder / "pooled.json").read_text()
    assert fresh["report.md"] == (folder / "report.md").read_text()


# RESULTS.md quotes each replication's pooled report between its markers
QUOTED = {"demo-replication": (demo.REPLICATION_START, demo.REPLICATION_END),
          "demo-replication-v2": ("<!-- replication-v2-results:start -->",
                                  "<!-- replication-v2-results:end -->"),
          "science-v3": ("<!-- science-v3-results:start -->", "<!-- science-v3-results:end -->")}


@pytest.mark.parametrize("name", QUOTED)
def test_results_md_quotes_the_replication_report_verbatim(tmp_path, name):
    report = ROOT / "results" / name / "report.md"
    text = (ROOT / "RESULTS.md").read_text()
    copy = tmp_path / "RESULTS.md"
    copy.write_text(text)
    splice_results_md(copy, report.read_text(), *QUOTED[name])
    assert copy.read_text() == text


def test_pooled_report_cli_rewrites_a_committed_pooled_report(tmp_path):
    """study.pooled_report pools seeds run one at a time: on a copy of the redone design's
    development folder it writes the committed pooled.json and report.md again."""
    source = ROOT / "results" / "demo-replication-v2" / "development"
    copy = tmp_path / "development"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("work"))
    (copy / "pooled.json").unlink()
    (copy / "report.md").unlink()
    assert pooled_report.main([str(copy), "--seeds", "100"]) == 0
    assert (copy / "pooled.json").read_text() == (source / "pooled.json").read_text()
    assert (copy / "report.md").read_text() == (source / "report.md").read_text()
    with pytest.raises(pooled_report.UsageError, match="no seed folder for seed.s. 7"):
        pooled_report.main([str(copy), "--seeds", "100,7"])
