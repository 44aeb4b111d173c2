"""Model loading, LoRA adapters (new, warm start, frozen) and the refusals of bad input."""
import json
import sys

import pytest
import torch

from relrl.modeling.loading import (
    DEFAULT_TARGET_MODULES,
    attach_lora,
    check_adapter_dir,
    device_of,
    load_adapter,
    reference_policy,
    save_adapter,
)
from relrl.modeling.logprobs import completion_logprobs, pack_sequences
from relrl.modeling.tiny_models import new_model, qwen3_config
from relrl.models.by_name import load_model
from relrl.runtime.cli import UsageError

NO_CUDA = not torch.cuda.is_available()


@pytest.fixture()
def tiny():
    return load_model("tiny-random")


@pytest.fixture()
def saved_adapter(tmp_path):
    model, _ = load_model("tiny-random")
    lora = attach_lora(model, r=4, alpha=8)
    with torch.no_grad():
        for name, param in lora.named_parameters():
            if "lora_B" in name:
                param.fill_(0.05)
    save_adapter(lora, tmp_path / "adapter")
    return tmp_path / "adapter"


def _batch(tok):
    prompt = tok("<|im_start|>user\nR(t) for lambda 0.001?<|im_end|>\n", add_special_tokens=False)["input_ids"]
    return pack_sequences([prompt, prompt[3:]], [[40, 41, 42, 43], [44, 45]], tok.pad_token_id)


def test_tiny_random_loads_in_float32_on_cpu(tiny):
    model, tok = tiny
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.name_or_path == "tiny-random"
    assert not model.training
    if NO_CUDA:
        assert device_of(model).type == "cpu"
        assert all(p.dtype == torch.float32 for p in model.parameters())
    assert tok.padding_side == "left" and tok.pad_token_id is not None


