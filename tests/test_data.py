"""Dataset IO: the study's JSONL schema, errors named with their line, progress files, atomic
writes."""
import gzip
import json

import pytest
from conftest import SEED_DATA

from relrl.data.dataset_io import (
    DatasetError,
    ProgressFile,
    atomic_write_json,
    atomic_write_jsonl,
    inspect_dataset,
    load_dataset,
    questions_fingerprint,
    read_records,
)

HOLDOUT = SEED_DATA / "holdout_54q.jsonl"


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def row(question="What is R(100)?", answer="0.9945", **extra):
    return json.dumps({"question": question, "answer": answer, "answer_type": "numeric",
                       "source": "test", **extra})


@pytest.mark.skipif(not HOLDOUT.exists(), reason="seed data not here")
def test_holdout_loads_unchanged():
    original = [json.loads(line) for line in HOLDOUT.read_text(encoding="utf-8").splitlines()]
    summary = inspect_dataset(HOLDOUT).summary()
    assert (summary["rows"], summary["usable_numeric_rows"], summary["skipped"]) == (54, 54, [])
    json.dumps(summary)  # what `build_dataset.py validate` prints
    rows = load_dataset(HOLDOUT)
    assert [{k: v for k, v in r.items() if k != "id"} for r in rows] == original
    assert len({r["id"] for r in rows}) == 54


def test_malformed_json_names_its_line(tmp_path):
    path = write(tmp_path / "d.jsonl", row() + "\n" + row() + "\n{\"question\": \"q\", \n")
    with pytest.raises(DatasetError, match=r"d\.jsonl:3: malformed JSON"):
        inspect_dataset(path)


def test_malformed_json_array_names_its_line(tmp_path):
    path = write(tmp_path / "d.json", "[\n" + row() + ",\n" + row() + "\n")
    with pytest.raises(DatasetError, match=r"d\.json:\d+: malformed JSON"):
        load_dataset(path)


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_empty_file(tmp_path, text):
    with pytest.raises(DatasetError, match="the file is empty"):
        load_dataset(write(tmp_path / "d.jsonl", text))


def test_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "nope.jsonl")


def test_bad_rows_are_listed_with_line_and_reason(tmp_path):
    lines = [row(), json.dumps({"answer": "1"}), row(answer="0.9-0.95"), row(answer="n/a"),
             "", row(answer=None), "[1, 2]", row(answer=870)]
    report = inspect_dataset(write(tmp_path / "d.jsonl", "\n".join(lines) + "\n"))
    assert report.rows == 7 and len(report.usable) == 2
    skipped = {s["line"]: s["reason"] for s in report.skipped}
    assert skipped[2] == "missing 'question'"
    assert "several values" in skipped[3] and "'0.9-0.95'" in skipped[3]  # a range
    assert "non-numeric answer 'n/a'" in skipped[4]
    assert skipped[6] == "missing 'answer'"
    assert skipped[7] == "not a JSON object"
    assert report.usable[1]["answer"] == "870"  # numbers become the schema's strings


def test_load_dataset_refuses_a_bad_row_naming_its_line(tmp_path):
    path = write(tmp_path / "d.jsonl", row() + "\n" + json.dumps({"answer": "1"}) + "\n")
    with pytest.raises(DatasetError, match=r"d\.jsonl:2: missing 'question'"):
        load_dataset(path)
    rows = load_dataset(path, allow_skips=True)
    assert len(rows) == 1


def test_non_numeric_answer_names_its_line(tmp_path):
    path = write(tmp_path / "d.jsonl", row() + "\n" + row(answer="about a week") + "\n")
    with pytest.raises(DatasetError, match=r"d\.jsonl:2: non-numeric answer 'about a week'"):
        load_dataset(path)


def test_json_array_rows_carry_their_line(tmp_path):
    text = "[\n  " + row() + ",\n\n  " + json.dumps({"answer": "1"}) + "\n]\n"
    report = inspect_dataset(write(tmp_path / "d.json", text))
    assert report.rows == 2 and report.skipped == [{"line": 4, "reason": "missing 'question'"}]


def test_line_separator_characters_inside_strings(tmp_path):
    question = "A question\u2028with a line separator\x1c inside"
    path = write(tmp_path / "d.jsonl", row(question=question) + "\n")
    assert load_dataset(path)[0]["question"] == question


def test_byte_order_mark_is_tolerated(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + row().encode("utf-8") + b"\n")
    assert len(load_dataset(path)) == 1


