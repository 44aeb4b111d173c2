"""The settings of an evaluation run: what is sampled and how it is graded."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from relrl.runtime.cli import UsageError
from relrl.tools.protocol import DEFAULT_MAX_TOOL_CALLS, TOOL_CHOICES


@dataclass(frozen=True)
class EvalSettings:
    samples: int = 1
    seed: int = 0
    temperature: float = 1.0
    top_p: float = 0.95
    max_new_tokens: int = 3072
    tolerance: float = 0.05
    tolerance_rule: str = "study"  # or "complement" (relrl.grading.scoring)
    top_k: int = 0  # 0: off
    allow_plain: bool = False
    micro_batch: int = 16  # sequences per forward pass: speed only, never results
    tools: str = "none"  # --tools: "calculator" answers the model's tool calls between turns
    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS  # --max-tool-calls (only used with tools)

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


def check_sampling_values(temperature: float, top_p: float, top_k: int, tolerance: float,
                          prefix: str = "--") -> None:
    """Refuse impossible evaluation sampling and grading values, naming the flag (`prefix` is
    "--eval-" where a trainer's own sampling flags sit beside these)."""
    if not temperature > 0:
        raise UsageError(f"{prefix}temperature: must be > 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise UsageError(f"{prefix}top-p: must be in (0, 1], got {top_p}")
    if not top_k >= 0:
        raise UsageError(f"{prefix}top-k: must be >= 1 (or 0: off), got {top_k}")
    if not tolerance >= 0:
        raise UsageError(f"--tolerance: must be >= 0, got {tolerance}")


def check_tool_values(tools: str, max_tool_calls: int) -> None:
    """Refuse an unknown --tools or a negative --max-tool-calls, naming the flag."""
    if tools not in TOOL_CHOICES:
        raise UsageError(f"--tools: one of {', '.join(TOOL_CHOICES)}, got {tools!r}")
    if not max_tool_calls >= 0:
        raise UsageError(f"--max-tool-calls: must be >= 0, got {max_tool_calls}")
