"""Checkpoints: standard PEFT files, exact resume, atomic writes, folder ownership."""
import json
import os
import pickle
import random
import re
import shutil

import numpy as np
import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model

from relrl.runtime.checkpointing import (
    list_checkpoints,
    load_checkpoint,
    prepare_output_dir,
    run_fingerprint,
    save_checkpoint,
)
from relrl.runtime.cli import UsageError


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)
        self.out = torch.nn.Linear(6, 1)

    def forward(self, x):
        return self.out(torch.relu(self.proj(x)))


def fresh():
    torch.manual_seed(0)
    model = get_peft_model(Net(), LoraConfig(r=2, lora_alpha=2, target_modules=["proj"],
                                             init_lora_weights=False))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=0.05, weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + s))
    return model, optimizer, scheduler


def train(model, optimizer, scheduler, gens, steps):
    """Steps whose data come from every kind of RNG, so a wrong restore changes the weights."""
    for _ in range(steps):
        x = torch.randn(4, 6) + float(np.random.rand()) + random.random()
        x = x + torch.randn(1, generator=gens["torch"]).item() + gens["numpy"].random()
        x = x * gens["python"].random()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()


def generators():
    return {"torch": torch.Generator().manual_seed(1), "numpy": np.random.default_rng(2),
            "python": random.Random(3)}


def lora_weights(model):
    return {k: v.clone() for k, v in model.state_dict().items() if "lora_" in k}


def test_resume_continues_exactly(tmp_path):
    model, opt, sched = fresh()
    gens = generators()
    train(model, opt, sched, gens, 2)
    save_checkpoint(tmp_path / "checkpoint-2", model=model, optimizer=opt, scheduler=sched,
                    generators=gens, state={"step": 2, "losses": [0.5, 0.25]}, fingerprint="abc")
    train(model, opt, sched, gens, 3)
    straight = lora_weights(model)

    model, opt, sched = fresh()
    gens = {"torch": torch.Generator(), "numpy": np.random.default_rng(), "python": random.Random()}
    torch.manual_seed(123)  # disturb the global RNGs: the checkpoint must restore them
    state = load_checkpoint(tmp_path / "checkpoint-2", model=model, optimizer=opt,
                            scheduler=sched, generators=gens)
    assert state == {"fingerprint": "abc", "step": 2, "losses": [0.5, 0.25]}
    train(model, opt, sched, gens, 3)
    resumed = lora_weights(model)
    assert straight.keys() == resumed.keys() and straight
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)


def test_adapter_files_are_standard_peft(tmp_path):
    model, opt, sched = fresh()
    folder = save_checkpoint(tmp_path / "checkpoint-1", model=model, state={}, fingerprint="f")
    names = {p.name for p in folder.iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "rng_state.json",
            "trainer_state.json"} <= names
    torch.manual_seed(5)
    loaded = PeftModel.from_pretrained(Net(), str(folder))
    got = {k: v for k, v in loaded.state_dict().items() if "lora_" in k}
    assert all(torch.equal(got[k], v) for k, v in lora_weights(model).items())


def test_failed_write_leaves_no_checkpoint_and_replacing_is_clean(tmp_path):
    model, opt, sched = fresh()
    save_checkpoint(tmp_path / "checkpoint-4", model=model, state={"v": 1}, fingerprint="f")

    class Broken:
        def save_pretrained(self, path, **kwargs):
            raise OSError("disk full")

    with pytest.raises(OSError):
        save_checkpoint(tmp_path / "checkpoint-8", model=Broken(), state={}, fingerprint="f")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-4"]
    save_checkpoint(tmp_path / "checkpoint-4", model=model, state={"v": 2}, fingerprint="f")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-4"]
    assert json.loads((tmp_path / "checkpoint-4/trainer_state.json").read_text())["v"] == 2


def test_latest_is_by_number_and_ignores_incomplete_folders(tmp_path):
    model, *_ = fresh()
    for step in (9, 10):
        save_checkpoint(tmp_path / f"checkpoint-{step}", model=model, state={}, fingerprint="f")
    (tmp_path / "checkpoint-11").mkdir()  # no trainer_state.json: not a checkpoint
    (tmp_path / ".tmp-checkpoint-12-99").mkdir()
    assert [s for s, _ in list_checkpoints(tmp_path)] == [9, 10]
    assert list_checkpoints(tmp_path / "missing") == []


