"""StopFlag: SIGTERM and SIGUSR1 become a flag while it is active; the file named by
$RELRL_STOP_FILE appearing requests a stop, its text naming the signal (SIGUSR1 when it names none
or cannot be read); an empty variable means none."""
import os
import signal

import pytest

from relrl.runtime.stop import STOP_FILE_ENV, StopFlag


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
