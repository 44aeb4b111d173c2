"""Dataset and result IO: the study's JSONL schema, atomic writes, resumable progress files.

A dataset row has `question` and `answer` (a string), usually `answer_type` and `source`,
optionally `reasoning`, and our own optional fields `id`, `group`, `family`, `topic`,
`difficulty`, `base_score`, and `target_kind` ("probability" or "value": how the complement
tolerance rule reads the answer, relrl.grading.scoring). A file is JSONL (one object a line) or one
JSON array.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from relrl.grading.numbers import parse_target_values
from relrl.grading.target_kind import TARGET_KINDS
from relrl.runtime.cli import UsageError
from relrl.untrusted import UntrustedInputError, loads_json, read_text_file


class DatasetError(UsageError):
    """A file that cannot be used, named with its line: reported in one line, exit status 2
    (a UsageError, so relrl.runtime.cli.run_main reports it without cli importing this module)."""


@dataclass
class DatasetReport:
    path: str
    rows: int = 0
    usable: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # {"line": n, "reason": "..."}

    def summary(self) -> dict:
        return {
            "file": self.path,
            "rows": self.rows,
            "usable_numeric_rows": len(self.usable),
            "skipped": self.skipped,
        }


def read_text(path: str | os.PathLike) -> str:
    """A UTF-8 text file (a byte-order mark tolerated), gunzipped when its name ends in .gz
    (committed logs are kept so), read within relrl.untrusted's size bound. A missing file, a
    folder, a broken gzip, an oversize file or bytes that are not UTF-8 raise DatasetError naming
    the file (and the line and byte offset of a bad byte)."""
    try:
        return read_text_file(path)
    except UntrustedInputError as exc:
        raise DatasetError(str(exc)) from None


def parse_json(text: str, path: str | os.PathLike, line: int = 1):
    """JSON text that starts on `line` of file `path`, through relrl.untrusted.loads_json (size,
    nesting and integer length bounded, NaN and Infinity refused). Any failure is a DatasetError
    naming path:line."""
    try:
        return loads_json(text, str(path), first_line=line)
    except UntrustedInputError as exc:
        raise DatasetError(str(exc)) from None


def read_records(path: str | os.PathLike) -> Iterator[tuple[int, object]]:
    """(line number, decoded JSON) for each row of a JSONL file or of a JSON array (the line
    where the element starts). Malformed JSON or an empty file raise DatasetError."""
    path = Path(path)
    text = read_text(path)
    if not text.strip():
        raise DatasetError(f"{path}: the file is empty")
    if text.lstrip().startswith("["):
        yield from _array_records(path, text)
        return
    # split on "\n" only: str.splitlines would also break inside strings holding U+2028 etc.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        yield lineno, parse_json(line, path, lineno)


def _array_records(path: Path, text: str) -> Iterator[tuple[int, object]]:
    parse_json(text, path)  # whole-file check first (and bounds), so an error names its line
    decoder = json.JSONDecoder()
    pos, lineno, counted_to = text.index("[") + 1, 1, 0
    while True:
        while text[pos] in " \t\r\n,":
            pos += 1
        if text[pos] == "]":
            return
        lineno += text.count("\n", counted_to, pos)
        counted_to = pos
        item, pos = decoder.raw_decode(text, pos)
        yield lineno, item


def row_problem(row: object) -> str | None:
    """Why a decoded row cannot be used as a numeric question, or None when it can."""
    if not isinstance(row, dict):
        return "not a JSON object"
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        return "missing 'question'"
    if "answer" not in row or row["answer"] is None:
        return "missing 'answer'"
    answer = row["answer"]
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        return f"'answer' must be a string or number, got {type(answer).__name__}"
    values, reason = parse_target_values(str(answer))  # "31, 521" is graded part by part
    if values is None:
        return f"non-numeric answer {str(answer)[:60]!r} ({reason})"
    kind = row.get("target_kind")
    if kind is not None and kind not in TARGET_KINDS:
        return f"'target_kind' must be one of {', '.join(TARGET_KINDS)}, got {str(kind)[:40]!r}"
    return None


def inspect_dataset(path: str | os.PathLike) -> DatasetReport:
    """Read every row; malformed JSON raises, other bad rows are listed as skipped."""
    path = Path(path)
    report = DatasetReport(str(path))
    for lineno, row in read_records(path):
        report.rows += 1
        problem = row_problem(row)
        if problem is None:
            item = dict(row)
            item["answer"] = str(item["answer"])
            item.setdefault("_line", lineno)
            report.usable.append(item)
        else:
            report.skipped.append({"line": lineno, "reason": problem})
    return report


def load_dataset(path: str | os.PathLike, *, allow_skips: bool = False) -> list[dict]:
    """Rows of a dataset, each with a stable `id`. Any bad row is an error naming its line,
    raised before the caller does any work (unless allow_skips, which warns instead)."""
    report = inspect_dataset(path)
    if report.skipped and not allow_skips:
        first = report.skipped[0]
        more = f" (and {len(report.skipped) - 1} more bad rows)" if len(report.skipped) > 1 else ""
        raise DatasetError(f"{path}:{first['line']}: {first['reason']}{more}")
    if report.skipped:
        print(f"warning: {path}: skipped {len(report.skipped)} bad rows", file=sys.stderr)
    if not report.usable:
        raise DatasetError(f"{path}: no usable rows")
    rows = []
    for item in report.usable:
        item.pop("_line", None)
        if item.get("id") in (None, ""):  # an id of 0 is a valid id
            item["id"] = question_id(item["question"])
        rows.append(item)
    return rows


def question_id(question: str) -> str:
    """A stable id from the question text, for rows that carry none."""
    return "q" + hashlib.sha256(question.strip().encode("utf-8")).hexdigest()[:12]


def questions_fingerprint(rows: Iterable[dict]) -> str:
    """One hash over (question, answer) pairs in order: two result files are comparable only
    when their fingerprints match."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(row["question"].encode("utf-8"))
        digest.update(b"\x00")
        digest.update(str(row["answer"]).encode("utf-8"))
        digest.update(b"\x01")
    return digest.hexdigest()[:16]


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    # create the folder: failing here, at the end of a long run, would lose the run's work
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)  # mkstemp makes 0600; results are for sharing
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    """Write JSON to a temporary file beside `path`, then rename: never half a file."""
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_json(path: str | os.PathLike):
    """A JSON file through relrl.untrusted: any failure is a DatasetError naming path:line."""
    return parse_json(read_text(path), path)


