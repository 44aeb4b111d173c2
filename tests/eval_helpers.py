"""Shared by the evaluation tests: a fake `generate` whose answers depend only on the per-sample
seed, like the real sampler (a chosen share right, some wrong, some cut off without an answer);
small datasets; running a script's main() exactly as its __main__ would; a tiny LoRA adapter."""
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from relrl.engines import sample_seed
from relrl.runtime.cli import run_main

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "evaluation" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(name: str, argv: list, capsys) -> tuple[int, str, str]:
    """Run a script's main the way its __main__ does: (exit status, stdout, stderr)."""
    module = load_script(name)
    capsys.readouterr()  # drop what earlier steps of the test printed
    with pytest.raises(SystemExit) as exc:
        run_main(lambda: module.main([str(a) for a in argv]))
    captured = capsys.readouterr()
    return exc.value.code, captured.out, captured.err


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models gain nothing from threads, and on a loaded 2-core machine they lose ~10x."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    """A LoRA adapter for tiny-random with non-zero weights, saved as GRPO would save it."""
    import torch

    from relrl.modeling.loading import attach_lora
    from relrl.models.by_name import load_model

    model, _ = load_model("tiny-random")
    peft_model = attach_lora(model, r=4, alpha=8)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    path = tmp_path_factory.mktemp("runs") / "exp7" / "checkpoint-80"
    peft_model.save_pretrained(path)
    return path


@dataclass
class FakeCompletion:
    text: str
    truncated: bool


def fake_generate(skill: int = 60, calls: list | None = None, fail_after: int | None = None):
    """skill: percent of samples answered right. `calls` collects the ids of each call's rows;
    after `fail_after` calls the next one raises, as a killed job would stop."""

    def generate(rows, seeds, n):
        if calls is not None:
            if fail_after is not None and len(calls) >= fail_after:
                raise KeyboardInterrupt("simulated kill")
            calls.append([row["id"] for row in rows])
        out = []
        for row, seed in zip(rows, seeds):
            samples = []
            for j in range(n):
                s = sample_seed(seed, j)
                if s % 11 == 0:
                    samples.append(FakeCompletion("Let me think step by step and", True))
                elif s % 100 < skill:
                    samples.append(FakeCompletion(f"So the answer is \\boxed{{{row['answer']}}}", False))
                else:
                    samples.append(FakeCompletion(f"I get \\boxed{{{float(row['answer']) * 3 + 1}}}", False))
            out.append(samples)
        return out

    return generate


def write_rows(path: Path, n: int, *, base_score: bool = True, groups: int | None = None) -> Path:
    """n numeric questions in the study's schema (optionally with screening scores and groups)."""
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            row = {"question": f"A system has {i + 2} identical parts in series, each with failure "
                               f"rate {i + 1}e-4 per hour. What is the system failure rate?",
                   "answer": f"{(i + 2) * (i + 1)}e-4", "answer_type": "numeric", "source": "test"}
            if base_score:
                row.update(base_score=i % 5, base_samples=4)
            if groups:
                row["group"] = f"g{i % groups}"
            handle.write(json.dumps(row) + "\n")
    return path
