"""--tools on the evaluation and screening scripts and demo.py (issue #29): a completion's tool
calls are recorded beside the graded text, the result counts them, a resume under another
--tools is refused, and without tools every file keeps the study's keys."""
import json
from dataclasses import dataclass, replace

import pytest
from eval_helpers import fake_generate, load_script, one_thread, run_script, write_rows  # noqa: F401

import demo
from relrl.data.dataset_io import load_dataset, questions_fingerprint
from relrl.evaluation.model_results import model_result, summary_line
from relrl.evaluation.results_io import read_result
from relrl.evaluation.runner import Progress, evaluate_rows, progress_path, score_question
from relrl.evaluation.settings import EvalSettings
from relrl.tools.protocol import calculator_call

# The keys a study result held before --tools existed, with mean@k and its intervals (issue #31):
# a run without tools must write exactly these.
STUDY_RESULT_KEYS = {"kind", "model", "model_path", "adapter", "dataset", "fingerprint", "n", "correct",
                     "accuracy", "truncated", "unextracted", "samples", "seed", "tolerance",
                     "tolerance_rule", "settings", "pass_at_k", "mean_at_k", "at_k_ci", "by_base_score",
                     "strata", "results"}
STUDY_SAMPLE_KEYS = {"extracted", "value", "correct", "truncated", "reward", "response"}
STUDY_SIGNATURE = {"samples": 1, "seed": 0, "temperature": 1.0, "top_p": 0.95, "max_new_tokens": 3072,
                   "tolerance": 0.05, "allow_plain": False}
TOOL_KEYS = {"transcript", "tool_calls", "tool_errors"}


@dataclass
class ToolCompletion:
    text: str
    truncated: bool
    transcript: str
    tool_calls: int
    tool_errors: int


def result_of(rows, sets, generate):
    records = evaluate_rows(rows, generate, sets)
    return model_result(records, label="m", model_path="fake", adapter=None, dataset="d.jsonl",
                        fingerprint=questions_fingerprint(rows), settings=sets)


def test_without_tools_the_result_keeps_the_study_keys(tmp_path):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 6))
    result = result_of(rows, EvalSettings(), fake_generate())
    assert set(result) == STUDY_RESULT_KEYS
    assert result["settings"] == STUDY_SIGNATURE
    assert set(result["results"][0]) - {"id", "question", "target", "pass_count", "samples",
                                        "base_score", "base_samples", "source"} == STUDY_SAMPLE_KEYS
    assert "call" not in summary_line(result)
    # a progress file written before --tools existed still resumes under the default
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "__run__", "run": {"settings": STUDY_SIGNATURE}}) + "\n")
    Progress(path, {"settings": EvalSettings(max_tool_calls=7).signature()})


def test_with_tools_records_and_summary_count_the_calls(tmp_path):
    rows = load_dataset(write_rows(tmp_path / "d.jsonl", 2, base_score=False))
    calls = iter([(2, 1), (0, 0), (1, 0), (0, 0)])  # (calls, failed) of the four answers

    def generate(chunk, seeds, n):
        out = []
        for row in chunk:
            samples = []
            for _ in range(n):
                made, failed = next(calls)
                samples.append(ToolCompletion(f"\\boxed{{{row['answer']}}}", False,
                                              f"call <tool_response>x</tool_response> "
                                              f"\\boxed{{{row['answer']}}}", made, failed))
            out.append(samples)
        return out

    sets = EvalSettings(samples=2, tools="calculator", max_tool_calls=3)
    result = result_of(rows, sets, generate)
    assert result["tools"] == "calculator" and result["max_tool_calls"] == 3
    assert result["settings"]["tools"] == "calculator" and result["settings"]["max_tool_calls"] == 3
    assert result["tool_use"] == {"calls": 3, "failed": 1, "calls_per_answer": 0.75,
                                  "share_with_call": 0.5, "share_failed": pytest.approx(1 / 3)}
    first = result["results"][0]
    assert (first["tool_calls"], first["tool_errors"]) == (2, 1)
    assert [c["tool_calls"] for c in first["completions"]] == [2, 0]
    assert first["completions"][0]["transcript"].startswith("call <tool_response>")
    assert first["response"] == f"\\boxed{{{rows[0]['answer']}}}"  # the graded text: the last turn
    assert summary_line(result).endswith("; 3 calculator calls (0.75 per answer, 50% of answers "
                                         "with one, 1 failed)")


