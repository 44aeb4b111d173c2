"""LoRA supervised fine-tuning: the SFT warm start (its k-fold sweep is relrl.finetune.sft_kfold).

  - examples (relrl.finetune.examples): system + user prompt -> worked solution ending in \\boxed{},
    loss on the assistant tokens only, end-of-turn included; no packing; with --tools
    calculator, tool-using solutions whose inserted tokens (the tool's answer) carry no loss;
  - the loop: relrl.finetune.epoch_loop (shared with the DPO trainer);
  - the SFT step: summed token NLL over the step's assistant tokens divided by their number, so
    micro-batching changes memory, not the loss; NEFTune noise on the input embeddings.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from relrl.finetune.epoch_loop import OPTIMISATION, EpochTrainer, LoopConfig
from relrl.finetune.examples import collate_examples
from relrl.modeling.loading import device_of
from relrl.modeling.logprobs import completion_logprobs
from relrl.runtime.config import LOAD_IN_4BIT, fingerprint_settings, setting
from relrl.tools.protocol import TOOL_CHOICES

DEFAULT_MODEL = "unsloth/Qwen3-8B-unsloth-bnb-4bit"


class NEFTune:
    """NEFTune (Jain et al. 2023): while the model trains, add uniform noise in
    [-1, 1] * alpha / sqrt(L * d) to each sequence's input embeddings, L its real length and d
    the embedding width. Set `.mask` to the attention mask of the batch about to run."""

    def __init__(self, model, alpha: float):
        self.alpha, self.mask = alpha, None
        self.seed = None  # set per micro-batch: its noise then does not depend on which rank
        self.handle = model.get_input_embeddings().register_forward_hook(self._hook)

    def _hook(self, module, inputs, output):
        if not module.training or self.alpha <= 0:
            return None
        mask = self.mask
        if mask is None or tuple(mask.shape) != tuple(output.shape[:2]):
            mask = torch.ones(output.shape[:2])
        mask = mask.to(output.device, torch.float32)  # lengths in float32, exact up to 2^24
        scale = self.alpha / torch.sqrt(mask.sum(dim=1).clamp(min=1) * output.shape[-1])
        generator = None
        if self.seed is not None:
            generator = torch.Generator(device=output.device).manual_seed(self.seed)
        noise = torch.empty_like(output).uniform_(-1.0, 1.0, generator=generator)
        return output + noise * (scale[:, None, None] * mask[..., None]).to(output.dtype)

    def remove(self) -> None:
        self.handle.remove()


def token_nll(model, batch) -> tuple[torch.Tensor, int]:
    """(summed negative log-likelihood of the labelled tokens, their number) of a Batch."""
    device = device_of(model)
    logp = completion_logprobs(model, batch.input_ids.to(device), batch.attention_mask.to(device),
                               batch.prompt_width, batch.input_ids.shape[0])
    mask = batch.completion_mask.to(device)
    return -(logp * mask).sum(), int(mask.sum())


@dataclass
class SFTConfig(LoopConfig):
    """A run's settings; defaults are the study's SFT (r=16, alpha=32, lr 2e-4, 4 epochs,
    NEFTune alpha 5, max length 4096)."""
    model: str = setting(DEFAULT_MODEL, "base model: hub id, folder, tiny, tiny-tool or tiny-random")
    dataset: str = setting("", "training questions, JSONL with `reasoning` worked solutions "
                           "(the study: the 600 non-mixed questions)", env="DATASET_PATH")
    lora_r: int = setting(16, "LoRA rank", positive=True, group=OPTIMISATION)
    lora_alpha: int = setting(32, "LoRA alpha", positive=True, group=OPTIMISATION)
    lora_dropout: float = setting(0.0, "LoRA dropout", group=OPTIMISATION, range="[0, 1)")
    neftune_alpha: float = setting(5.0, "NEFTune embedding noise, 0 turns it off",
                                   group=OPTIMISATION, range=">= 0")
    max_length: int = setting(4096, "prompt + answer tokens; longer answers are cut",
                              positive=True, group=OPTIMISATION)
    load_in_4bit: bool | None = setting(None, "auto: a pre-quantized checkpoint in 4-bit anywhere, a "
                                        "full-precision one in 4-bit NF4 on CUDA and float32 on the "
                                        "CPU; yes: quantize wherever bitsandbytes runs; no: full "
                                        "precision", choices=LOAD_IN_4BIT)
    unsloth: bool = setting(False, "load through Unsloth (CUDA only)")
    tools: str = setting("none", "none: the study's plain worked solutions; calculator: the "
                         "prompt declares the calculator and rows with an `expression` train on "
                         "a solution that calls it (the tool's answer masked), the others on "
                         "their plain solution", choices=TOOL_CHOICES)
    max_steps: int | None = setting(None, "train for exactly N optimiser updates, epochs or "
                                    "not (the warmup and cosine decay span N; --epochs is "
                                    "then unused): a dose that does not grow with the data",
                                    positive=True, group=OPTIMISATION,
                                    default_text="--epochs passes")

    def settings(self) -> dict:
        """What makes two runs the same run (bookkeeping settings left out)."""
        out = fingerprint_settings(self)
        if out["tools"] == "none":  # added after runs were recorded: those still resume
            out.pop("tools")
        if out["max_steps"] is None:  # likewise: a run by epochs keeps its fingerprint
            out.pop("max_steps")
        else:  # the steps, not the epochs, shape the run
            out.pop("epochs")
        return out


class SFTTrainer(EpochTrainer):
    kind = "sft"

    def __init__(self, cfg: SFTConfig, model, tokenizer, examples, output_dir, **kwargs):
        super().__init__(cfg, model, examples, output_dir, max_steps=cfg.max_steps, **kwargs)
        self.pad_id = tokenizer.pad_token_id
        self.neftune = NEFTune(model, cfg.neftune_alpha)

    def train_step(self, examples) -> dict:
        tokens = sum(e.trained_tokens for e in examples)  # the whole step's, every rank
        sums = []
        for m, part in self.my_micro_batches(examples):
            batch = collate_examples(part, self.pad_id)
            self.neftune.mask = batch.attention_mask
            # the noise of micro-batch m of this step, whichever rank runs it
            self.neftune.seed = (self.cfg.seed * 1_000_003 + self.step) * 1_000_003 + m
            nll, _ = token_nll(self.model, batch)
            (nll / tokens).backward()
            sums.append((m, nll.item()))
        self.neftune.mask = self.neftune.seed = None
        total = 0.0
        for value in self.in_order(sums):
            total += value
        return {"loss": total / tokens, "tokens": tokens, "examples": len(examples)}

    def describe(self, record: dict) -> str:
        return f"loss {record['loss']:.4f} ({record['tokens']} tokens)"

    def finish(self, stopped_by: str) -> dict:
        self.neftune.remove()
        return super().finish(stopped_by)
