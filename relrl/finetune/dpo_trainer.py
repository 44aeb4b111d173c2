"""The DPO baseline: preference pairs from screening or evaluation outputs, a LoRA trained with
the DPO (or IPO) loss of relrl.finetune.dpo_loss, the reference being the same weights with the adapter
off (relrl.modeling.loading.reference_policy), on the epoch loop of relrl.finetune.epoch_loop.

Pairs come from
  - result files (screening.json, a model result or a pair result of the evaluation scripts):
    for each question, a correct completion is chosen and a wrong one rejected, paired in order
    so no completion is used twice (at most --max-pairs-per-question per question); the same
    question id in several files must carry the same question text;
  - preference files, JSONL (or a JSON array): {"question", "chosen", "rejected"} with texts, or
    chosen / rejected as chat messages, whose user turns must then be the same question.
Output folder: checkpoint-N/, train_log.jsonl (loss, reward margin, implicit-reward accuracy
per step), statistics.json, pairs.jsonl (the pairs trained on) and adapter/ (the final LoRA).
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from relrl.data.dataset_io import (
    DatasetError,
    atomic_write_json,
    atomic_write_jsonl,
    question_id,
    read_records,
)
from relrl.data.prompting import build_prompt, build_training_text
from relrl.evaluation.results_io import read_result
from relrl.finetune.dpo_loss import LOSS_TYPES, dpo_loss
from relrl.finetune.epoch_loop import LOG_FILE, OPTIMISATION, STATS_FILE, EpochTrainer, LoopConfig
from relrl.finetune.examples import collate, encode
from relrl.modeling.loading import attach_lora, check_model_source, device_of, reference_policy, save_adapter
from relrl.modeling.logprobs import completion_logprobs
from relrl.models.by_name import load_model
from relrl.runtime import distributed
from relrl.runtime.checkpointing import run_fingerprint
from relrl.runtime.cli import UsageError
from relrl.runtime.config import (
    LOAD_IN_4BIT,
    SettingsParser,
    fingerprint_settings,
    prepare_run_dir,
    redefault,
    setting,
)
from relrl.runtime.stop import exit_status
from relrl.runtime.tracking import REPORT_TO, open_tracker
from relrl.runtime.tracking import RUN_FILES as TRACKING_FILES
from relrl.untrusted import UntrustedInputError, load_json_file

RESULT_KINDS = ("model_result", "screening", "pair_result")
LOSS = "loss"
PAIRS_FILE, ADAPTER_DIR = "pairs.jsonl", "adapter"


# ---------------------------------------------------------------------------- pairs


@dataclass
class Pair:
    id: str
    question: str
    chosen: str
    rejected: str
    chosen_truncated: bool = False  # a truncated completion gets no end-of-turn token
    rejected_truncated: bool = False
    source: str = ""


def _records(data: dict) -> list[dict]:
    if data.get("kind") == "pair_result":
        return data["base"]["results"] + data["finetuned"]["results"]
    return data["results"]


def _completions(record: dict) -> list[dict]:
    return record.get("completions") or [record]


def pairs_from_results(paths: list[str], max_per_question: int | None) -> tuple[list[Pair], int]:
    """(pairs, empty responses skipped) from evaluation or screening result files."""
    questions: dict[str, tuple[str, str]] = {}  # id -> (question, first file)
    pool: dict[str, list[dict]] = {}
    for path in paths:
        data = read_result(path)
        if not isinstance(data, dict) or data.get("kind") not in RESULT_KINDS:
            raise DatasetError(f"{path}: not a screening, model result or pair result JSON")
        for record in _records(data):
            qid = str(record["id"])
            seen = questions.setdefault(qid, (record["question"], path))
            if seen[0] != record["question"]:
                raise DatasetError(f"{path}: question {qid} differs from the one in {seen[1]}: "
                                   "pairs must share a question")
            pool.setdefault(qid, []).extend(_completions(record))
    pairs, empty = [], 0
    for qid, completions in pool.items():
        usable = [c for c in completions if str(c.get("response") or "").strip()]
        empty += len(completions) - len(usable)
        right = [c for c in usable if c["correct"]]
        wrong = [c for c in usable if not c["correct"]]
        for good, bad in list(zip(right, wrong))[:max_per_question]:
            pairs.append(Pair(qid, questions[qid][0], good["response"], bad["response"],
                              bool(good.get("truncated")), bool(bad.get("truncated")),
                              questions[qid][1]))
    return pairs, empty


def _user_turn(messages, where: str, side: str) -> tuple[str, str]:
    """(question, answer) of a chosen/rejected conversation."""
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise DatasetError(f"{where}: {side!r} must be a text or a list of chat messages")
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    answers = [m.get("content", "") for m in messages if m.get("role") == "assistant"]
    if not users or not answers:
        raise DatasetError(f"{where}: {side!r} needs a user and an assistant message")
    return str(users[-1]), str(answers[-1])


def pairs_from_preferences(path: str) -> list[Pair]:
    """Pairs from a preference file; any bad row is an error naming its line."""
    pairs = []
    for line, row in read_records(path):
        where = f"{path}:{line}"
        if not isinstance(row, dict) or "chosen" not in row or "rejected" not in row:
            raise DatasetError(f"{where}: a preference row needs 'chosen' and 'rejected'")
        question = row.get("question", row.get("prompt"))
        chosen, rejected = row["chosen"], row["rejected"]
        if isinstance(chosen, list) or isinstance(rejected, list):
            asked_c, chosen = _user_turn(chosen, where, "chosen")
            asked_r, rejected = _user_turn(rejected, where, "rejected")
            if asked_c.strip() != asked_r.strip():
                raise DatasetError(f"{where}: chosen and rejected answer different questions")
            if question is not None and str(question).strip() != asked_c.strip():
                raise DatasetError(f"{where}: the conversations answer another question than "
                                   "'question'")
            question = asked_c
        if not isinstance(question, str) or not question.strip():
            raise DatasetError(f"{where}: missing 'question'")
        for side, text in (("chosen", chosen), ("rejected", rejected)):
            if not isinstance(text, str) or not text.strip():
                raise DatasetError(f"{where}: empty {side} text")
        if chosen.strip() == rejected.strip():
            raise DatasetError(f"{where}: chosen and rejected are the same text")
        pairs.append(Pair(str(row.get("id") or question_id(question)), question, chosen,
                          rejected, bool(row.get("chosen_truncated")),
                          bool(row.get("rejected_truncated")), path))
    if not pairs:
        raise DatasetError(f"{path}: no preference pairs")
    return pairs


def is_result_file(path: str) -> bool:
    """A result file is one JSON object with a result `kind`; anything else (JSONL, a JSON
    array) is read as a preference file."""
    try:  # relrl.untrusted: a file it cannot read is not a result file
        data = load_json_file(path)
    except UntrustedInputError:
        return False
    return isinstance(data, dict) and data.get("kind") in RESULT_KINDS


def load_pairs(paths: list[str], max_per_question: int | None = None) -> list[Pair]:
    """Every pair of the given files. Errors (pairs that do not share a question, an empty
    text) name the file and line."""
    for path in paths:
        if not Path(path).is_file():
            raise DatasetError(f"{path}: no such file")
    results = [p for p in paths if is_result_file(p)]
    found: list[Pair] = []
    if results:
        from_results, empty = pairs_from_results(results, max_per_question)
        if empty:
            print(f"warning: skipped {empty} empty responses in {', '.join(results)}",
                  file=sys.stderr)
        found.extend(from_results)
    for path in paths:
        if path not in results:
            found.extend(pairs_from_preferences(path))
    if not found:
        raise DatasetError(f"{', '.join(paths)}: no question has both a correct and a wrong "
                           "completion, so there is no preference pair")
    return found


# ---------------------------------------------------------------------------- training


@dataclass
class PairItem:
    prompt_ids: list[int]
    chosen_ids: list[int]
    rejected_ids: list[int]
    reference: tuple[float, float] = (0.0, 0.0)  # reference log-probs (chosen, rejected)


def encode_pairs(pairs: list[Pair], tokenizer, max_length: int) -> tuple[list[PairItem], int]:
    """Token ids of each pair (the SFT prompt; completions end with end-of-turn unless
    truncated) and how many completions were cut at max_length."""
    items, cut = [], 0
    for pair in pairs:
        sides = []
        for text, truncated in ((pair.chosen, pair.chosen_truncated),
                                (pair.rejected, pair.rejected_truncated)):
            if truncated:
                prompt, completion = build_prompt(tokenizer, pair.question), text
            else:
                prompt, completion = build_training_text(tokenizer, pair.question, text)
            prompt_ids, ids, was_cut = encode(tokenizer, prompt, completion, max_length)
            if not ids:
                raise UsageError(f"--max-length {max_length}: the prompt of question {pair.id} "
                                 "alone is longer")
            cut += was_cut
            sides.append(ids)
        items.append(PairItem(prompt_ids, *sides))
    return items, cut


@dataclass
class DPOConfig(LoopConfig):
    """A DPO run's settings (the loop's fields from LoopConfig, other defaults here)."""
    learning_rate: float = redefault(LoopConfig, "learning_rate", 5e-6)
    epochs: int = redefault(LoopConfig, "epochs", 1)
    warmup_ratio: float = redefault(LoopConfig, "warmup_ratio", 0.1)
    weight_decay: float = redefault(LoopConfig, "weight_decay", 0.0)
    model: str = setting("unsloth/Qwen3-8B-unsloth-bnb-4bit",
                         "base model: hub id, folder, tiny, tiny-tool or tiny-random")
    # the pairs themselves make the fingerprint, not where they were read from
    pairs_from: list[str] = setting(
        help="screening.json / evaluation result JSONs (pairs made per question: a correct "
        "completion chosen, a wrong one rejected) or preference JSONL files; required",
        factory=list, fingerprint=False, metavar="FILE")
    max_pairs_per_question: int | None = setting(
        None, "cap on pairs made from one question's completions (none: as many as can be made "
        "without reusing a completion)", positive=True, fingerprint=False)
    output_dir: str = setting("outputs/dpo", "checkpoints, logs, pairs.jsonl and adapter/",
                              env="OUTPUT_DIR", fingerprint=False)
    beta: float = setting(0.1, "strength of the pull towards the reference", env="BETA",
                          group=LOSS, range="> 0")
    loss_type: str = setting("sigmoid", "sigmoid: DPO; ipo: IPO on per-token mean log-probs",
                             flag="--loss", choices=LOSS_TYPES, group=LOSS)
    lora_r: int = setting(16, "LoRA rank", positive=True, group=OPTIMISATION)
    lora_alpha: int = setting(32, "LoRA alpha", positive=True, group=OPTIMISATION)
    max_length: int = setting(4096, "prompt + completion tokens; longer completions are cut",
                              positive=True, group=OPTIMISATION)
    load_in_4bit: bool | None = setting(None, "auto: a pre-quantized checkpoint in 4-bit anywhere, a "
                                        "full-precision one in 4-bit NF4 on CUDA and float32 on the "
                                        "CPU; yes: quantize wherever bitsandbytes runs; no: full "
                                        "precision", choices=LOAD_IN_4BIT)
    unsloth: bool = setting(False, "load through Unsloth (CUDA only)")
    report_to: str = setting("none", "also log the training curves to TensorBoard "
                             "(<output-dir>/tensorboard) or Weights & Biases",
                             choices=REPORT_TO, fingerprint=False)

    def settings(self) -> dict:
        return fingerprint_settings(self)


class DPOTrainer(EpochTrainer):
    kind = "dpo"
    curves = {"losses": "loss", "margins": "margin", "accuracies": "accuracy"}

    def __init__(self, cfg: DPOConfig, model, tokenizer, items: list[PairItem], output_dir,
                 **kwargs):
        super().__init__(cfg, model, items, output_dir, **kwargs)
        self.pad_id = tokenizer.pad_token_id
        self.reference_logps()

    def sequence_logps(self, items: list[PairItem]) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs of the chosen and rejected completions, (pairs,) each: summed over
        tokens for DPO, the per-token mean for IPO."""
        batch = collate([(i.prompt_ids, i.chosen_ids) for i in items] +
                        [(i.prompt_ids, i.rejected_ids) for i in items], self.pad_id)
        device = device_of(self.model)
        logp = completion_logprobs(self.model, batch.input_ids.to(device),
                                   batch.attention_mask.to(device), batch.prompt_width,
                                   batch.input_ids.shape[0])
        mask = batch.completion_mask.to(device)
        per_seq = (logp * mask).sum(dim=1)
        if self.cfg.loss_type == "ipo":
            per_seq = per_seq / mask.sum(dim=1).clamp(min=1)
        n = len(items)
        return per_seq[:n], per_seq[n:]

    def reference_logps(self) -> None:
        """The reference's log-probs, once: the adapter is off and nothing trains."""
        if distributed.is_main():
            print(f"reference log-probs of {len(self.items)} pairs (adapter off)", flush=True)
        self.model.eval()
        mine = []  # each rank computes its share of the micro-batches, all ranks get all
        with torch.no_grad(), reference_policy(self.model):
            for m, part in distributed.share(list(enumerate(self.micro_batches(self.items)))):
                chosen, rejected = self.sequence_logps(part)
                mine.append((m, list(zip(chosen.tolist(), rejected.tolist()))))
        every = [pair for part in self.in_order(mine) for pair in part]
        for item, reference in zip(self.items, every):
            item.reference = tuple(reference)

    def train_step(self, items: list[PairItem]) -> dict:
        sums = {"loss": 0.0, "margin": 0.0, "accuracy": 0.0, "chosen_reward": 0.0,
                "rejected_reward": 0.0}
        mine = []  # (micro-batch, its weighted metrics) of this rank's share
        for m, part in self.my_micro_batches(items):
            chosen, rejected = self.sequence_logps(part)
            ref = torch.tensor([i.reference for i in part], dtype=chosen.dtype,
                               device=chosen.device)
            out = dpo_loss(chosen, rejected, ref[:, 0], ref[:, 1], beta=self.cfg.beta,
                           loss_type=self.cfg.loss_type)
            share = len(part) / len(items)  # micro-batch means weighted into the step's mean
            (out.loss * share).backward()
            mine.append((m, {"loss": out.loss.item() * share,
                             "margin": out.margins.mean().item() * share,
                             "accuracy": out.accuracy.item() * share,
                             "chosen_reward": out.chosen_rewards.mean().item() * share,
                             "rejected_reward": out.rejected_rewards.mean().item() * share}))
        for values in self.in_order(mine):
            for key, value in values.items():
                sums[key] += value
        return {**sums, "pairs": len(items)}

    def describe(self, record: dict) -> str:
        return (f"loss {record['loss']:.4f} margin {record['margin']:+.4f} "
                f"accuracy {record['accuracy']:.2f}")


