"""compare_results.py: the table's numbers are recomputed here from the result JSONs."""
import json

import pytest
from eval_helpers import adapter, fake_generate, one_thread, run_script, write_rows  # noqa: F401

from relrl.data.dataset_io import load_dataset, questions_fingerprint
from relrl.evaluation.model_results import compare_models, model_result
from relrl.evaluation.runner import evaluate_rows
from relrl.evaluation.settings import EvalSettings
from relrl.evaluation.stats import holm, mcnemar, wilson_interval


def fake_result(rows, label, skill, samples=1, adapter_path=None):
    sets = EvalSettings(samples=samples, max_new_tokens=16)
    records = evaluate_rows(rows, fake_generate(skill), sets)
    return model_result(records, label=label, model_path="fake", adapter=adapter_path,
                        dataset="d.jsonl", fingerprint=questions_fingerprint(rows), settings=sets)


def table(markdown: str, header_start: str) -> list[list[str]]:
    """Cells of the Markdown table whose header starts with `header_start`."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def pct(x):
    return f"{100 * x:.1f}%"


@pytest.fixture
def three_runs(tmp_path):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 40))
    base = fake_result(rows, "Qwen3-8B", 55)
    ck40 = fake_result(rows, "exp7/checkpoint-40", 70)
    ck80 = fake_result(rows, "exp7/checkpoint-80", 35)
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "ck40.json").write_text(json.dumps(ck40))
    # one given as a pair file: its base side must be recognised and counted once
    (tmp_path / "pair80.json").write_text(json.dumps(compare_models(base, ck80, n_boot=500)))
    return tmp_path, {"Qwen3-8B": base, "exp7/checkpoint-40": ck40, "exp7/checkpoint-80": ck80}


def test_table_numbers_match_the_result_files(three_runs, capsys):
    folder, results = three_runs
    log = folder / "log.jsonl"
    log.write_text("".join(json.dumps({"step": s, "reward_mean": 0.1 * s, "waste_rate": 0.5 - 0.05 * s,
                                       **({"val_accuracy": 0.5} if s % 2 == 0 else {})}) + "\n"
                           for s in range(1, 7)))
    plots = folder / "plots"
    plots.mkdir()
    md = folder / "table.md"
    code, stdout, _ = run_script("compare_results", [
        folder / "base.json", folder / "ck40.json", folder / "pair80.json", "--base", "Qwen3-8B",
        "--output-md", md, "--output-json", folder / "table.json", "--plots-dir", plots,
        "--grpo-log", log], capsys)
    assert code == 0
    text = md.read_text()
    assert stdout == text
    rows = table(text, "| Model")
    assert [r[0] for r in rows] == ["Qwen3-8B", "exp7/checkpoint-40", "exp7/checkpoint-80"]
    base = results["Qwen3-8B"]
    expected_p = []
    for name, correct_n, accuracy, truncated, delta, p, p_holm in rows:
        result = results[name]
        n, correct = result["n"], sum(r["correct"] for r in result["results"])
        assert correct_n == f"{correct}/{n}" and correct == result["correct"]
        low, high = wilson_interval(correct, n)
        assert accuracy == f"{pct(correct / n)} ({pct(low)}-{pct(high)})"
        assert truncated == str(sum(r["truncated"] for r in result["results"]))
        if name == "Qwen3-8B":
            assert (delta, p, p_holm) == ("-", "-", "-")
            continue
        assert delta == f"{100 * (correct - base['correct']) / n:+.1f}pp"
        pairs = list(zip(base["results"], result["results"]))
        b01 = sum(not b["correct"] and f["correct"] for b, f in pairs)
        b10 = sum(b["correct"] and not f["correct"] for b, f in pairs)
        expected_p.append(mcnemar(b01, b10)["exact_p"])
        assert p == (f"{expected_p[-1]:.3f}" if expected_p[-1] >= 0.001 else "<0.001")
    assert [r[6] for r in rows[1:]] == [f"{q:.3f}" if q >= 0.001 else "<0.001" for q in holm(expected_p)]

    levels = table(text, "| Base score")
    assert [r[0] for r in levels] == ["0/4", "1/4", "2/4", "3/4", "4/4"]
    for level in levels:
        score = int(level[0][0])
        for name, cell in zip(results, level[1:]):
            subset = [r for r in results[name]["results"] if r["base_score"] == score]
            correct = sum(r["correct"] for r in subset)
            assert cell == f"{pct(correct / len(subset))} ({correct}/{len(subset)})"

    numbers = json.loads((folder / "table.json").read_text())
    assert [r["correct"] for r in numbers["rows"]] == [results[r[0]]["correct"] for r in rows]
    for name in ("accuracy.png", "training.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_k_samples_use_the_permutation_test(tmp_path, capsys):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 10, base_score=False))
    for label, skill in (("base", 50), ("ft", 65)):
        (tmp_path / f"{label}.json").write_text(json.dumps(fake_result(rows, label, skill, samples=4)))
    code, stdout, _ = run_script("compare_results", [tmp_path / "base.json", tmp_path / "ft.json"], capsys)
    assert code == 0
    base, ft = (json.loads((tmp_path / f"{x}.json").read_text()) for x in ("base", "ft"))
    row = table(stdout, "| Model")[1]
    assert row[1] == f"{ft['correct']}/10x4"
    from relrl.evaluation.stats import paired_permutation_test

    p = paired_permutation_test([r["pass_count"] for r in base["results"]], 4,
                                [r["pass_count"] for r in ft["results"]], 4)["p"]
    assert row[5] == f"{p:.3f}" and "Base score" not in stdout


def test_two_tiny_random_runs(tmp_path, adapter, capsys):
    data = write_rows(tmp_path / "d.jsonl", 4)
    pair = tmp_path / "pair.json"
    assert run_script("evaluate_single", ["--model", "tiny-random", "--max-new-tokens", "8",
                                          "--adapter", adapter, "--dataset", data, "--output", pair],
                      capsys)[0] == 0
    plots = tmp_path / "plots"
    plots.mkdir()
    code, stdout, _ = run_script("compare_results", [pair, "--plots-dir", plots,
                                                     "--output-md", tmp_path / "t.md"], capsys)
    assert code == 0
    saved = json.loads(pair.read_text())
    rows = table(stdout, "| Model")
    assert [r[0] for r in rows] == ["tiny-random", "exp7/checkpoint-80"]
    assert rows[0][1] == f"{saved['base']['correct']}/4" and rows[1][1] == f"{saved['finetuned']['correct']}/4"
    assert rows[1][5] == f"{saved['mcnemar_p']:.3f}"
    assert (plots / "accuracy.png").stat().st_size > 1000


def test_bad_inputs(three_runs, tmp_path, capsys):
    folder, results = three_runs
    other_rows = load_dataset(write_rows(tmp_path / "o.jsonl", 5))
    (folder / "other.json").write_text(json.dumps(fake_result(other_rows, "other", 50)))
    renamed = {**results["exp7/checkpoint-40"], "model": "Qwen3-8B"}
    (folder / "clash.json").write_text(json.dumps(renamed))
    (folder / "log.jsonl").write_text('{"step": 1, "reward_mean": 0.1, "waste_rate": 0.2}\n{"step": 2,\n')
    (folder / "notes.json").write_text('{"hello": 1}')
    cases = [
        ([folder / "base.json", folder / "other.json"], "other questions"),
        ([folder / "base.json", "--base", "nobody"], "no result is labelled 'nobody'"),
        ([folder / "base.json", folder / "clash.json"], "both named 'Qwen3-8B'"),
        ([folder / "base.json", "--grpo-log", folder / "log.jsonl"], "log.jsonl:2: malformed JSON"),
        ([folder / "notes.json"], "not a model result"),
        ([folder / "base.json", "--output-md", folder / "missing" / "t.md"], "--output-md"),
    ]
    for argv, message in cases:
        code, stdout, err = run_script("compare_results", argv, capsys)
        assert code == 2 and err.startswith("error: ") and err.strip().count("\n") == 0, err
        assert message in err and stdout == ""