def test_output_folder_ownership(tmp_path, capsys):
    model, *_ = fresh()
    fp = run_fingerprint({"lr": 1e-5, "seed": 0})
    assert fp == run_fingerprint({"seed": 0, "lr": 1e-5}) != run_fingerprint({"lr": 2e-5})
    assert prepare_output_dir(tmp_path, fp) is None  # empty folder: a new run
    assert prepare_output_dir(tmp_path, fp, resume=True) is None
    save_checkpoint(tmp_path / "checkpoint-20", model=model, state={}, fingerprint="other")
    (tmp_path / "train_log.jsonl").write_text("{}\n")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="another run's .*--resume .*--overwrite"):
        prepare_output_dir(tmp_path, fp)
    assert prepare_output_dir(tmp_path, fp, resume=True).name == "checkpoint-20"
    assert "different settings" in capsys.readouterr().err
    with pytest.raises(UsageError, match="exclude each other"):
        prepare_output_dir(tmp_path, fp, resume=True, overwrite=True)
    with pytest.raises(UsageError, match="not a checkpoint"):
        prepare_output_dir(tmp_path, fp, resume=str(tmp_path / "nope"))
    save_checkpoint(tmp_path / "checkpoint-40", model=model, state={}, fingerprint=fp)
    with pytest.raises(UsageError, match="this run's checkpoints up to checkpoint-40"):
        prepare_output_dir(tmp_path, fp)
    assert prepare_output_dir(tmp_path, fp, overwrite=True, run_files=("train_log.jsonl",)) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_resume_without_a_path_picks_the_latest_checkpoint_by_step(tmp_path):
    model, *_ = fresh()
    fp = run_fingerprint({"seed": 0})
    for step in (10, 2, 9):  # written out of order; "checkpoint-10" sorts before "-2" as text
        save_checkpoint(tmp_path / f"checkpoint-{step}", model=model, state={"step": step},
                        fingerprint=fp)
    chosen = prepare_output_dir(tmp_path, fp, resume=True)
    assert chosen.name == "checkpoint-10"
    assert load_checkpoint(chosen, model=model)["step"] == 10
    named = prepare_output_dir(tmp_path, fp, resume=str(tmp_path / "checkpoint-2"))
    assert named.name == "checkpoint-2"  # a named checkpoint wins over the latest


# -- edges found by mutation testing ------------------------------------------------------------
def test_fingerprint_takes_paths_and_is_16_hex_digits(tmp_path):
    fp = run_fingerprint({"dataset": tmp_path / "d.jsonl", "lr": 1e-5})
    assert re.fullmatch(r"[0-9a-f]{16}", fp)
    assert fp == run_fingerprint({"dataset": str(tmp_path / "d.jsonl"), "lr": 1e-5})


def test_latest_of_three_checkpoints(tmp_path):
    model, *_ = fresh()
    for step in (1, 2, 3):
        save_checkpoint(tmp_path / f"checkpoint-{step}", model=model, state={}, fingerprint="f")
    assert prepare_output_dir(tmp_path, "f", resume=True).name == "checkpoint-3"


def test_ownership_messages_and_overwrite_removes_best(tmp_path, capsys):
    model, *_ = fresh()
    fp = "f" * 16
    assert prepare_output_dir(tmp_path, fp, resume=True) is None
    captured = capsys.readouterr()
    assert captured.err == f"no checkpoint in {tmp_path}: starting a new run\n"
    assert captured.out == ""
    with pytest.raises(UsageError, match=r"^--resume and --overwrite exclude each other$"):
        prepare_output_dir(tmp_path, fp, resume=True, overwrite=True)
    save_checkpoint(tmp_path / "checkpoint-3", model=model, state={}, fingerprint=fp)
    assert prepare_output_dir(tmp_path, fp, resume=True).name == "checkpoint-3"
    assert capsys.readouterr().err == ""  # the same settings: no warning
    with pytest.raises(UsageError, match=r"pass --resume to continue or --overwrite to start "
                                         r"again$"):
        prepare_output_dir(tmp_path, fp)
    save_checkpoint(tmp_path / "best", model=model, state={}, fingerprint=fp)
    assert prepare_output_dir(tmp_path, fp, overwrite=True) is None
    assert list(tmp_path.iterdir()) == []