class ProgressFile:
    """Append-only JSONL of finished items, so a killed job resumes losing at most one item.

    A truncated last line (the write the kill interrupted) is dropped with a warning;
    any other malformed line is an error naming the file and line.
    """

    def __init__(self, path: str | os.PathLike, key: str = "key"):
        self.path = Path(path)
        self.key = key

    def load(self) -> dict[str, dict]:
        done: dict[str, dict] = {}
        if not self.path.exists():
            return done
        raw = self.path.read_bytes()
        cut = raw.rfind(b"\n") + 1  # bytes after the last newline are an unfinished write
        complete, tail = raw[:cut].decode("utf-8", "replace").split("\n")[:-1], raw[cut:]
        for lineno, line in enumerate(complete, start=1):
            if not line.strip():
                continue
            try:
                record = loads_json(line, str(self.path), first_line=lineno)
            except UntrustedInputError as exc:
                raise DatasetError(f"{exc.where}: corrupt progress line ({exc.problem})") from None
            if not isinstance(record, dict) or self.key not in record:
                raise DatasetError(f"{self.path}:{lineno}: progress line has no {self.key!r}")
            done[str(record[self.key])] = record
        if tail.strip():
            print(f"warning: {self.path}: dropped a truncated last line", file=sys.stderr)
            with open(self.path, "r+b") as handle:
                handle.truncate(cut)
        return done

    def append(self, record: dict) -> None:
        if self.key not in record:
            raise ValueError(f"progress record needs {self.key!r}")
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
