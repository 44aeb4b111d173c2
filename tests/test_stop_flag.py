"""StopFlag: SIGTERM and SIGUSR1 become a flag while it is active; the file named by
$RELRL_STOP_FILE appearing requests a stop, its text naming the signal (SIGUSR1 when it names none
or cannot be read); an empty variable means none. A run a signal stopped exits STOPPED_EXIT (75),
never 0, which says a run finished."""
import importlib.util
import json
import os
import signal

import pytest
from conftest import ROOT

from relrl.runtime.stop import STOP_FILE_ENV, STOPPED_EXIT, StopFlag, exit_status


@pytest.mark.parametrize("text, signal", [("SIGTERM\n", "SIGTERM"), ("SIGUSR1", "SIGUSR1"),
                                          ("", "SIGUSR1"), ("stop now", "SIGUSR1")])
def test_the_stop_file_appearing_requests_a_stop_named_by_its_text(tmp_path, monkeypatch,
                                                                    text, signal):
    stop_file = tmp_path / "stop"
    monkeypatch.setenv(STOP_FILE_ENV, str(stop_file))
    flag = StopFlag()
    assert flag.stop_file == str(stop_file)
    assert not flag.requested and flag.signal is None  # not written yet
    stop_file.write_text(text, encoding="utf-8")
    assert flag.requested and flag.signal == signal


def test_an_unreadable_stop_file_still_requests_a_stop(tmp_path, monkeypatch):
    monkeypatch.setenv(STOP_FILE_ENV, str(tmp_path))  # a folder: it exists but cannot be read
    flag = StopFlag()
    assert flag.requested and flag.signal == "SIGUSR1"


@pytest.mark.parametrize("value", [None, ""])
def test_an_unset_or_empty_stop_file_variable_means_no_stop_file(tmp_path, monkeypatch, value):
    if value is None:
        monkeypatch.delenv(STOP_FILE_ENV, raising=False)
    else:
        monkeypatch.setenv(STOP_FILE_ENV, value)
    monkeypatch.chdir(tmp_path)
    flag = StopFlag()
    assert flag.stop_file is None
    assert not flag.requested and flag.signal is None


def test_stop_flag_turns_sigterm_and_sigusr1_into_a_flag(capsys):
    before = signal.getsignal(signal.SIGTERM)
    for sig, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGUSR1, "SIGUSR1")):
        with StopFlag() as stop:
            assert not stop.requested
            os.kill(os.getpid(), sig)
            assert stop.requested and stop.signal == name
    assert signal.getsignal(signal.SIGTERM) is before
    assert "will write a checkpoint" in capsys.readouterr().err


def test_stop_flag_can_be_reused_and_lets_errors_through():
    flag = StopFlag()
    for _ in range(2):
        with pytest.raises(RuntimeError, match="boom"):
            with flag:
                raise RuntimeError("boom")


def test_never_ignores_the_stop_file_and_signals(tmp_path, monkeypatch):
    stop_file = tmp_path / "stop"
    stop_file.write_text("SIGTERM", encoding="utf-8")
    monkeypatch.setenv(STOP_FILE_ENV, str(stop_file))
    before = signal.getsignal(signal.SIGUSR1)
    with StopFlag.never() as flag:
        assert signal.getsignal(signal.SIGUSR1) is before  # no handler installed
        assert not flag.requested and flag.agreed() is None
    assert StopFlag().agreed() == "SIGTERM"  # one process: its own signal is the agreed one


# ---------------------------------------------------------------------------- the exit status
def test_stopped_exit_is_ex_tempfail_and_apart_from_the_other_codes():
    from relrl.rl.health import UNHEALTHY_EXIT

    assert STOPPED_EXIT == 75  # sysexits.h EX_TEMPFAIL, documented in docs/training.md
    assert STOPPED_EXIT not in {0, 1, 2, UNHEALTHY_EXIT, 128 + signal.SIGTERM, 128 + signal.SIGUSR1}


@pytest.mark.parametrize("stopped_by, status", [
    ("SIGTERM", STOPPED_EXIT), ("SIGUSR1", STOPPED_EXIT), ("done", 0), ("max_useful_steps", 0),
    ("early_stopping", 0), ("max_total_attempts", 0)])
def test_exit_status_says_whether_a_signal_stopped_the_run(stopped_by, status, monkeypatch):
    monkeypatch.delenv(STOP_FILE_ENV, raising=False)
    assert exit_status(stopped_by) == status


def test_a_stopped_rank_leaves_its_status_beside_the_stop_file(tmp_path, monkeypatch):
    """torchrun turns a worker's 75 into its own 1: the job file reads <stop file>.exit."""
    stop_file = tmp_path / ".stop-7"
    monkeypatch.setenv(STOP_FILE_ENV, str(stop_file))
    assert exit_status("done") == 0 and not (tmp_path / ".stop-7.exit").exists()
    assert exit_status("SIGUSR1") == STOPPED_EXIT
    assert (tmp_path / ".stop-7.exit").read_text() == "75\n"


def test_dpo_stopped_by_sigterm_exits_75_and_finishes_on_resume(tmp_path, monkeypatch, capsys):
    """The DPO script: SIGTERM during step 2 of 4 -> checkpoint, statistics.json stopped_by
    SIGTERM, no adapter, exit 75; the same command with --resume finishes, exit 0."""
    from relrl.finetune import dpo_trainer

    monkeypatch.delenv(STOP_FILE_ENV, raising=False)
    spec = importlib.util.spec_from_file_location("dpo_train", ROOT / "training" / "dpo_train.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows = [{"question": f"What is {i} plus {i}?", "chosen": f"\\boxed{{{2 * i}}}",
             "rejected": f"\\boxed{{{2 * i + 1}}}"} for i in range(4)]
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "dpo"
    argv = ["--model", "tiny-random", "--pairs-from", str(prefs), "--output-dir", str(out),
            "--epochs", "2", "--micro-batch", "2", "--grad-accum", "1", "--lora-r", "4"]
    original = dpo_trainer.DPOTrainer.train_step

    def step(self, items):
        if self.step + 1 == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, items)

    monkeypatch.setattr(dpo_trainer.DPOTrainer, "train_step", step)
    assert script.main(argv) == STOPPED_EXIT
    stats = json.loads((out / "statistics.json").read_text())
    assert stats["stopped_by"] == "SIGTERM" and stats["steps"] == 2 < stats["total_steps"]
    assert not (out / "adapter").exists()
    assert "run again with --resume" in capsys.readouterr().out
    monkeypatch.setattr(dpo_trainer.DPOTrainer, "train_step", original)
    assert script.main([*argv, "--resume"]) == 0
    assert json.loads((out / "statistics.json").read_text())["stopped_by"] == "done"
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
