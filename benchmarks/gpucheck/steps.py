"""The steps of a path (<path>.<step>), each a function of the Check and the dict of figures it
fills in; a path's live objects (model, optimiser, engine) sit in check.paths[path]. Every step
goes through the project's own code (relrl.modeling, relrl.engines, relrl.rl.grpo_loss)."""
from __future__ import annotations

import gc
import time

import torch

from gpucheck.common import (
    GEN_BATCH,
    GROUPS,
    LORA_R,
    SFT_MICRO_BATCH,
    STOP_AFTER_STEPS,
    SYNC_B_STD,
    TRAIN_MICRO_BATCH,
    Check,
    G,
    cuda,
    mean_abs,
    random_ids,
    rollout,
    sampler_vs_trainer,
    scripted_call,
    study_prompts,
    sync,
    trainer_logprobs,
)
from gpucheck.environment import Skip, require
from relrl.data.prompting import build_prompt
from relrl.engines import Engine, GenerationStopped, SamplingConfig, hf, make_engine
from relrl.engines.vllm import check_four_bit_loadable, kv_cache_tokens
from relrl.modeling.four_bit import four_bit_layers
from relrl.modeling.loading import (
    attach_lora,
    device_of,
    enable_checkpointing,
    is_checkpointing,
    is_four_bit,
    load_pretrained,
    reference_policy,
)
from relrl.modeling.logprobs import completion_logprobs, pack_sequences
from relrl.rl.grpo_loss import LossConfig, batch_counts, group_advantages, policy_loss
from relrl.runtime.cli import UsageError
from relrl.tools.protocol import calculator_call


def load(path: str):
    def run(check: Check, out: dict) -> None:

        if path == "unsloth" and not cuda():
            raise Skip("Unsloth needs CUDA")
        if path == "unsloth":
            require("unsloth")
        if path == "4bit":  # by path, --load-in-4bit auto: how the default model loads
            model, tokenizer = load_pretrained(str(check.nf4_folder), load_in_4bit=None, seed=0)
            out["linear4bit_layers"] = four_bit_layers(model)
            assert is_four_bit(model) and out["linear4bit_layers"] > 0, "not loaded in 4-bit"
        else:
            model, tokenizer = load_pretrained(str(check.folder), load_in_4bit=path != "bf16",
                                               use_unsloth=path == "unsloth", seed=0)
        model = attach_lora(model, r=LORA_R, alpha=LORA_R)
        if not is_checkpointing(model):  # on CUDA attach_lora switched it on; the CPU here
            enable_checkpointing(model)
        params = [p for p in model.parameters() if p.requires_grad]
        check.paths[path] = {
            "model": model, "tokenizer": tokenizer,
            "optimizer": torch.optim.AdamW(params, lr=1e-5, weight_decay=0.1),
            "prompts": study_prompts(tokenizer, GROUPS)}
        out.update(lora_parameters=sum(p.numel() for p in params),
                   dtype=str(next(p for p in model.parameters() if not p.requires_grad).dtype))
    return run


def logprobs_agree(path: str):
    def run(check: Check, out: dict) -> None:
        """A left-padded batch scored in train mode, in eval mode, and each sequence alone agree
        (padding attended to in one mode would break this)."""

        model = check.paths[path]["model"]
        gen = torch.Generator().manual_seed(3)
        prompts = [random_ids(n, check.vocab, gen) for n in (12, 5, 9)]
        completions = [random_ids(n, check.vocab, gen) for n in (7, 10, 4)]
        ids, attention, start = pack_sequences(prompts, completions, 0)
        device = device_of(model)
        with torch.no_grad():
            model.train()
            train = completion_logprobs(model, ids.to(device), attention.to(device), start)
            model.eval()
            evaluated = completion_logprobs(model, ids.to(device), attention.to(device), start)
            reference = torch.zeros_like(train)
            for k, (p, c) in enumerate(zip(prompts, completions)):
                one_ids, one_mask, one_start = pack_sequences([p], [c], 0)
                reference[k, :len(c)] = completion_logprobs(model, one_ids.to(device),
                                                            one_mask.to(device), one_start)[0]
        mask = attention[:, start:].bool().to(device)
        tol = 5e-2 if cuda() or path == "4bit" else 1e-4  # bf16 compute, or fp32 on the CPU
        out.update(train_vs_eval=float((train - evaluated)[mask].abs().max()),
                   batched_vs_alone=float((train - reference)[mask].abs().max()), tolerance=tol)
        assert out["train_vs_eval"] <= tol, "train-mode and eval-mode log-probs disagree"
        assert out["batched_vs_alone"] <= tol, "padding changes the log-probs"
    return run


