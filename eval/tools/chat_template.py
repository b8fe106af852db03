"""A tokenizer made able to carry tool calls for TRL: a chat template that renders them, and a parser that reads them back.

TRL's tool loop (GRPOTrainer(tools=...)) needs two things of the tokenizer: a chat template that renders an
assistant's `tool_calls` and the `tool` messages (`trl.chat_template_utils.supports_tool_calling`), kept
prefix-preserving, and a `response_template` that `parse_response` reads a generated call back with (TRL's
`add_response_schema` sets one for the templates it knows, matched by exact text). `with_tool_template` gives a
tokenizer both, choosing in this order:

1. its own template, when it renders tool calls and TRL knows how to parse them (Qwen2.5, Qwen3, Llama 3.1, ...);
2. a ChatML tokenizer (`<|im_start|>`/`<|im_end|>`, e.g. SmolLM2-135M-Instruct, whose template drops tools):
   TRL's Qwen2.5 template, loaded from the installed TRL at runtime, in its training form (prefix-preserving,
   `{% generation %}` markers), with TRL's parser for it less its `reasoning_content` field (the template renders
   `content` alone, and R1-style `<think>...</think>` must stay in the `content` the rewards read). Its default
   system prompt names Qwen ("You are Qwen, created by Alibaba Cloud..."): it is replaced by the model's own default
   system prompt (SmolLM2's "You are a helpful AI assistant named SmolLM, ...") or, for a template without one, by
   `NEUTRAL_SYSTEM_PROMPT`; a conversation's own system message is used as it is. Since the text then differs from
   TRL's, TRL no longer recognises it, and need not: the parser is set here, and the template is prefix-preserving
   with its generation markers, so neither GRPOTrainer nor SFTTrainer swaps it. TRL's template writes arguments as
   plain JSON: an argument holding the text `</tool_call>` is not read back (TRL's parser then keeps the whole
   turn as text, and no tool runs);
3. the tiny model's format (role tokens `<|system|>`/`<|user|>`/`<|assistant|>`, every turn ended by EOS, a
   character-level vocabulary of printable ASCII): no TRL template fits it, so it gets ours, `ROLE_TOKEN_TEMPLATE`,
   which renders a plain conversation exactly as its own template does, adds a call as
   `<tool_call>{"name":...,"arguments":...}</tool_call>` before the EOS of the assistant turn and a result as a user
   turn `<tool_response>...</tool_response>`, and lists the tools in a short system line (its context is 512
   characters). Arguments are written as ASCII JSON with `<` escaped too (`\\u00e9`, `\\u003c`), so any argument
   survives its vocabulary and none can close the call or the turn; text outside printable ASCII elsewhere (a
   tool's output, say) still becomes `<|unk|>`, as in every other turn;
4. anything else: a ValueError saying to give the tokenizer a template with tool calls.

The tokenizer is changed in place and returned. Save it (`save_pretrained`) with the model so that a vLLM server
started from the folder renders the same template.
"""

from __future__ import annotations

import copy
import logging
import re

logger = logging.getLogger(__name__)

CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
# The system prompt of a ChatML template that has none of its own (TRL's Qwen2.5 template always writes one).
NEUTRAL_SYSTEM_PROMPT = "You are a helpful assistant."
# The sentence of TRL's Qwen2.5 template that names Qwen, written in single-quoted Jinja string literals.
QWEN_SYSTEM_PROMPT = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
# The response template of transformers' parser (>= 5.13) needs this version; older ones only have `response_schema`.
RESPONSE_TEMPLATE_TRANSFORMERS = "5.13.0.dev0"

# The tiny model's own format (recipes/common/model/tiny.py) with tool calls and tool results added. A plain
# conversation renders exactly as the model's own template renders it; the assistant's content, calls and EOS
# are inside the generation markers (assistant-only loss trains the calls and the stop); each tool result is
# its own turn, so that the template stays prefix-preserving however many results follow each other.
ROLE_TOKEN_TEMPLATE = (
    "{%- set ns = namespace(system_done=false) -%}"
    "{%- if tools -%}"
    "{{- '<|system|>' -}}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{{- messages[0]['content'] + '\\n' -}}"
    "{%- set ns.system_done = true -%}"
    "{%- endif -%}"
    "{{- 'tools:' -}}"
    "{%- for tool in tools -%}"
    "{%- set fn = tool['function'] if tool['function'] is defined else tool -%}"
    "{%- set params = fn['parameters']['properties'] if fn['parameters'] is defined"
    " and fn['parameters']['properties'] is defined else {} -%}"
    "{{- ' ' + fn['name'] + '(' + (params | list | join(', ')) + ')' -}}"
    "{%- endfor -%}"
    "{{- eos_token -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if loop.first and ns.system_done -%}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{- '<|assistant|>' -}}"
    "{%- generation -%}"
    "{{- message['content'] or '' -}}"
    "{%- for call in message['tool_calls'] or [] -%}"
    "{%- set fn = call['function'] if call['function'] is defined else call -%}"
    "{%- if fn['arguments'] is string -%}"
    "{%- set call_json = '{\"name\":' + (fn['name'] | tojson) + ',\"arguments\":' + fn['arguments'] + '}' -%}"
    "{%- else -%}"
    "{%- set call_json = {'name': fn['name'], 'arguments': fn['arguments']}"
    " | tojson(ensure_ascii=True, separators=(',', ':')) -%}"
    "{%- endif -%}"
    "{{- '<tool_call>' + (call_json | replace('<', '\\\\u003c')) + '</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- eos_token -}}"
    "{%- endgeneration -%}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{- '<|user|><tool_response>' + message['content'] + '</tool_response>' + eos_token -}}"
    "{%- elif message['role'] in ['system', 'user'] -%}"
    "{{- '<|' + message['role'] + '|>' + message['content'] + eos_token -}}"
    "{%- else -%}"
    "{{- raise_exception('unknown role: ' + message['role']) -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}"
)


