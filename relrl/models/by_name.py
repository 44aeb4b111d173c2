"""Every model by name: the built-in `tiny-random`, `tiny` and `tiny-tool`, a Hugging Face id, a folder.

The built-in models sit above model loading (relrl.modeling.loading) and the engines (relrl.engines):
`tiny` is built with the HF engine. This module, one layer higher still, resolves the built-in
names and hands every other name down, so no lower module needs to know the built-in models.
Scripts load models, tokenizers and engines from here.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from relrl import engines
from relrl.data.prompting import build_prompt, tool_turn_text
from relrl.engines import DEFAULT_VLLM_MEMORY, SLEEP_MODES, Engine, hf_merged
from relrl.engines import vllm as vllm_engine
from relrl.modeling.four_bit import four_bit_wanted, prequantized
from relrl.modeling.loading import (
    BUILTIN_MODELS,
    check_cuda_present,
    check_load_flags,
    check_model_source,
    checkpoint_config,
    finish_loading,
    import_unsloth,
    is_four_bit,
    load_adapter,
    load_pretrained,
)
from relrl.modeling.tiny_models import build_tiny_random, name_model
from relrl.models.tiny_build import load_or_build_tiny, tiny_dir
from relrl.models.tiny_tool_build import load_or_build_tiny_tool, tiny_tool_dir
from relrl.runtime.cli import UsageError, load_in_4bit_flag
from relrl.tools.protocol import MAX_ANSWER_CHARS


def load_builtin(name: str, seed: int = 0):
    """(model, tokenizer) of a built-in model on the CPU; `seed` sets `tiny-random`'s weights."""
    if name == "tiny-random":
        return build_tiny_random(seed)
    if name == "tiny":
        return load_or_build_tiny()
    if name == "tiny-tool":
        return load_or_build_tiny_tool()
    raise ValueError(f"unknown built-in model {name!r}")


def load_model(name_or_path: str, *, load_in_4bit: bool | None = None, use_unsloth: bool = False,
               seed: int = 0, flag: str = "--model", max_new_tokens: int | None = None,
               tools: str = "none", max_tool_calls: int = 0, max_seq_length: int | None = None):
    """(model, tokenizer) in eval mode. `seed` sets the weights of `tiny-random` and Unsloth's
    random_state.

    load_in_4bit: see relrl.modeling.loading.load_pretrained for hub/local models. The built-in
    models load in float32 unless load_in_4bit is True, which quantizes them on loading as it
    quantizes any full-precision checkpoint (wherever bitsandbytes runs). With Unsloth, its
    max_seq_length is the longer of `max_seq_length` (a training sequence: SFT's and DPO's
    --max-length, prompt and tool turns included) and the generation budget that
    `max_new_tokens`, `tools` and `max_tool_calls` give (unsloth_seq_length).
    """
    check_cuda_present()
    if name_or_path not in BUILTIN_MODELS:
        length = max_seq_length
        if use_unsloth and max_new_tokens is not None:
            length = max(length or 0, unsloth_seq_length(name_or_path, max_new_tokens, tools,
                                                         max_tool_calls))
        return load_pretrained(name_or_path, load_in_4bit=load_in_4bit, use_unsloth=use_unsloth,
                               seed=seed, flag=flag, max_seq_length=length)
    check_load_flags(load_in_4bit, use_unsloth)
    if load_in_4bit:
        return _load_builtin_four_bit(name_or_path, seed)
    model, tokenizer = load_builtin(name_or_path, seed=seed)
    if torch.cuda.is_available():
        model.to("cuda")
    return finish_loading(model, tokenizer)


def _load_builtin_four_bit(name: str, seed: int):
    """A built-in model quantized on loading: through its saved folder (`tiny-random` is saved
    to a temporary one first), the path a full-precision checkpoint takes."""
    with tempfile.TemporaryDirectory(prefix="relrl-4bit-") as scratch:
        folder = base_folder(name, seed, Path(scratch))
        model, tokenizer = load_pretrained(folder, load_in_4bit=True)
    name_model(model, name)
    return model, tokenizer


