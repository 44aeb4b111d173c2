"""The chat prompt every script sends to the model, with or without tools.

One system prompt for screening, training and evaluation, so that a score means the same thing
at every stage. Qwen3 gets `enable_thinking=False` (the study sampled without a thinking block);
a tokenizer without a chat template gets a plain ChatML one. With `--tools calculator` the tool
is declared through the template's `tools` argument, and a tool's answers come back as the
template renders a `tool` message (tool_turn_text): Qwen3's own format, rendered by Qwen3's
template for Qwen3 and by CHATML_TEMPLATE for the built-in models.
"""
from __future__ import annotations

from relrl.tools.protocol import tool_schemas

SYSTEM_PROMPT = (
    "You are an expert in reliability engineering. Solve the problem step by step. "
    "End your response with the final numerical answer written exactly once as \\boxed{answer}, "
    "a single number without units."
)

# Plain ChatML, with tools laid out as Qwen3's template lays them out: the declaration (one JSON
# object a line inside <tools></tools>) at the end of the system turn; a call as <tool_call> JSON
# after the assistant's text; consecutive tool answers as <tool_response> blocks in one user turn.
# The wording of the declaration is this project's. It accepts (and ignores) enable_thinking so
# callers need not know which template a tokenizer carries; without tools it renders exactly what
# the built-in models were trained on.
CHATML_TEMPLATE = (
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages[0]['role'] == 'system' -%}{{- messages[0]['content'] + '\\n\\n' -}}{%- endif -%}"
    "{{- '# Tools\\n\\nYou may call the functions described in JSON inside <tools></tools>:\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools>\\n\\nTo call one, write its name and arguments as one JSON object inside "
    "<tool_call></tool_call> tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' and tools and loop.first -%}"
    "{%- elif message['role'] == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' -%}"
    "{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' -%}"
    "{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- elif message['role'] == 'assistant' and message['tool_calls'] -%}"
    "{{- '<|im_start|>assistant\\n' + (message['content'] or '') -}}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set call = call['function'] if call['function'] is defined else call -%}"
    "{%- if message['content'] or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n{\"name\": \"' + call['name'] + '\", \"arguments\": ' -}}"
    "{{- call['arguments'] if call['arguments'] is string else (call['arguments'] | tojson) -}}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def chat_messages(question: str, system_prompt: str | None = None) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT if system_prompt is None else system_prompt},
        {"role": "user", "content": question.strip()},
    ]


def _render(tokenizer, messages: list[dict], tools: str, generation_prompt: bool) -> str:
    template = None if getattr(tokenizer, "chat_template", None) else CHATML_TEMPLATE
    extra = {} if tools == "none" else {"tools": tool_schemas(tools)}
    return tokenizer.apply_chat_template(messages, chat_template=template, tokenize=False,
                                         add_generation_prompt=generation_prompt,
                                         enable_thinking=False, **extra)


def build_prompt(tokenizer, question: str, *, system_prompt: str | None = None,
                 tools: str = "none") -> str:
    """The full prompt text, ending where the assistant's answer begins; `tools` (--tools)
    declares the tool in the system turn."""
    return _render(tokenizer, chat_messages(question, system_prompt), tools, True)


def end_of_turn(tokenizer) -> str:
    return "<|im_end|>" if "<|im_end|>" in tokenizer.get_vocab() else tokenizer.eos_token


def _markers(tokenizer) -> list[str]:
    """The texts of the tokenizer's special and added tokens that a text could spell by accident
    of its characters: at least two characters, not all letters, digits or spaces."""
    texts = set(getattr(tokenizer, "all_special_tokens", None) or [])
    get_added = getattr(tokenizer, "get_added_vocab", None)
    texts.update(get_added() if get_added else ())
    return sorted(t for t in texts
                  if len(t) > 1 and not all(c.isalnum() or c.isspace() for c in t))


def without_markers(tokenizer, answer: str) -> str:
    """`answer` with the first character of every marker it holds (`<` of `<|im_end|>`, of
    `</tool_response>`...) written as a Python escape (`\\x3c`) wherever it occurs, so its tokens
    hold no special or added token: an answer cannot change the structure of the turn it is
    inserted in. protocol.safe_answer has already escaped `<`; this covers any other tokenizer's
    markers (`[INST]`...). Unchanged when it holds none."""
    markers = _markers(tokenizer)
    for _ in range(8):  # an escape could spell a marker only in a contrived vocabulary
        firsts = sorted({m[0] for m in markers if m in answer})
        if not firsts:
            break
        for c in firsts:
            answer = answer.replace(c, f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}")
    return answer


def tool_turn_text(tokenizer, answers: list[str]) -> str:
    """What the engine inserts after a turn that ended with tool calls (the model's own
    end-of-turn token included in that turn): the answers as the template renders `tool`
    messages, then a new assistant prefix (Qwen3's has the empty think block when thinking is
    off). Found by rendering a conversation that ends with a call and taking what follows it.
    The answers go in without_markers, so the special and added tokens of the result are the
    template's alone, whatever the answers hold."""
    calls = [{"type": "function", "function": {"name": "calculator", "arguments": {"expression": "1"}}}
             for _ in answers]
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": "", "tool_calls": calls},
                *({"role": "tool", "content": without_markers(tokenizer, answer)}
                  for answer in answers)]
    rendered = _render(tokenizer, messages, "none", True)
    marker = "</tool_call>" + end_of_turn(tokenizer)
    cut = rendered.rfind(marker)
    if cut < 0:
        raise ValueError("the chat template does not render tool calls (no </tool_call> followed "
                         "by the end-of-turn token)")
    return rendered[cut + len(marker):]


def build_training_text(tokenizer, question: str, answer_text: str, *,
                        system_prompt: str | None = None) -> tuple[str, str]:
    """(prompt, completion) for supervised training: the completion ends with the end-of-turn
    token so the model learns to stop, exactly as sampling stops."""
    end = end_of_turn(tokenizer)
    return build_prompt(tokenizer, question, system_prompt=system_prompt), answer_text.strip() + end