def with_tool_template(tokenizer):
    """Make `tokenizer` render tool calls and tool results, and parse a generated call back (see the module doc).

    Returns the same tokenizer, changed in place. Raises ValueError when no template of ours or TRL's fits.
    """
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    if supports_tool_calling(tokenizer):
        if _has_parser(tokenizer):
            return tokenizer
        try:
            return add_response_schema(tokenizer)
        except ValueError:
            pass  # renders calls, but TRL cannot read them back: a template below, or the error
    added = set(tokenizer.get_added_vocab())
    if all(token in added for token in CHATML_TOKENS):
        return _set_chatml_template(tokenizer)
    if all(token in added for token in ROLE_TOKENS) and _renders_role_tokens(tokenizer):
        return _set_role_token_template(tokenizer)
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    if supports_tool_calling(tokenizer):
        raise ValueError(
            f"{name}: its chat template renders tool calls but TRL has no parser for it; set "
            "tokenizer.response_template (transformers' response parsing) or give a template TRL knows."
        )
    raise ValueError(
        f"{name}: its chat template cannot render tool calls and it is neither ChatML nor the tiny model's format; "
        "give the tokenizer a chat template that renders tool_calls and tool messages (tokenizer.chat_template)."
    )


def _has_parser(tokenizer) -> bool:
    return any(getattr(tokenizer, attr, None) is not None for attr in ("response_template", "response_schema"))


def _set_chatml_template(tokenizer):
    """TRL's Qwen2.5 training template with the model's own default system prompt, and TRL's parser for it."""
    from trl.chat_template_utils import (
        add_response_schema,
        qwen2_5_chat_template,
        qwen2_5_training_chat_template,
    )

    system_prompt = _own_system_prompt(tokenizer) or NEUTRAL_SYSTEM_PROMPT
    template = qwen2_5_training_chat_template
    if QWEN_SYSTEM_PROMPT not in template:
        logger.warning(
            "TRL's Qwen2.5 template no longer holds %r; its default system prompt is kept", QWEN_SYSTEM_PROMPT
        )
    template = template.replace(QWEN_SYSTEM_PROMPT, _jinja_single_quoted(system_prompt))
    # TRL picks the parser by the template's exact text: ask for it with TRL's own text, then set ours.
    for attr in ("response_template", "response_schema"):
        if hasattr(tokenizer, attr):
            setattr(tokenizer, attr, None)
    tokenizer.chat_template = qwen2_5_chat_template
    add_response_schema(tokenizer)
    tokenizer.chat_template = template
    parser = getattr(tokenizer, "response_template", None)
    if parser is not None and "reasoning_content" in parser.get("fields", {}):
        # The template renders `content` alone: reasoning split off would be lost on the way back, and the rewards
        # read `content` (rewards/text.py), where R1-style `<think>...</think>` must stay.
        parser = copy.deepcopy(parser)
        del parser["fields"]["reasoning_content"]
        tokenizer.response_template = parser
    return tokenizer


def _own_system_prompt(tokenizer) -> str | None:
    """The system prompt the tokenizer's own ChatML template writes when a conversation has none, if any."""
    if not tokenizer.chat_template:
        return None
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    except Exception:  # noqa: BLE001 - any template error means it has no default we can read
        return None
    match = re.match(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", text, flags=re.DOTALL)
    return match.group(1) if match and match.group(1).strip() else None


def _jinja_single_quoted(text: str) -> str:
    """`text` as the inside of a single-quoted Jinja string literal (Jinja decodes escapes as Python does)."""
    return text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")


def _renders_role_tokens(tokenizer) -> bool:
    """Does the tokenizer's own template write a turn as role token, content, EOS (the tiny model's format)?"""
    if not tokenizer.chat_template or tokenizer.eos_token is None:
        return False
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False)
    except Exception:  # noqa: BLE001 - a template that cannot render one user turn is not this format
        return False
    return text == "<|user|>x" + tokenizer.eos_token


def _set_role_token_template(tokenizer):
    """Our template for the role-token format, and a response template that reads its calls back."""
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) < Version(RESPONSE_TEMPLATE_TRANSFORMERS):
        raise ValueError(
            f"the tiny model's tool template is parsed with transformers' response_template, which needs "
            f"transformers >= 5.13 (installed: {transformers.__version__}); upgrade transformers."
        )
    tokenizer.chat_template = ROLE_TOKEN_TEMPLATE
    tokenizer.response_template = {
        "defaults": {"role": "assistant"},
        "start_anchor": "<|assistant|>",
        "fields": {
            "tool_calls": {
                "open": "<tool_call>",
                "close_pattern": r"</tool_call>\s*",
                "repeats": True,
                "content": "json",
                "transform": {"type": "function", "function": "{content}"},
            },
            "content": {"close_pattern": re.escape(tokenizer.eos_token) + r"\s*", "content": "text"},
        },
    }
    return tokenizer
