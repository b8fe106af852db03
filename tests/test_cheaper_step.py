"""Issue 25's two further savings in a GRPO step (recipes/stages/grpo/compact_generation.py): a LoRA policy samples from its
merged weights and gets its base weights back bit for bit; rows with zero advantage leave the loss pass without
changing the update."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from recipes.common.model.loading import SHIPPED_COLD_START
from recipes.stages.grpo.compact_generation import merged_lora
from recipes.stages.grpo.zero_advantage import drop_zero_advantage_rows


def lora_model(seed: int = 3):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)  # B != 0
    return get_peft_model(AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START), config)


def snapshot(model) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def test_merged_lora_samples_the_adapted_model_and_restores_every_weight_bit_for_bit():
    model = lora_model().eval()
    ids = torch.tensor([[5, 17, 23, 42, 7, 9]])
    before = snapshot(model)
    with torch.no_grad():
        adapted = model(input_ids=ids).logits
        with model.disable_adapter():
            base = model(input_ids=ids).logits
        with merged_lora(model) as merged:
            assert merged is model
            inside = model(input_ids=ids).logits
            changed = [name for name, tensor in model.state_dict().items() if not torch.equal(tensor, before[name])]
        after = model(input_ids=ids).logits
    assert not torch.allclose(adapted, base, atol=1e-3), "the adapter changes nothing: the test could not fail"
    assert changed, "nothing was merged into the base weights"
    torch.testing.assert_close(inside, adapted, atol=1e-5, rtol=1e-5)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), f"{name} not restored bit for bit"
    assert torch.equal(after, adapted)
    assert not any(getattr(module, "merged", False) for module in model.modules())


def test_merged_lora_restores_the_weights_when_the_block_raises():
    model = lora_model()
    before = snapshot(model)
    with pytest.raises(RuntimeError, match="inside"), merged_lora(model):
        raise RuntimeError("inside")
    assert all(torch.equal(tensor, before[name]) for name, tensor in model.state_dict().items())


def test_merged_lora_leaves_other_models_and_a_disabled_call_alone():
    plain = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START)
    with merged_lora(plain) as model:
        assert model is plain
    peft_model = lora_model()
    before = snapshot(peft_model)
    with merged_lora(peft_model, enabled=False):
        assert not any(getattr(module, "merged", False) for module in peft_model.modules())
        assert all(torch.equal(tensor, before[name]) for name, tensor in peft_model.state_dict().items())


def test_a_merged_lora_model_samples_the_tokens_of_the_unmerged_one():
    from eval.decoding import global_sampler, sample_tokens

    model = lora_model()
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_COLD_START)
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
        for q in ("a=4 b=a c=9. Find b.", "x=12 y=7 z=x. Find z.")
    ]
    prompts = tokenizer(texts, add_special_tokens=False)["input_ids"]

    def greedy(m):
        return sample_tokens(
            m, prompts, max_new_tokens=24, stop_ids={tokenizer.eos_token_id}, pad_id=tokenizer.pad_token_id,
            pick=global_sampler(0),
        )  # fmt: skip

    unmerged = greedy(model)
    with merged_lora(model):
        merged = greedy(model)
    with model.disable_adapter():
        base = greedy(model)
    assert merged == unmerged
    assert base != unmerged, "the adapter changes no token: the test could not fail"


def test_drop_zero_advantage_rows_drops_the_same_rows_of_every_per_row_value():
    inputs = {
        "advantages": torch.tensor([0.0, 1.5, 0.0, -0.5]),
        "completion_ids": torch.arange(12).view(4, 3),
        "prompt_mask": torch.ones(4, 2, dtype=torch.long),
        "old_per_token_logps": None,
        "num_items_in_batch": torch.tensor(40),
        "labels": ["a", "b", "c", "d"],
    }
    kept, dropped = drop_zero_advantage_rows(inputs)
    assert dropped == 2
    assert kept["advantages"].tolist() == [1.5, -0.5]
    assert kept["completion_ids"].tolist() == [[3, 4, 5], [9, 10, 11]]
    assert kept["prompt_mask"].shape == (2, 2)
    assert kept["labels"] == ["b", "d"]
    assert kept["old_per_token_logps"] is None and int(kept["num_items_in_batch"]) == 40
    same, none = drop_zero_advantage_rows({"advantages": torch.tensor([[0.0, 2.0], [1.0, 0.0]])})
    assert none == 0 and same["advantages"].shape == (2, 2)  # per-token advantages: a row with any nonzero stays
    empty, all_rows = drop_zero_advantage_rows({"advantages": torch.zeros(3), "completion_ids": torch.ones(3, 2)})
    assert all_rows == 3 and empty["completion_ids"].shape == (0, 2)


def _one_dapo_step(tmp_path, skip: bool, loss_type: str = "dapo", beta: float = 0.0):
    from datasets import Dataset

    from recipes.common.model.loading import load_tokenizer
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer
    from tasks.synthetic import generate_rows

    def reward(completions, answer, **kwargs):
        # Even answers: every completion 1 (a group without variance); odd: 0 and 1 within the group (its rows
        # are consecutive), so both kinds of group reach the loss.
        return [1.0 if int(a) % 2 == 0 else float(i % 2) for i, a in enumerate(answer)]

    rows = generate_rows([1, 2], 8, seed=0)
    args = RLVRGRPOConfig(
        output_dir=str(tmp_path / f"skip{skip}"), num_generations=2, per_device_train_batch_size=4,
        gradient_accumulation_steps=2, steps_per_generation=2, max_completion_length=32, temperature=3.0,
        learning_rate=0.1, optim="sgd", loss_type=loss_type, beta=beta, max_steps=1, seed=7, report_to=[], use_cpu=True,
        bf16=False, save_strategy="no", skip_zero_advantage=skip, logging_steps=1,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START)
    start = snapshot(model)
    trainer = RLVRGRPOTrainer(
        model=model, reward_funcs=[reward], args=args, train_dataset=Dataset.from_list(rows),
        processing_class=load_tokenizer(str(SHIPPED_COLD_START)),
    )  # fmt: skip
    trainer.train()
    logged = {key: value for entry in trainer.state.log_history for key, value in entry.items()}
    return start, snapshot(trainer.model), logged


def test_skipping_zero_advantage_rows_leaves_the_update_as_it_was(tmp_path):
    start, skipped, logged = _one_dapo_step(tmp_path, skip=True)
    _, full, logged_full = _one_dapo_step(tmp_path, skip=False)
    assert logged.get("loss_pass/zero_advantage_rows_skipped", 0) > 0, "no row was skipped: the test shows nothing"
    assert "loss_pass/zero_advantage_rows_skipped" not in logged_full
    moved = max(float((full[name] - start[name]).abs().max()) for name in start)
    assert moved > 1e-4, "the step did not move the weights"
    for name in start:
        torch.testing.assert_close(skipped[name], full[name], atol=1e-6, rtol=1e-5, msg=f"{name} differs")


def test_zero_advantage_rows_stay_where_they_can_change_the_loss(tmp_path):
    from recipes.stages.grpo.config import RLVRGRPOConfig

    def droppable(**options):
        from recipes.stages.grpo.zero_advantage import zero_rows_droppable

        args = RLVRGRPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, **options)
        return zero_rows_droppable(args.skip_zero_advantage, args.loss_type, args.beta, False,
                                   args.top_entropy_quantile, False)  # fmt: skip

    assert droppable(loss_type="dapo", beta=0.0)
    assert droppable(loss_type="cispo", beta=0.0, epsilon_high=5.0)
    assert not droppable(loss_type="dapo", beta=0.0, skip_zero_advantage=False)
    assert not droppable(loss_type="dapo", beta=0.04)  # the KL term is not zero on such a row
    assert not droppable(loss_type="grpo", beta=0.0)  # a mean over the micro-batch's rows: its divisor would change
    assert not droppable(loss_type="bnpo", beta=0.0)
    assert not droppable(loss_type="dapo", beta=0.0, top_entropy_quantile=0.2)  # the quantile is the batch's


def test_several_processes_keep_every_row():
    """TRL's loss gathers per-row clip metrics across processes: the row counts must stay equal, so a multi-process
    run drops nothing (a two-process run that dropped rows aborted in that gather)."""
    from recipes.stages.grpo.zero_advantage import rows_to_train

    inputs = {"advantages": torch.tensor([0.0, 1.0, 0.0, -1.0]), "completion_ids": torch.ones(4, 3)}
    assert rows_to_train(inputs, processes=2, sharded=False) == (inputs, None)
    one, dropped = rows_to_train(inputs, processes=1, sharded=False)
    assert one["advantages"].tolist() == [1.0, -1.0] and dropped == 2
    # ZeRO / FSDP run their hooks in the model's own backward: a micro-batch left with no row runs whole
    zeros = {"advantages": torch.zeros(2), "completion_ids": torch.ones(2, 3)}
    assert rows_to_train(zeros, processes=1, sharded=True) == (zeros, None)
    assert rows_to_train(zeros, processes=1, sharded=False)[0]["advantages"].shape[0] == 0


def test_a_recipe_run_samples_with_eval_decoding_from_the_merged_adapter(tiny_model_dir, tmp_path, monkeypatch):
    """The recipe's own build (grpo.py: generation_kwargs gets use_cache=True for TRL's generate) must still
    sample with eval.decoding, and a LoRA policy from its merged weights: before this test the recipes' runs
    silently fell back to TRL's generate, because the compact path refused any generation_kwargs."""
    from peft import PeftModel
    from peft.tuners.lora import LoraLayer

    import eval.decoding
    from recipes import grpo

    seen = []
    real = eval.decoding.sample_tokens

    def counting(model, prompts, **kwargs):
        lora = [module for module in model.modules() if isinstance(module, LoraLayer)]
        seen.append((len(prompts), isinstance(model, PeftModel), len(lora), all(layer.merged for layer in lora)))
        return real(model, prompts, **kwargs)

    monkeypatch.setattr(eval.decoding, "sample_tokens", counting)
    out = tmp_path / "run"
    grpo.cli([
        "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(out), "--max_steps", "1",
        "--num_generations", "2", "--per_device_train_batch_size", "4", "--max_completion_length", "8",
        "--dataset_num_rows", "4", "--dataset_name", "synthetic:1", "--save_strategy", "no", "--use_cpu", "true",
        "--use_peft", "true", "--lora_r", "4", "--lora_target_modules", "all-linear", "--disable_tqdm", "true",
    ])  # fmt: skip
    assert seen, "the recipe's generation did not go through eval.decoding"
    # the sampling model is the LoRA policy with every adapter layer merged into its base weights
    assert all(rows > 0 and peft and layers > 0 and merged for rows, peft, layers, merged in seen), seen
