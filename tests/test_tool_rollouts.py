"""Multi-turn rollouts with the calculator (relrl.engines.tool_loop): a call is answered and the
model continues; inserted ids are the template's and are masked; the budget counts sampled
tokens; malformed calls, the call limit and the context limit each end as specified. A scripted
`sample_round` stands in for the model where the test needs a tool call to happen."""
import pytest

from relrl.data.prompting import build_prompt, tool_turn_text
from relrl.engines import hf
from relrl.engines.base import GenerationStopped, SamplingConfig, sample_seed, turn_seed
from relrl.engines.tool_loop import run_async, run_rollouts
from relrl.modeling.tiny_models import build_tiny_random
from relrl.tools.protocol import calculator_call, format_tool_call

END = "<|im_end|>"


@pytest.fixture(scope="module")
def tok():
    return build_tiny_random(0)[1]


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def turn_of(tok, request) -> int:
    """Which turn a request samples: the assistant prefixes in its ids, less the prompt's."""
    return tok.decode(request.ids).count("<|im_start|>assistant") - 1


class Script:
    """A stand-in model: turn k of a rollout is turns[k] (the last one repeated), and every
    request is recorded."""

    def __init__(self, tok, turns):
        self.tok, self.turns, self.requests = tok, turns, []

    def __call__(self, requests, sampling, should_stop):
        self.requests += requests
        return [(ids(self.tok, self.turns[min(turn_of(self.tok, r), len(self.turns) - 1)]), None)
                for r in requests]


class Stepped:
    """A script as a TurnStream (run_async's engine): the turn of rollout k ends k % 3 + 1 steps
    after it is submitted, so the turns of several rollouts overlap and end out of order."""

    def __init__(self, script):
        self.script, self.flight, self.steps, self.aborted = script, [], 0, False
        self.overlapped = False  # a turn was submitted while others were in flight

    def submit(self, keys, requests):
        self.overlapped = self.overlapped or bool(self.flight)
        outputs = self.script(requests, None, None)
        self.flight += [[k % 3 + 1, k, out] for k, out in zip(keys, outputs)]

    def busy(self):
        return bool(self.flight)

    def step(self):
        self.steps += 1
        for turn in self.flight:
            turn[0] -= 1
        ended = [(k, *out) for left, k, out in self.flight if left == 0]
        self.flight = [turn for turn in self.flight if turn[0] > 0]
        return ended

    def abort(self):
        self.flight, self.aborted = [], True


def drive(driver, script, *args, **kwargs):
    """run_rollouts or run_async over the same script."""
    if driver == "rounds":
        return run_rollouts(script, *args, **kwargs)
    return run_async(Stepped(script), *args, **kwargs)


@pytest.fixture(params=["rounds", "async"])
def driver(request):
    return request.param


def rollout(tok, turns, driver="rounds", **sampling):
    script = Script(tok, turns)
    config = SamplingConfig(**{"tools": "calculator", "max_new_tokens": 2000, **sampling})
    prompt = build_prompt(tok, "R(500 h) at 0.002 per hour?", tools="calculator")
    completion = drive(driver, script, tok, [prompt], 1, [7], config)[0][0]
    return completion, script, ids(tok, prompt)


def test_a_call_is_answered_and_the_model_continues_with_the_inserted_ids_masked(tok, driver):
    first, last = calculator_call("exp(-0.002*500)") + END, "Answer: \\boxed{0.3679}" + END
    c, script, prompt = rollout(tok, [first, last], driver)
    inserted = ids(tok, tool_turn_text(tok, ["0.3678794412"]))
    assert tool_turn_text(tok, ["0.3678794412"]) == (
        "\n<|im_start|>user\n<tool_response>\n0.3678794412\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n")
    assert c.token_ids == ids(tok, first) + inserted + ids(tok, last)
    assert c.sampled_mask == [1] * len(ids(tok, first)) + [0] * len(inserted) + [1] * len(ids(tok, last))
    assert c.text == "Answer: \\boxed{0.3679}"  # the grader reads the last turn only
    assert "<tool_response>\n0.3678794412\n</tool_response>" in c.transcript
    assert (c.tool_calls, c.tool_errors, c.truncated) == (1, 0, False)
    assert c.sampled_tokens == len(ids(tok, first)) + len(ids(tok, last))
    # turn 1 continues from exactly the sampled ids plus the inserted ones, with its own seed
    second = script.requests[1]
    assert second.ids == prompt + ids(tok, first) + inserted
    assert script.requests[0].seed == sample_seed(7, 0)
    assert second.seed == turn_seed(sample_seed(7, 0), 1) != sample_seed(7, 0)


