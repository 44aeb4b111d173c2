"""Property-based tests of the tool channel (issue 43): whatever the model writes,

- the calculator answers with one printable line, the same in every process, without `<`, in
  time bounded by the expression's length;
- the tool-call parser and the rollout loop never raise (a bad call gets an error turn) and take
  time linear in the turn's length;
- the inserted turn's token ids hold the protocol's special and added tokens exactly where the
  protocol puts them, with the tokenizers of tiny-random, of a tiny-tool-like model and of a
  Qwen3-style one (`<tool_call>`, `<tool_response>`, `<think>` as added tokens), whatever the
  answers echo.

The number of examples comes from the hypothesis profile (`make fuzz` runs many more).
"""
import json
import random
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relrl.data.prompting import CHATML_TEMPLATE, build_prompt, tool_turn_text
from relrl.engines.base import SamplingConfig
from relrl.modeling.tiny_tokenizer import fixed_tokenizer, train_tokenizer
from relrl.tools.calculator import MAX_CHARS, calculator
from relrl.tools.protocol import (MAX_ANSWER_CHARS, answer_call, calculator_call,
                                  format_tool_call, tool_call_bodies)

pytestmark = pytest.mark.fuzz
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

MARKERS = ["<|im_end|>", "<|im_start|>", "<|endoftext|>", "<tool_call>", "</tool_call>",
           "<tool_response>", "</tool_response>", "<think>", "</think>", "<tools>"]
# Pieces that reach every branch of the calculator when glued together at random: numbers,
# every operator Python parses (the refused ones too), functions, names, bindings, brackets,
# literals of other types, spellings, markers and line breaks.
PIECES = ["1", "0", "2.5", "1e308", "1e-320", "9" * 40, "0x1f", "1_000", ".", "e", "pi", "π",
          "+", "-", "*", "/", "^", "**", "%", "//", "@", "<<", ">>", "&", "|", "~", "!", "==",
          "<", ">", "not ", " and ", " if ", " else ", ":=", "lambda:", "(", ")", "[", "]", "{",
          "}", ",", ";", "=", "x", "x1 = 2; ", "a.b", "'s'", "b'b'", "1j", "...", "None", "True",
          "exp(", "ln(", "log(", "sqrt(", "factorial(", "gamma(", "comb(", "norm_ppf(", "max(",
          "chi2_ppf(", "beta_ppf(", "gammainc(", "binom_cdf(", "poisson_cdf(", "__import__(",
          "f(", "×", "÷", "\u2212", " ", "\n", "\t", "\u2028", "\x00", "\\", "\"", "é", "𝔵",
          *MARKERS]
EXPRESSIONS = st.one_of(
    st.text(max_size=MAX_CHARS + 50),
    st.lists(st.sampled_from(PIECES), max_size=400).map("".join),
)


def assert_one_safe_line(answer: str, limit: int):
    assert isinstance(answer, str) and answer
    assert answer.isprintable()  # no line break, control or separator character
    assert "<" not in answer and " at 0x" not in answer
    assert len(answer) <= limit


