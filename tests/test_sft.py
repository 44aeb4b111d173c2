"""SFT: label masking, micro-batching, NEFTune, group-aware folds, the fold run's files (summary
against fold files, adapters GRPO accepts), exact resume after SIGTERM, bad input."""
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys

import pytest
import torch
from conftest import ROOT
from safetensors.torch import load_file

from relrl.evaluation.results_io import pair_accuracies, read_result
from relrl.finetune.examples import IGNORE, assistant_text, build_examples, collate_examples
from relrl.runtime.stop import STOPPED_EXIT

SCRIPT = ROOT / "training" / "sft_qwen3_kfold.py"


@pytest.fixture(scope="module")
def tiny_random():
    from relrl.models.by_name import load_model

    return load_model("tiny-random")


def toy_rows(groups=6, per_group=2):
    """Exponential-reliability questions; each group holds paraphrases of one problem."""
    rows = []
    for g in range(groups):
        lam, t = [0.001, 0.002, 0.005][g % 3], [100, 200, 500][g // 3 % 3] + g
        value = f"{2.718281828 ** (-lam * t):.4g}"
        for v in range(per_group):
            question = (f"A unit has failure rate {lam} per hour. Find its reliability at {t} h."
                        if v == 0 else f"What is R({t} h) for an exponential unit, lambda = {lam}/h?")
            rows.append({"id": f"g{g}v{v}", "group": f"g{g}", "question": question,
                         "answer": value, "answer_type": "numeric", "source": "toy",
                         "reasoning": "" if g == groups - 1 else
                         f"R(t) = exp(-lambda t) = exp(-{lam} * {t}) = {value}. \\boxed{{{value}}}"})
    return rows


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ---------------------------------------------------------------------------- examples and loss


def test_assistant_text_kinds():
    assert assistant_text({"answer": "3", "reasoning": "1 + 2 = 3, \\boxed{3}"}) == \
        ("1 + 2 = 3, \\boxed{3}", "reasoning")
    assert assistant_text({"answer": "3", "reasoning": "  "}) == \
        ("The final answer is \\boxed{3}.", "answer_only")
    text, kind = assistant_text({"answer": "3", "reasoning": "1 + 2 = 3"})
    assert kind == "boxed_added" and text.endswith("\\boxed{3}.")


def test_labels_mask_prompt_and_padding_and_count_every_assistant_token(tiny_random):
    _, tok = tiny_random
    rows = toy_rows(2, 1)
    rows[1]["question"] += " Give four significant figures, please, as an engineer would."
    examples, stats = build_examples(rows, tok, 4096)
    assert stats.answer_only == 1 and stats.truncated == 0
    batch = collate_examples(examples, tok.pad_token_id)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    for i, (ex, row) in enumerate(zip(examples, rows)):
        text, _ = assistant_text(row)
        answer_ids = tok(text, add_special_tokens=False)["input_ids"]
        labelled = batch.labels[i][batch.labels[i] != IGNORE].tolist()
        assert labelled == answer_ids + [end]  # every assistant token, end-of-turn included
        # the prompt (system + user turn) and the padding carry no label
        prompt_cols = slice(batch.prompt_width - len(ex.prompt_ids), batch.prompt_width)
        assert (batch.labels[i, prompt_cols] == IGNORE).all()
        assert (batch.labels[i][batch.attention_mask[i] == 0] == IGNORE).all()
        assert tok.decode(ex.prompt_ids).count("<|im_start|>") == 3  # system, user, assistant
    assert (batch.attention_mask == 0).any()  # the two rows really are padded


def test_loss_counts_exactly_the_labelled_tokens(tiny_random):
    """The SFT loss equals the standard shifted cross-entropy with ignore_index -100 over the
    labels, and a padded example's loss is the same as alone."""
    from relrl.finetune.sft_trainer import token_nll

    model, tok = tiny_random
    rows = toy_rows(3, 1)
    rows[2]["reasoning"] = "A much longer worked solution. " * 5 + "\\boxed{1}"
    examples, _ = build_examples(rows, tok, 4096)
    batch = collate_examples(examples, tok.pad_token_id)
    with torch.no_grad():
        nll, count = token_nll(model, batch)
        positions = (batch.attention_mask.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       position_ids=positions).logits
        reference = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), batch.labels[:, 1:].reshape(-1),
            ignore_index=IGNORE, reduction="sum")
        alone = [token_nll(model, collate_examples([e], tok.pad_token_id))[0] for e in examples]
    assert count == sum(len(e.completion_ids) for e in examples)
    assert nll.item() == pytest.approx(reference.item(), rel=1e-5)
    assert nll.item() == pytest.approx(sum(a.item() for a in alone), rel=1e-5)


