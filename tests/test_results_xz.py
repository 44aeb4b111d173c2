"""The xz records layout (--records xz, the layout results/ commits): X.json beside
X.records.json.xz, read back exactly, the same bytes for the same records, refused with one line
naming the file when its records are foreign, missing, corrupt or inflate too far; gzip files
read as before; evaluation/recompress_results.py turns gzip result files into xz ones."""
import argparse
import gzip
import hashlib
import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation import recompress_results
from relrl.data.dataset_io import DatasetError
from relrl.evaluation import results_io
from relrl.evaluation.model_results import compare_models, model_result
from relrl.evaluation.results_io import (add_records_arg, read_result, records_layout, records_path,
                                         write_result)
from relrl.evaluation.settings import EvalSettings

ROOT = Path(__file__).resolve().parents[1]


def model(label: str, correct: list[bool], adapter: str | None = None) -> dict:
    # each completion twice, as a tool model's record holds it (response and transcript)
    records = [{"id": f"q{i}", "question": f"q{i}?", "target": "1", "extracted": "1", "value": 1.0,
                "correct": c, "truncated": False, "reward": float(c),
                "response": f"step {i}: « \\boxed{{1}} »", "transcript": f"step {i}: « \\boxed{{1}} »",
                "pass_count": int(c), "samples": 1} for i, c in enumerate(correct)]
    return model_result(records, label=label, model_path="tiny", adapter=adapter, dataset="d",
                        fingerprint="f", settings=EvalSettings())


def pair() -> dict:
    return compare_models(model("base", [True, False, False, True]),
                          model("exp7", [True, True, False, True], adapter="runs/exp7/best"),
                          n_boot=50)


