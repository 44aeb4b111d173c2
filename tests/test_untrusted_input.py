"""Untrusted JSON, YAML and numbers (issue 43, item 3): one reader, relrl.untrusted, bounds size,
nesting and integer length, refuses NaN/Infinity and YAML aliases, and turns any failure into one
short line naming the source; every reader of datasets, recipes, API replies, result and progress
files goes through it, and the scripts report it in one line, exit status 2, nothing written.

The property tests (marked fuzz) check that nothing but UntrustedInputError ever escapes."""
import gzip
import hashlib
import json
import math
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relrl.data.dataset_io import DatasetError, ProgressFile, load_dataset, read_json
from relrl.evaluation import api_client as api
from relrl.evaluation.results_io import read_result, write_result
from relrl.runtime.checkpointing import read_state
from relrl.runtime.cli import UsageError, run_main
from relrl.runtime.config import read_recipe
from relrl.untrusted import (
    MAX_DEPTH,
    UntrustedInputError,
    iter_jsonl,
    load_json_file,
    load_yaml_file,
    loads_json,
    loads_yaml,
    nesting_depth,
)
from study import pipeline_config, stage_times

HUGE = "9" * 4301  # one digit past Python's int-digit limit
ROW = {"question": "What is the reliability?", "answer": "0.9", "answer_type": "numeric",
       "source": "test"}
# "billion laughs": nine anchors, each a list of nine aliases to the one before (9**9 leaves)
ALIAS_BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


def one_line(error: Exception, *, within: int = 300) -> str:
    text = str(error)
    assert "\n" not in text and len(text) <= within, text[:400]
    assert "9999999999" not in text  # never an echo of the huge value
    return text


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ the reader itself
def test_an_oversize_integer_is_one_line_naming_the_source():
    with pytest.raises(UntrustedInputError) as info:
        loads_json('{"arguments": {"expression": ' + HUGE + '}}', "tool call")
    assert one_line(info.value) == "tool call: an integer of 4301 digits (at most 4300)"
    assert loads_json("[" + HUGE[:-1] + "]", "x") == [int(HUGE[:-1])]  # 4,300 digits still read


def test_the_error_is_a_value_error_and_survives_pickling():
    import pickle
    error = pickle.loads(pickle.dumps(UntrustedInputError("d.jsonl", "bad row", 7)))
    assert isinstance(error, ValueError) and str(error) == "d.jsonl:7: bad row"
    assert (error.where, error.problem) == ("d.jsonl:7", "bad row")


def test_files_name_path_and_line(tmp_path):
    doc = write(tmp_path / "r.json", '{\n  "ok": 1,\n  "n": -' + HUGE + "\n}\n")
    with pytest.raises(UntrustedInputError, match=rf"^{doc}:3: an integer of 4301 digits"):
        load_json_file(doc)
    lines = write(tmp_path / "p.jsonl", '{"a": 1}\n\n{"a": [NaN]}\n')
    got = []
    with pytest.raises(UntrustedInputError, match=rf"^{lines}:3: NaN is not a number"):
        for line_no, value in iter_jsonl(lines):
            got.append((line_no, value))
    assert got == [(1, {"a": 1})]


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a":' * 100_000, "[" * 100_000 + "]" * 100_000])
def test_deep_nesting_is_refused_before_parsing(text):
    start = time.perf_counter()
    with pytest.raises(UntrustedInputError, match=f"nested deeper than {MAX_DEPTH} levels"):
        loads_json(text, "deep.json")
    assert time.perf_counter() - start < 2


def test_depth_counts_brackets_outside_strings_only():
    assert loads_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") is not None
    with pytest.raises(UntrustedInputError):
        loads_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "x")
    inside = '{"text": "' + "[{" * 5000 + '\\"]"}'
    assert loads_json(inside, "x") == json.loads(inside)
    # an unterminated string of escaped quotes is scanned in linear time
    start = time.perf_counter()
    with pytest.raises(UntrustedInputError):
        loads_json('"' + '\\"' * 500_000, "x")
    assert time.perf_counter() - start < 2


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1E400"])
def test_non_finite_numbers_are_refused(literal):
    assert math.isfinite(json.loads("1e308"))
    with pytest.raises(UntrustedInputError, match="^reply: "):
        loads_json(f'{{"x": [1, {literal}]}}', "reply")