def test_max_new_tokens_counts_only_the_models_own_tokens(tok, driver):
    first = calculator_call("2*3") + END
    budget = len(ids(tok, first)) + 3
    c, script, _ = rollout(tok, [first, "1234567890 and more text"], driver, max_new_tokens=budget)
    assert script.requests[1].max_tokens == 3
    assert c.truncated and c.sampled_tokens == budget
    assert len(c.token_ids) > budget  # the inserted tokens do not count


@pytest.mark.parametrize("call, answer", [
    ("<tool_call>\n{not json}\n</tool_call>", "error: the tool call is not valid JSON"),
    (format_tool_call("python", {"code": "1"}), "error: unknown tool 'python'"),
    (format_tool_call("calculator", {"expr": "1"}), 'error: missing argument "expression"'),
    (calculator_call("9^9^9"), "error: result too large"),
    (calculator_call("__import__('os')"), "error: unknown function '__import__'"),
])
def test_a_malformed_or_failing_call_gets_an_error_as_its_answer(tok, call, answer, driver):
    c, _, _ = rollout(tok, [call + END, "\\boxed{1}" + END], driver)
    assert (c.tool_calls, c.tool_errors) == (1, 1)
    response = c.transcript.split("<tool_response>\n")[1].split("\n</tool_response>")[0]
    assert response.startswith(answer)


def test_calls_past_the_limit_are_not_run_and_a_call_at_the_limit_ends_the_completion(tok, driver):
    always = calculator_call("1+1") + END
    c, script, _ = rollout(tok, [always], driver, max_tool_calls=2)
    assert len(script.requests) == 3 and c.tool_calls == 2 and not c.truncated
    assert c.text.startswith("<tool_call>")  # the last turn, a call nobody answered
    two = calculator_call("1+1") + "\n" + calculator_call("2+2") + END
    c, _, _ = rollout(tok, [two, "\\boxed{4}" + END], driver, max_tool_calls=1)
    assert (c.tool_calls, c.tool_errors) == (2, 1)  # the second call answered with a refusal
    assert "error: no more tool calls (the limit is 1)" in c.transcript


def test_without_tools_a_call_is_plain_text_and_nothing_is_inserted(tok, driver):
    call = calculator_call("2*3") + END
    c, script, _ = rollout(tok, [call, "never"], driver, tools="none")
    assert len(script.requests) == 1 and c.sampled_mask is None and c.tool_calls == 0
    assert c.text == c.transcript and "<tool_call>" in c.text


def test_no_room_in_the_context_for_the_answer_ends_the_completion_truncated(tok, driver):
    script = Script(tok, [calculator_call("2*3") + END, "\\boxed{6}" + END])
    prompt = build_prompt(tok, "q", tools="calculator")
    room = len(ids(tok, prompt)) + len(ids(tok, calculator_call("2*3") + END)) + 5
    c = drive(driver, script, tok, [prompt], 1, [0], SamplingConfig(tools="calculator"),
              context_limit=room)[0][0]
    assert c.truncated and len(script.requests) == 1 and c.sampled_mask is None


def scripted_first_turn(real, tok, text):
    """sample_round whose turn 0 is `text` (a tool call) and later turns the real model's."""
    def round_(model, tokenizer, requests, sampling, should_stop=None):
        out = real(model, tokenizer, requests, sampling, should_stop)
        return [(ids(tok, text), None) if turn_of(tok, r) == 0 else o
                for r, o in zip(requests, out)]
    return round_


