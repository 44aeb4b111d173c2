"""The built-in models are the same bits on every machine: they ship with the code, and a build
runs in a child process whose CPU kernels are pinned (relrl.models.pinned_build), so a rebuild
gives the registered bits on any AVX2 CPU (docs/testing.md, "The same bits on every CPU")."""
import hashlib
import os

import pytest

from relrl.models import pinned_build, tiny_build
from relrl.models.tiny_build import PROBE_SHA256, REGISTERED_SHA256, SHIPPED


@pytest.mark.parametrize("name", ["tiny-v3", "tiny-tool-v1"])
def test_the_shipped_models_are_the_registered_builds(name):
    weights = SHIPPED / name / "model.safetensors"
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == REGISTERED_SHA256[name]
    assert (SHIPPED / name / "accuracy.json").is_file()


def test_an_empty_cache_gets_the_shipped_tiny_without_a_build(tmp_path, monkeypatch):
    monkeypatch.setenv("RELRL_CACHE", str(tmp_path))

    def no_build(*args, **kwargs):
        raise AssertionError("built instead of installing the shipped model")

    monkeypatch.setattr(tiny_build, "build_tiny", no_build)
    model, _ = tiny_build.load_or_build_tiny()
    assert tiny_build.weights_sha256(tmp_path / "tiny-v3") == REGISTERED_SHA256["tiny-v3"]
    assert sum(p.numel() for p in model.parameters()) == 2_164_672
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tiny-v3-")]  # no staging left


def test_an_empty_cache_gets_the_shipped_tiny_tool_without_a_build(tmp_path, monkeypatch):
    from relrl.models import tiny_tool_build

    monkeypatch.setenv("RELRL_CACHE", str(tmp_path))

    def no_build(*args, **kwargs):
        raise AssertionError("built instead of installing the shipped model")

    monkeypatch.setattr(tiny_tool_build, "build_tiny_tool", no_build)
    tiny_tool_build.load_or_build_tiny_tool()
    assert tiny_build.weights_sha256(tmp_path / "tiny-tool-v1") == REGISTERED_SHA256["tiny-tool-v1"]


def test_a_cache_holding_another_build_is_reported_in_one_line(tmp_path, capsys):
    folder = tmp_path / "tiny-v3"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"another build")
    tiny_build.check_registered(folder)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds another build of tiny-v3" in err
    assert REGISTERED_SHA256["tiny-v3"][:16] in err and "make clean-cache" in err


def test_the_pins_reach_the_child_and_override_the_callers_setting():
    env = pinned_build.pinned_env(2, {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AUTO",
                                      "PATH": os.environ["PATH"]})
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["MKL_CBWR"] == "AVX2,STRICT"
    assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2" and env["OMP_NUM_THREADS"] == "2"
    assert env["MKL_NUM_THREADS"] == "2" and env["RELRL_PINNED_BUILD"] == "1"


@pytest.mark.slow
def test_a_pinned_build_gives_the_recorded_bits_whatever_the_callers_kernels():
    """The shortened recipe (tiny_build.PROBE, 40 steps) built in the pinned child, started from
    a process that asks for torch's scalar kernels: the digest recorded when the shipped build
    was made. Unpinned, the same recipe gave three digests under the default, AVX2 and AVX-512
    kernels of one machine (docs/testing.md), so this holds only if the pins took."""
    probe = tiny_build.probe_bits({**os.environ, "ATEN_CPU_CAPABILITY": "default"})
    assert probe["capability"] == "AVX2"
    assert probe["sha256"] == PROBE_SHA256