def test_truncation_and_dropped_rows(tiny_random):
    _, tok = tiny_random
    rows = toy_rows(2, 1)
    prompt_len = len(build_examples(rows[:1], tok, 4096)[0][0].prompt_ids)
    examples, stats = build_examples(rows, tok, prompt_len + 3)
    assert stats.truncated == 2 and all(len(e.completion_ids) == 3 for e in examples)
    examples, stats = build_examples(rows, tok, prompt_len)
    assert examples == [] and stats.dropped == ["g0v0", "g1v0"]


def _sft_grads(model, tok, examples, micro_batch, grad_accum):
    from relrl.finetune.sft_trainer import SFTConfig, SFTTrainer
    from relrl.modeling.loading import attach_lora

    torch.manual_seed(0)
    peft = attach_lora(model, r=4, alpha=8)
    for name, p in peft.named_parameters():  # non-zero B so every LoRA matrix gets a gradient
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)
    cfg = SFTConfig(micro_batch=micro_batch, grad_accum=grad_accum, neftune_alpha=0.0)
    trainer = SFTTrainer(cfg, peft, tok, examples, "unused", fingerprint="x", settings={})
    peft.train()
    metrics = trainer.train_step(examples)
    grads = {n: p.grad.clone() for n, p in peft.named_parameters() if p.grad is not None}
    trainer.neftune.remove()
    peft.unload()
    return metrics, grads


def test_micro_batching_changes_memory_not_the_step(tiny_random):
    model, tok = tiny_random
    examples, _ = build_examples(toy_rows(4, 1), tok, 4096)
    m1, g1 = _sft_grads(model, tok, examples, micro_batch=4, grad_accum=1)
    m2, g2 = _sft_grads(model, tok, examples, micro_batch=1, grad_accum=4)
    assert m1["tokens"] == m2["tokens"] == sum(len(e.completion_ids) for e in examples)
    assert m1["loss"] == pytest.approx(m2["loss"], rel=1e-5)
    assert g1.keys() == g2.keys() and g1
    for name in g1:
        torch.testing.assert_close(g1[name], g2[name], rtol=1e-4, atol=1e-7)


def test_neftune_noise_scale_mask_and_eval_mode():
    from relrl.finetune.sft_trainer import NEFTune

    embed = torch.nn.Embedding(50, 16)

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.e = embed

        def get_input_embeddings(self):
            return self.e

    holder = Holder()
    noise = NEFTune(holder, alpha=5.0)
    ids = torch.tensor([[1, 2, 3, 4], [0, 0, 5, 6]])
    holder.eval()
    clean = embed(ids).detach()
    assert torch.equal(embed(ids), clean)  # no noise outside training
    holder.train()
    noise.mask = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]])
    diff = (embed(ids) - clean).detach()
    bound = [5.0 / (4 * 16) ** 0.5, 5.0 / (2 * 16) ** 0.5]  # alpha / sqrt(L d), L = real length
    assert diff[0].abs().max() <= bound[0] + 1e-6 and diff[0].abs().max() > 0.5 * bound[0]
    assert diff[1, 2:].abs().max() <= bound[1] + 1e-6 and diff[1, 2:].abs().max() > bound[0]
    assert torch.equal(diff[1, :2], torch.zeros(2, 16))  # padding gets no noise
    noise.remove()
    assert torch.equal(embed(ids), clean)  # training mode, hook removed


# ---------------------------------------------------------------------------- folds


