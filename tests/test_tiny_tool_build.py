"""tiny-tool's build on a recipe shrunk to seconds: the tool is declared in every training
prompt, the calculator's answer is context and not a target, the build checks itself with the
calculator and without it, and the model loads by name from the cache."""
import json

import pytest

from relrl.models import by_name, tiny_tool_build
from relrl.models.tiny_tool_build import ToolRecipe, build_tiny_tool_here

SHRUNK = ToolRecipe(version="tool-test", n_train=40, steps=3, warmup=1, vocab_size=600,
                    hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                    num_key_value_heads=1, head_dim=16, intermediate_size=64,
                    eval_per_family=1, eval_samples=1, eval_max_new_tokens=6)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cache") / "tiny-tool-test"
    seen = []
    real = tiny_tool_build.pretrain

    def spy(model, pairs, recipe, pad_id, log=print):
        seen.extend(pairs)
        return real(model, pairs, recipe, pad_id, log)

    tiny_tool_build.pretrain = spy
    try:
        report = build_tiny_tool_here(SHRUNK, folder, log=lambda line: None)  # in this process
    finally:
        tiny_tool_build.pretrain = real
    return folder, report, seen


def test_the_training_pairs_mask_the_calculators_answer(built):
    _, _, pairs = built
    assert 30 <= len(pairs) <= 40 and all(len(p) == 3 for p in pairs)  # converted phrasings out
    for prompt, completion, own in pairs:
        assert len(own) == len(completion) and own[0] == 1 and own[-1] == 1
        assert 0 in own  # the inserted tool answer and assistant prefix
        inserted = [t for t, o in zip(completion, own) if not o]
        assert len(inserted) < len(completion)


def test_the_report_has_both_tables_on_the_tool_families(built):
    folder, report, _ = built
    saved = json.loads((folder / "accuracy.json").read_text())
    assert saved == json.loads(json.dumps(report))
    assert saved["tolerance_rule"] == "complement" == saved["without_calculator"]["tolerance_rule"]
    assert set(saved["by_family"]) == set(saved["families"]) == set(tiny_tool_build.TOOL_FAMILIES)
    assert saved["questions"] == len(tiny_tool_build.TOOL_FAMILIES)
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()


def test_it_loads_by_name_with_the_current_template(built, monkeypatch):
    folder, _, _ = built
    monkeypatch.setattr(by_name, "tiny_tool_dir", lambda: folder)
    monkeypatch.setattr(by_name, "load_or_build_tiny_tool",
                        lambda: tiny_tool_build.load_or_build_tiny_tool(SHRUNK, folder))
    model, tok = by_name.load_model("tiny-tool")
    assert model.config.name_or_path == "tiny-tool"
    assert "<tools>" in tok.apply_chat_template([{"role": "user", "content": "q"}],
                                                tools=[{"name": "calculator"}], tokenize=False)