def unsloth_seq_length(name: str, max_new_tokens: int, tools: str, max_tool_calls: int) -> int:
    """Unsloth's max_seq_length for a run: a prompt (PROMPT_TOKENS), the new tokens and, with
    tools, their declaration and every inserted answer turn, counted with the model's own
    tokenizer. Unsloth is imported first: it patches transformers, which the tokenizer imports."""
    import_unsloth()
    tokenizer = vllm_engine.load_tokenizer(name)
    return PROMPT_TOKENS + max_new_tokens + tool_context_tokens(tokenizer, tools, max_tool_calls)


def load_tokenizer(name: str):
    """The tokenizer alone, set up as load_model sets it."""
    check_model_source(name)
    if name in BUILTIN_MODELS:  # a few MB: loading the model too costs nothing
        return load_model(name)[1]
    return vllm_engine.load_tokenizer(name)


def base_folder(source: str, seed: int, scratch: Path) -> str:
    """What vLLM loads: a hub id or folder as given, the built-in models from disk (`tiny` from
    its cache, `tiny-random` saved to the engine's scratch folder with this seed's weights)."""
    if source in ("tiny", "tiny-tool"):
        folder = tiny_dir() if source == "tiny" else tiny_tool_dir()
        if not (folder / "config.json").is_file():
            load_builtin(source)
        return str(folder)
    if source == "tiny-random":
        model, tokenizer = build_tiny_random(seed)  # the weights load_model gives for this seed
        folder = scratch / "tiny-random"
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return str(folder)
    return source


def make_engine(name: str, model, tokenizer, *, source: str | None = None, seed: int = 0,
                adapter: str | None = None, max_new_tokens: int = 3072,
                gpu_memory_utilization: float = DEFAULT_VLLM_MEMORY,
                four_bit: bool | None = None, sleep: bool = False,
                max_sequences: int | None = None, kv_demand: tuple[int, int] | None = None) -> Engine:
    """relrl.engines.make_engine, with vLLM able to serve the built-in models by name and
    sampling in 4-bit when `model` (the policy) is held in 4-bit (four_bit=None: ask it)."""
    if four_bit is None:
        four_bit = model is not None and is_four_bit(model)
    return engines.make_engine(name, model, tokenizer, source=source, seed=seed, adapter=adapter,
                               max_new_tokens=max_new_tokens,
                               gpu_memory_utilization=gpu_memory_utilization,
                               base_folder=base_folder, four_bit=four_bit, sleep=sleep,
                               max_sequences=max_sequences, kv_demand=kv_demand)


# --vllm-sleep auto: the memory arithmetic (docs/engines.md, "GPU memory, sleep mode and batch mode")
SAFE_SHARE = 0.9  # of the GPU: CUDA contexts, NCCL buffers and fragmentation take the rest
PROMPT_TOKENS = 512  # a system prompt and one question: a few hundred tokens


def update_peak_bytes(held: int, adapter: int, layers: int, hidden: int, intermediate: int,
                      tokens: int) -> int:
    """The trainer's peak during an update: what it holds (weights and adapter), the adapter's
    gradient and AdamW's two moments (3 x the adapter), and one micro-batch's activations under
    gradient checkpointing: each layer's input kept, and one layer recomputed at a time (about
    4 hidden and 3 intermediate values a token), all in bf16."""
    return held + 3 * adapter + tokens * 2 * (layers * hidden + 4 * hidden + 3 * intermediate)


def sleep_needed(mode: str, *, cuda: bool, total: int, vllm_share: float,
                 trainer_peak: int) -> bool:
    """Whether vLLM sleeps during updates: `on`/`off` as said (never without CUDA); `auto` only
    when vLLM's share and the trainer's peak do not fit in SAFE_SHARE of the GPU together."""
    if mode not in SLEEP_MODES:
        raise UsageError(f"--vllm-sleep: one of {', '.join(SLEEP_MODES)}, got {mode!r}")
    if not cuda or mode == "off":
        return False
    return mode == "on" or vllm_share * total + trainer_peak > SAFE_SHARE * total


