"""One options type for where a recipe's model comes from when its path is missing (issue 56, item 4): every
recipe's arguments take `demo_model_if_missing` from recipes.common.model.loading.DemoModelArguments, SFT falls back to
the untrained tiny model and the others to the shipped cold start, and no recipe declares the option again."""

from __future__ import annotations

import dataclasses
import re

from recipes.common.model.loading import DemoModelArguments
from tests.conftest import REPO


def recipe_arguments():
    from recipes.stages.distill.arguments import DistillScriptArguments
    from recipes.stages.grpo.arguments import GRPOScriptArguments
    from recipes.stages.rejection_sampling.arguments import RejectionSamplingArguments
    from recipes.stages.reward_model.pairs import RewardModelArguments
    from recipes.stages.sft.arguments import SFTScriptArguments

    return {"sft": SFTScriptArguments, "grpo": GRPOScriptArguments, "rejection_sampling": RejectionSamplingArguments,
            "distill": DistillScriptArguments, "reward_model": RewardModelArguments}  # fmt: skip


def test_every_recipe_takes_the_one_option_and_its_own_fallback():
    for recipe, kind in recipe_arguments().items():
        assert issubclass(kind, DemoModelArguments), recipe
        names = [f.name for f in dataclasses.fields(kind)]
        assert names.count("demo_model_if_missing") == 1, recipe
        expected = "tiny" if recipe == "sft" else "cold_start"
        on = kind.__new__(kind)
        on.demo_model_if_missing = True
        assert on.missing_model_fallback() == expected, recipe
        on.demo_model_if_missing = False
        assert on.missing_model_fallback() is None, recipe


def test_no_module_declares_the_option_again():
    declared = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "recipes").rglob("*.py"))
        if re.search(r"^\s+demo_model_if_missing: bool = field", path.read_text(), re.M)
    ]
    assert declared == ["recipes/common/model/loading.py"]
