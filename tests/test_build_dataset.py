"""The build_dataset.py command line: generate (determinism, the 866-row master set), split
(group hygiene, OOD families), stats, validate, families, and bad input (one line, exit 2,
no file written)."""
import contextlib
import importlib.util
import io
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, SEED_DATA

from relrl.grading.scoring import grade
from relrl.runtime.cli import run_main

SCRIPT = ROOT / "generators" / "build_dataset.py"
_spec = importlib.util.spec_from_file_location("build_dataset", SCRIPT)
build_dataset = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_dataset)


def run(*args):
    """The script's main() in this process (as `python build_dataset.py ARGS` would run it)."""
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["build_dataset.py", *map(str, args)]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            run_main(build_dataset.main)
    except SystemExit as exc:
        code = exc.code or 0
    finally:
        sys.argv = argv
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def run_script(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def rows_of(path):
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("gen") / "small.jsonl"
    assert run("generate", "--n", 150, "--seed", 4, "--out", path).returncode == 0
    return path


def test_master_set_of_866_rows(tmp_path):
    out = tmp_path / "master.jsonl"
    result = run_script("generate", "--n", 866, "--seed", 0, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "wrote 866 rows" in result.stdout
    rows = rows_of(out)
    assert len(rows) == 866
    assert len({r["family"] for r in rows}) >= 30 and len({r["topic"] for r in rows}) >= 9
    assert len({r["question"] for r in rows}) == 866
    assert all(grade(r["reasoning"], r["answer"]).correct for r in rows)


def test_same_seed_same_bytes(tmp_path, small):
    again = tmp_path / "again.jsonl"
    assert run("generate", "--n", 150, "--seed", 4, "--out", again).returncode == 0
    assert again.read_bytes() == small.read_bytes()
    other = tmp_path / "other.jsonl"
    assert run("generate", "--n", 150, "--seed", 5, "--out", other).returncode == 0
    assert other.read_bytes() != small.read_bytes()


def test_generate_filters(tmp_path):
    out = tmp_path / "f.jsonl"
    result = run("generate", "--n", 40, "--seed", 1, "--out", out, "--topics", "spares,growth",
                 "--difficulty", "2,3", "--paraphrases", 0)
    assert result.returncode == 0, result.stderr
    rows = rows_of(out)
    assert {r["topic"] for r in rows} == {"spares", "growth"}
    assert {r["difficulty"] for r in rows} <= {2, 3}
    assert len({r["group"] for r in rows}) == 40


@pytest.mark.parametrize("args, message", [
    (["--n", "0"], "--n must be >= 1"),
    (["--n", "ten"], "--n must be an integer"),
    (["--seed", "1.5"], "--seed must be an integer"),
    (["--seed", "-3"], "--seed must be >= 0"),
    (["--families", "bridge,nope"], "unknown family nope"),
    (["--topics", "astrology"], "unknown topic astrology"),
    (["--difficulty", "4"], "--difficulty: levels are 1, 2 and 3"),
    (["--paraphrases", "-1"], "--paraphrases must be >= 0"),
])
def test_bad_generate_input_writes_nothing(tmp_path, args, message):
    out = tmp_path / "out.jsonl"
    result = run("generate", "--out", out, *args)
    assert result.returncode == 2
    assert result.stderr.startswith("error:") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_output_in_missing_folder(tmp_path):
    result = run_script("generate", "--n", 5, "--out", tmp_path / "missing" / "x.jsonl")
    assert result.returncode == 2 and "does not exist" in result.stderr
    assert list(tmp_path.iterdir()) == []
    result = run("generate", "--n", 5, "--out", tmp_path)
    assert result.returncode == 2 and "is a folder" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_exclude_file_must_be_readable(tmp_path):
    result = run("generate", "--n", 5, "--out", tmp_path / "x.jsonl", "--exclude",
                 tmp_path / "missing.jsonl")
    assert result.returncode == 2 and "missing.jsonl: no such file" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_split_by_group(tmp_path, small):
    result = run("split", small, "--out-dir", tmp_path, "--seed", 3, "--val-frac", 0.2,
                 "--holdout-frac", 0.2)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert set(summary) == {"train", "val", "holdout"}
    splits = {name: rows_of(tmp_path / f"{name}.jsonl") for name in summary}
    owners = {}
    for name, rows in splits.items():
        assert summary[name]["rows"] == len(rows)
        for row in rows:
            assert owners.setdefault(row["group"], name) == name, "a group crosses splits"
    assert sorted(r["id"] for rows in splits.values() for r in rows) == \
        sorted(r["id"] for r in rows_of(small))
    before = {name: (tmp_path / f"{name}.jsonl").read_bytes() for name in summary}
    assert run("split", small, "--out-dir", tmp_path, "--seed", 3, "--val-frac", 0.2,
               "--holdout-frac", 0.2).returncode == 0
    assert before == {name: (tmp_path / f"{name}.jsonl").read_bytes() for name in summary}


def test_split_holds_out_families(tmp_path, small):
    families = sorted({r["family"] for r in rows_of(small)})[:2]
    result = run("split", small, "--out-dir", tmp_path, "--ood-families", ",".join(families))
    assert result.returncode == 0, result.stderr
    ood = rows_of(tmp_path / "ood.jsonl")
    assert {r["family"] for r in ood} == set(families)
    for name in ("train", "val", "holdout"):
        assert not {r["family"] for r in rows_of(tmp_path / f"{name}.jsonl")} & set(families)


@pytest.mark.parametrize("args, message", [
    (["--ood-families", "bridge_of_sighs"], "no rows of bridge_of_sighs"),
    (["--val-frac", "1.5"], "--val-frac must be in [0, 1)"),
    (["--val-frac", "0.6", "--holdout-frac", "0.5"], "must be below 1"),
    (["--ood-families", "bridge", "--ood-topics", "spares"], "not allowed with argument"),
])
def test_bad_split_input_writes_nothing(tmp_path, small, args, message):
    out = tmp_path / "splits"
    out.mkdir()
    result = run("split", small, "--out-dir", out, *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert list(out.iterdir()) == []


def test_split_needs_an_existing_folder(tmp_path, small):
    result = run("split", small, "--out-dir", tmp_path / "nope")
    assert result.returncode == 2 and "does not exist" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_stats_counts(small):
    result = run("stats", small)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    rows = rows_of(small)
    assert stats["rows"] == len(rows) == 150
    assert stats["groups"] == len({r["group"] for r in rows})
    for field, key in (("topic", "by_topic"), ("family", "by_family"),
                       ("difficulty", "by_difficulty")):
        assert sum(stats[key].values()) == 150
        some = rows[0][field]
        assert stats[key][str(some)] == sum(r[field] == some for r in rows)


def test_validate_prints_one_summary(tmp_path, small):
    result = run("validate", small)
    assert result.returncode == 0
    summary = json.loads(result.stdout)
    assert (summary["rows"], summary["usable_numeric_rows"], summary["skipped"]) == (150, 150, [])
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(json.dumps({"question": "q1", "answer": "0.5"}) + "\n"
                     + json.dumps({"question": "q2", "answer": "a lot"}) + "\n", encoding="utf-8")
    summary = json.loads(run("validate", mixed).stdout)
    assert summary["usable_numeric_rows"] == 1 and summary["skipped"][0]["line"] == 2


def test_validate_malformed_json_exits_2(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "1"}) + "\n{oops\n", encoding="utf-8")
    result = run("validate", bad)
    assert result.returncode == 2
    assert "bad.jsonl:2: malformed JSON" in result.stderr and result.stdout == ""


@pytest.mark.skipif(not (SEED_DATA / "holdout_54q.jsonl").exists(), reason="seed data not here")
def test_validate_reads_the_study_holdout():
    summary = json.loads(run("validate", SEED_DATA / "holdout_54q.jsonl").stdout)
    assert (summary["rows"], summary["usable_numeric_rows"]) == (54, 54)


def test_family_table_is_documented():
    result = run("families")
    assert result.returncode == 0
    table = (ROOT / "generators" / "FAMILIES.md").read_text(encoding="utf-8")
    assert result.stdout.strip() in table, "regenerate the table: build_dataset.py families"


def test_validate_exits_non_zero_when_no_row_is_usable(tmp_path):
    useless = tmp_path / "useless.jsonl"
    useless.write_text(json.dumps({"question": "q1", "answer": "a lot"}) + "\n"
                       + json.dumps({"answer": "1"}) + "\n", encoding="utf-8")
    result = run("validate", useless)
    assert result.returncode == 2
    assert json.loads(result.stdout)["usable_numeric_rows"] == 0  # the summary still says why
    assert result.stderr.strip() == f"error: {useless}: no usable row (2 read, all skipped)"


def test_validate_reports_a_file_that_is_not_utf8(tmp_path):
    latin = tmp_path / "latin1.jsonl"
    latin.write_bytes(json.dumps({"question": "Température 85 °C?", "answer": "3"},
                                 ensure_ascii=False).encode("latin-1") + b"\n")
    result = run("validate", latin)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "latin1.jsonl: not UTF-8 text" in result.stderr
