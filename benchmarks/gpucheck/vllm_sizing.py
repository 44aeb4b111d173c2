"""How GRPO sizes its vLLM engine (relrl.models.by_name), for the vllm_start step. A module of
its own because relrl.models imports the problem generators, which need scipy: steps.py imports
it only where vLLM runs, so a bare node without scipy still gets the other steps."""
from __future__ import annotations

from gpucheck.common import TRAIN_MICRO_BATCH
from relrl.models.by_name import PROMPT_TOKENS, tool_context_tokens, vllm_sleep
from relrl.tools.protocol import DEFAULT_MAX_TOOL_CALLS


def grpo_sizing(model, tokenizer, memory_share: float, completion: int) -> tuple[bool, int]:
    """(sleep, tokens a sequence may reach) as GRPO decides them: --vllm-sleep auto from the
    memory arithmetic; the prompt, completion and tool-turn budget."""
    tools = tool_context_tokens(tokenizer, "calculator", DEFAULT_MAX_TOOL_CALLS)
    sleep = vllm_sleep("auto", model, memory_share, TRAIN_MICRO_BATCH, completion, tools)
    return sleep, PROMPT_TOKENS + completion + tools
