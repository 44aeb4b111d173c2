"""Every reader of datasets, answers, results and logs reports a file that is not UTF-8 in one
line naming it, exit status 2: never a UnicodeDecodeError traceback."""
import json
import subprocess
import sys

import pytest
from conftest import ROOT

from relrl.data.dataset_io import DatasetError, load_dataset, read_json, read_records

LATIN1 = json.dumps({"question": "Une pièce à 85 °C: fiabilité?", "answer": "0.9"},
                    ensure_ascii=False).encode("latin-1") + b"\n"


@pytest.fixture
def latin1(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(LATIN1)
    return path


@pytest.mark.parametrize("reader", [load_dataset, read_json, lambda p: list(read_records(p))])
def test_library_readers(latin1, reader):
    with pytest.raises(DatasetError, match=r"latin1\.jsonl: not UTF-8 text \(invalid "):
        reader(latin1)


def script(name: str, *args):
    return subprocess.run([sys.executable, str(ROOT / name), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [
    ["evaluation/evaluate_gsm8k.py", "--model", "tiny-random", "--dataset", "{f}", "--output",
     "{out}"],
    ["evaluation/evaluate_single.py", "--model", "tiny-random", "--adapter", "{dir}",
     "--dataset", "{f}", "--output", "{out}"],
    ["evaluation/grade_responses.py", "{f}"],
    ["evaluation/compare_results.py", "{f}"],
    ["generators/build_dataset.py", "stats", "{f}"],
    ["training/dpo_train.py", "--model", "tiny-random", "--pairs-from", "{f}", "--output-dir",
     "{dir}/dpo"],
], ids=lambda c: c[0].split("/")[-1] + (":" + c[1] if c[1] == "stats" else ""))
def test_scripts_say_so_in_one_line(tmp_path, latin1, command):
    filled = [a.format(f=latin1, out=tmp_path / "out.json", dir=tmp_path) for a in command]
    done = script(*filled)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"{latin1}: not UTF-8 text" in done.stderr


def test_a_grpo_log_that_is_not_utf8(latin1):
    from eval_helpers import load_script

    with pytest.raises(DatasetError, match=r"latin1\.jsonl: not UTF-8 text"):
        load_script("compare_results").read_log(str(latin1))
