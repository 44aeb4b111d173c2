"""Loading a Hugging Face id or a local folder, LoRA adapters, the reference policy.

The built-in models (`tiny`, `tiny-random`) sit a layer above this one: relrl.models.by_name.load_model
resolves them and hands every other name to load_pretrained here.

A pre-quantized 4-bit checkpoint loads in 4-bit wherever bitsandbytes runs (the CPU too); a
full-precision one in 4-bit NF4 (bf16 compute) on CUDA and in float32 on the CPU, unless
--load-in-4bit says otherwise (relrl.modeling.four_bit has the table); through Unsloth when
asked (CUDA only). GPU-only packages are imported only when CUDA is present. LoRA
adapters are attached new, or loaded trainable (warm start) or frozen; the reference policy for
KL and DPO is the same weights with the adapter switched off, never a second copy.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import warnings
from pathlib import Path

import torch

from relrl.modeling.four_bit import (
    COMPUTE_DTYPE,
    bnb_config,
    four_bit_wanted,
    one_cpu_kernel,
    prequantized,
    quiet_cpu_kernel_notice,
    require_bitsandbytes,
)
from relrl.runtime import distributed
from relrl.runtime.cli import UsageError

log = logging.getLogger(__name__)
# transformers, peft and safetensors are imported inside the functions that use them: the flag and
# folder checks here run before any heavy import, so bad input is refused in a moment.

BUILTIN_MODELS = ("tiny-random", "tiny", "tiny-tool")
# All attention and MLP projections of Qwen/Llama-style blocks (the study's choice).
DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ADAPTER_WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
ALLOW_CPU_ENV = "RELRL_ALLOW_CPU"  # =1: run on the CPU although this node has an NVIDIA GPU
EXPECT_CUDA_ENV = "RELRL_EXPECT_CUDA"  # =1: refuse the CPU even where no driver is seen
NVIDIA_DRIVER_FILE = Path("/proc/driver/nvidia/version")


def device_of(model) -> torch.device:
    """Where inputs go: the input embeddings' device (with offloading, or a device map that puts
    other layers elsewhere, the first parameter can sit on another device)."""
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    weight = getattr(embeddings, "weight", None)
    if isinstance(weight, torch.Tensor):
        return weight.device
    return next(model.parameters()).device


def is_unsloth(model) -> bool:
    """Loaded through Unsloth (the flag is read through PEFT's wrapper too)."""
    return bool(getattr(model, "_relrl_unsloth", False))


def _checkpointing_value(model):
    """The first truthy `gradient_checkpointing` flag of the modules (Unsloth stores "unsloth"
    there for its offloaded variant), else False."""
    return next((m.gradient_checkpointing for m in model.modules()
                 if getattr(m, "gradient_checkpointing", False)), False)


def is_checkpointing(model) -> bool:
    """Gradient checkpointing switched on in any module (what transformers' property reports)."""
    return bool(_checkpointing_value(model))


def enable_checkpointing(model) -> None:
    """Gradient checkpointing with transformers 5's defaults (non-reentrant; it also makes the
    input embeddings' output require grad, which a frozen base under LoRA needs)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base.gradient_checkpointing_enable()


@contextlib.contextmanager
def generation_mode(model):
    """Around every rollout. Inside: eval mode (dropout off, KV cache used) and, for an Unsloth
    model, its inference kernels (FastLanguageModel.for_inference). On exit: Unsloth's training
    mode again (for_training), gradient checkpointing back on if it was on before (for_inference
    switches it off and neither eval() nor train() switches it back, so the next update would run
    without it and run out of memory), and the train/eval mode the model had."""
    was_training = model.training
    was_checkpointing = _checkpointing_value(model)
    unsloth = None
    if is_unsloth(model):
        from unsloth import FastLanguageModel  # a GPU-only package, present when the model is Unsloth's

        unsloth = FastLanguageModel
        unsloth.for_inference(model)
    model.eval()
    try:
        yield model
    finally:
        if unsloth is not None:
            unsloth.for_training(model, use_gradient_checkpointing=was_checkpointing)
        if was_checkpointing and not is_checkpointing(model):
            enable_checkpointing(model)
        model.train(was_training)


def _looks_like_path(name: str) -> bool:
    # Hub ids are "name" or "org/name"; anything else with a separator is meant as a path.
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep != "/" and os.sep in name


def check_model_source(name_or_path: str, flag: str = "--model") -> None:
    """Refuse, before any heavy import or download, a model that cannot be a causal LM (and a
    GPU node whose torch has no CUDA: check_cuda_present)."""
    check_cuda_present()
    if name_or_path in BUILTIN_MODELS:
        return
    path = Path(name_or_path).expanduser()
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{flag}: {name_or_path} is a file, expected a model folder")
        has_config = (path / "config.json").is_file()
        if not has_config and (path / "adapter_config.json").is_file():
            raise UsageError(f"{flag}: {name_or_path} is a LoRA adapter, not a base model "
                             "(pass the base model here and the adapter to the adapter flag)")
        if not has_config:
            raise UsageError(f"{flag}: {name_or_path} has no config.json, so it is not a model folder")
    elif _looks_like_path(name_or_path):
        raise UsageError(f"{flag}: {name_or_path}: no such model folder")


def _check_causal_lm(name_or_path: str, flag: str):
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        config = AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{flag}: cannot load a model config from {name_or_path}: {first}") from None
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        raise UsageError(f"{flag}: {name_or_path} is a {config.model_type!r} model, "
                         "not a causal language model")
    return config


def checkpoint_config(name_or_path: str) -> dict:
    """config.json of a local folder, else the hub config (cached by transformers)."""
    path = Path(name_or_path).expanduser() / "config.json"
    if path.is_file():
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name_or_path).to_dict()
    except (OSError, ValueError):
        return {}  # the loader reports an unreachable or bad model in its own words


def check_not_prequantized(name_or_path: str) -> None:
    """--load-in-4bit no asks for full precision; a checkpoint saved quantized cannot give it."""
    quant = checkpoint_config(name_or_path).get("quantization_config")
    if quant:
        method = quant.get("quant_method", "quantized") if isinstance(quant, dict) else "quantized"
        raise UsageError(f"--load-in-4bit: 'no' asks for full precision, but {name_or_path} is a "
                         f"pre-quantized checkpoint ({method}); use --load-in-4bit auto, or a "
                         "full-precision model such as Qwen/Qwen3-8B")


def check_bf16(name_or_path: str, flag: str = "--model") -> None:
    """Hub and local models compute in bfloat16 on CUDA; refuse a GPU without it (V100, T4)
    before a long job loads anything."""
    if torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        name = torch.cuda.get_device_name()
        raise UsageError(f"{flag}: {name_or_path} computes in bfloat16 on CUDA and this GPU ({name}) "
                         "has no bfloat16 support; use an Ampere or newer GPU (A100, L40S, H100)")


def cuda_expected() -> str | None:
    """Why this process should have CUDA (None: no reason to think so): RELRL_EXPECT_CUDA=1, or
    an NVIDIA driver on the node (nvidia-smi on PATH, or the kernel module's version file)."""
    if os.environ.get(EXPECT_CUDA_ENV) == "1":
        return f"{EXPECT_CUDA_ENV}=1"
    if shutil.which("nvidia-smi"):
        return "nvidia-smi is on PATH"
    if NVIDIA_DRIVER_FILE.exists():
        return f"{NVIDIA_DRIVER_FILE} exists"
    return None


def check_cuda_present() -> None:
    """Refuse to run on the CPU where a GPU is expected (a driver too old for the CUDA 13 wheels
    leaves torch without CUDA, and every script would silently run on the CPU for days),
    unless RELRL_ALLOW_CPU=1 says so."""
    if torch.cuda.is_available() or os.environ.get(ALLOW_CPU_ENV) == "1":
        return
    why = cuda_expected()
    if why is None:
        return
    build = (f"torch {torch.__version__} is built for CUDA {torch.version.cuda} and sees no GPU "
             "(is the driver older than that CUDA?)" if torch.version.cuda else
             f"torch {torch.__version__} is a CPU build")
    raise UsageError(f"CUDA: expected ({why}) but absent: {build}; fix the driver or the torch "
                     f"install, or set {ALLOW_CPU_ENV}=1 to run on the CPU")


def check_load_flags(load_in_4bit: bool | None, use_unsloth: bool) -> None:
    """Refuse loading flags this machine cannot honour: --load-in-4bit yes without bitsandbytes
    (it runs on the CPU as on CUDA), --unsloth without CUDA."""
    cuda = torch.cuda.is_available()
    if load_in_4bit:
        require_bitsandbytes("--load-in-4bit yes")
    if use_unsloth and not cuda:
        raise UsageError("--unsloth: Unsloth needs a CUDA GPU and none is available")


def is_four_bit(model) -> bool:
    """Held in 4-bit bitsandbytes: a pre-quantized checkpoint, or quantized on loading (both
    leave the quantization config on the model's config; PEFT's wrapper passes it through)."""
    quant = getattr(getattr(model, "config", None), "quantization_config", None)
    if quant is not None and not isinstance(quant, dict):
        quant = quant.to_dict()
    return bool(quant) and quant.get("quant_method") == "bitsandbytes" and \
        bool(quant.get("load_in_4bit"))


def import_unsloth():
    """Unsloth's FastLanguageModel. Imported before anything imports transformers (the package
    imports it only when a model loads), since Unsloth patches transformers as it is imported."""
    try:
        from unsloth import FastLanguageModel
    except ImportError:
        raise UsageError("--unsloth: the unsloth package is not installed "
                         "(pip install -r requirements-gpu.txt)") from None
    return FastLanguageModel


def unsloth_device_map() -> dict:
    """Every weight on this process's GPU, the one picked from its local rank. Unsloth, left to
    choose under torch.distributed, takes cuda:<global rank>: on a second node, a GPU that does
    not exist there."""
    return {"": f"cuda:{distributed.local_device_index()}"}


def finish_loading(model, tokenizer):
    """What every loaded model gets: a pad token, left padding (for batched generation), eval mode."""
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    model.eval()
    return model, tokenizer


UNSLOTH_SEQ_LENGTH = 4096  # Unsloth's max_seq_length when the caller gives no length budget


def load_pretrained(name_or_path: str, *, load_in_4bit: bool | None = None, use_unsloth: bool = False,
                    seed: int = 0, flag: str = "--model", max_seq_length: int | None = None):
    """(model, tokenizer) in eval mode from a hub id or a local folder. `seed` is Unsloth's
    random_state, `max_seq_length` its longest sequence (the run's prompt, new tokens and tool
    turns; None: UNSLOTH_SEQ_LENGTH). The built-in names are resolved a layer up, by
    relrl.models.by_name.load_model.

    load_in_4bit=None (auto) means: a pre-quantized checkpoint in 4-bit anywhere bitsandbytes
    runs, a full-precision one in 4-bit NF4 on CUDA and in float32 on the CPU; True quantizes
    on loading on any device, False keeps full precision (relrl.modeling.four_bit).
    """
    if name_or_path in BUILTIN_MODELS:
        raise ValueError(f"{name_or_path!r} is a built-in model: load it with relrl.models.by_name.load_model")
    cuda = torch.cuda.is_available()
    check_load_flags(load_in_4bit, use_unsloth)
    fast = import_unsloth() if use_unsloth else None  # first: see import_unsloth
    check_model_source(name_or_path, flag)
    check_bf16(name_or_path, flag)
    if load_in_4bit is False:
        check_not_prequantized(name_or_path)
    if use_unsloth:
        model, tokenizer = _load_unsloth(fast, name_or_path, load_in_4bit is not False, seed,
                                         max_seq_length or UNSLOTH_SEQ_LENGTH)
    else:
        saved_4bit = prequantized(checkpoint_config(name_or_path))
        four_bit = four_bit_wanted(load_in_4bit, cuda=cuda, prequantized=saved_4bit)
        if four_bit:
            require_bitsandbytes("a pre-quantized checkpoint" if saved_4bit else "4-bit loading")
        model, tokenizer = _load_transformers(name_or_path, four_bit, saved_4bit, cuda, flag)
    return finish_loading(model, tokenizer)


def _load_transformers(name_or_path: str, four_bit: bool, saved_4bit: bool, cuda: bool, flag: str):
    """bf16 on CUDA, float32 on the CPU; in 4-bit (on either) with bf16 compute and the rest of
    the weights in bf16, as on the GPU. A pre-quantized checkpoint brings its own quantization
    config; a full-precision one is quantized on loading with relrl.modeling.four_bit's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _check_causal_lm(name_or_path, flag)
    device = torch.cuda.current_device() if cuda else "cpu"
    kwargs: dict = {"dtype": torch.bfloat16 if cuda else torch.float32}
    if cuda or four_bit:
        kwargs["device_map"] = {"": device}
    if four_bit:
        kwargs["dtype"] = COMPUTE_DTYPE
        if not saved_4bit:
            kwargs["quantization_config"] = bnb_config()
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        with quiet_cpu_kernel_notice():
            model = AutoModelForCausalLM.from_pretrained(name_or_path, **kwargs)
        if four_bit and not cuda:
            one_cpu_kernel(model)
    except ImportError as exc:  # bitsandbytes (or another optional backend) missing
        raise UsageError(f"--load-in-4bit: {str(exc).strip().splitlines()[0]} "
                         "(pip install -r requirements-cpu.txt or requirements-gpu.txt)") from None
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{flag}: cannot load {name_or_path}: {first}") from None
    return model, tokenizer


def _load_unsloth(fast, name_or_path: str, four_bit: bool, seed: int, max_seq_length: int):
    model, tokenizer = fast.from_pretrained(
        model_name=name_or_path, load_in_4bit=four_bit, dtype=None, max_seq_length=max_seq_length,
        random_state=seed, device_map=unsloth_device_map())
    model._relrl_unsloth = True
    return model, tokenizer


def _present_targets(model, wanted) -> list[str]:
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    return [t for t in wanted if t in names]


@contextlib.contextmanager
def _quiet_peft():
    """PEFT 0.21 reads a property transformers 5 deprecated: a warning the user can do nothing about."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def _prepare_for_training(model) -> None:
    """Gradient checkpointing on CUDA, where activation memory is what limits the batch."""
    if device_of(model).type == "cuda" and getattr(model, "supports_gradient_checkpointing", False):
        enable_checkpointing(model)


def attach_lora(model, r: int = 32, alpha: int = 32, dropout: float = 0.0, target_modules=None,
                seed: int | None = None):
    """A new trainable LoRA on all attention and MLP projections (the study: r=32/alpha=32 for
    GRPO, r=16/alpha=32 for SFT). Only the adapter's weights require gradients. `seed` (default:
    the seed torch.manual_seed last set, which the trainers set to the run seed just before)
    is Unsloth's random_state; PEFT draws from torch's generator."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if isinstance(model, PeftModel):
        raise UsageError("attach_lora: the model already carries an adapter")
    targets = list(target_modules) if target_modules else _present_targets(model, DEFAULT_TARGET_MODULES)
    if not targets:
        targets = "all-linear"
    if getattr(model, "_relrl_unsloth", False):
        from unsloth import FastLanguageModel

        return FastLanguageModel.get_peft_model(
            model, r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets,
            bias="none", use_gradient_checkpointing="unsloth",
            random_state=torch.initial_seed() if seed is None else seed)
    _prepare_for_training(model)
    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets,
                        bias="none", task_type="CAUSAL_LM")
    with _quiet_peft():
        return get_peft_model(model, config)


def check_adapter_dir(path, flag: str = "--adapter") -> dict:
    """The adapter's config, or UsageError if `path` is not a saved LoRA adapter folder.
    Needs no model, so scripts call it before loading one."""
    folder = Path(path)
    if not folder.exists():
        raise UsageError(f"{flag}: {path}: no such adapter folder")
    if not folder.is_dir():
        raise UsageError(f"{flag}: {path} is a file, expected an adapter folder")
    config_file = folder / "adapter_config.json"
    if not config_file.is_file():
        raise UsageError(f"{flag}: {path} has no adapter_config.json, so it is not a LoRA adapter")
    if not any((folder / name).is_file() for name in ADAPTER_WEIGHT_FILES):
        raise UsageError(f"{flag}: {path} has no adapter_model.safetensors")
    try:
        config = json.loads(config_file.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"{flag}: {config_file}: unreadable adapter config ({exc})") from None
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise UsageError(f"{flag}: {path} is not a LoRA adapter (peft_type "
                         f"{config.get('peft_type') if isinstance(config, dict) else None!r})")
    return config


def _adapter_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    weights = folder / "adapter_model.safetensors"
    if weights.is_file():
        from safetensors import safe_open

        with safe_open(str(weights), framework="pt") as handle:
            return {key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()}
    state = torch.load(folder / "adapter_model.bin", map_location="cpu", weights_only=True)
    return {key: tuple(value.shape) for key, value in state.items()}


def _check_adapter_matches(model, folder: Path, flag: str) -> None:
    """Every LoRA matrix must sit on a module of the model with matching in/out sizes: an
    adapter trained on another base is refused in one line instead of a PEFT traceback."""
    modules = dict(model.named_modules())
    for key, shape in _adapter_shapes(folder).items():
        if ".lora_A." not in key and ".lora_B." not in key:
            continue
        module_name = key.split(".lora_")[0].removeprefix("base_model.model.")
        module = modules.get(module_name)
        if module is None:
            raise UsageError(f"{flag}: {folder} does not match this model: it has no module {module_name}")
        size_in = getattr(module, "in_features", None)
        size_out = getattr(module, "out_features", None)
        expected = shape[1] if ".lora_A." in key else shape[0]
        actual = size_in if ".lora_A." in key else size_out
        if actual is not None and actual != expected:
            side = "input" if ".lora_A." in key else "output"
            raise UsageError(f"{flag}: {folder} does not match this model: {module_name} has {side} "
                             f"size {actual}, the adapter expects {expected} "
                             "(trained on another base model?)")


def load_adapter(model, path, trainable: bool, flag: str = "--adapter"):
    """A saved LoRA on top of `model`: trainable (warm start) or frozen (evaluation)."""
    from peft import PeftModel

    config = check_adapter_dir(path, flag)
    folder = Path(path)
    _check_adapter_matches(model, folder, flag)
    base = config.get("base_model_name_or_path")
    here = getattr(model, "name_or_path", None)
    if base and here and Path(str(base)).name != Path(str(here)).name:
        log.warning("adapter %s was trained on %s, loading it on %s", path, base, here)
    if trainable:
        _prepare_for_training(model)
    with _quiet_peft():
        peft_model = PeftModel.from_pretrained(model, str(folder), is_trainable=trainable)
    if not trainable:
        peft_model.eval()
    return peft_model


def save_adapter(model, path) -> None:
    """Save only the LoRA weights. Embeddings are never adapted here, and saying so stops PEFT
    from asking the Hub whether a built-in name such as "tiny" changed its vocabulary."""
    with _quiet_peft():
        model.save_pretrained(str(path), save_embedding_layers=False)


@contextlib.contextmanager
def reference_policy(model):
    """The base model's behaviour (adapter off) inside the block, on the same weights."""
    from peft import PeftModel

    if isinstance(model, PeftModel):
        with model.disable_adapter():
            yield model
    else:
        yield model
