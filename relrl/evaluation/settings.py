"""The settings of an evaluation run: what is sampled and how it is graded."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from relrl.grading.scoring import TOLERANCE_RULES
from relrl.runtime.config import check_fields, range_of, setting
from relrl.tools.protocol import DEFAULT_MAX_TOOL_CALLS, TOOL_CHOICES


@dataclass(frozen=True)
class EvalSettings:
    """Each field's flag is --field-name; its declared range (finite and ...) is checked by
    check_fields when the scripts make settings from their flags (settings_from_args), and the
    flags themselves reject a value out of it as they are parsed (relrl.evaluation.cli)."""
    samples: int = setting(1, "completions per question", range=">= 1")
    seed: int = setting(0, "run seed", range=">= 0")
    temperature: float = setting(1.0, "sampling temperature", range="> 0")
    top_p: float = setting(0.95, "nucleus sampling", range="(0, 1]")
    max_new_tokens: int = setting(3072, "completion length limit", range=">= 1")
    tolerance: float = setting(0.05, "relative tolerance for a correct answer", range="[0, 1]")
    tolerance_rule: str = setting("study", "relrl.grading.scoring", choices=TOLERANCE_RULES)
    top_k: int = setting(0, "the K likeliest tokens only (0: off)", range=">= 0")
    allow_plain: bool = setting(False, "grade a final plain number without \\boxed{}")
    # sequences per forward pass: speed only, never results
    micro_batch: int = setting(16, "sequences per forward pass", range=">= 1")
    # "calculator" answers the model's tool calls between turns
    tools: str = setting("none", "tools the model may call", choices=TOOL_CHOICES)
    max_tool_calls: int = setting(DEFAULT_MAX_TOOL_CALLS, "tool calls answered per completion "
                                  "(only used with tools)", range=">= 0")

    def signature(self) -> dict:
        """The settings that change results (a resumed run must match them)."""
        sig = asdict(self)
        sig.pop("micro_batch")
        # a default left out keeps the signature of results recorded without the field
        if not sig["top_k"]:
            sig.pop("top_k")
        if sig["tolerance_rule"] == "study":
            sig.pop("tolerance_rule")
        if sig["tools"] == "none":  # without tools the call limit changes nothing
            sig.pop("tools")
            sig.pop("max_tool_calls")
        return sig

    @property
    def uses_tools(self) -> bool:
        return self.tools != "none"


def setting_changes(before, after) -> str:
    """'settings changed: --flag old -> new, ...' between two signatures (a key left out holds its
    default), or '' when either is not a signature: what a refused resume names."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return ""
    defaults = asdict(EvalSettings())
    changed = [f"--{key.replace('_', '-')} {before.get(key, defaults.get(key))} -> "
               f"{after.get(key, defaults.get(key))}"
               for key in sorted(set(before) | set(after))
               if before.get(key, defaults.get(key)) != after.get(key, defaults.get(key))]
    return f"settings changed: {', '.join(changed)}" if changed else ""


def settings_of(result: dict) -> EvalSettings:
    """The settings a model result was sampled and graded with."""
    return EvalSettings(**result["settings"])


def eval_range(name: str) -> str | None:
    """The range EvalSettings declares for `name` (a flag or a trainer's --eval-* setting that
    becomes it)."""
    return range_of(EvalSettings, name)


def check_settings(settings: EvalSettings) -> EvalSettings:
    """Every evaluation setting finite and in its declared range, a choice among its choices:
    one line naming the flag, exit status 2 (a UsageError)."""
    check_fields(settings)
    return settings
