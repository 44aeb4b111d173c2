"""The GPU-path defects of issue 15, tested on the CPU with fakes: Unsloth's mode switches around
a rollout, its training-mode forward that drops the padding mask, the refusals before loading
(pre-quantized checkpoint with --load-in-4bit no, a GPU without bfloat16), the run seed as
Unsloth's random_state, and device_of on a model whose first parameter is elsewhere."""
import json
import sys
import types

# peft imports bitsandbytes (in the CPU set since the 4-bit path runs there), and bitsandbytes
# picks its backend when first imported: under the fakes below that say CUDA is present it
# would pick CUDA's and fail. Imported here, on the real device, before any fake.
import peft  # noqa: F401
import pytest
import torch

from relrl.data.prompting import build_prompt
from relrl.engines.base import SamplingConfig
from relrl.engines.hf import generate
from relrl.modeling import loading as modeling
from relrl.modeling.loading import attach_lora, device_of, generation_mode, is_checkpointing
from relrl.modeling.logprobs import completion_logprobs, naive_logprobs, pack_sequences
from relrl.models.by_name import load_builtin, load_model
from relrl.runtime.cli import UsageError


class FakeFastLanguageModel:
    """Records Unsloth's calls and does to the model what the real ones do to its flags:
    for_inference switches gradient checkpointing off in every module and sets eval mode;
    for_training sets it to the value given and sets train mode."""
    calls: list = []
    loaded = None

    @classmethod
    def for_inference(cls, model):
        cls.calls.append(("for_inference",))
        for module in model.modules():
            if hasattr(module, "gradient_checkpointing"):
                module.gradient_checkpointing = False
        model.eval()
        return model

    @classmethod
    def for_training(cls, model, use_gradient_checkpointing=True):
        cls.calls.append(("for_training", use_gradient_checkpointing))
        for module in model.modules():
            if hasattr(module, "gradient_checkpointing"):
                module.gradient_checkpointing = use_gradient_checkpointing
        model.train()
        return model

    @classmethod
    def get_peft_model(cls, model, **kwargs):
        cls.calls.append(("get_peft_model", kwargs["random_state"]))
        return model

    @classmethod
    def from_pretrained(cls, **kwargs):
        cls.calls.append(("from_pretrained", kwargs["random_state"]))
        return cls.loaded


@pytest.fixture()
def fake_unsloth(monkeypatch):
    FakeFastLanguageModel.calls = []
    monkeypatch.setitem(sys.modules, "unsloth", types.SimpleNamespace(FastLanguageModel=FakeFastLanguageModel))
    return FakeFastLanguageModel