def test_a_tool_answer_is_never_graded_as_the_model_answer(tmp_path):
    row = load_dataset(write_rows(tmp_path / "d.jsonl", 1))[0]
    wrong = ToolCompletion("I am not sure", False,
                           f"<tool_response>\n{row['answer']}\n</tool_response> I am not sure", 1, 0)
    record = score_question(row, [wrong], EvalSettings(tools="calculator"))
    assert record["correct"] is False and record["extracted"] is None


def gsm_rows(path, n=2):
    with open(path, "w") as handle:
        for i in range(n):
            handle.write(json.dumps({"question": f"What is 2 times {3 + i}?",
                                     "answer": f"2*{3 + i}\n#### {2 * (3 + i)}"}) + "\n")
    return path


@pytest.fixture
def scripted_call(monkeypatch):
    """hf's sample_round with turn 0 scripted as a calculator call of 2*3; later turns (after a
    <tool_response>) are the real model's. Returns how many turns each kind made."""
    from relrl.engines import hf

    real, turns = hf.sample_round, {"scripted": 0, "model": 0}

    def sample_round(model, tokenizer, requests, config, should_stop=None):
        call = tokenizer(calculator_call("2*3") + "<|im_end|>", add_special_tokens=False)["input_ids"]
        later = [k for k, r in enumerate(requests) if "<tool_response>" in tokenizer.decode(r.ids)]
        sampled = dict(zip(later, real(model, tokenizer, [requests[k] for k in later], config,
                                       should_stop))) if later else {}
        turns["scripted"] += len(requests) - len(later)
        turns["model"] += len(later)
        return [sampled.get(k, (list(call), None)) for k in range(len(requests))]

    monkeypatch.setattr(hf, "sample_round", sample_round)
    return turns


def test_a_calculator_run_records_the_call_and_refuses_a_resume_without_tools(tmp_path, capsys,
                                                                              scripted_call):
    data, out = gsm_rows(tmp_path / "gsm.jsonl"), tmp_path / "out.json"
    common = ["--model", "tiny-random", "--rollout-engine", "hf", "--dataset", data, "--output", out,
              "--max-new-tokens", "90", "--micro-batch", "2"]
    code, stdout, _ = run_script("evaluate_gsm8k", [*common, "--tools", "calculator"], capsys)
    assert code == 0, stdout
    assert scripted_call == {"scripted": 2, "model": 2}
    result = read_result(out)
    assert (result["tools"], result["max_tool_calls"]) == ("calculator", 4)
    assert result["tool_use"]["calls"] == 2 and result["tool_use"]["failed"] == 0
    for record in result["results"]:
        assert (record["tool_calls"], record["tool_errors"]) == (1, 0)
        assert "<tool_response>\n6\n</tool_response>" in record["transcript"]
        assert record["transcript"].startswith("<tool_call>")
        assert "<tool_call>" not in record["response"]  # graded: the model's turn after the answer
        assert record["transcript"].endswith(record["response"])
    assert "2 calculator calls (1.00 per answer, 100% of answers with one, 0 failed)" in stdout
    assert progress_path(out, "base").exists()

    before = out.read_bytes()
    code, _, err = run_script("evaluate_gsm8k", common, capsys)
    assert code == 2 and err.startswith("error: ") and err.strip().count("\n") == 0, err
    assert "progress of a different run" in err and "--tools calculator -> none" in err
    assert out.read_bytes() == before


def test_without_tools_the_script_writes_the_study_keys(tmp_path, capsys):
    data, out = gsm_rows(tmp_path / "gsm.jsonl"), tmp_path / "out.json"
    code, _, _ = run_script("evaluate_gsm8k", ["--model", "tiny-random", "--rollout-engine", "hf",
                                               "--dataset", data, "--output", out,
                                               "--max-new-tokens", "8"], capsys)
    assert code == 0
    result = read_result(out)
    assert set(result) == STUDY_RESULT_KEYS - {"by_base_score"} | {"rollout_engine"}
    assert not TOOL_KEYS & set(result["results"][0])
    assert result["settings"] == {**STUDY_SIGNATURE, "max_new_tokens": 8, "tolerance": 0.0}


