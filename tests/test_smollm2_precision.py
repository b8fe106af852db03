"""The SmolLM2 DAPO configs' precision follows the measurement of what bf16 costs DAPO's gain (docs/demo-real.md,
"bf16 against fp32, paired over seeds", with its read-out fixed before the runs in docs/readouts/bf16-cost.md): fp32
minus the bf16 defaults was +0.028 [+0.002, +0.054] pass@1 pooled over three paired seeds, above zero, so both
passes run in fp32 (the split arm, bf16 sampling with an fp32 loss pass, was not run: the read-out then takes both
halves to fp32). A change here is a change of protocol: measure it the same way first."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import REPO

DECIDED = {"sampling_dtype": "float32", "loss_dtype": "float32"}


@pytest.mark.parametrize("config", ["dapo.yaml", "dapo_lora.yaml"])
def test_the_smollm2_dapo_configs_precision_follows_the_measurement(config):
    values = yaml.safe_load((REPO / "recipes" / "configs" / "smollm2-135m" / config).read_text())
    assert {key: values.get(key) for key in DECIDED} == DECIDED