# ---------------------------------------------------------------------------- command line


def build_parser() -> SettingsParser:
    p = SettingsParser(DPOConfig, description="DPO (or IPO) with a LoRA on preference pairs built "
                       "from screening or evaluation outputs; the reference is the base model",
                       epilog=distributed.launch_help("training/dpo_train.py"))
    p.add_argument("--resume", nargs="?", const=True, default=None, metavar="CHECKPOINT",
                   help="continue from CHECKPOINT, or from the output folder's latest when none "
                   "is named")
    p.add_argument("--overwrite", action="store_true",
                   help="delete the output folder's checkpoints first")
    return p


def main(argv=None) -> int:
    """Validate everything (flags, pair files, output folder), then load and train."""
    cfg, args = build_parser().parse(argv)
    cfg.check()
    if not cfg.pairs_from:
        raise UsageError("--pairs-from: required (or pairs_from in the --config recipe)")
    check_model_source(cfg.model)
    pairs = load_pairs(cfg.pairs_from, cfg.max_pairs_per_question)
    out = Path(cfg.output_dir)
    texts = [{k: v for k, v in dataclasses.asdict(p).items() if k != "source"} for p in pairs]
    fingerprint = run_fingerprint({**cfg.settings(), "pairs": texts})  # same pairs, same run
    settings = {**cfg.settings(), "pairs": len(pairs)}
    distributed.setup()  # torchrun / srun: one rank per process; else a no-op
    try:
        return _train(cfg, pairs, out, fingerprint, settings, args)
    finally:
        distributed.cleanup()


