"""The `hf-merged` engine: the HF engine's sampling on a plain copy of the policy whose LoRA
projections hold W + scale * B A, refreshed from the live adapter before every generate call.

Unmerged, every LoRA projection is three matrix products (W x, A x, B (A x)) and peft's Python
around them. The copy shares every tensor that LoRA does not touch (embeddings, norms, the
head) with the policy, so it costs one extra copy of the adapted projections' weights; merging
in place instead (and unmerging after) would drift the frozen base by rounding, step after step.

What changes against `hf`: the logits differ by floating-point rounding ((W + BA) x against
W x + B (A x)), so a sample can fork where two tokens are nearly tied; in bf16 a delta under
half a unit in the last place of its weight rounds away, as in any merged-LoRA rollout. The
engine reports no sampler log-probs: the trainer's own (unmerged) are what the loss uses.
Refused for a 4-bit base (its weights cannot hold a merged delta), for Unsloth's model (its
own kernels already fuse LoRA) and for DoRA adapters.
"""
from __future__ import annotations

import contextlib
import copy

import torch

from relrl.engines.base import Engine
from relrl.engines.hf import generate
from relrl.modeling.loading import is_four_bit, is_unsloth, reference_policy
from relrl.runtime.cli import UsageError

NAME = "hf-merged"
FOUR_BIT = "the base is held in 4-bit, which cannot hold a merged delta (use hf or vllm)"
UNSLOTH = "Unsloth's model fuses LoRA in its own kernels (use hf)"


def refuse(why: str) -> UsageError:
    return UsageError(f"--rollout-engine {NAME}: {why}")


def is_peft(model) -> bool:
    from peft import PeftModel

    return isinstance(model, PeftModel)


def lora_layers(model) -> dict[str, torch.nn.Module]:
    """The peft LoRA layers of `model` by their name in the base model (no peft prefix)."""
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    return {name: module for name, module in base.named_modules() if isinstance(module, LoraLayer)}


def check_mergeable(model) -> None:
    """UsageError, naming the flag, where a merged copy cannot stand in for `model`."""
    if is_four_bit(model):
        raise refuse(FOUR_BIT)
    if is_unsloth(model):
        raise refuse(UNSLOTH)
    if is_peft(model) and any(any(layer.use_dora.values()) for layer in lora_layers(model).values()):
        raise refuse("DoRA adapters are not a plain delta (use hf)")


def plain_copy(model) -> tuple[torch.nn.Module, list[tuple[torch.nn.Module, torch.nn.Module]]]:
    """A copy of `model`'s base without peft's layers, and (layer in the copy, LoRA layer)
    pairs. Every parameter and buffer is shared with the policy except the adapted projections'
    weights, which get their own storage (refresh writes them). A model without an adapter is
    its own copy."""
    if not is_peft(model):
        return model, []
    base = model.get_base_model()
    layers = lora_layers(model)
    memo = {id(t): t for t in [*base.parameters(), *base.buffers()]}
    clone = copy.deepcopy(base, memo)
    pairs = []
    for name, layer in layers.items():
        plain = copy.copy(layer.base_layer)  # the same module type, sharing its bias
        plain._parameters = dict(layer.base_layer._parameters)
        plain.weight = torch.nn.Parameter(layer.base_layer.weight.detach().clone(),
                                          requires_grad=False)
        clone.set_submodule(name, plain)
        pairs.append((plain, layer))
    clone.requires_grad_(False)
    clone.eval()
    return clone, pairs


class MergedHFEngine(Engine):
    """The HF engine's `generate` on a merged copy of the policy (see the module docstring)."""

    name = NAME

    def __init__(self, model, tokenizer):
        check_mergeable(model)
        self.model, self.tokenizer = model, tokenizer
        self.copy, self.pairs = plain_copy(model)

    @torch.no_grad()
    def refresh(self) -> None:
        """Write W + the active adapters' delta into the copy (W alone while the adapter is off,
        as inside base_policy)."""
        for plain, layer in self.pairs:
            plain.weight.copy_(layer.base_layer.weight)
            if not layer.disable_adapters:
                for adapter in layer.active_adapters:
                    if adapter in layer.lora_A:
                        plain.weight.add_(layer.get_delta_weight(adapter).to(plain.weight.dtype))

    def generate(self, prompts, n, seeds, sampling, should_stop=None):
        self.refresh()
        return generate(self.copy, self.tokenizer, prompts, n, seeds, sampling, should_stop)

    @contextlib.contextmanager
    def base_policy(self):
        with reference_policy(self.model):  # switches the layers' adapters off: refresh reads it
            yield self