@pytest.mark.parametrize("flags, named", [
    (["--max-tool-calls", "-1"], "--max-tool-calls must be >= 0, got -1"),
    (["--max-tool-calls", "two"], "--max-tool-calls must be an integer"),
    (["--tools", "abacus"], "--tools"),
])
def test_bad_tool_flags_exit_2_with_one_line(tmp_path, capsys, flags, named):
    data = gsm_rows(tmp_path / "gsm.jsonl")
    code, _, err = run_script("evaluate_gsm8k", ["--model", "tiny-random", "--dataset", data,
                                                 "--output", tmp_path / "o.json", *flags], capsys)
    assert code == 2 and err.startswith("error: ") and err.strip().count("\n") == 0, err
    assert named in err


SCRIPTS = {  # every evaluation script that samples, with the flags it needs besides the tools'
    "evaluate_single": ["--dataset", "d.jsonl", "--adapter", "a"],
    "evaluate_finetuned_only": ["--dataset", "d.jsonl", "--adapter", "a", "--base-results", "b.json"],
    "evaluate_gsm8k": ["--dataset", "d.jsonl", "--output", "o.json"],
    "evaluate_qwen25_base": ["--dataset", "d.jsonl", "--output-dir", "o"],
    "screen_v4": ["--dataset", "d.jsonl", "--output-dir", "o"],
}


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_sampling_script_takes_the_tool_flags(name):
    from relrl.evaluation.cli import settings_from_args

    def settings(*flags):
        parsed = load_script(name).parse_args([*SCRIPTS[name], *flags])
        return settings_from_args(parsed[1] if isinstance(parsed, tuple) else parsed)

    default = settings()
    assert (default.tools, default.max_tool_calls) == ("none", 4)
    chosen = settings("--tools", "calculator", "--max-tool-calls", "2")
    assert (chosen.tools, chosen.max_tool_calls) == ("calculator", 2)


# demo.py: every stage that samples or trains on completions gets --tools
SAMPLING = ("screen_v4.py", "sft_qwen3_kfold.py", "grpo_exp7_dynamic.py", "grpo_exp10_nosft.py",
            "evaluate_single.py", "evaluate_finetuned_only.py")


def demo_commands(tmp_path, monkeypatch, tools: str) -> dict[str, list[list[str]]]:
    seen = []
    monkeypatch.setattr(demo.Demo, "run", lambda self, stage, args, done=None, processes=1:
                        seen.append([str(a) for a in args]))
    monkeypatch.setattr(demo.Demo, "run_side_by_side", lambda self, jobs, lanes=None:
                        seen.extend([str(a) for a in job[1]] for job in jobs))
    monkeypatch.setattr(demo.Demo, "models", lambda self: {"SFT": tmp_path / "sft",
                                                           "GRPO": tmp_path / "grpo"})
    monkeypatch.setattr(demo.Demo, "heldout_from_holdout", lambda self: None)
    d = demo.Demo(fast=True, seed=0, work=tmp_path, out=tmp_path / "out", lanes=2, config="fast",
                  settings=replace(demo.recipe("fast"), tools=tools))
    d.data(), d.tiny(), d.screen(), d.train(), d.evaluate()
    by_script: dict[str, list[list[str]]] = {}
    for command in seen:
        script = next(p.rsplit("/", 1)[-1] for p in command if p.endswith((".py", "tiny_build")))
        by_script.setdefault(script, []).append(command)
    return by_script


def test_demo_passes_tools_to_every_sampling_and_training_stage(tmp_path, monkeypatch):
    by_script = demo_commands(tmp_path, monkeypatch, "calculator")
    assert set(SAMPLING) <= set(by_script)
    for script, commands in by_script.items():
        for command in commands:
            if script in SAMPLING:
                assert command[command.index("--tools") + 1] == "calculator", command
            else:  # data and the tiny model's build sample nothing
                assert "--tools" not in command, command


def test_demo_without_tools_leaves_the_commands_as_they_were(tmp_path, monkeypatch):
    by_script = demo_commands(tmp_path, monkeypatch, "none")
    assert set(SAMPLING) <= set(by_script)
    assert not any("--tools" in c for commands in by_script.values() for c in commands)
    assert demo.recipe("full").tools == "none"
