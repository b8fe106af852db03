"""`make test-real`, the tool path on SmolLM2-135M-Instruct's real weights, chained as docs/tools.md runs it: the tool
cold start (smollm2-135m/sft_tools.yaml, 2 steps), GRPO with the python tool from it (smollm2-135m/dapo_tools.yaml,
1 step), evaluation with tools (`eval.evaluate --tools python`) and a round of rejection sampling with tools, each
on two problems, each checked for its tool figures and for what it kept or masked.

A 2-step cold start does not make the model call the tool, so the rows at even places of each batch have their
first turn scripted (a python call that computes the answer) and, after a tool's result, their answer (the result,
boxed); every other turn, and every odd row, is the real model's own generation. The scripted turns are wrapped
around the turn TRL's tool loop calls for every turn (RLVRGRPOTrainer's `_generate_single_turn`, the tool sampler's
`decode_turn`): the real tool template renders the call, TRL parses it, the sandbox runs it, and the masks, records
and kept rows are the code's own.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from trl import ModelConfig, SFTConfig

from recipes import grpo, sft
from recipes import rejection_sampling as rs
from recipes.common.command_line.config import CONFIG_DIR, parse_recipe_args
from recipes.stages.grpo.trainer import RLVRGRPOTrainer

pytestmark = pytest.mark.real
SMOL = CONFIG_DIR / "smollm2-135m"
PROBLEMS = [("What is 17 * 23?", "391"), ("What is 46 + 58?", "104")]
QUESTION = re.compile(r"What is (\d+) ([*+]) (\d+)\?")
RESULT = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.DOTALL)


class Script:
    """The scripted turns (module docstring): a call that computes a question's answer, and a tool's result boxed."""

    def wrap(self, original):
        script = self

        def turn(trainer, prompt_ids, *args, **kwargs):
            tokenizer = trainer.processing_class
            scripted = {}
            for row, prompt in enumerate(prompt_ids):
                text = tokenizer.decode(prompt)
                results = RESULT.findall(text)
                if results:  # after a tool's result: the result, boxed
                    scripted[row] = script.answer(tokenizer, results[-1])
                elif row % 2 == 0 and QUESTION.search(text):
                    scripted[row] = script.call(tokenizer, QUESTION.findall(text)[-1])
            if len(scripted) == len(prompt_ids):  # no row left to the model (TRL reads these log-probs only where
                ids, logprobs = [[] for _ in prompt_ids], [[] for _ in prompt_ids]  # its first turn had some)
            else:
                ids, logprobs = original(trainer, prompt_ids, *args, **kwargs)
                ids, logprobs = list(ids), None if logprobs is None else list(logprobs)
            for row, turn_ids in scripted.items():
                ids[row] = turn_ids
                if logprobs is not None:  # not the real model's sampling: no log-prob (a ratio of 1)
                    logprobs[row] = [math.nan] * len(turn_ids)
            return ids, logprobs

        return turn

    def call(self, tokenizer, question: tuple[str, str, str]) -> list[int]:
        left, operator, right = question
        prompt = [{"role": "user", "content": "x"}]
        call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": "python", "arguments": {"code": f"print({left} {operator} {right})"}}}]}  # fmt: skip
        before = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        whole = tokenizer.apply_chat_template([*prompt, call], tokenize=False)
        ids = tokenizer(whole[len(before) :], add_special_tokens=False)["input_ids"]
        return ids[: ids.index(tokenizer.eos_token_id) + 1]  # the turn through its end (<|im_end|>), not the newline

    def answer(self, tokenizer, result: str) -> list[int]:
        ids = tokenizer(f"So the answer is \\boxed{{{result}}}.", add_special_tokens=False)["input_ids"]
        return [*ids, tokenizer.eos_token_id]


@pytest.fixture
def scripted(monkeypatch):
    """Every GRPO trainer samples by the Script: RLVRGRPOTrainer, and the tool sampler's (its turns are
    eval.tools.trl_sampling.decode_turn's)."""
    from eval.tools import trl_sampling

    script = Script()
    monkeypatch.setattr(RLVRGRPOTrainer, "_generate_single_turn", script.wrap(RLVRGRPOTrainer._generate_single_turn))
    monkeypatch.setattr(trl_sampling, "decode_turn", script.wrap(trl_sampling.decode_turn))
    return script