def refusal(path: Path) -> str:
    with pytest.raises(DatasetError) as info:
        read_result(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def reseal(path: Path, blob: bytes) -> None:
    """Put `blob` in as path's xz records, the summary naming its SHA-256 (past the check)."""
    records_path(path, "xz").write_bytes(blob)
    summary = json.loads(path.read_text())
    summary["records"]["sha256"] = hashlib.sha256(blob).hexdigest()
    path.write_text(json.dumps(summary))


# ------------------------------------------------------------------------------ the layout

def test_xz_records_sit_beside_the_summary_and_read_back_exactly(tmp_path):
    result, path = pair(), tmp_path / "eval_x.json"
    write_result(path, result, records="xz")
    assert records_path(path, "xz") == tmp_path / "eval_x.records.json.xz"
    assert not records_path(path, "gzip").exists()
    summary = json.loads(path.read_text())
    assert not {"base_results", "ft_results"} & set(summary)
    lists = json.loads(lzma.decompress(records_path(path, "xz").read_bytes(), format=lzma.FORMAT_XZ))
    assert summary["records"] == {
        "lists": ["base_results", "ft_results", "base.results", "finetuned.results"],
        "sha256": hashlib.sha256(records_path(path, "xz").read_bytes()).hexdigest(),
        "format": "xz"}
    assert summary["records"]["lists"] == list(lists) and records_layout(summary) == "xz"
    assert read_result(path) == result


def test_the_same_records_give_the_same_bytes_whatever_the_file_is_called(tmp_path):
    write_result(tmp_path / "a.json", pair(), records="xz")
    write_result(tmp_path / "b.json", pair(), records="xz")
    before = [p.read_bytes() for p in (tmp_path / "a.json", records_path(tmp_path / "a.json", "xz"))]
    assert before == [p.read_bytes() for p in (tmp_path / "b.json", records_path(tmp_path / "b.json", "xz"))]
    write_result(tmp_path / "a.json", read_result(tmp_path / "a.json"), records="xz")
    assert before == [p.read_bytes() for p in (tmp_path / "a.json", records_path(tmp_path / "a.json", "xz"))]


def test_a_write_removes_the_records_file_any_other_layout_left(tmp_path):
    path = tmp_path / "x.json"
    write_result(path, pair(), records="gzip")
    write_result(path, pair(), records="xz")
    assert not records_path(path, "gzip").exists() and read_result(path) == pair()
    write_result(path, pair(), records="gzip")
    assert not records_path(path, "xz").exists() and read_result(path) == pair()
    write_result(path, pair(), records="xz")
    write_result(path, pair())
    assert not any(p.exists() for p in results_io.records_paths(path))


def test_a_gzip_summary_has_no_format_and_reads_as_before(tmp_path):
    path = tmp_path / "g.json"
    write_result(path, pair(), records="gzip")
    summary = json.loads(path.read_text())
    assert list(summary["records"]) == ["lists", "sha256"] and records_layout(summary) == "gzip"
    lists = json.loads(gzip.decompress(records_path(path).read_bytes()))
    assert list(lists) == summary["records"]["lists"] and read_result(path) == pair()


def test_records_offers_xz():
    parser = argparse.ArgumentParser()
    add_records_arg(parser)
    assert parser.parse_args(["--records", "xz"]).records == "xz"
    with pytest.raises(ValueError, match="records: one of inline, gzip, xz"):
        write_result(Path("unused.json"), pair(), records="zip")


# ------------------------------------------------------------------------ refused records

def test_foreign_and_missing_xz_records_are_refused_in_one_line(tmp_path):
    write_result(tmp_path / "a.json", pair(), records="xz")
    write_result(tmp_path / "b.json", model("base", [False]), records="xz")
    file = records_path(tmp_path / "a.json", "xz")
    records_path(tmp_path / "b.json", "xz").replace(file)
    assert refusal(tmp_path / "a.json") == (
        f"{file}: not the records a.json was written with (checksum differs); rewrite both from "
        "one run")
    file.unlink()
    assert refusal(tmp_path / "a.json") == (
        f"{tmp_path / 'a.json'}: its records file a.records.json.xz is missing")


def test_xz_records_that_inflate_past_the_bound_are_refused(tmp_path, monkeypatch):
    path = tmp_path / "m.json"
    write_result(path, {"kind": "model_result", "results": [{"q": 1}] * 400}, records="xz")
    monkeypatch.setattr(results_io, "MAX_BYTES", 1000)
    assert refusal(path) == f"{records_path(path, 'xz')}: inflates past the 1000 bytes allowed"
    monkeypatch.setattr(results_io, "MAX_BYTES", 1 << 20)
    bomb = lzma.compress(b'{"results": [' + b" " * (4 << 20) + b"]}", format=lzma.FORMAT_XZ)
    reseal(path, bomb)
    assert refusal(path) == f"{records_path(path, 'xz')}: inflates past the {1 << 20} bytes allowed"


def test_a_dictionary_past_the_memory_bound_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "m.json"
    write_result(path, {"kind": "model_result", "results": [{"q": 1}]}, records="xz")
    monkeypatch.setattr(results_io, "XZ_MEMLIMIT", 1 << 20)  # preset 9 asks for 64 MiB
    assert refusal(path) == (f"{records_path(path, 'xz')}: unreadable xz-compressed JSON (Memory "
                             "usage limit exceeded)")


@pytest.mark.parametrize("damage, why", [
    (lambda blob: blob[:len(blob) // 2], "it ends mid-stream"),
    (lambda blob: blob + b"\0" * 8, "bytes after its stream"),
    (lambda blob: gzip.compress(lzma.decompress(blob), mtime=0), "Input format not supported by decoder"),
    (lambda blob: blob[:40] + bytes(b ^ 0x55 for b in blob[40:80]) + blob[80:], "Corrupt input data"),
], ids=["truncated", "trailing", "not-xz", "corrupt"])
def test_a_damaged_xz_is_refused_in_one_line(tmp_path, damage, why):
    path = tmp_path / "m.json"
    write_result(path, pair(), records="xz")
    reseal(path, damage(records_path(path, "xz").read_bytes()))
    assert refusal(path) == f"{records_path(path, 'xz')}: unreadable xz-compressed JSON ({why})"


def test_an_unknown_records_format_is_refused(tmp_path):
    path = tmp_path / "m.json"
    write_result(path, pair(), records="xz")
    summary = json.loads(path.read_text())
    summary["records"]["format"] = "zstd"
    path.write_text(json.dumps(summary))
    assert refusal(path) == f"{path}: its records are in an unknown format 'zstd' (known: gzip, xz)"


# ------------------------------------------------------------- evaluation/recompress_results.py

def gzip_folder(root: Path) -> dict[Path, str]:
    """Two gzip results a folder apart, an inline one, and a stage ledger naming one by hash:
    each result file's JSON text as read_result gives it."""
    write_result(root / "eval" / "heldout" / "sft.json", pair(), records="gzip")
    write_result(root / "eval" / "holdout" / "base.json", model("base", [True, False]), records="gzip")
    write_result(root / "inline.json", model("plain", [True]))
    sft = root / "eval" / "heldout" / "sft.json"
    ledger = {"eval_holdout": {"inputs": {"command": ["x"], "files": {
        str(sft): hashlib.sha256(sft.read_bytes()).hexdigest(), "other.json": "0" * 64}},
        "finished": True, "code": "abc"}}
    (root / "stage_inputs.json").write_text(json.dumps(ledger, indent=2) + "\n")
    return {p: json.dumps(read_result(p)) for p in sorted(root.rglob("*.json"))
            if p.name != "stage_inputs.json"}


def snapshot(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_check_lists_the_changes_and_writes_nothing(tmp_path, capsys):
    gzip_folder(tmp_path)
    before = snapshot(tmp_path)
    assert recompress_results.main([str(tmp_path), "--check"]) == 0
    out = capsys.readouterr().out
    assert f"would convert {tmp_path / 'eval/heldout/sft.json'}: " in out
    assert f"would convert {tmp_path / 'eval/holdout/base.json'}: " in out
    assert "inline.json" not in out and "2 result files would go from gzip to xz" in out
    assert f"{tmp_path / 'stage_inputs.json'}: its hash of sft.json would be updated" in out
    assert snapshot(tmp_path) == before


def test_gzip_results_become_xz_and_read_back_identical(tmp_path, capsys):
    expected = gzip_folder(tmp_path)
    inline = (tmp_path / "inline.json").read_bytes()
    assert recompress_results.main([str(tmp_path)]) == 0
    for path, text in expected.items():
        assert json.dumps(read_result(path)) == text
    for name in ("eval/heldout/sft.json", "eval/holdout/base.json"):
        path = tmp_path / name
        assert records_layout(json.loads(path.read_text())) == "xz"
        assert records_path(path, "xz").is_file() and not records_path(path, "gzip").exists()
    assert (tmp_path / "inline.json").read_bytes() == inline
    assert not list(tmp_path.rglob(".recompress-*"))  # no staging folder left
    # the ledger names the new summary's hash, so the stage that read it stays done
    files = json.loads((tmp_path / "stage_inputs.json").read_text())["eval_holdout"]["inputs"]["files"]
    sft = tmp_path / "eval" / "heldout" / "sft.json"
    assert files == {str(sft): hashlib.sha256(sft.read_bytes()).hexdigest(), "other.json": "0" * 64}
    assert "2 result files went from gzip to xz" in capsys.readouterr().out
    again = snapshot(tmp_path)  # nothing left in gzip: a second run changes nothing
    assert recompress_results.main([str(tmp_path)]) == 0 and snapshot(tmp_path) == again


def test_a_file_that_reads_back_differently_is_left(tmp_path, capsys, monkeypatch):
    expected = gzip_folder(tmp_path)
    before = snapshot(tmp_path)
    monkeypatch.setattr(recompress_results, "canonical", lambda result: str(id(result)))
    assert recompress_results.main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"left {tmp_path / 'eval/heldout/sft.json'}: its xz layout does not read back" in out
    assert snapshot(tmp_path) == before and not list(tmp_path.rglob(".recompress-*"))
    assert {p: json.dumps(read_result(p)) for p in expected} == expected


def run_script(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "evaluation" / "recompress_results.py"),
                           *map(str, args)], capture_output=True, text=True, cwd=ROOT, check=False)


def test_bad_input_is_one_line_and_exit_status_2_before_anything_is_written(tmp_path):
    gzip_folder(tmp_path / "good")
    missing = tmp_path / "missing"
    done = run_script(tmp_path / "good", missing)
    assert (done.returncode, done.stderr, done.stdout) == (2, f"error: {missing}: no such folder\n", "")
    before = snapshot(tmp_path)
    broken = tmp_path / "good" / "eval" / "holdout" / "base.json"
    records_path(broken).unlink()
    done = run_script(tmp_path / "good")
    assert (done.returncode, done.stderr) == (
        2, f"error: {broken}: its records file base.records.json.gz is missing\n")
    assert snapshot(tmp_path) == {p: b for p, b in before.items() if p != records_path(broken)}