def _train(cfg: DPOConfig, pairs: list[Pair], out: Path, fingerprint: str, settings: dict,
           args) -> int:
    def prepare():  # rank 0 alone checks (and with --overwrite clears) the output folder
        found = prepare_run_dir(cfg, out, fingerprint, resume=args.resume,
                                overwrite=args.overwrite,
                                run_files=(LOG_FILE, STATS_FILE, PAIRS_FILE, ADAPTER_DIR,
                                           *TRACKING_FILES))
        atomic_write_jsonl(out / PAIRS_FILE, [dataclasses.asdict(p) for p in pairs])
        return found

    resume_from = distributed.on_main(prepare)
    main = distributed.is_main()
    tracker = open_tracker(cfg.report_to, out, run_name=out.name, config=settings, main=main)

    model, tokenizer = load_model(cfg.model, load_in_4bit=cfg.load_in_4bit,
                                  use_unsloth=cfg.unsloth,
                                  max_seq_length=cfg.max_length)  # Unsloth's: a pair's longest
    items, cut = encode_pairs(pairs, tokenizer, cfg.max_length)
    if cut and main:
        print(f"warning: {cut} completions cut at --max-length {cfg.max_length}", file=sys.stderr)
    torch.manual_seed(cfg.seed)  # the new LoRA's initial weights
    model = attach_lora(model, r=cfg.lora_r, alpha=cfg.lora_alpha)
    if main:
        print(f"DPO {cfg.model}: {len(pairs)} pairs from {len({p.id for p in pairs})} questions, "
              f"loss {cfg.loss_type}, beta {cfg.beta}, lr {cfg.learning_rate:g}, {cfg.epochs} epochs, "
              f"batch {cfg.batch_size}, fingerprint {fingerprint}", flush=True)
    trainer = DPOTrainer(cfg, model, tokenizer, items, out, fingerprint=fingerprint,
                         settings=settings, tracker=tracker)
    try:
        result = trainer.run(resume_from)
    finally:
        tracker.close()
    result["completions_cut"] = cut
    status = exit_status(result["stopped_by"])  # 75 on every rank when a signal stopped it
    if main:
        atomic_write_json(out / STATS_FILE, result)
        if not status:
            save_adapter(model, out / ADAPTER_DIR)
            print(f"done: {result['steps']} steps, last margin {result['margins'][-1]:+.4f}, "
                  f"implicit-reward accuracy {result['accuracies'][-1]:.2f}; adapter saved to "
                  f"{out / ADAPTER_DIR}", flush=True)
    # the others wait for rank 0's files: a launcher ends every rank once one exits non-zero
    distributed.barrier()
    return status