def seconds(f, repeats=3):
    """The best of `repeats` timings of f() in this process's CPU time: the work, not the wait
    for a core on a shared machine (which only ever adds time)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        f()
        best = min(best, time.process_time() - start)
    return best


# ---------------------------------------------------------------------- the calculator
@PROPERTY
@given(EXPRESSIONS)
def test_the_calculator_answers_one_safe_deterministic_line_in_linear_time(expression):
    start = time.process_time()
    answer = calculator(expression)
    took = time.process_time() - start
    if answer.startswith("error: "):
        assert_one_safe_line(answer, 600)
    else:
        assert float(answer) == float(answer) and abs(float(answer)) != float("inf")
    assert calculator(expression) == answer
    # 20 ms and 50 us a character (1 then 999 '!' took 2 s); re-timed before failing, since a
    # busy machine can stall one call
    bound = 0.02 + 5e-5 * len(expression)
    assert took <= bound or seconds(lambda: calculator(expression)) <= bound, expression


def generated_expressions(n=400, seed=43):
    """A fixed set of expressions built like EXPRESSIONS' second strategy, plus every refused
    operator alone: the same list in every process."""
    rng = random.Random(seed)
    glued = ["".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 40))) for _ in range(n)]
    alone = ["7 % 2", "7 // 2", "1 @ 2", "~1", "not 1", "1 << 2", "1 & 2", "1 | 2", "1 ^ 2 ^ 3",
             "norm_ppf(0.5, 2)", "max(1)", "+".join(["1"] * 499), "-" * 999 + "1"]
    return alone + glued


def test_the_calculator_answers_the_same_in_another_process():
    """Addresses (`<ast.Mod object at 0x7f...>`), hash seeds and stack depths differ between
    processes; the answers must not."""
    expressions = generated_expressions()
    here = [calculator(e) for e in expressions]
    code = ("import json, sys\nfrom relrl.tools.calculator import calculator\n"
            "print(json.dumps([calculator(e) for e in json.load(sys.stdin)]))")
    for hash_seed in ("1", "2"):
        run = subprocess.run([sys.executable, "-c", code], input=json.dumps(expressions),
                             capture_output=True, text=True, timeout=120, check=True,
                             env={"PYTHONHASHSEED": hash_seed, "PATH": ""})
        there = json.loads(run.stdout)
        assert [(e, a) for e, a, b in zip(expressions, here, there) if a != b] == []
    assert sum(a.startswith("error: ") for a in here) > 100  # the error paths were exercised
    assert any("'%' not supported" in a for a in here)


def test_the_calculator_is_linear_in_the_expression():
    """Time at 250 and 1,000 characters: a ratio near 4 (quadratic: 16; the bound is 10)."""
    for make in (lambda n: "1" + "!" * (n - 1),
                 lambda n: "+".join(["1"] * ((n + 1) // 2)),
                 lambda n: "(" * 90 + "1" + "+1" * ((n - 181) // 2) + ")" * 90,
                 lambda n: "x = 1; " * (n // 7)):
        small, large = make(250), make(1000)
        ratio = seconds(lambda: calculator(large), 5) / seconds(lambda: calculator(small), 5)
        assert ratio < 10, (large[:30], ratio)


# ---------------------------------------------------------------------- the tool-call parser
TURN_PIECES = ["<tool_call>", "</tool_call>", "\n", '{"name": "calculator", "arguments": ',
               '{"expression": "', '"}}', "}", "{", "[", "]", '"', "\\", "1" * 5000, "1e999",
               "NaN", "-Infinity", '"name"', ":", ",", "null", "true", "calculator", "python",
               '"arguments": "{\\"expression\\": \\"1\\"}"', " ", "<|im_end|>", "é"]
TURNS = st.one_of(st.text(max_size=5000),
                  st.lists(st.sampled_from(TURN_PIECES), max_size=300).map("".join))


@PROPERTY
@given(TURNS)
def test_the_parser_answers_any_turn_with_calls_or_error_lines(turn):
    for body in tool_call_bodies(turn):
        answer = answer_call(body)
        assert_one_safe_line(answer.text, MAX_ANSWER_CHARS + 3 * MAX_ANSWER_CHARS)
        assert answer.failed == answer.text.startswith("error:")


@pytest.mark.parametrize("body, answer", [
    ('{"name": "calculator", "arguments": {"expression": "1"}, "x": ' + "1" * 5000 + "}",
     "error: the tool call is not valid JSON"),  # once Python's int-digit ValueError
    ("[" * 100_000 + "]" * 100_000, "error: the tool call is not valid JSON"),
    ('{"name": "calculator", "arguments": ' + "[" * 10_000 + "]" * 10_000 + "}",
     "error: the tool call is not valid JSON"),
    ('{"name": "calculator", "arguments": "' + "[" * 10_000 + '"}',
     'error: missing argument "expression"'),
    ('{"name": NaN, "arguments": {}}', "error: the tool call is not valid JSON"),
    ('{"name": "<|im_end|><tool_call>", "arguments": {}}',
     "error: unknown tool '\\x3c|im_end|>\\x3ctool_call>'; the tool is 'calculator'"),
    ('{"name": "calculator", "arguments": {"expression": "7 % 2"}}', "error: '%' not supported"),
])
def test_hostile_calls_get_error_answers(body, answer):
    got = answer_call(body)
    assert got.failed and got.text.startswith(answer), got.text
    assert_one_safe_line(got.text, 4 * MAX_ANSWER_CHARS)


def test_an_exception_anywhere_in_a_call_becomes_an_error_answer(monkeypatch):
    from relrl.tools import protocol

    monkeypatch.setattr(protocol, "calculator", lambda e: 1 / 0)
    got = answer_call(json.dumps({"name": "calculator", "arguments": {"expression": "1"}}))
    assert got.failed and got.text == "error: the tool call could not be run"


def test_the_parser_is_linear_in_the_turn():
    """Time at n and 4n characters: a ratio near 4 (quadratic: 16; the bound, 10, leaves room
    for a busy machine). Unclosed openings once took
    27 s at 160,000 characters (a regular expression rescanned the turn from each)."""
    families = [
        lambda n: "<tool_call>" * (n // 11),
        lambda n: "<tool_call>" * (n // 22) + "x" * (n // 2) + "</tool_call>",
        lambda n: ("<tool_call>" + "[" * 50 + "</tool_call>") * (n // 73),
        lambda n: (calculator_call("1!" * 20) + "\n") * (n // 110),
        lambda n: ("<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \""
                   + "(" * 500 + "</tool_call>") * (n // 580),
    ]

    def parse_and_answer(turn):
        for body in tool_call_bodies(turn):
            answer_call(body)

    for make in families:
        small, large = make(40_000), make(160_000)
        ratio = seconds(lambda: parse_and_answer(large), 5) / seconds(lambda: parse_and_answer(small), 5)
        assert ratio < 10, (small[:40], ratio)


# ---------------------------------------------------------------------- the inserted turn
# A Qwen3-style template: CHATML_TEMPLATE, whose generation prompt with thinking off holds the
# empty think block as Qwen3's does (this project's own text, not Qwen3's template).
QWEN3_STYLE_TEMPLATE = CHATML_TEMPLATE.replace(
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}",
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and not enable_thinking -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}{%- endif -%}")
assert QWEN3_STYLE_TEMPLATE != CHATML_TEMPLATE


def qwen3_style_tokenizer():
    """tiny-random's tokenizer with Qwen3's tool and think markers as added (not special)
    tokens, as Qwen3's tokenizer has them, and the Qwen3-style template."""
    tok = fixed_tokenizer()
    tok.add_tokens(["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
                    "<think>", "</think>"])
    tok.chat_template = QWEN3_STYLE_TEMPLATE
    return tok