def hf_rollout(path: str):
    def run(check: Check, out: dict) -> None:

        state = check.paths[path]
        engine = make_engine("hf", state["model"], state["tokenizer"])
        rollout(engine, state["prompts"], check.shapes["hf_rollout_tokens"], out)
        out["checkpointing_after_rollout"] = is_checkpointing(state["model"])
        assert out["checkpointing_after_rollout"], "gradient checkpointing is off after a rollout"
    return run


def vllm_start(path: str):
    def run(check: Check, out: dict) -> None:

        if check.skip_vllm:
            raise Skip("--skip-vllm")
        require("vllm")
        four_bit = path == "4bit"
        if four_bit:
            try:  # the engine's own refusal, in its words (it names the installed vLLM)
                check_four_bit_loadable(cuda())
            except UsageError as refusal:
                raise Skip(str(refusal)) from None
        # relrl.models imports the problem generators (scipy): only where vLLM runs
        from gpucheck.vllm_sizing import grpo_sizing

        state = check.paths[path]
        model, tok, shapes = state["model"], state["tokenizer"], check.shapes
        # as GRPO starts it: --vllm-sleep auto from the memory arithmetic, the scheduler and the
        # KV check sized by a training call (gen batch x G, each at its full length budget)
        sleep, length = grpo_sizing(model, tok, check.vllm_memory, shapes["completion"])
        state["engine"] = engine = make_engine(
            "vllm", model, tok, source=str(check.nf4_folder if four_bit else check.folder),
            max_new_tokens=shapes["completion"], gpu_memory_utilization=check.vllm_memory,
            four_bit=four_bit, sleep=sleep, max_sequences=GEN_BATCH * G,
            kv_demand=(GEN_BATCH * G, length))
        engine.sync_adapter(model)
        cache = kv_cache_tokens(engine.llm)
        out.update(four_bit=four_bit, vllm_sleep="auto", sleeps=engine.sleeps,
                   memory_share=check.vllm_memory, kv_cache_tokens=cache,
                   kv_demand_tokens=GEN_BATCH * G * length,
                   kv_demand=f"{GEN_BATCH} questions x G {G} x {length:,} tokens")
    return run


def vllm_rollout(path: str):
    def run(check: Check, out: dict) -> None:
        state = check.paths[path]
        completions = rollout(state["engine"], state["prompts"],
                              check.shapes["vllm_rollout_tokens"], out)
        assert all(len(c.logprobs) == len(c.token_ids) for c in completions)
        out["sampler_vs_trainer"] = sampler_vs_trainer(
            completions, trainer_logprobs(state["model"], completions))
    return run


