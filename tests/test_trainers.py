"""recipes/stages/grpo/ (issue 27, redesign step 2): the GRPO trainer is built from its config alone, as TRL's is,
and recipes/common/ holds what every recipe shares, no trainer and no RL algorithm."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

TRL_GRPO = {"GRPOTrainer", "GRPOConfig"}


def alternating(completions, **kwargs):
    """0, 1, 0, 1, ...: every group of 2 completions has variance."""
    return [float(index % 2) for index in range(len(completions))]


alternating.__name__ = "math_accuracy"  # read as the accuracy reward, as the registry's is


def test_a_bare_script_builds_the_trainer_from_its_config_alone(tiny_model_dir, tmp_path):
    from datasets import Dataset

    from data_filters.curriculum import CurriculumSampler
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer
    from tasks.synthetic import generate_rows

    config = RLVRGRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=8, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
        gradient_checkpointing=False, disable_tqdm=True, seed=0,
        dynamic_sampling=True, dynamic_sampling_max_rounds=1, sampler="pass_rate_weighted",
    )  # fmt: skip
    trainer = RLVRGRPOTrainer(
        model=str(tiny_model_dir),
        reward_funcs=[alternating],
        args=config,
        train_dataset=Dataset.from_list(generate_rows([1, 2], 4, seed=1)),
    )
    assert (trainer.args.dynamic_sampling, trainer.dynamic.max_rounds) == (True, 1)
    assert trainer.variance_rewards == ["math_accuracy"] and trainer.accuracy_reward == "math_accuracy"
    trainer.train()
    logged = next(record for record in trainer.state.log_history if "dynamic_sampling/groups_generated" in record)
    assert logged["dynamic_sampling/groups_generated"] == 2  # 4 completions = 2 groups, both with variance
    assert logged["dynamic_sampling/groups_kept_with_variance"] == 2 and logged["dynamic_sampling/cap_hit"] == 0
    assert isinstance(trainer.curriculum, CurriculumSampler)  # sampler: pass_rate_weighted reached it too
    assert any(rate not in (None, 0.0) for rate in trainer.curriculum.pass_rates)  # updated from the rewards


def test_a_plain_grpo_config_is_refused_with_the_config_to_use(tmp_path):
    from trl import GRPOConfig

    from recipes.stages.grpo.trainer import RLVRGRPOTrainer

    with pytest.raises(TypeError, match="RLVRGRPOConfig"):
        RLVRGRPOTrainer(model="unused", reward_funcs=[alternating], args=GRPOConfig(str(tmp_path), bf16=False))


def trainer_code(path: Path) -> list[str]:
    """What in a module makes it the GRPO trainer's home: an import of trl's GRPOTrainer or GRPOConfig (from trl or
    by attribute), or a class built on a trainer or on GRPOConfig."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trl"):
            found += [f"imports {alias.name}" for alias in node.names if alias.name in TRL_GRPO]
        elif isinstance(node, ast.Attribute) and node.attr in TRL_GRPO:
            found.append(f"uses {node.attr}")
        elif isinstance(node, ast.ClassDef):
            bases = [ast.unparse(base).split(".")[-1] for base in node.bases]
            if any(base.endswith("Trainer") or base in TRL_GRPO or base.endswith("Mixin") for base in bases):
                found.append(f"defines {node.name}({', '.join(bases)})")
    return [f"{path.relative_to(REPO)} {what}" for what in found]


def test_recipes_common_holds_no_trainer():
    common = sorted((REPO / "recipes" / "common").rglob("*.py"))
    assert common and not [line for path in common for line in trainer_code(path)]
    # the checker itself: it finds the trainer where it lives
    found = trainer_code(REPO / "recipes" / "stages" / "grpo" / "trainer.py")
    found += trainer_code(REPO / "recipes" / "stages" / "grpo" / "config.py")
    assert any("imports GRPOTrainer" in line for line in found)
    assert any("defines RLVRGRPOTrainer" in line for line in found)
    assert any("defines RLVRGRPOConfig(GRPOConfig)" in line for line in found)