def test_size_bytes_and_a_long_source_stay_bounded():
    with pytest.raises(UntrustedInputError, match="more than the 10 allowed"):
        loads_json("[" + "1," * 20 + "1]", "x", max_bytes=10)
    with pytest.raises(UntrustedInputError, match="not UTF-8 text"):
        loads_json(b'["\xff"]', "x")
    with pytest.raises(UntrustedInputError) as info:
        loads_json('{"' + "k" * 100_000, "s" * 10_000)
    one_line(info.value)


# ------------------------------------------------------------------ YAML
def test_an_alias_bomb_is_refused_at_once_in_one_short_line(tmp_path):
    recipe = write(tmp_path / "bomb.yaml", "learning_rate: 1.0e-5\n" + ALIAS_BOMB.replace(
        "i: &i", "beta: &i"))
    start = time.perf_counter()
    with pytest.raises(UsageError) as info:
        read_recipe(recipe)
    assert time.perf_counter() - start < 2
    message = one_line(info.value, within=500)
    assert message.startswith(f"{recipe}:3: YAML aliases are not allowed") and "lol" not in message
    huge = write(tmp_path / "huge.yaml", "learning_rate: 1.0e-5\nseed: " + HUGE + "\n")
    with pytest.raises(UsageError) as info:
        read_recipe(huge)
    assert one_line(info.value) == f"{huge}:2: an integer of 4301 digits (at most 4300)"


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_an_endless_recipe_is_read_no_further_than_the_bound():
    with pytest.raises(UsageError, match="^/dev/zero: larger than the 262144 bytes"):
        read_recipe("/dev/zero")


def test_yaml_bounds_integers_nesting_and_tags(tmp_path):
    with pytest.raises(UntrustedInputError, match=r"^r.yaml: an integer of 4301 digits .* line 2"):
        loads_yaml("seed: 1\nbatch: " + HUGE, "r.yaml")
    for deep in ["x: " + "[" * 100_000, "x:\n" + "".join(" " * i + f"k{i}:\n" for i in range(300))]:
        start = time.perf_counter()
        with pytest.raises(UntrustedInputError, match="nest"):
            loads_yaml(deep, "r.yaml")
        assert time.perf_counter() - start < 2
    with pytest.raises(UntrustedInputError, match="not valid YAML"):
        loads_yaml("x: !!python/object/apply:os.system [true]", "r.yaml")
    with pytest.raises(UntrustedInputError, match="unreadable YAML value"):
        loads_yaml("when: 2024-13-45", "r.yaml")
    assert load_yaml_file(write(tmp_path / "ok.yaml", "a: 1\nb: [x, {c: 2.5}]\n")) == \
        {"a": 1, "b": ["x", {"c": 2.5}]}


# ------------------------------------------------------------------ every reader goes through it
def test_dataset_rows(tmp_path):
    rows = write(tmp_path / "d.jsonl", json.dumps(ROW) + "\n" + '{"question": "q", "answer": '
                 + HUGE + "}\n")
    with pytest.raises(DatasetError) as info:
        load_dataset(rows)
    assert one_line(info.value) == f"{rows}:2: an integer of 4301 digits (at most 4300)"
    array = write(tmp_path / "d.json", "[\n" + json.dumps(ROW) + ",\n" + "[" * 50_000 + "\n]")
    with pytest.raises(DatasetError, match=rf"^{array}:3: JSON nested deeper"):
        load_dataset(array)