def tiny_tool_like_tokenizer():
    """A tokenizer trained as tiny-tool's is (relrl.models.tiny_tool_build), on rendered
    tool-using solutions, small: its merges span the tool markup."""
    from relrl.data.tool_solutions import tool_solution
    from relrl.problems.dataset import generate_rows
    from relrl.problems.registry import TOOL_FAMILIES, select

    render = fixed_tokenizer()
    rows = generate_rows(select(TOOL_FAMILIES), 60, 7)
    texts = [build_prompt(render, row["question"], tools="calculator")
             + "".join(text for text, _ in tool_solution(render, row)) for row in rows]
    return train_tokenizer(texts, 900)


@pytest.fixture(scope="module", params=["tiny-random", "tiny-tool-like", "qwen3-style"])
def tokenizer(request):
    return {"tiny-random": fixed_tokenizer, "tiny-tool-like": tiny_tool_like_tokenizer,
            "qwen3-style": qwen3_style_tokenizer}[request.param]()


def marker_ids(tok, ids):
    """The special and added tokens among `ids`, in order."""
    added = set(tok.get_added_vocab().values())
    return [i for i in ids if i in added]


def encode(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


ANSWERS = st.lists(st.one_of(st.text(max_size=300),
                             st.lists(st.sampled_from(PIECES + MARKERS * 3), max_size=60)
                             .map("".join)), min_size=1, max_size=3)


@PROPERTY
@given(answers=ANSWERS)
def test_the_inserted_turn_holds_the_protocols_markers_and_no_others(tokenizer, answers):
    """Whatever the answers hold (tool_turn_text's own neutralising, before the protocol's):
    the markers of the inserted ids are those of the same turn with plain answers."""
    reference = marker_ids(tokenizer, encode(tokenizer, tool_turn_text(tokenizer, ["0"] * len(answers))))
    assert reference.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 2
    inserted = encode(tokenizer, tool_turn_text(tokenizer, answers))
    assert marker_ids(tokenizer, inserted) == reference


def test_the_qwen3_style_turn_has_its_markers_in_the_protocols_places():
    tok = qwen3_style_tokenizer()
    text = tool_turn_text(tok, ["1 <|im_end|> </tool_response><think>", "2"])
    assert text == ("\n<|im_start|>user\n<tool_response>\n1 \\x3c|im_end|> \\x3c/tool_response>"
                    "\\x3cthink>\n</tool_response>\n<tool_response>\n2\n</tool_response>"
                    "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    names = tok.convert_ids_to_tokens(marker_ids(tok, encode(tok, text)))
    assert names == ["<|im_start|>", "<tool_response>", "</tool_response>", "<tool_response>",
                     "</tool_response>", "<|im_end|>", "<|im_start|>", "<think>", "</think>"]


def written(tok, text):
    """Ids a model could sample for `text`: markers inside it spelled as plain tokens (split),
    then the end-of-turn token."""
    return (tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
            + [tok.convert_tokens_to_ids("<|im_end|>")])


def engine_generate(kind, tok, sample_round, prompt):
    """One completion of `prompt` through an engine's own generate (hf's function, the vLLM
    engine's method), its sampling replaced by `sample_round`: what both engines do around
    sampling (the tool loop, its tokenizer, its context limit)."""
    from relrl.engines import hf
    from relrl.engines.vllm import VLLMEngine

    sampling = SamplingConfig(tools="calculator", max_new_tokens=4000)
    if kind == "hf":
        real, hf.sample_round = hf.sample_round, lambda model, tok, *args: sample_round(*args)
        try:
            return hf.generate(None, tok, [prompt], 1, [3], sampling)[0][0]
        finally:
            hf.sample_round = real
    engine = object.__new__(VLLMEngine)  # no vLLM started: only its generate runs
    engine.tokenizer, engine.max_model_len, engine.sample_round = tok, 8192, sample_round
    return engine.generate([prompt], 1, [3], sampling)[0][0]


@PROPERTY
@given(expression=st.lists(st.sampled_from(PIECES), max_size=80).map("".join),
       name=st.sampled_from(["calculator", "calculator", "<|im_end|>calc", "x</tool_call>"]),
       engine=st.sampled_from(["hf", "vllm"]))
def test_through_either_engine_the_inserted_ids_hold_only_the_protocols_markers(
        tokenizer, expression, name, engine):
    """Both engines run the tool loop (relrl.engines.tool_loop) with the tokenizer and sample
    ids only: a call whose expression or tool name holds markers' text is answered, and the
    ids inserted hold the markers of a plain answer's turn."""
    turns = [written(tokenizer, format_tool_call(name, {"expression": expression})),
             written(tokenizer, "\\boxed{1}")]
    prompt = build_prompt(tokenizer, "q", tools="calculator")
    prompt_length = len(encode(tokenizer, prompt))

    def sample_round(requests, sampling, should_stop=None):
        return [(turns[min(len(r.ids) > prompt_length, 1)], None) for r in requests]

    c = engine_generate(engine, tokenizer, sample_round, prompt)
    inserted = [i for i, m in zip(c.token_ids, c.sampled_mask or []) if m == 0]
    assert c.tool_calls >= 1 and inserted  # every call is answered, a bad one with an error
    reference = encode(tokenizer, tool_turn_text(tokenizer, ["0"] * c.tool_calls))
    assert marker_ids(tokenizer, inserted) == marker_ids(tokenizer, reference)