def test_plan_runs_folds_keep_groups_together(tmp_path):
    from relrl.finetune.sft_kfold import plan_runs
    from relrl.finetune.sft_trainer import SFTConfig

    rows = toy_rows(7, 3)
    plans = plan_runs(SFTConfig(model="tiny-random"), rows, tmp_path, folds=3, fold=None,
                      fold_seed=0, train_all=False, resume=None, overwrite=False)
    assert [p.name for p in plans] == ["fold_0", "fold_1", "fold_2"]
    tested = [r["id"] for p in plans for r in p.test_rows]
    assert sorted(tested) == sorted(r["id"] for r in rows)  # each row held out exactly once
    for plan in plans:
        train_groups = {r["group"] for r in plan.train_rows}
        test_groups = {r["group"] for r in plan.test_rows}
        assert not train_groups & test_groups
        assert len(plan.train_rows) + len(plan.test_rows) == len(rows)
    group_folds = {}
    for k, plan in enumerate(plans):
        for r in plan.test_rows:
            group_folds.setdefault(r["group"], set()).add(k)
    assert all(len(f) == 1 for f in group_folds.values())  # no group in two folds
    assert len({p.fingerprint for p in plans}) == 3


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "training" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sft_main(*args):
    """training/sft_qwen3_kfold.py's main in this process (no second interpreter start)."""
    return load_script("sft_qwen3_kfold").main([str(a) for a in args])


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", toy_rows(6, 2))
    out = subprocess.run([sys.executable, str(SCRIPT), "--model", "tiny-random", "--dataset",
                          str(data), "--output-dir", str(tmp_path / "o"), "--folds", "20"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 2
    assert out.stderr.strip() == "error: --folds: 12 rows cannot fill 20 folds"


@pytest.mark.parametrize("extra, message", [
    (["--folds", "20"], "--folds: 12 rows cannot fill 20 folds"),
    (["--folds", "3", "--fold", "3"], "--fold: must satisfy 0 <= fold < 3, got 3"),
    (["--folds", "3", "--fold", "-1"], "--fold: must satisfy 0 <= fold < 3, got -1"),
    (["--folds", "1"], "--folds 1 leaves nothing to evaluate on"),
    (["--train-all", "--folds", "3"], "--train-all trains one adapter on all rows"),
    (["--folds", "2", "--eval-temperature", "0"], "--eval-temperature: must be > 0"),
])
def test_bad_fold_requests_stop_before_any_work(tmp_path, extra, message):
    from relrl.runtime.cli import UsageError

    data = write_jsonl(tmp_path / "d.jsonl", toy_rows(6, 2))
    with pytest.raises(UsageError, match=re.escape(message)):
        sft_main("--model", "tiny-random", "--dataset", data, "--output-dir", tmp_path / "o",
                 *extra)
    assert not (tmp_path / "o" / "adapters").exists()


FOLD_ARGS = ["--model", "tiny-random", "--folds", "2", "--epochs", "1", "--lora-r", "4",
             "--grad-accum", "2", "--eval-max-new-tokens", "8"]


@pytest.fixture(scope="module")
def fold_run(tmp_path_factory):
    """A 2-fold run on tiny-random: one short epoch per fold, 8-token answers."""
    tmp = tmp_path_factory.mktemp("kfold")
    data = write_jsonl(tmp / "train.jsonl", toy_rows(6, 2))
    assert sft_main(*FOLD_ARGS, "--dataset", data, "--output-dir", tmp / "run") == 0
    return tmp


def test_fold_run_writes_adapters_and_a_summary_matching_its_fold_files(fold_run):
    run = fold_run / "run"
    summary = json.loads((run / "cv_summary.json").read_text())
    assert summary["complete"] and summary["folds_done"] == 2
    folds = [read_result(run / f"fold_{k}" / "evaluation.json") for k in range(2)]
    for k, (entry, pair) in enumerate(zip(summary["per_fold"], folds)):
        assert entry["fold"] == pair["fold"] == k
        assert entry["n"] == pair["n"] == len(pair["finetuned"]["results"])
        assert entry["base_correct"] == sum(r["correct"] for r in pair["base"]["results"])
        assert entry["sft_correct"] == sum(r["correct"] for r in pair["finetuned"]["results"])
        base, ft, delta = pair_accuracies(pair)
        assert entry["base_accuracy"] == base == entry["base_correct"] / entry["n"]
        assert entry["delta"] == pytest.approx(ft - base) == pytest.approx(delta)
        assert (entry["mcnemar_b01"], entry["mcnemar_b10"]) == \
            (pair["mcnemar_b01"], pair["mcnemar_b10"])
        assert entry["train_n"] + entry["n"] == 12
        assert (run / "adapters" / f"fold_{k}" / "adapter_model.safetensors").is_file()
    accs = [pair_accuracies(f)[1] for f in folds]
    assert summary["sft_accuracy"]["mean"] == pytest.approx(sum(accs) / 2)
    assert summary["pooled"]["n"] == 12
    assert summary["pooled"]["mcnemar_b01"] == sum(f["mcnemar_b01"] for f in folds)
    held_out = [r["id"] for f in folds for r in f["finetuned"]["results"]]
    assert sorted(held_out) == sorted(r["id"] for r in toy_rows(6, 2))
    groups = [{r["id"][:2] for r in f["finetuned"]["results"]} for f in folds]
    assert not groups[0] & groups[1]  # ids g<k>v<j>: no group in both folds
    log = [json.loads(x) for x in (run / "fold_0" / "train_log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in log] == [1, 2] and all(x["tokens"] > 0 for x in log)
    stats = [json.loads((run / f"fold_{k}" / "statistics.json").read_text()) for k in range(2)]
    assert sorted(s["answer_only"] for s in stats) == [0, 2]  # group g5 has no reasoning


def test_summarize_rebuilds_the_same_summary(fold_run):
    run = fold_run / "run"
    before = json.loads((run / "cv_summary.json").read_text())
    (run / "cv_summary.json").unlink()
    assert sft_main("--output-dir", run, "--folds", "2", "--summarize") == 0
    assert json.loads((run / "cv_summary.json").read_text()) == before


def test_fold_adapter_is_grpo_exp7_warm_start(fold_run, tmp_path):
    """grpo_exp7_dynamic.py --sft-adapter <run>/adapters --fold 1 loads the fold's adapter
    trainable and one GRPO update moves it (a toy reward gives the group a spread)."""
    from relrl.rl.grpo_main import main as grpo_main

    adapters = fold_run / "run" / "adapters"
    argv = ["--model", "tiny-random", "--dataset", str(fold_run / "train.jsonl"),
            "--sft-adapter", str(adapters), "--fold", "1", "--output-dir", str(tmp_path / "g"),
            "--max-useful-steps", "1", "--grad-accum", "1", "--max-new-tokens", "8",
            "--max-total-steps", "20", "--learning-rate", "1e-3", "--informative-by", "reward"]
    assert grpo_main("exp7", argv, reward_fn=lambda text, row: (len(text) % 3 / 2, False)) == 0
    stats = json.loads((tmp_path / "g" / "statistics.json").read_text())
    assert stats["useful_steps"] == 1
    assert stats["settings"]["sft_adapter"] == str(adapters / "fold_1")
    warm = load_file(adapters / "fold_1" / "adapter_model.safetensors")
    after = load_file(tmp_path / "g" / "checkpoint-1" / "adapter_model.safetensors")
    assert warm.keys() == after.keys()
    assert any(t.abs().sum() > 0 for k, t in warm.items() if "lora_B" in k)  # SFT trained it
    assert any(not torch.equal(warm[k], after[k]) for k in warm)  # GRPO trained it further


def test_rerun_without_resume_refuses_and_resume_is_a_no_op(fold_run):
    from relrl.runtime.cli import UsageError

    args = [*FOLD_ARGS, "--dataset", fold_run / "train.jsonl", "--output-dir", fold_run / "run",
            "--fold", "0"]
    with pytest.raises(UsageError, match="pass --resume to continue or --overwrite"):
        sft_main(*args)
    before = (fold_run / "run" / "fold_0" / "evaluation.json").read_text()
    assert sft_main(*args, "--resume") == 0
    assert (fold_run / "run" / "fold_0" / "evaluation.json").read_text() == before


# ---------------------------------------------------------------------------- resume


def _train_all(tmp_path, name, data, *, stop_at=None, resume=False):
    """training/sft_qwen3_kfold.py --train-all in this process; with stop_at, SIGTERM arrives
    during that step, as SLURM sends it."""
    from relrl.finetune import sft_trainer

    original = sft_trainer.SFTTrainer.train_step

    def step(self, examples):
        if stop_at is not None and self.step + 1 == stop_at:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, examples)

    argv = ["--model", "tiny-random", "--dataset", str(data), "--output-dir", str(tmp_path / name),
            "--train-all", "--epochs", "2", "--micro-batch", "2", "--grad-accum", "2",
            "--lora-r", "4", "--save-every", "100", "--max-length", "120"]
    sft_trainer.SFTTrainer.train_step = step
    try:
        return sft_main(*argv, *(["--resume"] if resume else []))
    finally:
        sft_trainer.SFTTrainer.train_step = original


def test_sigterm_then_resume_equals_an_uninterrupted_run(tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", toy_rows(5, 1))  # 5 examples: 2 steps an epoch
    assert _train_all(tmp_path, "straight", data) == 0
    assert _train_all(tmp_path, "killed", data, stop_at=3) == STOPPED_EXIT  # resume with --resume
    printed = capsys.readouterr().out
    assert "stopped by SIGTERM at step 3/4" in printed
    assert (tmp_path / "killed" / "all" / "checkpoint-3").is_dir()
    assert not (tmp_path / "killed" / "adapters" / "all").exists()
    assert _train_all(tmp_path, "killed", data, resume=True) == 0
    assert "resumed from" in capsys.readouterr().out
    a = load_file(tmp_path / "straight" / "adapters" / "all" / "adapter_model.safetensors")
    b = load_file(tmp_path / "killed" / "adapters" / "all" / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    logs = [(tmp_path / run / "all" / "train_log.jsonl").read_text().splitlines()
            for run in ("straight", "killed")]
    strip = [[{k: v for k, v in json.loads(x).items() if k != "t_step"} for x in log]
             for log in logs]
    assert strip[0] == strip[1] and len(strip[0]) == 4
    stats = [json.loads((tmp_path / run / "all" / "statistics.json").read_text())
             for run in ("straight", "killed")]
    assert stats[0]["losses"] == stats[1]["losses"] and stats[1]["answer_only"] == 1


# ---------------------------------------------------------------------------- tiny


@pytest.mark.slow
def test_short_sft_raises_tiny_accuracy_on_its_families(tmp_path):
    """On `tiny`, a short LoRA SFT (75 steps of 8 on 200 rows) on three families where it is
    mixed raises accuracy on 200 held-out problems of those families (other parameter draws, no
    shared group), paired with the base on the same seeded samples. How much depends on the
    families and on the build: on tiny v3 here point_availability, cold_standby and k_out_of_n
    gained +17.5 points (McNemar p 2e-5), while other mixed trios gained +5.0 to +8.0 (v2's trio,
    k_out_of_n, parallel_active and series_availability, +7.0 on v3 against +13 to +18 on v2).
    The assertion leaves room for another machine's floating point, not for another build."""
    from relrl.problems.dataset import generate_rows
    from relrl.problems.registry import select

    families = ["point_availability", "cold_standby", "k_out_of_n"]
    rows = generate_rows(select(families), 400, 5, paraphrases=1)
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared 2-core machine: one thread is fastest
    try:
        assert sft_main("--model", "tiny", "--dataset", data, "--output-dir", tmp_path / "run",
                        "--folds", "2", "--fold", "0", "--learning-rate", "2e-3", "--epochs", "3",
                        "--eval-micro-batch", "64") == 0
    finally:
        torch.set_num_threads(threads)
    pair = read_result(tmp_path / "run" / "fold_0" / "evaluation.json")
    assert pair["n"] == 200 and pair["base"]["samples"] == 1
    train_ids = {r["id"] for r in rows} - {r["id"] for r in pair["finetuned"]["results"]}
    assert len(train_ids) == 200
    print(f"SFT on tiny: {pair['delta']:+.1f} points, McNemar p {pair['mcnemar_p']:.2g}")
    assert pair["delta"] >= 8, pair["delta"]  # points
    assert pair["mcnemar_p"] < 0.01


def test_qwen25_script_runs_end_to_end_with_the_kfold_trainer_and_folds(fold_run, tmp_path):
    """training/sft_train_qwen25.py as a user runs it, small: the same trainer and the same
    folds as sft_qwen3_kfold.py for the same arguments, with its own default model and folder."""
    script = ROOT / "training" / "sft_train_qwen25.py"
    usage = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                           text=True, timeout=600, cwd=ROOT)
    assert usage.returncode == 0
    assert "Qwen/Qwen2.5-7B-Instruct" in usage.stdout and "outputs/sft_qwen25" in usage.stdout
    run = tmp_path / "qwen25"
    proc = subprocess.run([sys.executable, str(script), *FOLD_ARGS, "--dataset",
                           str(fold_run / "train.jsonl"), "--output-dir", str(run)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((run / "cv_summary.json").read_text())
    assert summary["complete"] and summary["folds_done"] == 2 and summary["pooled"]["n"] == 12
    kfold = fold_run / "run"
    for k in range(2):
        mine = read_result(run / f"fold_{k}" / "evaluation.json")
        theirs = read_result(kfold / f"fold_{k}" / "evaluation.json")
        assert [r["id"] for r in mine["finetuned"]["results"]] == \
            [r["id"] for r in theirs["finetuned"]["results"]]
        weights = load_file(str(run / "adapters" / f"fold_{k}" / "adapter_model.safetensors"))
        reference = load_file(str(kfold / "adapters" / f"fold_{k}" / "adapter_model.safetensors"))
        assert weights.keys() == reference.keys()
        assert all(torch.equal(weights[n], reference[n]) for n in weights)