def test_result_and_progress_files(tmp_path):
    result = write(tmp_path / "r.json", '{"kind": "model_result",\n "accuracy": ' + HUGE + "}")
    with pytest.raises(DatasetError, match=rf"^{result}:2: an integer of 4301"):
        read_result(result)
    with pytest.raises(DatasetError, match=rf"^{result}:2: an integer of 4301"):
        read_json(result)
    progress = write(tmp_path / "p.jsonl", '{"key": "a"}\n{"key": "b", "n": ' + HUGE + "}\n")
    with pytest.raises(DatasetError) as info:
        ProgressFile(progress).load()
    assert one_line(info.value).startswith(f"{progress}:2: corrupt progress line (an integer")
    state = tmp_path / "checkpoint-1"
    state.mkdir()
    write(state / "trainer_state.json", '{"step": ' + "[" * 10_000 + "}")
    with pytest.raises(UsageError, match="nested deeper"):
        read_state(state)


def test_gzipped_records_are_inflated_within_a_bound(tmp_path, monkeypatch):
    from relrl.evaluation import results_io
    monkeypatch.setattr(results_io, "MAX_BYTES", 1 << 20)
    path = tmp_path / "m.json"
    write_result(path, {"kind": "model_result", "results": [{"q": 1}]}, records="gzip")
    assert read_result(path)["results"] == [{"q": 1}]
    summary = json.loads(path.read_text())
    bomb = gzip.compress(b'{"results": [' + b" " * (4 << 20) + b"]}", mtime=0)
    (tmp_path / "m.records.json.gz").write_bytes(bomb)
    summary["records"]["sha256"] = hashlib.sha256(bomb).hexdigest()
    path.write_text(json.dumps(summary))
    with pytest.raises(DatasetError, match="inflates past"):
        read_result(path)


def test_pipeline_yaml_and_stage_times(tmp_path):
    recipe = write(tmp_path / "p.yaml", "model: tiny\nseeds: &s 1\nscreen_samples: *s\n")
    with pytest.raises(UsageError, match=rf"^{recipe}:3: YAML aliases are not allowed"):
        pipeline_config.load(recipe)
    recipe = write(tmp_path / "q.yaml", "model: tiny\nscreen_samples: " + HUGE + "\n")
    with pytest.raises(UsageError) as info:
        pipeline_config.load(recipe)
    assert one_line(info.value).startswith(f"{recipe}:2: screen_samples: an integer of 4301")
    times = write(tmp_path / stage_times.FILE_NAME, '{"stage": "sft"}\n')
    with pytest.raises(UntrustedInputError, match=rf"^{times}:1: not a stage record"):
        stage_times.read(times)


