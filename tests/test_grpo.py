"""recipes/grpo.py and its trainer on the tiny model: every demo config trains and saves, dynamic sampling
keeps zero-variance groups out of the loss, the monitor fires when it should, resume continues at the
right step (two processes: tests/test_multiprocess.py)."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, TrainerCallback

from eval.sampler import vllm_available
from recipes import grpo
from recipes.common.command_line.config import CONFIG_DIR, parse_recipe_args
from recipes.common.training.monitor import RLVRMonitor
from recipes.stages.grpo.config import variance_reward_names
from tasks.synthetic import generate_rows

SMALL = [
    "--max_steps", "2", "--num_generations", "4", "--per_device_train_batch_size", "8",
    "--max_completion_length", "48", "--dataset_num_rows", "40", "--logging_steps", "1",
    "--save_strategy", "no", "--dataset_name", "synthetic:1-3", "--use_cpu", "true", "--disable_tqdm", "true",
]  # fmt: skip


def parse(config: str, *argv: str):
    return parse_recipe_args(grpo.make_parser().dataclass_types, config, list(argv))


def metrics(folder):
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("config", ["demo/grpo.yaml", "demo/dr_grpo.yaml", "demo/dapo.yaml"])
def test_each_demo_config_trains_and_saves_a_loadable_model(config, trained_tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    script_args, training_args, model_args = parse(
        config, "--model_name_or_path", str(trained_tiny_model_dir), "--output_dir", str(out), *SMALL
    )
    grpo.main(script_args, training_args, model_args)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.use_cache is True  # saved for generation
    card = json.loads((out / "run_card.json").read_text())
    assert card["recipe"] == "grpo" and card["final_step"] == 2
    assert card["config"]["training"]["loss_type"] == training_args.loss_type
    logged = metrics(out)
    assert any("groups/std_mean" in record for record in logged)
    if training_args.dynamic_sampling:
        assert any("dynamic_sampling/groups_generated" in record for record in logged)


def test_every_recipe_config_in_the_repo_parses():
    """Field names and types of every YAML; bf16 is switched off only because this machine has no GPU."""
    import yaml
    from trl import ModelConfig, SFTConfig

    from recipes import sft

    checked = 0
    for path in sorted(CONFIG_DIR.rglob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        if "loss_type" not in raw and not path.name.startswith("sft"):
            continue  # not a recipe config (e.g. a data_filters pipeline)
        cpu = ["--bf16", "false"] if raw.get("bf16") else []
        if raw.get("use_vllm") and not vllm_available():  # asked for by name, vLLM must be there (issue 57)
            cpu += ["--use_vllm", "false"]
        if path.name.startswith("sft"):
            _, training_args, _ = parse_recipe_args((sft.SFTScriptArguments, SFTConfig, ModelConfig), str(path), cpu)
        else:
            _, training_args, _ = parse(str(path), *cpu)
            assert training_args.loss_type == raw["loss_type"]
        assert training_args.learning_rate == raw["learning_rate"]
        checked += 1
    assert checked >= 9


# ---------------------------------------------------------------- dynamic sampling


def poisoned_reward(poisoned: set):
    """1.0 for every completion of a poisoned prompt (a zero-variance group); a hash coin flip otherwise."""

    def reward(completions, id, **kwargs):
        scores = []
        for completion, row_id in zip(completions, id, strict=True):
            text = completion[0]["content"] if isinstance(completion, list) else completion
            coin = hashlib.sha1(f"{row_id}{text}{len(scores)}".encode()).digest()[0] % 2
            scores.append(1.0 if row_id in poisoned else float(coin))
        return scores

    return reward


class GroupRecorder(TrainerCallback):
    def __init__(self):
        self.trainer, self.steps = None, []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(list(self.trainer.dynamic.last_batch_group_ids))


def trainer_with(reward, model_dir, out, rows, max_rounds, steps=3):
    from recipes.common.model.loading import load_tokenizer
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer

    args = RLVRGRPOConfig(
        output_dir=str(out), max_steps=steps, num_generations=4, per_device_train_batch_size=16,
        max_completion_length=32, learning_rate=1e-4, logging_steps=1, save_strategy="no", report_to=[],
        bf16=False, gradient_checkpointing=False, use_cpu=True, disable_tqdm=True, beta=0.0, seed=0,
        generation_kwargs={"use_cache": True}, dynamic_sampling=True, dynamic_sampling_max_rounds=max_rounds,
        trim_padding=False, share_prompts=False,
    )  # fmt: skip
    recorder = GroupRecorder()
    trainer = RLVRGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        reward_funcs=[reward],
        args=args,
        train_dataset=rows,
        processing_class=load_tokenizer(str(model_dir)),
        callbacks=[recorder, RLVRMonitor(out)],
    )
    recorder.trainer = trainer
    return trainer, recorder


def test_dynamic_sampling_keeps_zero_variance_groups_out_of_the_loss(trained_tiny_model_dir, tmp_path):
    from datasets import Dataset

    rows = Dataset.from_list(generate_rows([1, 2], 20, seed=3))
    poisoned = set(rows["id"][::2])  # half the prompts always get the same reward
    trainer, recorder = trainer_with(poisoned_reward(poisoned), trained_tiny_model_dir, tmp_path / "a", rows, 5)
    trainer.train()
    assert len(recorder.steps) == 3
    for group_ids in recorder.steps:
        assert len(group_ids) == 4  # 16 completions = 4 groups of 4, every step
        assert not poisoned & set(group_ids), group_ids
    logged = metrics(tmp_path / "a")
    generated = [r["dynamic_sampling/groups_generated"] for r in logged if "dynamic_sampling/groups_generated" in r]
    assert sum(generated) > 3 * 4  # refills happened
    assert all(r.get("dynamic_sampling/cap_hit", 0) == 0 for r in logged)


def test_dynamic_sampling_cap_lets_zero_variance_groups_through_and_says_so(trained_tiny_model_dir, tmp_path):
    from datasets import Dataset

    rows = Dataset.from_list(generate_rows([1, 2], 10, seed=4))
    everything = set(rows["id"])
    trainer, recorder = trainer_with(
        poisoned_reward(everything), trained_tiny_model_dir, tmp_path / "b", rows, 1, steps=2
    )
    trainer.train()
    assert all(len(group_ids) == 4 and set(group_ids) <= everything for group_ids in recorder.steps)
    logged = metrics(tmp_path / "b")
    assert [r["dynamic_sampling/cap_hit"] for r in logged if "dynamic_sampling/cap_hit" in r] == [1.0, 1.0]
    assert [r["dynamic_sampling/extra_rounds"] for r in logged if "dynamic_sampling/extra_rounds" in r] == [1, 1]
    assert [r["dynamic_sampling/groups_generated"] for r in logged if "dynamic_sampling/groups_generated" in r] == [
        8,
        8,
    ]


# ---------------------------------------------------------------- monitor


def test_variance_rewards_sum_filters_on_the_summed_reward_for_the_ablation():
    """`--variance_rewards sum` (the bench's dapo_filter_sum) makes a group's variance the std of the weighted
    sum even with math_accuracy among the rewards; the default stays the accuracy reward."""

    from recipes.common.command_line.config import ConfigError

    def variance(*argv):  # what the trainer reads, from the config and the names of the YAML's rewards
        script, training, _ = parse("demo/dapo.yaml", *argv)
        names = [reward["name"] for reward in script.rewards]
        return training.variance_rewards, variance_reward_names(training.variance_rewards, names)

    default, summed = variance()[1], variance("--variance_rewards", "sum")
    assert default == ["math_accuracy"] and summed == (["sum"], None)
    assert variance("--variance_rewards", "math_accuracy", "overlong")[1] == ["math_accuracy", "overlong"]
    with pytest.raises((ValueError, ConfigError), match="stands alone"):
        parse("demo/dapo.yaml", "--variance_rewards", "sum", "overlong")
    with pytest.raises((ValueError, ConfigError), match="not among the rewards"):
        parse("demo/dapo.yaml", "--variance_rewards", "think_format")

    # Two groups of 2 (accuracy, overlong), weights 1 and 1: group 1 is all wrong but differs in length,
    # group 2 is all right and equally long.
    per_func = torch.tensor([[0.0, 0.0], [0.0, -1.0], [1.0, 0.0], [1.0, 0.0]])
    summed_rewards = per_func.sum(dim=1)

    def spread(variance_rewards):
        from recipes.stages.grpo.outcomes import group_spread

        names = ["math_accuracy", "overlong"]
        return group_spread(per_func, summed_rewards, names, variance_rewards, group_size=2).tolist()

    assert spread(default) == [0.0, 0.0]  # accuracy: no variance anywhere
    assert spread(summed[1]) == pytest.approx([2**-0.5, 0.0])  # std of [0, -1]


def test_monitor_fires_on_collapse_and_constant_rewards_and_stays_silent_otherwise(tmp_path):
    monitor = RLVRMonitor(tmp_path, std_threshold=0.05, patience=3)
    state = type("State", (), {"global_step": 0, "is_world_process_zero": True})()
    healthy = {"groups/std_mean": 0.3, "rewards/math_accuracy/std": 0.4, "loss": 0.1}
    for step in range(1, 6):
        state.global_step = step
        monitor.on_log(None, state, None, logs=healthy)
    assert monitor.warnings == []
    collapsing = {"groups/std_mean": 0.01, "rewards/math_accuracy/std": 0.2}
    for step in range(6, 8):
        state.global_step = step
        monitor.on_log(None, state, None, logs=collapsing)
    assert monitor.warnings == []  # two low logs: not yet the patience of three
    state.global_step = 8
    monitor.on_log(None, state, None, logs=collapsing)
    assert [w["kind"] for w in monitor.warnings] == ["entropy_collapse"] and monitor.warnings[0]["step"] == 8
    state.global_step = 9
    monitor.on_log(None, state, None, logs={"groups/std_mean": 0.0, "rewards/a/std": 0.0, "rewards/b/std": 0.0})
    assert monitor.warnings[-1]["kind"] == "constant_rewards"
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 9


def test_a_constant_reward_run_is_flagged_in_the_run_card(trained_tiny_model_dir, tmp_path):
    out = tmp_path / "constant"
    script_args, training_args, model_args = parse(
        "demo/grpo.yaml", "--model_name_or_path", str(trained_tiny_model_dir), "--output_dir", str(out), *SMALL,
        "--monitor_patience", "1", "--max_steps", "2",
    )  # fmt: skip
    script_args.rewards = [{"name": "constant", "value": 1.0}]
    grpo.main(script_args, training_args, model_args)
    kinds = {warning["kind"] for warning in json.loads((out / "run_card.json").read_text())["monitor_warnings"]}
    assert kinds == {"constant_rewards", "entropy_collapse"}


# ---------------------------------------------------------------- resume and processes


class KillAt(TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt


def test_resume_after_a_kill_continues_at_the_right_step_with_the_same_result(
    trained_tiny_model_dir, tmp_path, monkeypatch
):
    base = [
        "--model_name_or_path",
        str(trained_tiny_model_dir),
        *SMALL,
        "--max_steps",
        "4",
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
    ]
    straight = tmp_path / "straight"
    grpo.main(*parse("demo/dapo.yaml", *base, "--output_dir", str(straight)))

    killed = tmp_path / "killed"
    from recipes.stages.grpo import trainer as grpo_trainer

    original_init = grpo_trainer.RLVRGRPOTrainer.__init__

    def init_with_kill(self, *args, **kwargs):
        kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), KillAt(3)]
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(grpo_trainer.RLVRGRPOTrainer, "__init__", init_with_kill)
    with pytest.raises(KeyboardInterrupt):
        grpo.main(*parse("demo/dapo.yaml", *base, "--output_dir", str(killed)))
    monkeypatch.setattr(grpo_trainer.RLVRGRPOTrainer, "__init__", original_init)
    assert (killed / "checkpoint-2").is_dir() and not (killed / "checkpoint-4").exists()

    grpo.main(*parse("demo/dapo.yaml", *base, "--output_dir", str(killed), "--resume_from_checkpoint", "true"))
    card = json.loads((killed / "run_card.json").read_text())
    assert card["final_step"] == 4
    steps = [record["step"] for record in metrics(killed) if "loss" in record]
    assert steps[-2:] == [3, 4]
    a = AutoModelForCausalLM.from_pretrained(straight).state_dict()
    b = AutoModelForCausalLM.from_pretrained(killed).state_dict()
    assert all(torch.allclose(a[name], b[name], atol=1e-5) for name in a)  # nothing lost, nothing redone
