"""eval/tools/chat_template.py: SmolLM2's real tokenizer and the tiny model's carry tool calls for TRL.

For each: a conversation with a `python` call and its result renders both, TRL's start-up checks pass (tool calling,
prefix preservation, generation markers), and the round trip holds: TRL's `parse_response` of the token ids of a
rendered call gives the call back, whatever its code holds (quotes, newlines, braces, unicode). A tokenizer with no
template of ours or TRL's is refused in one line.
"""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoTokenizer, PreTrainedTokenizerFast
from trl.chat_template_utils import (
    get_training_chat_template,
    has_generation_markers,
    is_chat_template_prefix_preserving,
    parse_response,
    qwen2_5_chat_template,
    supports_tool_calling,
)

from eval.tools.chat_template import NEUTRAL_SYSTEM_PROMPT, with_tool_template

CODES = [
    "print(6*7)",
    "print(\"double\" + 'single' + '\\'escaped\\'')",
    "for i in range(3):\n    print(i)\n\nprint('done')\n",
    "d = {'a': {1: [2, 3]}}\nprint(f'{d} {{literal}}')",
    "print('héllo wörld: ∑ π ≈ 3.14 😀 日本')",
    "x = '\\\\'  # one backslash\nprint(x, '\\t', r'\\n')",
    "print('<|im_end|>', '<|eos|>', '<tool_response>')",
    "",
]


def python(code: str) -> str:
    """Run Python code and return what it prints.

    Args:
        code: the program to run
    """
    return ""


def call(code: str) -> dict:
    return {"type": "function", "function": {"name": "python", "arguments": {"code": code}}}


@pytest.fixture(scope="module", params=["smol", "tiny"])
def tokenizer(request):
    folder = request.getfixturevalue("smol_standin_dir" if request.param == "smol" else "tiny_model_dir")
    return with_tool_template(AutoTokenizer.from_pretrained(folder))


def render(tokenizer, messages, **kwargs) -> str:
    return tokenizer.apply_chat_template(messages, tools=[python], tokenize=False, **kwargs)


def ids(tokenizer, messages, **kwargs) -> list[int]:
    return tokenizer.apply_chat_template(messages, tools=[python], tokenize=True, return_dict=False, **kwargs)


def round_trip(tokenizer, assistant: dict) -> dict:
    """The assistant turn rendered after a user turn, its token ids parsed back by TRL as its trainer does."""
    prompt = [{"role": "user", "content": "What is 6*7?"}]
    prompt_ids = ids(tokenizer, prompt, add_generation_prompt=True)
    full_ids = ids(tokenizer, [*prompt, assistant])
    assert full_ids[: len(prompt_ids)] == prompt_ids
    return parse_response(tokenizer, full_ids[len(prompt_ids) :], prefix=prompt_ids, tools=[python])


def test_renders_the_call_and_its_result(tokenizer):
    messages = [
        {"role": "user", "content": "What is 6*7?"},
        {"role": "assistant", "content": "", "tool_calls": [call("print(6*7)")]},
        {"role": "tool", "name": "python", "content": "42"},
    ]
    text = render(tokenizer, messages, add_generation_prompt=True)
    assert "<tool_call>" in text and "</tool_call>" in text
    assert '"name":' in text and '"python"' in text and '"code":' in text and '"print(6*7)"' in text
    assert "<tool_response>" in text and "42" in text and "</tool_response>" in text
    assert text.index("print(6*7)") < text.index("<tool_response>")
    assert "python(" in text or '"name": "python"' in text  # the tool is listed for the model


def test_trl_start_up_checks_pass(tokenizer):
    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)
    assert has_generation_markers(tokenizer.chat_template)
    assert get_training_chat_template(tokenizer) is None  # nothing for GRPOTrainer or SFTTrainer to swap
    assert tokenizer.response_template is not None  # so GRPOTrainer does not ask add_response_schema


@pytest.mark.parametrize("code", CODES)
def test_round_trip_of_a_call(tokenizer, code):
    parsed = round_trip(tokenizer, {"role": "assistant", "content": "", "tool_calls": [call(code)]})
    assert parsed["tool_calls"] == [call(code)]
    assert parsed["content"] == ""


def test_round_trip_of_text_and_two_calls(tokenizer):
    content = "<think>6*7: let me run it</think>\nI will check."
    calls = [call("print(6*7)"), call("print('again')")]
    parsed = round_trip(tokenizer, {"role": "assistant", "content": content, "tool_calls": calls})
    assert parsed["tool_calls"] == calls
    assert parsed["content"] == content  # the thinking stays in `content`, which the rewards read


def test_rendering_keeps_prefixes(tokenizer):
    calls = [[call("print(6*7)")], [call("x = {'a': 1}\nprint(x)")]]
    for first in ([{"role": "system", "content": "Use the tool."}], []):
        messages = [
            *first,
            {"role": "user", "content": "What is 6*7?"},
            {"role": "assistant", "content": "", "tool_calls": calls[0]},
            {"role": "tool", "name": "python", "content": "42"},
            {"role": "assistant", "content": "Once more.", "tool_calls": calls[1]},
            {"role": "tool", "name": "python", "content": "{'a': 1}"},
            {"role": "assistant", "content": "The answer is 42."},
        ]
        whole = render(tokenizer, messages)
        for k in range(1, len(messages)):
            assert whole.startswith(render(tokenizer, messages[:k])), k
            if messages[k]["role"] == "assistant":  # the prompt TRL sends before each assistant turn
                assert whole.startswith(render(tokenizer, messages[:k], add_generation_prompt=True)), k


