"""The chat prompt every script sends to the model.

One system prompt for screening, training and evaluation, so that a score means the same thing
at every stage. Qwen3 gets `enable_thinking=False` (the study sampled without a thinking block);
a tokenizer without a chat template gets a plain ChatML one.
"""
from __future__ import annotations

SYSTEM_PROMPT = (
    "You are an expert in reliability engineering. Solve the problem step by step. "
    "End your response with the final numerical answer written exactly once as \\boxed{answer}, "
    "a single number without units."
)

# Plain ChatML. Accepts (and ignores) enable_thinking so callers need not know which template
# a tokenizer carries.
CHATML_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def chat_messages(question: str, system_prompt: str | None = None) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT if system_prompt is None else system_prompt},
        {"role": "user", "content": question.strip()},
    ]


def build_prompt(tokenizer, question: str, *, system_prompt: str | None = None) -> str:
    """The full prompt text, ending where the assistant's answer begins."""
    template = None if getattr(tokenizer, "chat_template", None) else CHATML_TEMPLATE
    return tokenizer.apply_chat_template(
        chat_messages(question, system_prompt),
        chat_template=template,
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=False,
    )


def build_training_text(tokenizer, question: str, answer_text: str, *,
                        system_prompt: str | None = None) -> tuple[str, str]:
    """(prompt, completion) for supervised training: the completion ends with the end-of-turn
    token so the model learns to stop, exactly as sampling stops."""
    end = "<|im_end|>" if "<|im_end|>" in tokenizer.get_vocab() else tokenizer.eos_token
    return build_prompt(tokenizer, question, system_prompt=system_prompt), answer_text.strip() + end
