"""The API scripts end to end against a real server on 127.0.0.1.

Scripts run in this process through their main() and the shared run_main (exit status, one-line
errors), with stdout and stderr captured; the kill and Ctrl-C tests run them as real processes.
Every test sets the key to a recognisable string and, at teardown, checks that it appears in no
file under the test's folder and in no line the scripts printed.
"""
import io
import json
import os
import re
import runpy
import signal
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from chat_server import ChatServer
from waiting import LineWatcher

from relrl.data.dataset_io import load_dataset, questions_fingerprint
from relrl.evaluation.results_io import read_result
from relrl.runtime.cli import run_main

ROOT = Path(__file__).resolve().parents[1]

CANARY = "sk-or-v1-CANARY-0d15ea5e-tools"
WITH_CTRL_C = ("import runpy, signal, sys; "
               "signal.signal(signal.SIGINT, signal.default_int_handler); "
               "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
FAST = ["--backoff", "0.01", "--max-wait", "2", "--timeout", "5", "--workers", "1"]


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str


class Runner:
    """Runs scripts with the canary key and the test server; remembers everything printed."""

    def __init__(self, server, folder: Path):
        self.server, self.folder, self.printed = server, folder, []

    def env(self, key=True):
        env = {k: v for k, v in os.environ.items() if k != "OPENROUTER_API_KEY"}
        env["API_BASE_URL"] = self.server.url
        if key:
            env["OPENROUTER_API_KEY"] = CANARY
        return env

    def __call__(self, script, *args, key=True) -> Finished:
        main = runpy.run_path(str(ROOT / script))["main"]
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.dict(os.environ, self.env(key), clear=True), redirect_stdout(out), \
                redirect_stderr(err), pytest.raises(SystemExit) as exit_:
            run_main(lambda: main([str(a) for a in args]))
        self.printed.append(out.getvalue() + err.getvalue())
        return Finished(exit_.value.code, out.getvalue(), err.getvalue())

    def start(self, script, *args):
        """The script as a real process (for tests that kill or interrupt it), with Ctrl-C's
        handler in place as in a terminal: a test run started in the background (`make test &`,
        a CI runner) has SIGINT ignored, children inherit that across exec, and Python then
        installs no KeyboardInterrupt handler, so the Ctrl-C test could not pass."""
        return subprocess.Popen([sys.executable, "-c", WITH_CTRL_C, str(ROOT / script),
                                 *map(str, args)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env())


@pytest.fixture
def run(tmp_path):
    with ChatServer(key=CANARY) as server:
        runner = Runner(server, tmp_path)
        yield runner
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), f"key written to {path}"
    for text in runner.printed:
        assert CANARY not in text, "key printed"


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


QUESTIONS = [
    ("A pump has a constant failure rate of 0.002 per hour. What is its MTTF in hours?", "500"),
    ("Two components with reliabilities 0.9 and 0.8 work in series. System reliability?", "0.72"),
    ("A valve fails 3 times in 1500 hours of operation. Estimate its failure rate per hour.",
     "0.002"),
    ("Two redundant units each have reliability 0.9. What is the parallel system reliability?",
     "0.99"),
    ("A bearing has an L10 life of 800 hours. What percentage of bearings fail by then?", "10"),
    ("A motor has MTTF 2000 hours. What is its failure rate per hour?", "0.0005"),
]


@pytest.fixture
def dataset(tmp_path):
    return write_jsonl(tmp_path / "questions.jsonl", [
        {"id": f"q{i}", "question": q, "answer": a, "answer_type": "numeric", "source": "test",
         "base_score": i % 5}
        for i, (q, a) in enumerate(QUESTIONS)])


def answers_all_but(wrong: set):
    """A responder that solves every question except those whose text contains a `wrong` key."""
    truth = dict(QUESTIONS)

    def respond(body):
        question = body["messages"][-1]["content"]
        if any(w in question for w in wrong):
            return "I think it is about **Final answer: 12345**"
        return f"Working...\n\nFinal answer: {truth[question]}"
    return respond


# -- benchmark_api_models.py ------------------------------------------------------------------
BENCH = "evaluation/benchmark_api_models.py"


def test_benchmark_writes_a_model_result(run, dataset, tmp_path):
    run.server.responder = answers_all_but({"L10"})
    out = tmp_path / "api"
    proc = run(BENCH, "--models", "vendor/model-a", "--dataset", dataset, "--output-dir", out,
               *FAST, "--workers", "3")
    assert proc.returncode == 0, proc.stderr
    assert run.server.count == 6 and 1 <= run.server.max_in_flight <= 3
    result = read_result(out / "vendor_model-a.json")
    assert result["kind"] == "model_result" and result["model"] == "vendor/model-a"
    assert result["model_path"] == "vendor/model-a" and result["adapter"] is None
    assert result["fingerprint"] == questions_fingerprint(load_dataset(dataset))
    assert (result["n"], result["correct"], result["samples"]) == (6, 5, 1)
    assert result["accuracy"] == pytest.approx(5 / 6)
    assert (result["truncated"], result["unextracted"], result["tolerance"]) == (0, 0, 0.05)
    assert [r["id"] for r in result["results"]] == [f"q{i}" for i in range(6)]
    wrong = result["results"][4]
    assert wrong["correct"] is False and wrong["value"] == 12345 and wrong["target"] == "10"
    assert wrong["base_score"] == 4 and wrong["pass_count"] == 0 and wrong["samples"] == 1
    assert {"question", "extracted", "truncated", "reward", "response"} <= set(wrong)
    assert result["usage"]["cost_usd"] == pytest.approx(0.006)
    assert "5/6 correct" in proc.stdout
    # the system prompt of local evaluations and the bare question were sent, not the answer
    for seen in run.server.seen:
        system, user = seen.body["messages"]
        assert system["role"] == "system" and "\\boxed" in system["content"]
    assert sorted(s.user_text for s in run.server.seen) == sorted(q for q, _ in QUESTIONS)


def test_benchmark_grades_by_the_tolerance_rule(run, dataset, tmp_path):
    from relrl.evaluation.model_results import load_model_result

    truth = dict(QUESTIONS)

    def respond(body):  # 0.996 for 0.99: 0.6% off, but 60% off its failure probability 0.01
        question = body["messages"][-1]["content"]
        return f"Final answer: {'0.996' if truth[question] == '0.99' else truth[question]}"

    run.server.responder = respond
    results = {}
    for rule in ("study", "complement"):
        out = tmp_path / rule
        proc = run(BENCH, "--models", "vendor/model-a", "--dataset", dataset, "--output-dir", out,
                   "--tolerance-rule", rule, *FAST)
        assert proc.returncode == 0, proc.stderr
        results[rule] = load_model_result(out / "vendor_model-a.json")
    assert [results[r]["correct"] for r in ("study", "complement")] == [6, 5]
    assert results["complement"]["tolerance_rule"] == "complement"
    assert results["complement"]["settings"]["tolerance_rule"] == "complement"
    assert results["study"]["tolerance_rule"] == "study"


def test_benchmark_result_loads_beside_a_local_result(run, dataset, tmp_path):
    from relrl.evaluation.model_results import compare_models, load_model_result, model_result
    from relrl.evaluation.runner import score_question
    from relrl.evaluation.settings import EvalSettings

    run.server.responder = answers_all_but({"series"})
    out = tmp_path / "api"
    assert run(BENCH, "--models", "api/model", "--dataset", dataset, "--output-dir", out,
               *FAST).returncode == 0
    api_result = load_model_result(out / "api_model.json")
    rows = load_dataset(dataset)

    class Done:  # a local model's completions, as the shared evaluation runner makes them
        def __init__(self, text):
            self.text, self.truncated = text, False

    local = model_result(
        [score_question(row, [Done(f"\\boxed{{{row['answer']}}}")], EvalSettings())
         for row in rows], label="local", model_path="tiny", adapter=None, dataset=str(dataset),
        fingerprint=questions_fingerprint(rows), settings=EvalSettings())
    pair = compare_models(local, api_result, n_boot=200)
    assert (pair["base_accuracy"], pair["ft_accuracy"]) == (100.0, 83.3)  # the study's percent
    assert (pair["mcnemar_b01"], pair["mcnemar_b10"]) == (0, 1)  # one question lost
    compare = ROOT / "evaluation" / "compare_results.py"
    if compare.exists():
        local_path = tmp_path / "local.json"
        local_path.write_text(json.dumps(local))
        (tmp_path / "p").mkdir()
        proc = run("evaluation/compare_results.py", local_path, out / "api_model.json",
                   "--base", "local", "--output-md", tmp_path / "table.md", "--plots-dir",
                   tmp_path / "p")
        assert proc.returncode == 0, proc.stderr
        table = (tmp_path / "table.md").read_text()
        assert "| local" in table and "| api/model" in table


def test_a_killed_benchmark_resumes_without_asking_again(run, dataset, tmp_path):
    out = tmp_path / "api"
    run.server.script("ok", "ok", "ok", {"hang": True})
    proc = run.start(BENCH, "--models", "m", "--dataset", dataset, "--output-dir", out, *FAST)
    assert run.server.hanging.wait(60), "the fourth request never came"
    proc.send_signal(signal.SIGKILL)  # killed mid-request, as a SLURM time limit would
    run.printed.append("".join(proc.communicate()))
    first = [s.user_text for s in run.server.seen]
    assert len(first) == 4
    progress = read_jsonl(out / "m.json.api.progress.jsonl")
    assert len([r for r in progress if r["id"] != "__run__"]) == 3
    assert not (out / "m.json").exists()

    proc = run(BENCH, "--models", "m", "--dataset", dataset, "--output-dir", out, *FAST)
    assert proc.returncode == 0, proc.stderr
    second = [s.user_text for s in run.server.seen[4:]]
    assert len(second) == 3  # the three unanswered questions, nothing answered before
    assert set(second).isdisjoint(first[:3]) and first[3] in second
    assert set(first[:3]) | set(second) == {q for q, _ in QUESTIONS}
    assert json.loads((out / "m.json").read_text())["n"] == 6
    proc = run(BENCH, "--models", "m", "--dataset", dataset, "--output-dir", out, *FAST)
    assert proc.returncode == 0 and run.server.count == 7  # a finished run asks nothing


def test_ctrl_c_saves_the_answer_in_flight(run, dataset, tmp_path):
    out = tmp_path / "api"
    run.server.script("ok", {"hang": True})
    proc = run.start(BENCH, "--models", "m", "--dataset", dataset, "--output-dir", out, *FAST)
    assert run.server.hanging.wait(60)
    errors = LineWatcher(proc.stderr)
    proc.send_signal(signal.SIGINT)
    # the interrupt has landed while the request is still held
    assert errors.seen("answers in flight").wait(60), f"no sign of the interrupt: {errors.text()!r}"
    run.server.release.set()  # the answer arrives after Ctrl-C
    stdout = proc.stdout.read()
    proc.wait(timeout=60)
    errors.join()
    stderr = errors.text()
    run.printed.append(stdout + stderr)
    assert proc.returncode == 130 and "saving the 1 answers in flight" in stderr
    progress = read_jsonl(out / "m.json.api.progress.jsonl")
    assert [r["qid"] for r in progress if r["id"] != "__run__"] == ["q0", "q1"]


def test_benchmark_samples_and_seeds(run, dataset, tmp_path):
    calls = {"n": 0}

    def alternate(body):  # right, wrong, right, wrong, ...
        calls["n"] += 1
        return "\\boxed{500}" if calls["n"] % 2 else "\\boxed{1}"
    run.server.responder = alternate
    rows = write_jsonl(tmp_path / "one.jsonl", [{"question": QUESTIONS[0][0], "answer": "500"}])
    proc = run(BENCH, "--models", "m", "--dataset", rows, "--output-dir", tmp_path / "o",
               "--samples", "4", "--seed", "10", "--temperature", "0.7", *FAST)
    assert proc.returncode == 0, proc.stderr
    assert [s.body["seed"] for s in run.server.seen] == [10, 11, 12, 13]
    assert {s.body["temperature"] for s in run.server.seen} == {0.7}
    result = read_result(tmp_path / "o" / "m.json")
    record = result["results"][0]
    assert (record["pass_count"], record["samples"], len(record["completions"])) == (2, 4, 4)
    assert result["accuracy"] == 0.5


def test_benchmark_stops_at_max_cost_and_resumes(run, dataset, tmp_path):
    out = tmp_path / "api"
    args = ["--models", "m", "--dataset", dataset, "--output-dir", out, *FAST]
    proc = run(BENCH, *args, "--max-cost", "0.0025")
    assert proc.returncode == 1 and "--max-cost reached" in proc.stderr
    assert run.server.count == 3 and not (out / "m.json").exists()
    proc = run(BENCH, *args, "--temperature", "0.3")  # other settings: not the same run
    assert proc.returncode == 2 and "progress of a different run (differs in temperature)" \
        in proc.stderr and run.server.count == 3
    proc = run(BENCH, *args)
    assert proc.returncode == 0 and run.server.count == 6


def test_benchmark_request_failures_are_retried_on_the_next_run(run, dataset, tmp_path):
    out = tmp_path / "api"
    args = ["--models", "m", "--dataset", dataset, "--output-dir", out, *FAST]
    run.server.script({"status": 500}, {"status": 500})
    proc = run(BENCH, *args, "--max-retries", "1")
    assert proc.returncode == 1
    assert "question q0 sample 0 not answered" in proc.stderr and "rerun" in proc.stderr
    assert run.server.count == 7  # q0 twice, then the five others
    proc = run(BENCH, *args)
    assert proc.returncode == 0 and run.server.count == 8


def test_benchmark_rejected_key_stops_with_status_2(run, dataset, tmp_path):
    run.server.key = "the-real-key"  # ours is refused; the server echoes it in its error body
    proc = run(BENCH, "--models", "m", "--dataset", dataset, "--output-dir", tmp_path / "o",
               *FAST)
    assert proc.returncode == 2 and "error: HTTP 401" in proc.stderr
    assert "Traceback" not in proc.stderr and run.server.count == 1


def test_benchmark_unknown_model_keeps_the_others_results(run, dataset, tmp_path):
    run.server.models = {"good/model"}
    out = tmp_path / "o"
    proc = run(BENCH, "--models", "good/model", "bad/model", "--dataset", dataset,
               "--output-dir", out, *FAST)
    assert proc.returncode == 2
    assert "unknown model 'bad/model'" in proc.stderr and "Traceback" not in proc.stderr
    assert json.loads((out / "good_model.json").read_text())["n"] == 6
    assert run.server.count == 7  # six answers, then one refused request


def test_benchmark_missing_key_sends_nothing(run, dataset, tmp_path):
    proc = run(BENCH, "--models", "m", "--dataset", dataset, "--output-dir", tmp_path / "o",
               key=False)
    assert proc.returncode == 2 and "OPENROUTER_API_KEY is not set" in proc.stderr
    assert run.server.count == 0 and not (tmp_path / "o").exists()


def test_benchmark_bad_dataset_sends_nothing(run, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q1", "answer": "1"}\n{"question": "q2"}\n')
    proc = run(BENCH, "--models", "m", "--dataset", bad, "--output-dir", tmp_path / "o")
    assert proc.returncode == 2 and f"{bad}:2: missing 'answer'" in proc.stderr
    assert run.server.count == 0 and not (tmp_path / "o").exists()


# -- augment_grpo_questions.py ----------------------------------------------------------------
AUGMENT = "generators/augment_grpo_questions.py"
GOOD = ("QUESTION: A compressor has a constant failure rate of 0.0004 per hour. What is its "
        "reliability over a 1000-hour mission?\nREASONING: R = exp(-0.0004 × 1000) = 0.6703\n"
        "ANSWER: 0.6703")
GOOD_3 = ("QUESTION: A transformer bank uses two units in active parallel, each with "
          "reliability 0.9. Find the bank's reliability.\nREASONING: 1 - (1 - 0.9)^2 = 0.99\n"
          "ANSWER: 0.99")
GOOD_2 = ("**QUESTION:** Three identical fans in series each survive a year with probability "
          "0.95. What is the probability that all three survive?\n**REASONING:** "
          "0.95^3 = 0.857\n**ANSWER:** 0.857")


def scripted(*replies):
    """A responder that returns the replies in order."""
    queue = list(replies)
    return lambda body: queue.pop(0)


def test_augment_keeps_good_generations_and_rejects_with_reasons(run, dataset, tmp_path):
    near_duplicate = ("QUESTION: A pump has a constant failure rate of 0.004 per hour. What is "
                      "its MTTF in hours?\nREASONING: 1/0.004 = 250\nANSWER: 250")
    run.server.responder = scripted(
        GOOD.replace("ANSWER: 0.6703", "ANSWER: about two thirds"),
        "QUESTION: (a) Find the MTTF. (b) Find the reliability at 100 h.\nANSWER: 500",
        near_duplicate,
        "Sure! Here is a new problem about pumps.",
        GOOD + "\nQUESTION: another one\nANSWER: 3",
        {"text": GOOD[:60], "finish_reason": "length"},
        GOOD, GOOD_2, GOOD)
    out = tmp_path / "gen.jsonl"
    proc = run(AUGMENT, "--seeds", dataset, "--model", "gen/model", "--target", "2",
               "--max-attempts", "20", "--output", out, *FAST)
    assert proc.returncode == 0, proc.stderr
    kept = read_jsonl(out)
    assert [k["answer"] for k in kept] == ["0.6703", "0.857"]
    assert run.server.count == 8  # stops the moment the target is met
    seed_ids = {f"q{i}" for i in range(6)}
    for item in kept:
        assert item["source"] == "test" and item["generator"] == "gen/model"
        assert item["group"] == item["seed_id"] in seed_ids and item["reasoning"]
        assert item["answer_type"] == "numeric" and item["id"].startswith(item["seed_id"])
    reasons = [r["reason"] for r in read_jsonl(tmp_path / "gen.rejected.jsonl")]
    assert reasons[0].startswith("non-numeric answer 'about two thirds'")
    assert reasons[1].startswith("multi-part question")
    assert re.match(r"near-duplicate of q0 \(similarity 1\.00\)", reasons[2])
    assert reasons[3] == "malformed: no QUESTION section"
    assert reasons[4] == "malformed: several problems (more than one QUESTION section)"
    assert reasons[5] == "generation cut off (max tokens)"
    prompt = run.server.seen[0].user_text
    assert "QUESTION:" in prompt and "ANSWER:" in prompt


def test_augment_accepts_an_enumeration_that_asks_one_thing(run, dataset, tmp_path):
    run.server.responder = scripted(
        "QUESTION: A diode fails in two modes: (i) open, with probability 0.02, and (ii) short, "
        "with probability 0.05. What is the probability that it works?\nANSWER: 0.93")
    out = tmp_path / "gen.jsonl"
    proc = run(AUGMENT, "--seeds", dataset, "--model", "g", "--target", "1", "--output", out,
               *FAST)
    assert proc.returncode == 0, proc.stderr
    assert [k["answer"] for k in read_jsonl(out)] == ["0.93"]


def test_augment_resumes_where_it_stopped(run, dataset, tmp_path):
    run.server.responder = scripted(GOOD, GOOD_2, "no format at all", GOOD_3)
    run.server.script("ok", "ok", {"status": 401})  # the third request is refused: exit 2
    out = tmp_path / "gen.jsonl"
    args = ["--seeds", dataset, "--model", "gen/model", "--target", "3", "--output", out, *FAST]
    proc = run(AUGMENT, *args)
    assert proc.returncode == 2 and "HTTP 401" in proc.stderr
    assert len(read_jsonl(out)) == 2  # what was paid for is in the output already
    first = [s.user_text for s in run.server.seen[:2]]
    proc = run(AUGMENT, *args)
    assert proc.returncode == 0, proc.stderr
    later = [s.user_text for s in run.server.seen[3:]]
    assert len(later) == 2 and set(later).isdisjoint(first)  # attempts 2 and 3, not 0 or 1
    assert [k["answer"] for k in read_jsonl(out)] == ["0.6703", "0.857", "0.99"]
    assert run(AUGMENT, *args).returncode == 0 and run.server.count == 5


def test_augment_gives_up_after_max_attempts(run, dataset, tmp_path):
    run.server.responder = lambda body: "nothing useful"
    proc = run(AUGMENT, "--seeds", dataset, "--model", "g", "--target", "2", "--output",
               tmp_path / "g.jsonl", *FAST)
    assert proc.returncode == 1 and "--max-attempts 6 used up" in proc.stderr
    assert run.server.count == 6 and read_jsonl(tmp_path / "g.jsonl") == []


def test_augment_paraphrase_keeps_numbers_and_answer(run, tmp_path):
    seed = write_jsonl(tmp_path / "seed.jsonl", [{
        "id": "s1", "question": "A unit has failure rate 0.002 per hour. Find R at 100 hours.",
        "answer": "0.8187", "source": "book", "group": "g7", "reasoning": "exp(-0.2)"}])
    run.server.responder = scripted(
        "QUESTION: A unit with a failure rate of 0.002 per hour: find R at 1000 hours.",
        "QUESTION: A unit has failure rate 0.002 per hour. Find R at 100 hours.",
        "QUESTION: Find the reliability at 100 hours of a unit whose failure rate is 0.002/h.")
    out = tmp_path / "para.jsonl"
    proc = run(AUGMENT, "--mode", "paraphrase", "--seeds", seed, "--model", "p/m", "--target",
               "1", "--output", out, *FAST)
    assert proc.returncode == 0, proc.stderr
    [item] = read_jsonl(out)
    assert item["question"].startswith("Find the reliability at 100 hours")
    assert (item["answer"], item["source"], item["group"]) == ("0.8187", "book", "g7")
    assert item["paraphrase_of"] == "s1" and item["generator"] == "p/m"
    reasons = [r["reason"] for r in read_jsonl(tmp_path / "para.rejected.jsonl")]
    assert reasons == ["numbers changed: missing 100; added 1000",
                       "paraphrase identical to the original"]
    assert "0.002" in run.server.seen[0].user_text and "0.8187" not in run.server.seen[0].user_text


def test_augment_target_zero_is_refused(run, dataset, tmp_path):
    proc = run(AUGMENT, "--seeds", dataset, "--model", "g", "--target", "0", "--output",
               tmp_path / "g.jsonl")
    assert proc.returncode == 2 and "--target must be >= 1, got 0" in proc.stderr
    assert run.server.count == 0


# -- verify_generated.py ----------------------------------------------------------------------
VERIFY = "generators/verify_generated.py"


def test_verify_generated_keeps_agreeing_items(run, tmp_path):
    items = write_jsonl(tmp_path / "gen.jsonl", [
        {"id": "g1", "question": "Q one: MTTF for rate 0.002?", "answer": "500"},
        {"id": "g2", "question": "Q two: series 0.9 and 0.8?", "answer": "0.8123"},
        {"id": "g3", "question": "Q three: parallel 0.9, 0.9?", "answer": "0.99"},
        {"id": "g4", "question": "Q four: a long one", "answer": "7"},
        {"id": "g5", "question": "Q five: rounding", "answer": "0.6703"}])
    replies = {"one": "\\boxed{500}", "two": "\\boxed{0.72}", "three": "I cannot tell.",
               "four": {"text": "Let me think for a very long", "finish_reason": "length"},
               "five": "R = exp(-0.4) = 0.670\n\nFinal answer: 0.670"}
    run.server.responder = lambda body: next(v for k, v in replies.items()
                                             if f"Q {k}:" in body["messages"][-1]["content"])
    kept, rejected = tmp_path / "kept.jsonl", tmp_path / "rejected.jsonl"
    args = ["--input", items, "--model", "judge/m", "--kept", kept, "--rejected", rejected, *FAST]
    proc = run(VERIFY, *args)
    assert proc.returncode == 0, proc.stderr
    assert [k["id"] for k in read_jsonl(kept)] == ["g1", "g5"]
    assert read_jsonl(kept)[0]["verified_by"] == "judge/m"
    reasons = {r["id"]: r["rejected_reason"] for r in read_jsonl(rejected)}
    assert reasons["g2"].startswith("verifier answered 0.72, generated answer 0.8123 (off by")
    assert reasons["g3"].startswith("verifier gave no extractable answer")
    assert reasons["g4"] == "verifier's answer was cut off (max tokens)"
    assert all("0.8123" not in json.dumps(s.body) for s in run.server.seen)  # answer not shown
    before = kept.read_text()
    assert run(VERIFY, *args).returncode == 0 and run.server.count == 5  # resumed: no requests
    assert kept.read_text() == before


def test_verify_generated_stops_on_unknown_model_losing_nothing(run, tmp_path):
    items = write_jsonl(tmp_path / "gen.jsonl", [
        {"id": f"g{i}", "question": f"Question {i}?", "answer": "42"} for i in range(3)])
    run.server.models = {"other"}
    args = ["--input", items, "--model", "nope", "--kept", tmp_path / "k.jsonl", "--rejected",
            tmp_path / "r.jsonl", *FAST]
    proc = run(VERIFY, *args)
    assert proc.returncode == 2 and "unknown model 'nope'" in proc.stderr
    assert run.server.count == 1 and not (tmp_path / "k.jsonl").exists()


def test_verify_generated_follows_the_tolerance_rule(run, tmp_path):
    # 0.9955 for 0.9900: 0.6% off, but 55% off the failure probability 0.01
    items = write_jsonl(tmp_path / "gen.jsonl", [
        {"id": "p", "question": "Q one: determine the reliability of the pair.", "answer": "0.9900"},
        {"id": "v", "question": "Q two: determine the reliability of the pair.", "answer": "0.9900",
         "target_kind": "value"}])
    run.server.responder = lambda body: "\\boxed{0.9955}"
    kept, rejected = tmp_path / "kept.jsonl", tmp_path / "rejected.jsonl"
    proc = run(VERIFY, "--input", items, "--model", "judge/m", "--kept", kept, "--rejected",
               rejected, "--tolerance-rule", "complement", *FAST)
    assert proc.returncode == 0, proc.stderr
    assert [k["id"] for k in read_jsonl(kept)] == ["v"]
    [reason] = [r["rejected_reason"] for r in read_jsonl(rejected)]
    assert reason.endswith("(off by 55% of min(t, 1 - t))")


# -- verify_reasoning.py ----------------------------------------------------------------------
REASONING = "generators/verify_reasoning.py"


def reasoning_items(tmp_path):
    return write_jsonl(tmp_path / "worked.jsonl", [
        {"id": "ok", "question": "Series 0.9, 0.8, 0.95?", "answer": "0.684",
         "reasoning": "R = 0.9 × 0.8 × 0.95 = 0.684\n\n\\boxed{0.684}"},
        {"id": "bad_step", "question": "Parallel 0.9, 0.9?", "answer": "0.99",
         "reasoning": "Q = (1 - 0.9)(1 - 0.9) = 0.02, R = 1 - 0.01 = 0.99. \\boxed{0.99}"},
        {"id": "contradicts", "question": "MTTF at rate 0.002?", "answer": "400",
         "reasoning": "MTTF = \\frac{1}{0.002} = 500 hours, so \\boxed{500}"},
        {"id": "functions", "question": "R at 1000 h, rate 0.0004?", "answer": "0.6703",
         "reasoning": "R = e^{-0.0004 \\times 1000} = exp(-0.4) = 0.6703, $0.5^{2} = 0.25$ "
                      "and 10^{4}/4×10^{3} = 2.5. \\boxed{0.6703}"},
        {"id": "none", "question": "No worked solution?", "answer": "1", "reasoning": ""}])


def test_verify_reasoning_flags_wrong_steps_and_contradictions(run, tmp_path):
    flagged, clean = tmp_path / "flagged.jsonl", tmp_path / "clean.jsonl"
    proc = run(REASONING, "--input", reasoning_items(tmp_path), "--output", tmp_path / "r.json",
               "--flagged", flagged, "--clean", clean, key=False)  # offline: needs no key
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    items = {item["id"]: item for item in report["items"]}
    assert (report["ok"], report["flagged"], report["no reasoning"]) == (2, 2, 1)
    assert items["ok"]["steps_checked"] == 1 and items["ok"]["problems"] == []
    [step] = items["bad_step"]["wrong_steps"]
    assert (step["expr"], step["written"], step["computed"]) == ("(1 - 0.9)(1 - 0.9)", "0.02",
                                                                 0.01)
    assert items["contradicts"]["problems"][0].startswith("final value 500 contradicts the "
                                                          "answer 400")
    assert items["functions"]["status"] == "ok" and items["functions"]["steps_checked"] == 2
    assert [r["id"] for r in read_jsonl(flagged)] == ["bad_step", "contradicts"]
    assert [r["id"] for r in read_jsonl(clean)] == ["ok", "functions"]
    assert run.server.count == 0


def test_verify_reasoning_llm_judge_is_resumable(run, tmp_path):
    run.server.responder = lambda body: ("Step 2 is wrong.\nVERDICT: INCONSISTENT"
                                         if "Parallel" in body["messages"][0]["content"]
                                         else "All fine.\nVERDICT: CONSISTENT")
    args = ["--input", reasoning_items(tmp_path), "--output", tmp_path / "r.json",
            "--judge-model", "judge/m", *FAST]
    proc = run(REASONING, *args, "--max-cost", "0.0015")  # two verdicts at $0.001 each
    assert proc.returncode == 1 and "2 items have no judge verdict yet" in proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["judge_missing"] == 2
    assert run(REASONING, *args).returncode == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["judge_missing"] == 0
    items = {i["id"]: i for i in report["items"]}
    assert items["bad_step"]["judge"]["verdict"] == "INCONSISTENT"
    assert "LLM judge: the solution does not support the answer" in items["bad_step"]["problems"]
    assert items["ok"]["judge"]["verdict"] == "CONSISTENT" and "judge" not in items["none"]
    assert run.server.count == 4  # items with reasoning only
    assert run(REASONING, *args).returncode == 0 and run.server.count == 4


def test_verify_reasoning_follows_the_tolerance_rule(run, tmp_path):
    items = write_jsonl(tmp_path / "worked.jsonl", [
        {"id": "near_one", "question": "Determine the reliability of the valve.",
         "answer": "0.9990", "reasoning": "R = 0.995 \\boxed{0.995}"}])
    for rule, status in (("study", "ok"), ("complement", "flagged")):
        out = tmp_path / f"{rule}.json"
        proc = run(REASONING, "--input", items, "--output", out, "--tolerance-rule", rule,
                   key=False)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(out.read_text())
        assert report["tolerance_rule"] == rule and report["items"][0]["status"] == status
