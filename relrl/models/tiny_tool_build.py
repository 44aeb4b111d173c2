"""Build `tiny-tool`: a small Qwen3 that solves problems with the calculator.

`tiny` cannot compute, so in miniature GRPO could only reinforce guesses. `tiny-tool` is trained
on tool-using worked solutions (relrl.data.tool_solutions) of the families whose answer is one
calculator expression of the question's numbers and that a small model learns to write
(TOOL_FAMILIES, chosen by benchmarks/tool_learnability.py): its job is to pick the formula and
copy the numbers; the calculator does the arithmetic. The tool is declared in every prompt, the
loss is on the model's own turns only (the calculator's answer is context), and the build checks
itself on fresh questions with the calculator and without it, under the `complement` rule.

Cached under cache_root()/tiny-tool-<version>/ like `tiny`; built on first use or with

    python -m relrl.models.tiny_tool_build [--force]

`make test` never builds it (the tests use `tiny-random` and `tiny`); docs/demo.md says what
it cost.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from relrl.data.dataset_io import read_json
from relrl.data.prompting import build_prompt
from relrl.data.tool_solutions import encode_segments, tool_solution
from relrl.modeling.tiny_models import cache_root, new_model, qwen3_config
from relrl.modeling.tiny_tokenizer import fixed_tokenizer, train_tokenizer
from relrl.models.tiny_build import (
    Recipe,
    build_lock,
    build_pinned,
    family_accuracy,
    finish_build,
    format_accuracy,
    install_shipped,
    load_or_build,
    pretrain,
    threads,
)
from relrl.problems.base import stray_numbers
from relrl.problems.dataset import generate_rows
from relrl.problems.registry import TOOL_FAMILIES, select
from relrl.runtime.cli import ArgumentParser, run_main

RULE = "complement"  # the honest rule: a guess near 1 earns nothing


@dataclass(frozen=True)
class ToolRecipe(Recipe):
    version: str = "tool-v1"
    seed: int = 20240602  # far from the demo's seeds and from tiny's
    n_train: int = 6000   # rows: each problem's phrasings are rows of their own
    paraphrases: int = 2
    steps: int = 3000  # 1500 steps left the numbers miscopied (4.5% right): results/tiny-tool
    eval_per_family: int = 10
    eval_max_new_tokens: int = 120


RECIPE = ToolRecipe()


def tiny_tool_dir(recipe: ToolRecipe = RECIPE) -> Path:
    return cache_root() / f"tiny-{recipe.version}"


def load_or_build_tiny_tool(recipe: ToolRecipe = RECIPE, folder: Path | None = None):
    """(model, tokenizer) of `tiny-tool`, building it first if the cache lacks it."""
    return load_or_build(Path(folder or tiny_tool_dir(recipe)), "tiny-tool",
                         lambda f: build_tiny_tool(recipe, f))


def training_rows(recipe: ToolRecipe) -> list[dict]:
    """Rows of TOOL_FAMILIES, leaving out the phrasings that state a number otherwise than the
    expression writes it (in FIT, per million hours, percent): their call would hold a number
    the question does not."""
    rows = generate_rows(select(TOOL_FAMILIES), recipe.n_train, recipe.seed,
                         paraphrases=recipe.paraphrases)
    return [row for row in rows if not stray_numbers(row["expression"], row["question"])]


def build_tiny_tool(recipe: ToolRecipe, folder: Path, log=print) -> dict:
    """Like tiny's build: in a pinned process of its own, the same bits on any AVX2 CPU."""
    return build_pinned("relrl.models.tiny_tool_build:build_tiny_tool_here", build_tiny_tool_here,
                        recipe, folder, log)


def build_tiny_tool_here(recipe: ToolRecipe | dict, folder: Path, log=print) -> dict:
    """build_tiny_tool in this process, whatever its kernels."""
    recipe = ToolRecipe(**recipe) if isinstance(recipe, dict) else recipe
    started = time.time()
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with threads(recipe.threads):
        rows = training_rows(recipe)
        # Any tokenizer with the built-in template renders the text the new one is trained on.
        render = fixed_tokenizer()
        texts = [build_prompt(render, row["question"], tools="calculator")
                 + "".join(text for text, _ in tool_solution(render, row)) for row in rows]
        tokenizer = train_tokenizer(texts, recipe.vocab_size)
        pairs = [(tokenizer(build_prompt(tokenizer, row["question"], tools="calculator"),
                            add_special_tokens=False)["input_ids"],
                  *encode_segments(tokenizer, tool_solution(tokenizer, row))) for row in rows]
        longest = max(len(p) + len(c) for p, c, _ in pairs)
        if longest > recipe.max_positions:
            raise ValueError(f"a training example has {longest} tokens, over the recipe's "
                             f"{recipe.max_positions} positions")
        model = new_model(qwen3_config(tokenizer, recipe.max_positions, **recipe.dims()),
                          recipe.seed, "tiny-tool")
        log(f"tiny-tool {recipe.version}: {sum(p.numel() for p in model.parameters()):,} "
            f"parameters, {len(rows)} rows of {len(TOOL_FAMILIES)} families, "
            f"{len(tokenizer)} tokens, {recipe.steps} steps")
        losses = pretrain(model, pairs, recipe, tokenizer.pad_token_id, log)
        train_seconds = time.time() - started
        exclude = frozenset(row["question"] for row in rows)
        families = select(TOOL_FAMILIES)
        report = family_accuracy(model, tokenizer, recipe, exclude, RULE, families, "calculator")
        report["without_calculator"] = family_accuracy(model, tokenizer, recipe, exclude, RULE,
                                                       families, "none")
    report["families"] = list(TOOL_FAMILIES)
    return finish_build(folder, model, tokenizer, report, recipe, losses, started, train_seconds,
                        describe, log)


def describe(report: dict) -> str:
    return (f"with the calculator:\n{format_accuracy(report)}\n\nwithout it:\n"
            f"{format_accuracy(report['without_calculator'])}")


def main() -> None:
    parser = ArgumentParser(description="Build the built-in `tiny-tool` model (it solves "
                            "problems with the calculator) and print its accuracy.")
    parser.add_argument("--force", action="store_true", help="rebuild even if cached")

    def run():
        args = parser.parse_args()
        folder = tiny_tool_dir()
        with build_lock(folder):
            if not args.force and not (folder / "accuracy.json").is_file() \
                    and install_shipped(folder):
                print(f"installed the shipped tiny-tool into {folder}")
            elif args.force or not (folder / "accuracy.json").is_file():
                build_tiny_tool(RECIPE, folder)
                return
        print(describe(read_json(folder / "accuracy.json")))
        print(f"cached at {folder} (--force to rebuild)")

    run_main(run)


if __name__ == "__main__":
    main()
