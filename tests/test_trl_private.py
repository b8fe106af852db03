"""recipes/common/trl_private.py: every private name of TRL and transformers the repository relies on exists in the
installed versions, a build of the GRPO trainer stops in one line naming one that is gone, and no other module
reaches such a name itself (an override calling super() is the trainer's seam and is allowed)."""

from __future__ import annotations

import re

import pytest

from recipes.common import trl_private
from tests.conftest import REPO


def build_trainer(tmp_path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from recipes.common.model.loading import SHIPPED_COLD_START, load_tokenizer
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer
    from tasks.synthetic import generate_rows

    args = RLVRGRPOConfig(output_dir=str(tmp_path), num_generations=2, per_device_train_batch_size=2,
                          max_completion_length=8, report_to=[], use_cpu=True, bf16=False, save_strategy="no")  # fmt: skip
    return RLVRGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(SHIPPED_COLD_START), reward_funcs=[lambda completions, **kw: [0.0]],
        args=args, train_dataset=Dataset.from_list(generate_rows([1], 2, seed=0)),
        processing_class=load_tokenizer(str(SHIPPED_COLD_START)),
    )  # fmt: skip


def test_the_installed_trl_and_transformers_have_every_listed_name(tmp_path):
    trainer = build_trainer(tmp_path)
    assert trl_private.missing(trainer) == [], "the installed TRL / transformers lack names trl_private.py lists"
    assert trl_private.missing_in_vllm_generation() == []
    assert trl_private.metrics(trainer) is trainer._metrics["train"]
    del trainer._metrics  # as an upgrade that renamed it would leave the trainer
    assert trl_private.missing(trainer) == ["_metrics"]
    with pytest.raises(RuntimeError, match=r"lack \['_metrics'\].*trl_private\.py"):
        trl_private.check(trainer)


def test_a_trainer_built_on_a_trl_without_a_listed_method_stops_naming_it(tmp_path, monkeypatch):
    from trl import GRPOTrainer
    from trl.generation import vllm_generation

    monkeypatch.delattr(GRPOTrainer, "_tokenize_prompts")
    with pytest.raises(RuntimeError, match=r"lack \['_tokenize_prompts'\]"):
        build_trainer(tmp_path)
    monkeypatch.delattr(vllm_generation.VLLMGeneration, "_iter_named_params")
    assert trl_private.missing_in_vllm_generation() == ["_iter_named_params"]


def test_no_other_module_reaches_a_private_name_of_trl():
    names = [*trl_private.TRAINER, *trl_private.TOOL_SAMPLING, *trl_private.VLLM_GENERATION_STATE, "_iter_named_params"]
    reach = re.compile(r"\.(" + "|".join(map(re.escape, names)) + r")\b")
    seam = re.compile(r"(def |super\([\w, ]*\)\.)(" + "|".join(map(re.escape, names)) + r")\b")
    # eval's tool sampler lists and reaches its own (eval cannot import recipes); trl_private.py names them too
    accessors = {REPO / "recipes" / "common" / "trl_private.py", REPO / "eval" / "tools" / "trl_sampling.py"}
    offenders = []
    for package in ("recipes", "eval", "data_filters", "rewards", "tasks", "basics", "scripts"):
        for path in sorted((REPO / package).rglob("*.py")):
            if path in accessors:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if reach.search(seam.sub("", line)):
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "private names of TRL reached outside recipes/common/trl_private.py:\n" + "\n".join(offenders)


def test_every_override_of_the_trainer_is_listed_and_a_renamed_base_method_stops_the_build(tmp_path, monkeypatch):
    from trl import GRPOTrainer

    from recipes.stages.grpo.trainer import RLVRGRPOTrainer

    # an override whose base method an upgrade renamed would never run again: each one is listed, so it is checked
    bases = RLVRGRPOTrainer.__mro__[1:]
    overrides = {name for name in vars(RLVRGRPOTrainer) if not name.startswith("__")}
    overrides = {name for name in overrides if any(name in vars(base) for base in bases)}
    assert overrides == set(trl_private.OVERRIDDEN)
    # hasattr would still find our override; the check reads TRL's and transformers' classes
    monkeypatch.delattr(GRPOTrainer, "_get_per_token_logps_and_entropies")
    assert hasattr(RLVRGRPOTrainer, "_get_per_token_logps_and_entropies")
    with pytest.raises(RuntimeError, match=r"lack \['_get_per_token_logps_and_entropies'\]"):
        build_trainer(tmp_path)
