"""The committed replication results are what their own JSON files give: each pooled number is
recomputed from the seed folders' per-question records and GRPO statistics and compared with
pooled.json, and the recomputed report with report.md."""
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
def test_pooled_numbers_and_report_are_recomputed_from_the_seed_files(folder):
    saved = json.loads((folder / "pooled.json").read_text())
    module = pooled_report.reporter(folder, saved["seeds"])
    fresh = module.pooled_results(folder, saved["seeds"])
    assert_close(fresh, saved)
    # the report as the current code writes it; sections added since (mean@k, run time) aside
    report = without_sections(module.build_report(fresh), ADDED_SINCE)
    assert without_sections((folder / "report.md").read_text(), ADDED_SINCE) == report


# Sections build_report gained after the committed reports were written (not rerun: that is
# every seed's training again); the rest of each report must still match byte for byte.
ADDED_SINCE = ("## mean@k and pass@K (pooled over seeds)", "## Run time and code")


def without_sections(text: str, headings) -> str:
    """The text without each `## heading` section (up to the next `## ` heading or the end)."""
    parts = text.split("\n## ")
    return "\n## ".join(p for p in parts if not any(("## " + p).startswith(h) for h in headings))


# RESULTS.md quotes each replication's pooled report between its markers
QUOTED = {"demo-replication": (demo.REPLICATION_START, demo.REPLICATION_END),
          "demo-replication-v2": ("<!-- replication-v2-results:start -->",
                                  "<!-- replication-v2-results:end -->")}


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
    development folder it writes the committed pooled.json's numbers and report.md again."""
    source = ROOT / "results" / "demo-replication-v2" / "development"
    copy = tmp_path / "development"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("work"))
    (copy / "pooled.json").unlink()
    (copy / "report.md").unlink()
    assert pooled_report.main([str(copy), "--seeds", "100"]) == 0
    assert_close(json.loads((copy / "pooled.json").read_text()),
                 json.loads((source / "pooled.json").read_text()))
    assert (copy / "report.md").read_text() == (source / "report.md").read_text()
    with pytest.raises(pooled_report.UsageError, match="no seed folder for seed.s. 7"):
        pooled_report.main([str(copy), "--seeds", "100,7"])