def test_tool_less_conversation_renders_as_before(smol_standin_dir, tiny_model_dir):
    """The tiny model's SFT format is unchanged; SmolLM2 keeps its own system prompt, not the one naming Qwen."""
    messages = [{"role": "user", "content": "What is 6*7?"}, {"role": "assistant", "content": "42"}]
    own = AutoTokenizer.from_pretrained(tiny_model_dir)
    tiny = with_tool_template(AutoTokenizer.from_pretrained(tiny_model_dir))
    for convo in (messages, [{"role": "system", "content": "Be brief."}, *messages]):
        before = own.apply_chat_template(convo, return_dict=True, return_assistant_tokens_mask=True)
        after = tiny.apply_chat_template(convo, return_dict=True, return_assistant_tokens_mask=True)
        assert after["input_ids"] == before["input_ids"] and after["assistant_masks"] == before["assistant_masks"]

    smol = with_tool_template(AutoTokenizer.from_pretrained(smol_standin_dir))
    own_prompt = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    for tools in (None, [python]):
        text = smol.apply_chat_template(messages, tools=tools, tokenize=False)
        assert text.startswith(f"<|im_start|>system\n{own_prompt}") and "Qwen" not in text
        text = smol.apply_chat_template(
            [{"role": "system", "content": "Be brief."}, *messages], tools=tools, tokenize=False
        )
        assert text.startswith("<|im_start|>system\nBe brief.") and own_prompt not in text


def test_chatml_without_a_default_system_prompt(smol_standin_dir):
    """A ChatML template with no system prompt of its own gets a neutral one; one of its own is kept verbatim."""
    bare = AutoTokenizer.from_pretrained(smol_standin_dir)
    bare.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )
    text = with_tool_template(bare).apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert text.startswith(f"<|im_start|>system\n{NEUTRAL_SYSTEM_PROMPT}<|im_end|>") and "Qwen" not in text

    odd = 'It\'s a "test" \\ of é,\nover two lines {{ not jinja }}'
    quirky = AutoTokenizer.from_pretrained(smol_standin_dir)
    quirky.chat_template = (
        "{{ '<|im_start|>system\\n' + " + repr(odd) + " + '<|im_end|>\\n' }}"
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )
    for tools in (None, [python]):
        text = with_tool_template(quirky).apply_chat_template(
            [{"role": "user", "content": "hi"}], tools=tools, tokenize=False
        )
        assert text.startswith(f"<|im_start|>system\n{odd}")


def test_a_template_trl_knows_is_kept(smol_standin_dir):
    qwen = AutoTokenizer.from_pretrained(smol_standin_dir)
    qwen.chat_template = qwen2_5_chat_template  # what a Qwen2.5 model ships
    assert with_tool_template(qwen).chat_template == qwen2_5_chat_template
    assert qwen.response_template is not None
    again = with_tool_template(with_tool_template(AutoTokenizer.from_pretrained(smol_standin_dir)))
    assert again.chat_template == with_tool_template(AutoTokenizer.from_pretrained(smol_standin_dir)).chat_template


def plain_tokenizer(chat_template: str) -> PreTrainedTokenizerFast:
    """A word-level tokenizer with neither ChatML nor the tiny model's role tokens."""
    backend = Tokenizer(models.WordLevel(vocab={"<unk>": 0, "<eos>": 1}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", eos_token="<eos>", chat_template=chat_template
    )


def test_a_tokenizer_no_template_fits_is_refused():
    plain = plain_tokenizer("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}")
    with pytest.raises(ValueError, match="cannot render tool calls.*give the tokenizer a chat template") as error:
        with_tool_template(plain)
    assert "\n" not in str(error.value)

    renders_calls = plain_tokenizer(
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}"
        "{% for c in m['tool_calls'] or [] %}CALL {{ c['function']['name'] }} {{ c['function']['arguments'] | tojson }}"
        "{% endfor %}\n{% endfor %}"
    )
    with pytest.raises(ValueError, match="renders tool calls but TRL has no parser"):
        with_tool_template(renders_calls)


def test_the_tiny_vocabulary_spells_the_tool_format(tiny_model_dir):
    """The tiny tokenizer is character-level over printable ASCII: the tool format's markers are plain text in it,
    and a call's arguments are written in ASCII whatever they hold; a tool's non-ASCII output becomes <|unk|>."""
    tiny = with_tool_template(AutoTokenizer.from_pretrained(tiny_model_dir))
    for marker in ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", '{"name":', "tools:"):
        encoded = tiny.encode(marker, add_special_tokens=False)
        assert tiny.unk_token_id not in encoded and tiny.decode(encoded) == marker
        assert len(encoded) == len(marker)  # one character, one token

    unicode_call = {"role": "assistant", "content": "", "tool_calls": [call("print('π ≈ 3.14 😀')")]}
    assert tiny.unk_token_id not in ids(tiny, [{"role": "user", "content": "pi?"}, unicode_call])
    result = {"role": "tool", "name": "python", "content": "π ≈ 3.14"}
    assert tiny.unk_token_id in ids(tiny, [{"role": "user", "content": "pi?"}, unicode_call, result])


def test_a_closing_marker_inside_an_argument(tokenizer):
    """Ours escapes `<` in a call's JSON, so the tiny format reads `</tool_call>` in code back; TRL's Qwen2.5
    template writes plain JSON, so its parser cuts the call there and keeps the turn as text (no tool runs)."""
    code = "print('</tool_call>')"
    parsed = round_trip(tokenizer, {"role": "assistant", "content": "", "tool_calls": [call(code)]})
    if "<|im_start|>" in tokenizer.chat_template:
        assert "tool_calls" not in parsed and code in parsed["content"]
    else:
        assert parsed["tool_calls"] == [call(code)]