def adapter_sync(path: str):
    def run(check: Check, out: dict) -> None:
        """vLLM serves the adapter as it is after sync_adapter, not the base or an old copy:
        the sampler's log-probs sit closer to the trainer's with this adapter than the adapter
        moves them; inside base_policy() it serves the base."""

        state = check.paths[path]
        model, engine, prompts = state["model"], state["engine"], state["prompts"][:2]
        gen = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.randn(p.shape, generator=gen) * SYNC_B_STD)
        engine.sync_adapter(model)
        tokens = check.shapes["vllm_rollout_tokens"]
        adapted = rollout(engine, prompts, tokens, {}, seed=100)
        with engine.base_policy():
            base = rollout(engine, prompts, tokens, {}, seed=100)
        with_adapter = trainer_logprobs(model, adapted)
        with reference_policy(model):
            without = trainer_logprobs(model, adapted)
            base_trainer = trainer_logprobs(model, base)
        out.update(adapter_effect=mean_abs(with_adapter, without),
                   synced_gap=mean_abs(with_adapter, [c.logprobs for c in adapted]),
                   base_gap=mean_abs(base_trainer, [c.logprobs for c in base]))
        assert out["synced_gap"] < out["adapter_effect"] / 4, "vLLM does not serve the synced adapter"
        assert out["base_gap"] < out["adapter_effect"] / 4, "base_policy() does not serve the base"
    return run


def stepping(path: str):
    def run(check: Check, out: dict) -> None:

        state = check.paths[path]
        engine, prompts = state["engine"], state["prompts"]
        sampling = SamplingConfig(max_new_tokens=check.shapes["vllm_rollout_tokens"])
        start = engine.steps
        try:
            engine.generate(prompts, G, list(range(len(prompts))), sampling,
                            should_stop=lambda: engine.steps - start >= STOP_AFTER_STEPS)
            stopped = False
        except GenerationStopped:
            stopped = True
        out.update(stopped=stopped, steps_run=engine.steps - start)
        assert stopped and out["steps_run"] == STOP_AFTER_STEPS, "the stop was not honoured within one step"
        again = engine.generate(prompts[:1], 1, [0], SamplingConfig(max_new_tokens=4))
        out["generate_after_stop"] = len(again[0])
    return run


def grpo_update(path: str):
    def run(check: Check, out: dict) -> None:
        """One update of GRPOTrainer.update's shape and loss (relrl.rl.grpo_trainer itself imports
        the problem generators, which need scipy): 4 groups x G=4 completions of exactly
        `completion` tokens, micro-batches of 4, token-mean loss, one optimiser step; inside
        the engine's updating() block, as the trainer runs it (vLLM asleep where it sleeps)."""

        state = check.paths[path]
        model, optimizer, shapes = state["model"], state["optimizer"], check.shapes
        engine = state.get("engine") or Engine()
        gen = torch.Generator().manual_seed(1)
        rows = []
        for _ in range(GROUPS):
            prompt = random_ids(shapes["prompt"], check.vocab, gen)
            rows += [(prompt, random_ids(shapes["completion"], check.vocab, gen)) for _ in range(G)]
        advantages = group_advantages(torch.rand(GROUPS, G, generator=gen)).flatten()
        batches = []
        for i in range(0, len(rows), TRAIN_MICRO_BATCH):
            part = rows[i:i + TRAIN_MICRO_BATCH]
            ids, attention, start = pack_sequences([p for p, _ in part], [c for _, c in part], 0)
            batches.append((ids, attention, start, attention[:, start:].float(),
                            advantages[i:i + TRAIN_MICRO_BATCH]))
        batch_tokens = sum(batch_counts(b[3])[0] for b in batches)
        device = device_of(model)
        sync()
        times = [time.perf_counter()]
        with engine.updating():
            times.append(time.perf_counter())  # asleep
            model.train()
            for ids, attention, start, mask, adv in batches:
                logp = completion_logprobs(model, ids.to(device), attention.to(device), start,
                                           micro_batch=ids.shape[0])
                terms = policy_loss(logp, logp.detach(), adv.to(device), mask.to(device),
                                    LossConfig(), batch_tokens=batch_tokens, batch_seqs=len(rows))
                terms.loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            model.eval()
            sync()
            times.append(time.perf_counter())
        times.append(time.perf_counter())  # awake
        out.update(sleep_seconds=round(times[1] - times[0], 2),
                   update_seconds=round(times[2] - times[1], 2),
                   wake_seconds=round(times[3] - times[2], 2))
        out.update(sequences=len(rows), tokens_per_sequence=shapes["prompt"] + shapes["completion"],
                   checkpointing=is_checkpointing(model),
                   vllm_slept=bool(getattr(engine, "sleeps", False)))
        if "engine" in state:  # the engine woke up and serves the updated adapter
            engine.sync_adapter(model)
            after = rollout(engine, state["prompts"][:1], 8, {})
            out["rollout_after_wake"] = len(after)
    return run