@pytest.fixture()
def fake_cuda(monkeypatch):
    """A CUDA machine as far as the checks before loading can tell."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a, **k: "Tesla V100-SXM2-16GB")
    monkeypatch.setattr(modeling, "_load_transformers",
                        lambda *a, **k: pytest.fail("the model was loaded before the refusal"))


@pytest.fixture()
def model_dir(tmp_path):
    model, tok = load_model("tiny-random")
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    return tmp_path / "m"


def _prompts(tok):
    return [build_prompt(tok, "Find R(100 h) for lambda = 1e-3 per hour."), build_prompt(tok, "B10?")]


def test_unsloth_rollout_switches_modes_and_restores_checkpointing(fake_unsloth):
    model, tok = load_model("tiny-random")
    model._relrl_unsloth = True
    model.gradient_checkpointing_enable()
    model.train()
    assert is_checkpointing(model)
    with generation_mode(model):
        assert fake_unsloth.calls == [("for_inference",)]
        assert not model.training and not is_checkpointing(model)
    assert fake_unsloth.calls == [("for_inference",), ("for_training", True)]
    assert is_checkpointing(model) and model.training
    # The HF engine's generate() goes through the same switches around its rollout.
    fake_unsloth.calls.clear()
    rows = generate(model, tok, _prompts(tok), 2, [1, 2], SamplingConfig(max_new_tokens=4))
    assert len(rows) == 2 and all(len(r) == 2 for r in rows)
    assert fake_unsloth.calls == [("for_inference",), ("for_training", True)]
    assert is_checkpointing(model), "the next update would run without gradient checkpointing"
    assert model.training


def test_rollout_restores_eval_mode_and_checkpointing_off(fake_unsloth):
    model, tok = load_model("tiny-random")
    model._relrl_unsloth = True
    with generation_mode(model):
        pass
    # for_training puts train mode and the given checkpointing: both are put back as they were.
    assert fake_unsloth.calls[-1] == ("for_training", False)
    assert not model.training and not is_checkpointing(model)


def test_transformers_rollout_turns_checkpointing_back_on():
    model, _ = load_model("tiny-random")
    model.gradient_checkpointing_enable()
    with generation_mode(model):
        model.gradient_checkpointing_disable()  # as Unsloth's generate wrapper does
    assert is_checkpointing(model) and not model.training


def _unsloth_like_decoder(model, monkeypatch, seen):
    """Unsloth's Qwen3 forward in training mode: the 2-D padding mask is dropped; a packed row
    (packed_seq_lengths, positions restarting per sequence) is what it honours."""
    decoder = model.get_decoder()
    real = decoder.forward

    def forward(input_ids=None, attention_mask=None, position_ids=None, packed_seq_lengths=None, **kw):
        if packed_seq_lengths is not None:
            seen.append(packed_seq_lengths.tolist())
            assert input_ids.shape[0] == 1 and int(packed_seq_lengths.sum()) == input_ids.shape[1]
            starts = torch.cumsum(packed_seq_lengths, 0) - packed_seq_lengths
            assert (position_ids[0, starts] == 0).all()
        if decoder.training and attention_mask is not None:
            # Causal attention over every token, padding included (None would let transformers
            # infer a packed layout from the restarting positions and mask after all).
            attention_mask = torch.ones_like(attention_mask)
        return real(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, **kw)

    monkeypatch.setattr(decoder, "forward", forward)


def test_padding_mask_survives_unsloth_training_mode(monkeypatch):
    model, tok = load_model("tiny-random")
    prompts = [tok(p, add_special_tokens=False)["input_ids"] for p in _prompts(tok)]
    ids, mask, start = pack_sequences(prompts, [[40, 41, 42, 43, 44], [45, 46]], tok.pad_token_id)
    assert (mask == 0).any()  # left and right padding both present
    with torch.no_grad():
        expected = naive_logprobs(model, ids, mask, start)  # eval mode, the mask honoured
    seen = []
    _unsloth_like_decoder(model, monkeypatch, seen)
    model.train()
    with torch.no_grad():
        dropped = completion_logprobs(model, ids, mask, start)  # a plain model: mask passed, dropped
        model._relrl_unsloth = True
        kept = completion_logprobs(model, ids, mask, start)
    assert not torch.allclose(dropped, expected, atol=1e-3), "the fake must drop the mask"
    assert seen == [mask.sum(1).tolist()]
    assert torch.allclose(kept, expected, atol=1e-5)


def test_load_in_4bit_no_on_a_prequantized_checkpoint_is_refused(model_dir):
    config = json.loads((model_dir / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError) as info:
        load_model(str(model_dir), load_in_4bit=False)
    message = str(info.value)
    assert message.startswith("--load-in-4bit: ") and "\n" not in message
    assert "pre-quantized" in message and str(model_dir) in message


def test_gpu_without_bf16_is_refused_before_loading(model_dir, fake_cuda, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    with pytest.raises(UsageError) as info:
        load_model(str(model_dir))
    message = str(info.value)
    assert message.startswith("--model: ") and "\n" not in message
    assert "bfloat16" in message and "V100" in message


def test_run_seed_is_unsloths_random_state(model_dir, fake_cuda, fake_unsloth):
    fake_unsloth.loaded = load_builtin("tiny-random", seed=0)  # load_model would move it to "cuda"
    model, _ = load_model(str(model_dir), use_unsloth=True, seed=17)
    assert fake_unsloth.calls == [("from_pretrained", 17)]
    torch.manual_seed(1234)  # what the trainers do just before attaching a new LoRA
    attach_lora(model)
    assert fake_unsloth.calls[-1] == ("get_peft_model", 1234)
    attach_lora(model, seed=5)
    assert fake_unsloth.calls[-1] == ("get_peft_model", 5)


def test_device_of_is_the_input_embeddings_device():
    class Offloaded(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(2, 2, device="meta")  # first parameter, elsewhere
            self.embed = torch.nn.Embedding(4, 2)

        def get_input_embeddings(self):
            return self.embed

    model = Offloaded()
    assert next(model.parameters()).device.type == "meta"
    assert device_of(model) == torch.device("cpu")


def test_bf16_logits_give_float32_logprobs_and_gradients():
    # Qwen3's vocabulary, several vocabulary blocks; the reference casts the logits to float32.
    from relrl.modeling.logprobs import _TokenLogprob

    gen = torch.Generator().manual_seed(0)
    logits = (torch.randn(6, 151_936, generator=gen) * 4).to(torch.bfloat16).requires_grad_(True)
    targets = torch.randint(0, 151_936, (6,), generator=gen)
    targets[0] = logits[0].argmax()  # a likely token, where 1 - p matters
    weights = torch.rand(6, generator=gen)
    token, entropy = _TokenLogprob.apply(logits, targets, True)
    (token * weights).sum().backward()

    reference = logits.detach().float().requires_grad_(True)
    logp = torch.log_softmax(reference, dim=-1)
    expected = logp.gather(-1, targets[:, None]).squeeze(-1)
    (expected * weights).sum().backward()
    assert token.dtype == torch.float32
    assert torch.allclose(token, expected, atol=1e-4, rtol=0)
    assert torch.allclose(entropy, -(logp.exp() * logp).sum(-1), atol=1e-3)
    assert logits.grad.dtype == torch.bfloat16
    assert torch.allclose(logits.grad.float(), reference.grad, atol=1e-3, rtol=1e-2)
    assert not entropy.requires_grad


def test_unsloths_max_seq_length_is_the_runs_length_budget(model_dir, fake_cuda, fake_unsloth,
                                                           monkeypatch):
    """Not a fixed 4,096: a prompt, the new tokens and, with tools, the declaration and every
    inserted answer turn, counted with the model's own tokenizer."""
    from relrl.models import by_name

    seen = {}

    def from_pretrained(**kwargs):
        seen.update(kwargs)
        return load_builtin("tiny-random", seed=0)
    monkeypatch.setattr(fake_unsloth, "from_pretrained", from_pretrained)
    load_model(str(model_dir), use_unsloth=True)  # no budget given: Unsloth's former default
    assert seen["max_seq_length"] == modeling.UNSLOTH_SEQ_LENGTH == 4096
    load_model(str(model_dir), use_unsloth=True, max_new_tokens=6000)
    assert seen["max_seq_length"] == by_name.PROMPT_TOKENS + 6000
    load_model(str(model_dir), use_unsloth=True, max_new_tokens=6000, tools="calculator",
               max_tool_calls=4)
    tok = by_name.load_tokenizer(str(model_dir))
    tools = by_name.tool_context_tokens(tok, "calculator", 4)
    assert tools > 0 and seen["max_seq_length"] == by_name.PROMPT_TOKENS + 6000 + tools
