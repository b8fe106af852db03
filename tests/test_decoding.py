"""eval.decoding: finished rows leave the batch, repeated prompts are prefilled once, and the tokens are still
what transformers' `generate` writes (greedy, on the tiny model, the SmolLM2 stand-in and a LoRA model);
recipes.stages.grpo.compact_generation serves RLVRGRPOTrainer's generation with it and trims each micro-batch's padding."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from eval.decoding import global_sampler, sample_tokens
from recipes.common.model.loading import SHIPPED_COLD_START  # the tiny demo's cold start: it writes answers and stops
from recipes.stages.grpo.compact_generation import trim_micro_batch

QUESTIONS = ["Ann has 3 apples and buys 4 more.", "What is 2 + 2?", "A long question " * 6, "Hi"]


def chat_prompts(tokenizer, questions) -> list[list[int]]:
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
        for q in questions
    ]
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


def generate_greedy(model, tokenizer, prompts, max_new_tokens) -> list[list[int]]:
    """transformers' own greedy decoding, cut after the first EOS (as sample_tokens returns rows)."""
    tokenizer.padding_side = "left"
    batch = tokenizer.pad({"input_ids": prompts}, return_tensors="pt")
    output = model.generate(
        **batch, max_new_tokens=max_new_tokens, do_sample=False, use_cache=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    rows = output[:, batch["input_ids"].shape[1] :].tolist()
    return [row[: row.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in row else row for row in rows]


def ours_greedy(model, tokenizer, prompts, max_new_tokens) -> list[list[int]]:
    return sample_tokens(
        model, prompts, max_new_tokens=max_new_tokens, stop_ids={tokenizer.eos_token_id},
        pad_id=tokenizer.pad_token_id, pick=global_sampler(0),
    )  # fmt: skip


@pytest.mark.parametrize("which", ["tiny_cold_start", "smol_standin"])
def test_greedy_tokens_are_generates(which, smol_standin_dir):
    folder = SHIPPED_COLD_START if which == "tiny_cold_start" else smol_standin_dir
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    prompts = chat_prompts(tokenizer, QUESTIONS)
    prompts = [prompts[i] for i in (0, 0, 1, 2, 2, 2, 3)]  # groups of repeated prompts, of different lengths
    expected = generate_greedy(model, tokenizer, prompts, 24)
    assert ours_greedy(model, tokenizer, prompts, 24) == expected
    assert any(len(row) < 24 for row in expected) or which == "smol_standin"  # the tiny model stops early


def test_shared_prefixes_group_prompts_by_their_common_start_by_hand(monkeypatch):
    import eval.decoding as decoding

    monkeypatch.setattr(decoding, "MIN_SHARED_PREFIX", 3)
    a, b, c, d = (1, 2, 3, 4, 5), (1, 2, 3, 4, 6, 7), (1, 2, 3, 9), (8, 8, 8, 8)
    heads, owner, rests = decoding.shared_prefixes([a, b, c, d])
    # sorted: a, b, c, d; a-b share 4, b-c 3, c-d 0: groups {a, b, c} (prefix 3) and {d} (all but its last token)
    assert heads == [(1, 2, 3), (8, 8, 8)] and owner == [0, 0, 0, 1]
    assert rests == [(4, 5), (4, 6, 7), (9,), (8,)]
    # a prompt that is all prefix keeps its last token for the second pass
    heads, owner, rests = decoding.shared_prefixes([(1, 2, 3), (1, 2, 3, 4)])
    assert heads == [(1, 2)] and rests == [(3,), (3, 4)]
    assert decoding.shared_prefixes([(1, 2, 9), (1, 2, 8)]) is None  # 2 in common: under the minimum
    assert decoding.shared_prefixes([(1,), (1, 2, 3, 4)]) is None  # a one-token prompt: nothing to split


@pytest.mark.parametrize("which", ["tiny_cold_start", "smol_standin"])
def test_a_shared_prefix_prefilled_once_decodes_as_generate(which, smol_standin_dir, monkeypatch):
    """A tool loop's later turns: each a group's prompt and its own turn so far; prefilled as one common prefix
    then each row's rest, the greedy tokens are generate's."""
    import eval.decoding as decoding

    monkeypatch.setattr(decoding, "MIN_SHARED_PREFIX", 4)  # the template's start alone groups prompts too
    folder = SHIPPED_COLD_START if which == "tiny_cold_start" else smol_standin_dir
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    first = chat_prompts(tokenizer, QUESTIONS[:2])
    turns = [tokenizer.encode(text, add_special_tokens=False) for text in ("4 + 3 = 7", "7", "four", "2 + 2")]
    prompts = [first[0] + turns[0], first[0] + turns[1], first[0] + turns[1], first[1] + turns[2], first[1] + turns[3]]
    prompts += [chat_prompts(tokenizer, ["Hi"])[0]]  # one that shares only the template's start
    heads, _, _ = decoding.shared_prefixes(list(dict.fromkeys(map(tuple, prompts))))
    assert len(heads) < 5  # the 5 distinct prompts prefill fewer prefixes
    expected = generate_greedy(model, tokenizer, prompts, 16)
    shared = sample_tokens(
        model, prompts, max_new_tokens=16, stop_ids={tokenizer.eos_token_id}, pad_id=tokenizer.pad_token_id,
        pick=global_sampler(0), share_prefixes=True,
    )  # fmt: skip
    assert shared == expected


def test_a_lora_model_decodes_as_generate_does():
    tiny_model_dir = SHIPPED_COLD_START
    from peft import LoraConfig, get_peft_model

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    torch.manual_seed(3)
    config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)  # B != 0
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), config)
    prompts = chat_prompts(tokenizer, QUESTIONS[:3])
    expected = generate_greedy(model, tokenizer, prompts, 16)
    with model.disable_adapter():
        without_adapter = ours_greedy(model, tokenizer, prompts, 16)
    assert ours_greedy(model, tokenizer, prompts, 16) == expected
    assert without_adapter != expected, "the adapter changes nothing: the test would not see it ignored"