def tool_context_tokens(tokenizer, tools: str, max_tool_calls: int) -> int:
    """Tokens a sequence holds besides the prompt and the model's own when tools are on: the
    tools' declaration in the system turn, and per call the turn the engine inserts (the
    answer at its longest, MAX_ANSWER_CHARS, and the new assistant prefix), counted with this
    tokenizer: a bound, so a budget made from it never truncates a tool turn."""
    if tools == "none":
        return 0

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    declaration = count(build_prompt(tokenizer, "q", tools=tools)) - count(build_prompt(tokenizer, "q"))
    return declaration + max_tool_calls * count(tool_turn_text(tokenizer, ["0" * MAX_ANSWER_CHARS]))


def vllm_sleep(mode: str, model, vllm_share: float, micro_batch: int, max_new_tokens: int,
               extra_tokens: int = 0) -> bool:
    """sleep_needed for `model` (loaded, adapter attached) on this process's GPU; a sequence is
    the prompt, `max_new_tokens` and `extra_tokens` (tool_context_tokens)."""
    cuda = torch.cuda.is_available()
    if not cuda or mode != "auto":
        return sleep_needed(mode, cuda=cuda, total=0, vllm_share=vllm_share, trainer_peak=0)
    config = model.config
    tokens = micro_batch * (max_new_tokens + PROMPT_TOKENS + extra_tokens)
    peak = update_peak_bytes(torch.cuda.memory_allocated(), vllm_engine.adapter_bytes(model),
                             config.num_hidden_layers, config.hidden_size,
                             getattr(config, "intermediate_size", 4 * config.hidden_size), tokens)
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    return sleep_needed(mode, cuda=cuda, total=total, vllm_share=vllm_share, trainer_peak=peak)


def loads_in_four_bit(model: str, load_in_4bit: bool | None) -> bool:
    """Whether `model` will be held in 4-bit (relrl.modeling.four_bit's table), known before
    it loads."""
    if model in BUILTIN_MODELS:
        return bool(load_in_4bit)
    return four_bit_wanted(load_in_4bit, cuda=torch.cuda.is_available(),
                           prequantized=prequantized(checkpoint_config(model)))


def check_engine_choice(engine: str, model: str, load_in_4bit: bool | None,
                        unsloth: bool = False) -> None:
    """Refuse, before anything loads or is written, an engine that cannot serve this policy."""
    if engine != hf_merged.NAME:
        return
    if unsloth:
        raise hf_merged.refuse(hf_merged.UNSLOTH)
    if loads_in_four_bit(model, load_in_4bit):
        raise hf_merged.refuse(hf_merged.FOUR_BIT)


def open_engine(args, *, adapter: str | None = None, max_new_tokens: int = 3072,
                seed: int = 0):
    """(engine, tokenizer) for an evaluation script: hf loads the model (and the frozen
    adapter); vllm loads only the tokenizer and serves the base model and adapter itself."""
    name = args.rollout_engine
    engines.check_memory_fraction(args.vllm_gpu_memory_utilization)
    if name == "vllm":
        check_cuda_present()
        engines.require_vllm()
        tokenizer = load_tokenizer(args.model)
        return make_engine("vllm", None, tokenizer, source=args.model, seed=seed, adapter=adapter,
                           max_new_tokens=max_new_tokens,
                           four_bit=loads_in_four_bit(args.model, load_in_4bit_flag(args)),
                           gpu_memory_utilization=args.vllm_gpu_memory_utilization), tokenizer
    check_engine_choice(name, args.model, load_in_4bit_flag(args))
    model, tokenizer = load_model(args.model, load_in_4bit=load_in_4bit_flag(args))
    if adapter is not None:
        model = load_adapter(model, adapter, trainable=False)
    return make_engine(name, model, tokenizer), tokenizer
