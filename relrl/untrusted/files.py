"""Untrusted JSON and JSONL files: read within a size bound (gzip too), errors name path:line."""
from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import Iterator

import relrl.untrusted.limits as limits
from relrl.untrusted.errors import UntrustedInputError
from relrl.untrusted.json_text import loads_json


def read_text_file(path: str | os.PathLike, *, max_bytes: int = limits.MAX_BYTES) -> str:
    """A UTF-8 text file (a byte-order mark tolerated), gunzipped when its name ends in .gz, read
    no further than max_bytes (a gzip bomb stops there too). A missing file, a folder, a broken
    gzip, bytes that are not UTF-8 or an oversize file raise UntrustedInputError naming it."""
    path = Path(path)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise UntrustedInputError(path, "no such file") from None
    except IsADirectoryError:
        raise UntrustedInputError(path, "is a folder, not a file") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise UntrustedInputError(path, f"not a readable gzip file ({exc})") from None
    except OSError as exc:
        raise UntrustedInputError(path, f"cannot read it ({exc.strerror or exc})") from None
    if len(raw) > max_bytes:
        raise UntrustedInputError(path, f"larger than the {max_bytes} bytes allowed")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise UntrustedInputError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start}, "
                                  f"line {line}); save it as UTF-8") from None


def load_json_file(path: str | os.PathLike, **bounds) -> object:
    """One JSON document from a file; an error names path:line. `bounds` as for loads_json."""
    max_bytes = bounds.get("max_bytes", limits.MAX_BYTES)
    text = read_text_file(path, max_bytes=max_bytes)
    return loads_json(text, str(path), first_line=1, **bounds)


def iter_jsonl_text(text: str, source: str, **bounds) -> Iterator[tuple[int, object]]:
    """(line number, value) for each non-blank line of JSONL text; an error names source:line.
    Lines are split on "\\n" only: str.splitlines would also break inside strings holding
    U+2028 and the like."""
    for line_no, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield line_no, loads_json(line, source, first_line=line_no, **bounds)


def iter_jsonl(path: str | os.PathLike, **bounds) -> Iterator[tuple[int, object]]:
    """(line number, value) for each non-blank line of a JSONL file (or .jsonl.gz)."""
    text = read_text_file(path, max_bytes=bounds.get("max_bytes", limits.MAX_BYTES))
    yield from iter_jsonl_text(text, str(path), **bounds)