class ScriptedPick:
    """Row r emits the stop token at its step finish[r] and token 5 before; records the live rows per step."""

    def __init__(self, finish: list[int], stop: int):
        self.finish, self.stop, self.step, self.live = finish, stop, 0, []

    def __call__(self, logits, rows):
        self.live.append(rows.tolist())
        tokens = torch.tensor([self.stop if self.finish[r] == self.step else 5 for r in rows.tolist()])
        self.step += 1
        return tokens


def test_finished_rows_leave_the_batch_and_a_repeated_prompt_is_prefilled_once(tiny_model_dir):
    model, tokenizer = (
        AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    prompts = chat_prompts(tokenizer, QUESTIONS[:2])
    prompts = [prompts[0]] * 3 + [prompts[1]] * 2  # two distinct prompts, five rows
    calls = []
    hook = model.register_forward_hook(
        lambda module, args, kwargs, out: calls.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    stop = tokenizer.eos_token_id
    pick = ScriptedPick(finish=[0, 2, 5, 2, 9], stop=stop)  # row 0 stops at once; row 4 is cut at 6 tokens
    try:
        rows = sample_tokens(
            model, prompts, max_new_tokens=6, stop_ids={stop}, pad_id=tokenizer.pad_token_id, pick=pick
        )
    finally:
        hook.remove()
    width = max(len(p) for p in prompts)
    # The prefill: 2 distinct prompts. Then one token a row for the live rows only (worked out by hand):
    # after step 0 row 0 leaves (4 live), after step 2 rows 1 and 3 leave (2 live), after step 5 the cap.
    assert calls == [(2, width), (4, 1), (4, 1), (2, 1), (2, 1), (2, 1)]
    assert pick.live == [[0, 1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], [2, 4], [2, 4], [2, 4]]
    assert rows == [[stop], [5, 5, stop], [5] * 5 + [stop], [5, 5, stop], [5] * 6]


def test_every_row_stopping_ends_the_loop_early(tiny_model_dir):
    model, tokenizer = (
        AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    prompts = chat_prompts(tokenizer, QUESTIONS[:2])
    pick = ScriptedPick(finish=[1, 1], stop=tokenizer.eos_token_id)
    rows = sample_tokens(model, prompts, max_new_tokens=50, stop_ids={tokenizer.eos_token_id}, pad_id=0, pick=pick)
    assert rows == [[5, tokenizer.eos_token_id]] * 2 and pick.step == 2


def test_trim_micro_batch_cuts_only_columns_that_are_padding_in_every_row():
    prompt_mask = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]])  # left padding: the first two columns are empty
    completion_mask = torch.tensor([[1, 1, 0, 0, 0], [1, 1, 1, 0, 0]])  # the last two are empty
    inputs = {
        "prompt_ids": torch.arange(8).view(2, 4), "prompt_mask": prompt_mask,
        "completion_ids": torch.arange(10).view(2, 5), "completion_mask": completion_mask,
        "old_per_token_logps": torch.ones(2, 5), "advantages": torch.tensor([1.0, -1.0]), "num_items_in_batch": 5,
    }  # fmt: skip
    trimmed = trim_micro_batch(inputs)
    assert trimmed["prompt_ids"].tolist() == [[2, 3], [6, 7]]
    assert trimmed["prompt_mask"].tolist() == [[1, 1], [0, 1]]
    assert trimmed["completion_ids"].tolist() == [[0, 1, 2], [5, 6, 7]]
    assert trimmed["completion_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert trimmed["old_per_token_logps"].shape == (2, 3)
    assert trimmed["advantages"] is inputs["advantages"] and trimmed["num_items_in_batch"] == 5
    unknown = {**inputs, "token_type_ids": torch.zeros(2, 9)}  # a layout it does not know: left alone
    assert trim_micro_batch(unknown)["completion_ids"].shape == (2, 5)


def test_the_trainer_samples_as_trls_generate_does(tmp_path):
    """At a temperature so low that sampling is argmax, the compact path and TRL's `generate` agree token for
    token; with min_p (which eval.decoding does not implement) the trainer falls back to TRL's."""
    from datasets import Dataset

    from recipes.common.model.loading import load_tokenizer
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer
    from tasks.synthetic import generate_rows

    tiny_model_dir = SHIPPED_COLD_START

    def trainer(**options):
        args = RLVRGRPOConfig(
            output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=4, max_completion_length=64,
            temperature=1e-4, report_to=[], use_cpu=True, bf16=False, save_strategy="no", compact_generation=True,
            **options,
        )  # fmt: skip
        return RLVRGRPOTrainer(
            model=AutoModelForCausalLM.from_pretrained(tiny_model_dir), reward_funcs=[lambda completions, **k: [0.0] * len(completions)],
            args=args, train_dataset=Dataset.from_list(generate_rows([1], 4, seed=0)),
            processing_class=load_tokenizer(str(tiny_model_dir)),
        )  # fmt: skip

    compact = trainer()
    tokenizer = load_tokenizer(str(tiny_model_dir))
    prompts = chat_prompts(tokenizer, QUESTIONS[:2])
    prompts = [prompts[0], prompts[0], prompts[1], prompts[1]]
    assert compact._compact_generation_applies(None, {})
    ours, _ = compact._generate_single_turn(prompts, None, {}, 2)
    compact.args.compact_generation = False
    theirs, _ = compact._generate_single_turn(prompts, None, {}, 2)
    assert ours == theirs and any(len(row) < 64 for row in ours)
    assert not trainer(min_p=0.1)._compact_generation_applies(None, {})


def test_each_finished_row_is_reported_as_it_finishes(tiny_model_dir):
    """Issue 40, item 10: eval.evaluate's progress bar counts samples as they finish (before, a small set sat at
    0 problems until its one chunk was done). Worked out by hand from the script above: one row finishes at
    step 0, two at step 2, the two cut at the cap at the end."""
    from eval.decoding import SEQUENCES_DONE

    model, tokenizer = (
        AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        AutoTokenizer.from_pretrained(tiny_model_dir),
    )
    prompts = chat_prompts(tokenizer, QUESTIONS[:2])
    prompts = [prompts[0]] * 3 + [prompts[1]] * 2
    stop = tokenizer.eos_token_id
    pick = ScriptedPick(finish=[0, 2, 5, 2, 9], stop=stop)
    heard: list[tuple[int, int]] = []
    token = SEQUENCES_DONE.set(lambda count: heard.append((pick.step, count)))
    try:
        sample_tokens(model, prompts, max_new_tokens=6, stop_ids={stop}, pad_id=tokenizer.pad_token_id, pick=pick)
    finally:
        SEQUENCES_DONE.reset(token)
    assert heard == [(1, 1), (3, 2), (6, 2)]


def test_the_cache_goes_under_the_name_the_forward_takes():
    """transformers renamed `past_key_values` to `cache` after 5.17 (vLLM's CPU build pins 5.17): a cache passed
    under the other name disappears into **kwargs, and every step sees only its new token."""
    from eval.decoding import cache_argument

    class Old(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, past_key_values=None, **kwargs):
            return input_ids

    class New(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, cache=None, **kwargs):
            return input_ids

    class Wrapped(torch.nn.Module):  # a PEFT model's forward takes *args, **kwargs: its base model's is read
        def __init__(self, base):
            super().__init__()
            self.base = base

        def get_base_model(self):
            return self.base

        def forward(self, *args, **kwargs):
            return self.base(*args, **kwargs)

    assert cache_argument(Old()) == "past_key_values" and cache_argument(New()) == "cache"
    assert cache_argument(Wrapped(Old())) == "past_key_values" and cache_argument(Wrapped(New())) == "cache"