def test_ids_are_kept_or_derived_from_the_question(tmp_path):
    path = write(tmp_path / "d.jsonl", row(id=0) + "\n" + row(question="Other?") + "\n")
    first, second = load_dataset(path)
    assert first["id"] == 0
    assert second["id"].startswith("q") and second["id"] == load_dataset(path)[1]["id"]


def test_read_records_of_jsonl(tmp_path):
    path = write(tmp_path / "d.jsonl", "\n" + json.dumps({"a": 1}) + "\n\n" + "[2]\n")
    assert list(read_records(path)) == [(2, {"a": 1}), (4, [2])]


def test_a_gzipped_jsonl_reads_as_its_text_and_a_broken_one_is_named(tmp_path):
    text = "\n" + json.dumps({"a": 1}) + "\n"
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    assert list(read_records(tmp_path / "d.jsonl.gz")) == [(2, {"a": 1})]
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(text.encode())[:12])
    (tmp_path / "plain.jsonl.gz").write_bytes(text.encode())
    for name in ("cut.jsonl.gz", "plain.jsonl.gz"):
        with pytest.raises(DatasetError, match=f"{name}: not a readable gzip file"):
            read_records(tmp_path / name).__next__()


def test_questions_fingerprint():
    a = [{"question": "q1", "answer": "1"}, {"question": "q2", "answer": "2"}]
    assert questions_fingerprint(a) == questions_fingerprint([dict(r) for r in a])
    assert questions_fingerprint(a) != questions_fingerprint(a[::-1])
    assert questions_fingerprint(a) != questions_fingerprint(a[:1] + [{"question": "q2",
                                                                        "answer": "3"}])


# ---- progress files


def test_progress_roundtrip(tmp_path):
    progress = ProgressFile(tmp_path / "p.jsonl", key="id")
    assert progress.load() == {}
    progress.append({"id": "a", "correct": True})
    progress.append({"id": 7, "correct": False})
    assert progress.load() == {"a": {"id": "a", "correct": True},
                               "7": {"id": 7, "correct": False}}


def test_progress_drops_a_truncated_last_line(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    progress = ProgressFile(path, key="id")
    progress.append({"id": "a"})
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"id": "b", "val')  # the write a kill interrupted
    assert set(progress.load()) == {"a"}
    assert "dropped a truncated last line" in capsys.readouterr().err
    progress.append({"id": "c"})  # resuming appends after the last complete line
    assert set(progress.load()) == {"a", "c"}
    assert path.read_text(encoding="utf-8").count("\n") == 2


def test_progress_corrupt_line_is_an_error(tmp_path):
    path = write(tmp_path / "p.jsonl", '{"id": "a"}\nnot json\n{"id": "b"}\n')
    with pytest.raises(DatasetError, match=r"p\.jsonl:2: corrupt progress line"):
        ProgressFile(path, key="id").load()


def test_progress_line_without_key_is_an_error(tmp_path):
    path = write(tmp_path / "p.jsonl", '{"id": "a"}\n{"other": 1}\n')
    with pytest.raises(DatasetError, match=r"p\.jsonl:2: progress line has no 'id'"):
        ProgressFile(path, key="id").load()


def test_progress_append_needs_the_key(tmp_path):
    with pytest.raises(ValueError, match="needs 'key'"):
        ProgressFile(tmp_path / "p.jsonl").append({"id": 1})


# ---- atomic writes


def test_atomic_writes_leave_no_temporary_files(tmp_path):
    atomic_write_json(tmp_path / "r.json", {"accuracy": 0.5, "name": "ü"})
    atomic_write_jsonl(tmp_path / "r.jsonl", [{"i": 1}, {"i": 2}])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.jsonl"]
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["name"] == "ü"
    assert (tmp_path / "r.jsonl").read_text(encoding="utf-8") == '{"i": 1}\n{"i": 2}\n'


def test_unserializable_result_keeps_the_old_file(tmp_path):
    path = tmp_path / "r.json"
    atomic_write_json(path, {"old": True})
    with pytest.raises(TypeError):
        atomic_write_json(path, {"new": object()})
    with pytest.raises(TypeError):
        atomic_write_jsonl(path, [{"ok": 1}, {"new": object()}])
    assert json.loads(path.read_text(encoding="utf-8")) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_interrupted_atomic_write_removes_its_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    atomic_write_json(path, {"old": True})

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr("relrl.data.dataset_io.os.replace", fail)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_json(path, {"new": True})
    assert json.loads(path.read_text(encoding="utf-8")) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_atomic_write_creates_the_folder(tmp_path):
    atomic_write_json(tmp_path / "results" / "run1" / "r.json", [1])
    assert json.loads((tmp_path / "results" / "run1" / "r.json").read_text()) == [1]