def sft_step(path: str):
    def run(check: Check, out: dict) -> None:
        """One optimiser step on SFT's micro-batch (2 sequences) of `sft_tokens` tokens each."""

        state = check.paths[path]
        model, optimizer, tokens = state["model"], state["optimizer"], check.shapes["sft_tokens"]
        gen = torch.Generator().manual_seed(2)
        prompt = tokens // 8
        seqs = [random_ids(tokens, check.vocab, gen) for _ in range(SFT_MICRO_BATCH)]
        ids, attention, start = pack_sequences([s[:prompt] for s in seqs],
                                               [s[prompt:] for s in seqs], 0)
        device = device_of(model)
        with (state.get("engine") or Engine()).updating():
            model.train()
            logp = completion_logprobs(model, ids.to(device), attention.to(device), start,
                                       micro_batch=SFT_MICRO_BATCH)
            (-logp.sum() / attention[:, start:].sum()).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            model.eval()
        out.update(sequences=SFT_MICRO_BATCH, tokens_per_sequence=tokens)
    return run


def release(path: str):
    def run(check: Check, out: dict) -> None:
        state = check.paths.pop(path, {})
        if state.get("engine") is not None:
            state["engine"].close()
            out["engine_closed"] = True
        state.clear()
        gc.collect()  # the model's last references, before its memory goes back
        if cuda():
            torch.cuda.empty_cache()
            free, total = torch.cuda.mem_get_info()
            out["gpu_used_after_gib"] = round((total - free) / 2**30, 2)
    return run


def tool_rollout(path: str):
    def run(check: Check, out: dict) -> None:
        """One multi-turn rollout with the calculator through each engine this path runs: the
        call answered, its inserted ids masked, the model continuing within the budget."""
        state = check.paths[path]
        tok = state["tokenizer"]
        call = tok(calculator_call("exp(-0.002*500)") + "<|im_end|>", add_special_tokens=False)["input_ids"]
        prompts = [build_prompt(tok, "A pump fails at 0.002 per hour. R(500 h)?", tools="calculator")] * 2
        sampling = SamplingConfig(max_new_tokens=len(call) + check.shapes["hf_rollout_tokens"],
                                  tools="calculator", micro_batch=2 * G)
        engines = {"hf": make_engine("hf", state["model"], tok)}
        if state.get("engine") is not None:
            engines["vllm"] = state["engine"]
        real_hf = hf.sample_round
        try:
            hf.sample_round = scripted_call(real_hf, tok, call)
            for name, engine in engines.items():
                if name == "vllm":
                    engine.sample_round = scripted_call(type(engine).sample_round.__get__(engine),
                                                        tok, call)
                sync()
                start = time.perf_counter()
                done = [c for row in engine.generate(prompts, G, [0, 1], sampling) for c in row]
                sync()
                out[name] = {"seconds": round(time.perf_counter() - start, 2),
                             "calls": sum(c.tool_calls for c in done),
                             "inserted_tokens": sum(len(c.token_ids) - c.sampled_tokens for c in done),
                             "sampled_tokens": sum(c.sampled_tokens for c in done)}
                assert all(c.tool_calls == 1 and "0.3678794412" in c.transcript for c in done)
                assert all(c.sampled_tokens <= sampling.max_new_tokens for c in done)
        finally:
            hf.sample_round = real_hf
            if "vllm" in engines:
                del engines["vllm"].sample_round
    return run


