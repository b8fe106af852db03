"""SFT on tool traces (recipes/sft.py `tools: [python]`, recipes/stages/sft/tools.py) and the tool configs.

The loss mask is checked token by token, against a mask worked out here without the code under test: the
conversation is rendered to text, the assistant's turns and the tool's results are found in it as substrings (the
formats written out below), and each token is mapped to its characters by the tokenizer's offsets. Every token of
an assistant turn (its text, its call, its end of turn) must be trained, every other one (the tools' system text,
the question, each tool result) must be -100; on the tiny model the trainer's loss must be the mean cross-entropy
over exactly those tokens. Then the tool cold start runs through the recipe's command line, and
`recipes/configs/demo/dapo_tools.yaml` trains 4 steps through grpo.py's, with its first turns calling the tool.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

from recipes.common.model.loading import SHIPPED_COLD_START

# One multi-call conversation: a 2-step problem solved with one call per step (two calls, two results).
SOLUTION = "Mia starts with 14 marbles.\n14 - 5 = 9\n9 * 3 = 27\n\\boxed{27}"
# Each template's assistant turn, as the templates write it: after the header, through the end of turn. The span
# in between (text, calls, EOS) is the assistant's; ChatML's newline after <|im_end|> is inside its markers too.
ASSISTANT = {
    "tiny": re.compile(r"<\|assistant\|>(.*?<\|eos\|>)", re.DOTALL),
    "chatml": re.compile(r"<\|im_start\|>assistant(\n.*?<\|im_end\|>\n)", re.DOTALL),
}
# Each template's tool result around its text
TOOL_RESULT = {"tiny": "<tool_response>{}</tool_response>", "chatml": "<tool_response>\n{}\n</tool_response>"}


def _conversations(style="per_step", result=None):
    """The conversation of SOLUTION, built by the recipe's own code, with the tools column; `result(text)` replaces
    the text of each tool result."""
    from datasets import Dataset

    from recipes.stages.sft.tools import tool_schemas, tool_solution_conversations, with_tools_column

    row = {"id": "m", "prompt": [{"role": "user", "content": "Mia has 14 marbles. How many now?"}]}
    rows = Dataset.from_list([{**row, "solution": SOLUTION, "answer": "27"}])
    conversations = tool_solution_conversations(rows, style)
    if result is not None:
        messages = conversations[0]["messages"]
        messages = [{**m, "content": result(m["content"])} if m["role"] == "tool" else m for m in messages]
        conversations = Dataset.from_list([{"messages": messages}])
    return with_tools_column(conversations, tool_schemas(["python"]))


def _prepared(model_dir, conversations, tmp_path):
    """TRL's SFTTrainer as train_sft builds it (the recipe's tool template, assistant_only_loss) and its first row."""
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    from recipes.common.model.loading import load_tokenizer
    from recipes.stages.sft.tools import tool_template

    tokenizer = tool_template(load_tokenizer(str(model_dir)))
    args = SFTConfig(
        output_dir=str(tmp_path), assistant_only_loss=True, max_length=4096, use_cpu=True, bf16=False,
        report_to=[], per_device_train_batch_size=1,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    trainer = SFTTrainer(model=model, args=args, train_dataset=conversations, processing_class=tokenizer)
    return trainer, tokenizer, trainer.train_dataset[0]


def _expected_mask(tokenizer, row, family: str):
    """(input_ids, trained? per token, the tool results' tokens) of the conversation, from its rendered text alone."""
    messages, tools = row["messages"], json.loads(row["tools"])
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = encoded["offset_mapping"]
    spans = [match.span(1) for match in ASSISTANT[family].finditer(text)]
    assert len(spans) == sum(message["role"] == "assistant" for message in messages) == 3
    trained = []
    for start, end in offsets:
        inside = [a <= start and end <= b for a, b in spans]
        assert any(inside) or not any(a < end and start < b for a, b in spans), "a token straddles a turn's edge"
        trained.append(any(inside))
    results, after = [], spans[0][1]
    for message in messages:
        if message["role"] == "tool":  # the tokens of each result, found after the turn that called for it
            start = text.index(TOOL_RESULT[family].format(message["content"]), after)
            after = start + len(TOOL_RESULT[family].format(message["content"]))
            results.append([i for i, (a, b) in enumerate(offsets) if a < after and start < b])
    return encoded["input_ids"], trained, results, spans[0][0]


@pytest.mark.parametrize("family", ["tiny", "chatml"])
def test_the_loss_is_on_the_assistants_turns_token_by_token(family, tmp_path):
    """The tiny model's template (ours) and SmolLM2's tokenizer with TRL's Qwen2.5 training template (ChatML)."""
    from tests.conftest import build_smol_standin

    model_dir = SHIPPED_COLD_START
    if family == "chatml":
        model_dir = tmp_path / "smol"
        build_smol_standin(model_dir)
    conversations = _conversations()
    _, tokenizer, prepared = _prepared(model_dir, conversations, tmp_path)
    ids, trained, results, first_turn = _expected_mask(tokenizer, conversations[0], family)
    assert prepared["input_ids"] == ids
    labels = prepared["labels"]
    assert labels == [token if keep else -100 for token, keep in zip(ids, trained, strict=True)]
    # what that means, read back: the prompt and each tool result (2 of them) are -100 to the last token; the
    # assistant's turns, calls and ends of turn (3 of them) are trained
    prompt = tokenizer(tokenizer.apply_chat_template(conversations[0]["messages"][:1], tools=json.loads(
        conversations[0]["tools"]), tokenize=False), add_special_tokens=False)["input_ids"]  # fmt: skip
    assert ids[: len(prompt)] == prompt and all(label == -100 for label in labels[: len(prompt)])
    assert len(results) == 2 and all(results) and all(labels[i] == -100 for result in results for i in result)
    kept = tokenizer.decode([label for label in labels if label != -100])
    assert kept.count("<tool_call>") == 2 and "step_1 = 14 - 5" in kept and "step_2 = 9 * 3" in kept
    assert kept.count(tokenizer.eos_token) == 3 and "\\boxed{27}" + tokenizer.eos_token in kept
    assert "<tool_response>" not in kept and "marbles. How many" not in kept


def test_the_loss_is_the_mean_over_the_assistants_tokens_and_no_tool_token(tmp_path):
    """On the tiny model: the trainer's loss is the cross-entropy averaged over exactly the tokens found above. A tool
    result of other text (as long) changes no label outside it, and no loss before it (the answer after it reads it,
    so its loss may change: that is the model conditioning on the result, not training on it)."""
    runs = []
    for result in (None, lambda text: "Q" * (len(text) - 1) + "\n"):
        conversations = _conversations(result=result)
        trainer, tokenizer, prepared = _prepared(SHIPPED_COLD_START, conversations, tmp_path)
        ids, trained, _, _ = _expected_mask(tokenizer, conversations[0], "tiny")
        batch = trainer.data_collator([prepared])
        model = trainer.model.eval()
        with torch.no_grad():
            loss = trainer.compute_loss(model, batch)
            logits = model(input_ids=torch.tensor([ids])).logits[0]
        per_token = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="none")
        targets = torch.tensor(trained[1:])  # a token is trained as the target of the position before it
        assert loss.item() == pytest.approx(per_token[targets].mean().item(), rel=1e-5)
        runs.append((per_token, targets, ids, prepared["labels"]))
    (first, kept, ids, labels), (second, kept_too, other, other_labels) = runs
    assert torch.equal(kept, kept_too) and len(ids) == len(other)
    changed = [index for index, (a, b) in enumerate(zip(ids, other, strict=True)) if a != b]
    assert changed and all(labels[i] == other_labels[i] == -100 for i in changed)
    assert [a for a, b in zip(labels, other_labels, strict=True) if a != b] == []
    assert torch.allclose(first[: changed[0] - 1], second[: changed[0] - 1])