def test_local_folder_round_trip(tiny, tmp_path):
    model, tok = tiny
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    again, tok2 = load_model(str(tmp_path / "m"))
    ids = torch.tensor([[1, 50, 60, 70]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)
    assert tok2("a 12 b")["input_ids"] == tok("a 12 b")["input_ids"]


@pytest.mark.parametrize("make, message", [
    (lambda p: str(p / "no" / "such" / "model"), "no such model folder"),
    (lambda p: "./not-here", "no such model folder"),
    (lambda p: (p / "f.txt").write_text("x") and str(p / "f.txt"), "is a file"),
    (lambda p: (p / "empty").mkdir() or str(p / "empty"), "no config.json"),
    (lambda p: (p / "ad").mkdir() or (p / "ad" / "adapter_config.json").write_text("{}") and str(p / "ad"),
     "is a LoRA adapter, not a base model"),
    (lambda p: (p / "vit").mkdir() or (p / "vit" / "config.json").write_text(json.dumps({"model_type": "vit"}))
     and str(p / "vit"), "not a causal language model"),
])
def test_bad_model_paths_name_the_flag_and_path(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(UsageError, match=message) as info:
        load_model(path)
    assert str(info.value).startswith("--model: ")
    assert path in str(info.value)


def test_4bit_without_bitsandbytes_names_the_package(monkeypatch):
    """--load-in-4bit yes needs bitsandbytes, not CUDA (it runs on the CPU: tests/test_four_bit.py);
    without it the refusal is one line naming the package and its pin."""
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # import fails as if not installed
    with pytest.raises(UsageError) as info:
        load_model("tiny-random", load_in_4bit=True)
    message = str(info.value)
    assert message.startswith("--load-in-4bit: ") and "\n" not in message
    assert "pip install bitsandbytes==0.50.2" in message


@pytest.mark.skipif(not NO_CUDA, reason="checks the CPU refusal")
def test_unsloth_needs_cuda():
    with pytest.raises(UsageError, match="^--unsloth: "):
        load_model("tiny-random", use_unsloth=True)


def test_attach_lora_trains_only_the_adapter_on_all_projections(tiny):
    model, _ = tiny
    lora = attach_lora(model, r=8, alpha=16)
    trainable = [n for n, p in lora.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    targeted = {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in trainable}
    assert targeted == set(DEFAULT_TARGET_MODULES)
    # 4 blocks x 7 projections x (A and B)
    assert len(trainable) == model.config.num_hidden_layers * 7 * 2
    assert lora.peft_config["default"].r == 8 and lora.peft_config["default"].lora_alpha == 16


def test_check_adapter_dir_accepts_a_saved_adapter(saved_adapter):
    config = check_adapter_dir(saved_adapter)
    assert config["peft_type"] == "LORA" and config["base_model_name_or_path"] == "tiny-random"


def test_check_adapter_dir_refusals(tmp_path, saved_adapter):
    with pytest.raises(UsageError, match=r"^--sft-adapter: .*missing: no such adapter folder"):
        check_adapter_dir(tmp_path / "missing", flag="--sft-adapter")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        check_adapter_dir(tmp_path / "file")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no adapter_config.json"):
        check_adapter_dir(tmp_path / "empty")
    (tmp_path / "noweights").mkdir()
    (tmp_path / "noweights" / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    with pytest.raises(UsageError, match="no adapter_model.safetensors"):
        check_adapter_dir(tmp_path / "noweights")
    config = json.loads((saved_adapter / "adapter_config.json").read_text())
    (saved_adapter / "adapter_config.json").write_text(json.dumps({**config, "peft_type": "IA3"}))
    with pytest.raises(UsageError, match="not a LoRA adapter"):
        check_adapter_dir(saved_adapter)


def test_adapter_for_another_base_is_refused(saved_adapter, tiny):
    _, tok = tiny
    narrow = new_model(qwen3_config(tok, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                                    num_attention_heads=2, num_key_value_heads=1, head_dim=32), 0, "other")
    with pytest.raises(UsageError, match=r"^--adapter: .*adapter does not match this model: .* has input size 128, the adapter expects 512"):
        load_adapter(narrow, saved_adapter, trainable=False)
    shallow = new_model(qwen3_config(tok, hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, head_dim=32), 0, "other")
    with pytest.raises(UsageError, match="has no module model.layers.2"):
        load_adapter(shallow, saved_adapter, trainable=True)


def test_warm_start_adapter_trains_and_base_stays(saved_adapter, tiny):
    model, tok = tiny
    lora = load_adapter(model, saved_adapter, trainable=True)
    lora.train()
    adapter = {n: p for n, p in lora.named_parameters() if "lora_" in n}
    base = {n: p for n, p in lora.named_parameters() if "lora_" not in n}
    assert adapter and all(p.requires_grad for p in adapter.values())
    assert not any(p.requires_grad for p in base.values())
    assert all(torch.all(p == 0.05) for n, p in adapter.items() if "lora_B" in n)  # loaded, not fresh
    before_adapter = {n: p.detach().clone() for n, p in adapter.items()}
    before_base = {n: p.detach().clone() for n, p in base.items()}

    optimiser = torch.optim.AdamW([p for p in lora.parameters() if p.requires_grad], lr=1e-3)
    ids, mask, start = _batch(tok)
    loss = -completion_logprobs(lora, ids, mask, start).sum()
    loss.backward()
    optimiser.step()

    assert all(not torch.equal(before_adapter[n], p) for n, p in adapter.items())
    assert all(torch.equal(before_base[n], p) for n, p in base.items())


def test_frozen_adapter_changes_outputs_but_not_trainable(saved_adapter, tiny):
    model, tok = tiny
    ids, mask, start = _batch(tok)
    with torch.no_grad():
        plain = completion_logprobs(model, ids, mask, start)
    frozen = load_adapter(model, saved_adapter, trainable=False)
    assert not any(p.requires_grad for p in frozen.parameters())
    with torch.no_grad():
        adapted = completion_logprobs(frozen, ids, mask, start)
        with reference_policy(frozen):
            reference = completion_logprobs(frozen, ids, mask, start)
    assert not torch.allclose(adapted, plain, atol=1e-4)
    assert torch.equal(reference, plain)


def test_reference_policy_without_adapter_is_the_model(tiny):
    model, _ = tiny
    with reference_policy(model) as ref:
        assert ref is model