def test_unsupported_generator_is_named():
    model, *_ = fresh()
    with pytest.raises(TypeError, match=r"^generator 'dice': unsupported type int$"):
        save_checkpoint("unused/checkpoint-1", model=model, state={}, fingerprint="f",
                        generators={"dice": 6})


def test_cuda_rng_states_are_saved_and_restored_only_with_cuda(tmp_path, monkeypatch):
    model, *_ = fresh()
    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all",
                        lambda: [torch.tensor([1, 2, 3], dtype=torch.uint8)])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: restored.append(states))
    save_checkpoint(tmp_path / "checkpoint-1", model=model, state={}, fingerprint="f")
    load_checkpoint(tmp_path / "checkpoint-1")
    assert len(restored) == 1 and [s.tolist() for s in restored[0]] == [[1, 2, 3]]
    assert restored[0][0].dtype == torch.uint8
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # resumed on a CPU
    load_checkpoint(tmp_path / "checkpoint-1")
    assert len(restored) == 1


def test_without_cuda_the_cuda_rng_is_never_touched(tmp_path, monkeypatch):
    def no_cuda(*args):
        raise AssertionError("CUDA RNG touched on a machine without CUDA")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", no_cuda)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", no_cuda)
    model, *_ = fresh()
    folder = save_checkpoint(tmp_path / "checkpoint-1", model=model, state={}, fingerprint="f")
    assert json.loads((folder / "rng_state.json").read_text())["cuda"] == []
    load_checkpoint(folder)


def test_save_creates_missing_parents_and_replaces_a_stale_temp_folder(tmp_path):
    model, *_ = fresh()
    nested = save_checkpoint(tmp_path / "x" / "y" / "checkpoint-1", model=model, state={},
                             fingerprint="f")
    assert (nested / "trainer_state.json").is_file()
    target = tmp_path / "a" / "b" / "checkpoint-1"
    stale = target.parent / f".tmp-checkpoint-1-{os.getpid()}"
    stale.mkdir(parents=True)
    (stale / "junk").write_text("from a crash")
    save_checkpoint(target, model=model, state={"step": 1}, fingerprint="f")
    assert sorted(p.name for p in target.parent.iterdir()) == ["checkpoint-1"]
    # readable JSON, the fingerprint first
    assert (target / "trainer_state.json").read_text() == \
        '{\n "fingerprint": "f",\n "step": 1\n}\n'


def test_a_failed_save_raises_its_own_error_even_when_the_temp_folder_is_gone(tmp_path):
    class Vanishing:
        def save_pretrained(self, path, **kwargs):
            shutil.rmtree(path)
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path / "checkpoint-1", model=Vanishing(), state={}, fingerprint="f")
    assert list(tmp_path.iterdir()) == []


def test_an_adapter_of_another_shape_is_refused(tmp_path):
    model, *_ = fresh()
    save_checkpoint(tmp_path / "checkpoint-1", model=model, state={}, fingerprint="f")
    torch.manual_seed(0)
    wider = get_peft_model(Net(), LoraConfig(r=2, lora_alpha=2, target_modules=["proj", "out"]))
    with pytest.raises(UsageError, match=r"adapter does not match the model \(\S*out\.lora_A\S* "
                                         r"missing\)$"):
        load_checkpoint(tmp_path / "checkpoint-1", model=wider)


def test_optimizer_state_is_loaded_without_running_pickled_code(tmp_path):
    model, opt, sched = fresh()
    folder = save_checkpoint(tmp_path / "checkpoint-1", model=model, optimizer=opt,
                             scheduler=sched, state={}, fingerprint="f")
    for name in ("optimizer.pt", "scheduler.pt"):
        good = (folder / name).read_bytes()
        torch.save({"state": Net()}, folder / name)  # an arbitrary object, not plain data
        with pytest.raises(pickle.UnpicklingError):
            load_checkpoint(folder, optimizer=opt, scheduler=sched)
        (folder / name).write_bytes(good)