def test_the_rows_show_the_tools_as_grpo_shows_them():
    """The tools column renders exactly as TRL renders the python environment's bound method in GRPO."""
    from transformers import AutoTokenizer

    from eval.tools.python import PythonEnvironment
    from recipes.common.model.loading import load_tokenizer
    from recipes.common.model.tiny import SMOLLM2_TOKENIZER
    from recipes.stages.sft.tools import tool_schemas, tool_template

    prompt = [{"role": "user", "content": "What is 6*7?"}]
    for tokenizer in (load_tokenizer(str(SHIPPED_COLD_START)), AutoTokenizer.from_pretrained(SMOLLM2_TOKENIZER)):
        tokenizer = tool_template(tokenizer)
        shown = tokenizer.apply_chat_template(prompt, tools=tool_schemas(["python"]), tokenize=False)
        in_grpo = tokenizer.apply_chat_template(prompt, tools=[PythonEnvironment().python], tokenize=False)
        assert shown == in_grpo and "python" in shown


def _recipe_error(capsys, recipe, *argv) -> str:
    with pytest.raises(SystemExit) as stopped:
        recipe.cli(list(argv))
    assert stopped.value.code == 2
    return capsys.readouterr().err.strip()


def test_the_tool_options_are_checked_before_anything_loads(monkeypatch, capsys):
    from recipes import sft
    from recipes.common.command_line import config
    from recipes.stages.sft.arguments import SFTScriptArguments

    monkeypatch.setattr(config, "setup_logging", lambda: None)
    base = ["--config", "recipes/configs/demo/sft_tools.yaml"]
    assert "assistant_only_loss: true" in _recipe_error(capsys, sft, *base, "--assistant_only_loss", "false")
    assert "unknown tool 'pyhton'" in _recipe_error(capsys, sft, *base, "--tools", "pyhton")
    assert "arithmetic" in _recipe_error(capsys, sft, *base, "--dataset_name", "synthetic:1", "--dataset_num_rows", "1")
    with pytest.raises(ValueError, match=r"tools: \[python\]"):
        SFTScriptArguments(tool_solutions="one_call")