def _recorded_generation(monkeypatch) -> list:
    """What RLVRGRPOTrainer._generate returns, each call: prompt ids, completion ids, tool mask, completions, ..."""
    generated = []
    original = RLVRGRPOTrainer._generate

    def keep(trainer, prompts):
        generated.append(original(trainer, prompts))
        return generated[-1]

    monkeypatch.setattr(RLVRGRPOTrainer, "_generate", keep)
    return generated


def _split(tokenizer, ids, mask) -> tuple[str, str]:
    """(the model's tokens, the tool's tokens) of one completion, decoded."""
    model = [token for token, kept in zip(ids, mask, strict=True) if kept]
    tool = [token for token, kept in zip(ids, mask, strict=True) if not kept]
    return tokenizer.decode(model), tokenizer.decode(tool)


def test_the_tool_path_on_the_real_model(real_model, tmp_path, monkeypatch, scripted):
    from transformers import AutoTokenizer

    from eval import evaluate

    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps({"problem": q, "answer": a}) + "\n" for q, a in PROBLEMS))
    answers = {q: a for q, a in PROBLEMS}

    # 1. the tool cold start: the tool template saved with the merged model, the loss on the assistant's turns
    cold = tmp_path / "sft_tools"
    argv = ["--model_name_or_path", str(real_model), "--output_dir", str(cold), "--max_steps", "2",
            "--dataset_num_rows", "2", "--per_device_train_batch_size", "2", "--logging_steps", "1",
            "--warmup_steps", "0", "--disable_tqdm", "true"]  # fmt: skip
    sft.main(*parse_recipe_args((sft.SFTScriptArguments, SFTConfig, ModelConfig), SMOL / "sft_tools.yaml", argv))
    tokenizer = AutoTokenizer.from_pretrained(cold)
    assert (cold / "config.json").is_file() and "<tool_response>" in tokenizer.chat_template
    logged = [json.loads(line) for line in (cold / "metrics.jsonl").open()]
    assert [entry["step"] for entry in logged if "loss" in entry] == [1, 2]
    assert all(math.isfinite(entry["loss"]) for entry in logged if "loss" in entry)

    # 2. GRPO with the python tool, one step of 4 completions (2 problems x 2)
    generated = _recorded_generation(monkeypatch)
    argv = ["--model_name_or_path", str(cold), "--output_dir", str(tmp_path / "grpo"), "--dataset_name",
            str(problems), "--max_steps", "1", "--num_generations", "2", "--per_device_train_batch_size", "4",
            "--gradient_accumulation_steps", "1", "--steps_per_generation", "1", "--max_completion_length", "96",
            "--max_tool_calling_iterations", "2", "--dynamic_sampling", "false", "--warmup_steps", "0",
            "--rewards", "[{name: math_accuracy, weight: 1.0}]", "--save_strategy", "no", "--disable_tqdm", "true",
            "--use_cpu", "true"]  # fmt: skip
    grpo.main(*parse_recipe_args(grpo.make_parser().dataclass_types, SMOL / "dapo_tools.yaml", argv))
    prompt_ids, completion_ids, tool_mask, *_ = generated[0]
    assert len(completion_ids) == 4
    for row, (ids, mask) in enumerate(zip(completion_ids, tool_mask, strict=True)):
        if row % 2:
            continue  # the real model's own completion: whatever it wrote
        question = QUESTION.search(tokenizer.decode(prompt_ids[row])).group(0)
        model, tool = _split(tokenizer, ids, mask)  # a scripted caller: call, the sandbox's result, the answer
        assert tool.count("<tool_response>") == 1 and answers[question] in tool and "print(" not in tool
        assert "<tool_call>" in model and model.endswith(f"\\boxed{{{answers[question]}}}.<|im_end|>")
        zeros = [index for index, kept in enumerate(mask) if not kept]
        assert zeros == list(range(zeros[0], zeros[-1] + 1))  # one run of tool tokens: the result's turn alone
    metrics = {}
    for line in (tmp_path / "grpo" / "metrics.jsonl").open():
        metrics.update(json.loads(line))
    assert metrics["tokens/generated"] == sum(sum(mask) for mask in tool_mask) < sum(map(len, completion_ids))
    assert metrics["tools/calls_per_completion"] >= 0.5 and metrics["tools/turns_mean"] >= 1.5
    assert 0.0 <= metrics["tools/failure_frac"] <= 1.0 and metrics["timing_s/tools"] > 0

    # 3. evaluation with tools: each record keeps its conversation and counts the model's tokens alone
    out = tmp_path / "eval"
    summaries = evaluate.main(
        ["--model", str(tmp_path / "grpo"), "--dataset", str(problems), "--n", "2", "--k", "1", "--max-new-tokens",
         "96", "--temperature", "1.0", "--output-dir", str(out), "--backend", "transformers", "--tools", "python",
         "--max-tool-calls", "2", "--tool-options", "timeout_s=5"]
    )  # fmt: skip
    folder = next(path for path in out.iterdir() if path.is_dir())
    samples = [json.loads(line) for line in (folder / "samples.jsonl").open()]
    callers = [sample for sample in samples if sample["index"] == 0]  # even rows scripted: each problem's sample 0
    assert len(samples) == 4 and len(callers) == 2
    golds = {row["id"]: row["answer"] for row in map(json.loads, (folder / "per_problem.jsonl").open())}
    questions = {problem_id: next(q for q, a in PROBLEMS if a == gold) for problem_id, gold in golds.items()}
    for sample in callers:
        call, result = sample["conversation"][:2]
        assert call["tool_calls"][0]["function"]["name"] == "python" and result["role"] == "tool"
        assert sample["correct"] and result["content"].strip() == sample["extracted"]
        assert sample["tool_calls"] == 1 and sample["turns"] == 2 and sample["tool_tokens"] > 0
        # the model's tokens alone: the scripted call and answer, counted here from their own ids
        question = QUESTION.search(questions[sample["id"]]).groups()
        own = len(scripted.call(tokenizer, question)) + len(scripted.answer(tokenizer, sample["extracted"]))
        assert sample["num_tokens"] == own
    summary = next(iter(summaries.values()))
    tools = summary["tools"]
    assert tools["calls_per_completion"] >= 0.5 and tools["used_tool_frac"] >= 0.5 and tools["turns_mean"] >= 1.5
    assert tools["correct_used_tool_frac"] > 0 and 0.0 <= tools["failure_frac"] <= 1.0

    # 4. a round of rejection sampling with tools: the kept rows are whole conversations, the result untrained
    argv = ["--model_name_or_path", str(tmp_path / "grpo"), "--output_dir", str(tmp_path / "rs"), "--dataset_name",
            str(problems), "--eval_samples_per_problem", "0", "--sampling", "{n: 2, max_new_tokens: 96}",
            "--tools", "python", "--max_tool_calling_iterations", "2", "--assistant_only_loss", "true",
            "--max_length", "640", "--max_steps", "1", "--per_device_train_batch_size", "2",
            "--disable_tqdm", "true"]  # fmt: skip
    rs.main(
        *parse_recipe_args(
            (rs.RejectionSamplingArguments, SFTConfig, ModelConfig), SMOL / "rejection_sampling.yaml", argv
        )
    )
    kept = [json.loads(line) for line in (tmp_path / "rs" / "round_1" / "dataset.jsonl").open()]
    with_tools = [row for row in kept if any(message["role"] == "tool" for message in row["messages"])]
    assert len(with_tools) >= 2  # both scripted callers are correct
    round_tokenizer = AutoTokenizer.from_pretrained(tmp_path / "rs" / "round_1" / "model")
    assert "<tool_response>" in round_tokenizer.chat_template  # the round trained with the tool template
    for row in with_tools:
        question = row["prompt"][-1]["content"]
        roles = [message["role"] for message in row["messages"][len(row["prompt"]) :]]
        assert roles == ["assistant", "tool", "assistant"]
        assert [schema["function"]["name"] for schema in json.loads(row["tools"])] == ["python"]
        expected = next(answer for text, answer in answers.items() if text in question)
        assert row["messages"][-2]["content"].strip() == expected
        rendered = round_tokenizer.apply_chat_template(
            row["messages"], tools=json.loads(row["tools"]), tokenize=True, return_dict=True,
            return_assistant_tokens_mask=True,
        )  # fmt: skip
        trained, untrained = _split(round_tokenizer, rendered["input_ids"], rendered["assistant_masks"])
        assert "<tool_call>" in trained and "\\boxed{" + expected + "}" in trained
        assert "<tool_response>" in untrained and "<tool_response>" not in trained
    stats = json.loads((tmp_path / "rs" / "round_1" / "stats.json").read_text())
    assert stats["samples_kept"] == len(kept) and stats["complete"] and stats["model"].endswith("model")
