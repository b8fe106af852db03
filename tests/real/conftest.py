"""The real SmolLM2-135M-Instruct weights for tests/real (`make test-real`): `RLVR_REAL_MODEL`, else the folder
`make real-model` writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scripts.offline_models import get_offline_model
from tests.conftest import REPO


@pytest.fixture(scope="session")
def real_model() -> Path:
    folder = Path(os.environ.get("RLVR_REAL_MODEL", REPO / "artifacts" / "models" / "smollm2-135m-instruct"))
    return get_offline_model("smollm2-135m-instruct", folder)  # a no-op when `make real-model` already ran