def test_the_tool_cold_start_trains_and_saves_the_tool_template(monkeypatch, tmp_path):
    """`python recipes/sft.py --config recipes/configs/demo/sft_tools.yaml`, one step: the saved tokenizer carries the
    tool template, so that GRPO with tools (and vLLM) renders as the cold start trained."""
    from recipes import sft
    from recipes.common.command_line import config
    from recipes.common.model.loading import load_tokenizer
    from recipes.common.model.tiny import CHAT_TEMPLATE

    monkeypatch.setattr(config, "setup_logging", lambda: None)
    out = tmp_path / "sft_tools"
    argv = ["--config", "recipes/configs/demo/sft_tools.yaml", "--dataset_num_rows", "2", "--max_steps", "1"]
    sft.cli([*argv, "--per_device_train_batch_size", "2", "--output_dir", str(out)])
    card = json.loads((out / "run_card.json").read_text())
    assert card["final_step"] == 1 and card["config"]["script"]["tools"] == ["python"]
    saved = load_tokenizer(str(out))
    assert saved.chat_template != CHAT_TEMPLATE and "tool_call" in saved.chat_template
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "python", "arguments": {"code": "print(1)"}}}]}  # fmt: skip
    assert '<tool_call>{"name":"python","arguments":{"code":"print(1)"}}</tool_call>' in saved.apply_chat_template(
        [{"role": "user", "content": "q"}, call], tokenize=False
    )


def test_the_dapo_tools_demo_trains_and_logs_the_tool_figures(monkeypatch, tmp_path):
    """`python recipes/grpo.py --config recipes/configs/demo/dapo_tools.yaml --max_steps 4`, smaller rollouts, from the
    shipped cold start. No tool cold start here: it takes minutes on 2 cores, not seconds (the demo's sft_tools.yaml),
    so the policy's first turn in rows 0 and 2 of each batch of 4 is a call python(print(6*7)), the rest is the
    model's own sampling through the trainer's loop. By hand: 2 calls over 4 completions, none failed, 1.5 turns."""
    from recipes import grpo
    from recipes.common.command_line import config
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer

    monkeypatch.setattr(config, "setup_logging", lambda: None)
    sample = RLVRGRPOTrainer._generate_single_turn

    def first_turn_calls(self, prompt_ids, *args, **kwargs):
        ids, logprobs = sample(self, prompt_ids, *args, **kwargs)
        tokenizer = self.processing_class
        call = '<tool_call>{"name":"python","arguments":{"code":"print(6*7)"}}</tool_call>' + tokenizer.eos_token
        call_ids = tokenizer(call, add_special_tokens=False)["input_ids"]
        ids, logprobs = list(ids), list(logprobs) if logprobs is not None else None
        for row in range(0, len(ids), 2):
            if "<tool_response>" not in tokenizer.decode(prompt_ids[row]):
                ids[row] = call_ids
                if logprobs is not None:
                    logprobs[row] = [-0.5] * len(call_ids)
        return ids, logprobs

    monkeypatch.setattr(RLVRGRPOTrainer, "_generate_single_turn", first_turn_calls)
    out = tmp_path / "dapo_tools"
    grpo.cli([
        "--config", "recipes/configs/demo/dapo_tools.yaml", "--max_steps", "4", "--model_name_or_path",
        str(SHIPPED_COLD_START), "--output_dir", str(out), "--num_generations", "2", "--per_device_train_batch_size",
        "4", "--max_completion_length", "160", "--dynamic_sampling", "false", "--dataset_num_rows", "8",
        "--save_strategy", "no",
    ])  # fmt: skip
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [record for record in steps if "tools/calls_per_completion" in record]
    assert len(steps) == 4
    for record in steps:
        assert record["tools/calls_per_completion"] == pytest.approx(0.5)
        assert record["tools/failure_frac"] == 0.0 and record["tools/turns_mean"] == pytest.approx(1.5)
        assert record["timing_s/tools"] > 0