class _RawReply(BaseHTTPRequestHandler):
    body = b""

    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("body", [
    '{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": ' + HUGE + "}}",
    '{"choices": ' + "[" * 100_000,
    '{"choices": [{"message": {"content": "x"}}], "usage": {"cost": NaN}}',
])
def test_api_replies_name_the_model(body, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "none")
    handler = type("Handler", (_RawReply,), {"body": body.encode()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = api.ChatClient("test/model", base_url=f"http://127.0.0.1:{server.server_port}",
                                backoff=0.01, max_wait=1.0, timeout=5.0, max_retries=1)
        with pytest.raises(api.MalformedResponse) as info:
            client.chat([{"role": "user", "content": "hi"}])
    finally:
        server.shutdown()
        server.server_close()
    assert one_line(info.value).startswith("test/model: gave up after 2 attempts: ")


# ------------------------------------------------------------------ the scripts: exit 2, nothing written
def script(*args, timeout=600):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


def exit_2_one_line(done) -> str:
    err = done.stderr.strip()
    assert done.returncode == 2 and err.startswith("error: ") and "\n" not in err, err[-2000:]
    assert len(err) < 500 and "9999999999" not in err
    return err


def test_build_dataset_validate_and_split(tmp_path):
    rows = write(tmp_path / "d.jsonl", json.dumps(ROW) + "\n" + json.dumps(ROW)[:-1]
                 + ', "difficulty": ' + HUGE + "}\n")
    done = script(ROOT / "generators" / "build_dataset.py", "validate", rows)
    assert f"{rows}:2: an integer of 4301 digits" in exit_2_one_line(done) and done.stdout == ""
    from generators import build_dataset
    argv, sys.argv = sys.argv, ["build_dataset.py", "split", str(rows), "--out-dir",
                                str(tmp_path / "splits")]
    try:
        with pytest.raises(SystemExit) as info:
            run_main(build_dataset.main)
    finally:
        sys.argv = argv
    assert info.value.code == 2 and not (tmp_path / "splits").exists()


def test_training_script_refuses_a_bomb_recipe_and_a_bad_dataset(tmp_path):
    out = tmp_path / "out"
    bomb = write(tmp_path / "bomb.yaml", "seed: 1\n" + ALIAS_BOMB.replace("i: &i", "beta: &i"))
    start = time.perf_counter()
    done = script(ROOT / "training" / "grpo_exp10_nosft.py", "--config", bomb, "--model",
                  "tiny-random", "--output-dir", out)
    err = exit_2_one_line(done)
    assert f"{bomb}:3: YAML aliases are not allowed" in err and not out.exists()
    assert time.perf_counter() - start < 120  # the interpreter and torch's import, not the bomb
    rows = write(tmp_path / "d.jsonl", json.dumps(ROW) + "\n" + "[" * 100_000 + "\n")
    from relrl.rl import grpo_main
    with pytest.raises(SystemExit) as info:
        run_main(lambda: grpo_main.main("exp10", ["--dataset", str(rows), "--model",
                                                  "tiny-random", "--output-dir", str(out)]))
    assert info.value.code == 2 and not out.exists()


# ------------------------------------------------------------------ properties
def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _reference(text: str):
    """json.loads's answer when it has one within the bounds; None when it refuses."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if _depth(value) > MAX_DEPTH or "NaN" in json.dumps(value) or "Infinity" in json.dumps(value):
        return None
    return value


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


JSONISH = st.lists(st.sampled_from(list('[]{}",:\\ 0123456789-+.eE\n') + [
    "true", "null", "NaN", "Infinity", "\u2028", "\x00", "é"]), max_size=400).map("".join)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner,
                                                               max_size=5),
    max_leaves=40)


@pytest.mark.fuzz
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=2_000), JSONISH))
def test_property_loads_json_is_json_loads_or_one_error(text):
    try:
        got = loads_json(text, "fuzz")
    except UntrustedInputError as exc:
        one_line(exc)
        assert _reference(text) is None  # json.loads fails too, or the value is out of bounds
        return
    assert _same(got, json.loads(text))


@pytest.mark.fuzz
@settings(deadline=None)
@given(VALUES, st.integers(min_value=0, max_value=3))
def test_property_every_json_value_reads_back(value, indent):
    text = json.dumps(value, indent=indent or None)
    assert _same(loads_json(text, "fuzz"), value)
    assert nesting_depth(text) == _depth(value)


@pytest.mark.fuzz
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=1_000), st.lists(st.sampled_from(
    list("&*ab:-[]{}!, \n'\"#|>?09.") + ["<<: ", "!!python/name:", "0x"]), max_size=300).map("".join)))
def test_property_loads_yaml_is_safe_load_or_one_error(text):
    try:
        got = loads_yaml(text, "fuzz")
    except UntrustedInputError as exc:
        one_line(exc)
        return
    try:  # the same parser (libyaml), safe constructor, and no bounds
        expected = yaml.load(text, Loader=yaml.CSafeLoader)
    except Exception:  # noqa: BLE001 - refusals are checked above; this is the reference only
        return
    assert repr(got) == repr(expected)


def test_a_huge_value_is_never_echoed_whole(tmp_path, capsys):
    """Past the reader, a settings error may quote the value; the script's one line is cut."""
    from relrl.rl import grpo_main
    long_list = write(tmp_path / "long.yaml", "num_generations: [" + ", ".join(["abc"] * 30_000)
                      + "]\n")
    for argv in (["--config", str(long_list)], ["--num-generations", HUGE]):
        with pytest.raises(SystemExit) as info:
            run_main(lambda: grpo_main.main("exp10", [*argv, "--model", "tiny-random",
                                                      "--output-dir", str(tmp_path / "out")]))
        err = capsys.readouterr().err.strip()
        assert info.value.code == 2 and "\n" not in err and len(err) < 1100, err[:200]
    assert not (tmp_path / "out").exists()