def test_the_hf_engine_continues_after_the_call_deterministically_per_sample(tok, monkeypatch):
    model, tok = build_tiny_random(0)
    monkeypatch.setattr(hf, "sample_round",
                        scripted_first_turn(hf.sample_round, tok, calculator_call("2*3") + END))
    config = SamplingConfig(tools="calculator", max_new_tokens=120, micro_batch=3)
    prompts = [build_prompt(tok, q, tools="calculator") for q in ("first?", "second question?")]
    both = hf.generate(model, tok, prompts, 2, [11, 12], config)
    alone = hf.generate(model, tok, prompts[1:], 2, [12], config)
    for c in (c for row in both for c in row):
        assert c.tool_calls == 1 and 0 in c.sampled_mask and "<tool_response>\n6\n" in c.transcript
        assert len(c.sampled_mask) == len(c.token_ids)
    assert [c.token_ids for c in alone[0]] == [c.token_ids for c in both[1]]
    assert both[0][0].token_ids != both[0][1].token_ids  # samples differ after the call


class ByQuestion(Script):
    """A stand-in model whose turns depend on the question: turns[i] for prompts[i]."""

    def __init__(self, tok, prompts, turns):
        super().__init__(tok, None)
        self.prompts, self.by_question = [ids(tok, p) for p in prompts], turns

    def __call__(self, requests, sampling, should_stop):
        self.requests += requests
        out = []
        for r in requests:
            i = next(i for i, p in enumerate(self.prompts) if r.ids[:len(p)] == p)
            turns = self.by_question[i]
            out.append((ids(self.tok, turns[min(turn_of(self.tok, r), len(turns) - 1)]), None))
        return out


QUESTIONS = ["R(500 h)?", "two valves in parallel?", "availability?", "MTBF?"]
TURNS = [["\\boxed{1}" + END],  # no call
         [calculator_call("exp(-0.002*500)") + END, "\\boxed{0.3679}" + END],
         [calculator_call("9^9^9") + END, calculator_call("1-0.1^2") + END, "\\boxed{0.99}" + END],
         [calculator_call("400/408") + END, "0.98 and on and on without an end"]]  # truncated


def test_async_gives_the_rounds_completions_while_turns_overlap(tok):
    prompts = [build_prompt(tok, q, tools="calculator") for q in QUESTIONS]
    config = SamplingConfig(tools="calculator", max_new_tokens=200)
    rounds = run_rollouts(ByQuestion(tok, prompts, TURNS), tok, prompts, 2, [1, 2, 3, 4], config)
    stream = Stepped(ByQuestion(tok, prompts, TURNS))
    together = run_async(stream, tok, prompts, 2, [1, 2, 3, 4], config)
    fields = lambda c: (c.token_ids, c.sampled_mask, c.text, c.transcript, c.truncated,
                        c.tool_calls, c.tool_errors)
    assert [[fields(c) for c in row] for row in together] == [[fields(c) for c in row] for row in rounds]
    assert [[(c.tool_calls, c.tool_errors, c.truncated) for c in row[:1]] for row in together] == [
        [(0, 0, False)], [(1, 0, False)], [(2, 1, False)], [(1, 0, True)]]
    assert stream.overlapped  # nobody waited for the end of a round


def test_async_stops_before_the_next_step_and_drops_the_turns_in_flight(tok):
    prompts = [build_prompt(tok, q, tools="calculator") for q in QUESTIONS]
    stream = Stepped(ByQuestion(tok, prompts, TURNS))
    with pytest.raises(GenerationStopped):
        run_async(stream, tok, prompts, 2, [1, 2, 3, 4], SamplingConfig(tools="calculator"),
                  should_stop=lambda: stream.steps >= 2)
    assert stream.steps == 2 and stream.aborted and not stream.busy()
