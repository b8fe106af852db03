"""Command-line and YAML parsing shared by the recipes.

Every recipe parses `TrlParser((OurScriptArguments, TrlTrainerConfig, ModelConfig))`: YAML through
`--config FILE`, any field overridden by a flag. What this adds to TRL's parser: a recipe run with no
`--config` gets its embedded default (a YAML under recipes/configs/demo/ that trains the tiny model
on the synthetic task), so `python recipes/sft.py` works on a fresh clone with no Hub access.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"

logger = logging.getLogger(__name__)


def setup_logging(level: int = logging.INFO) -> None:
    """One format for our loggers and the libraries' (transformers and datasets log through `logging` too)."""
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        level=level,
        force=True,
    )


def mapping_option(value, name: str) -> dict | None:
    """A mapping option of a recipe's arguments: a dict from the YAML, or a JSON string from the command line."""
    import json

    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except ValueError as error:
            raise ValueError(f"{name} is not valid JSON ({error}): {value!r}") from error
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{name} must be a mapping of option names to values, got {value!r}")
    return value


def parse_recipe_args(dataclass_types: tuple, default_config: str | Path, argv: list[str] | None = None) -> tuple:
    """Parse the recipe's dataclasses from `argv`, reading `default_config` when no `--config` is given.

    `default_config` is a path relative to recipes/configs/ (or absolute).
    """
    from trl import TrlParser

    argv = list(sys.argv[1:] if argv is None else argv)
    if "--config" not in argv:
        default = Path(default_config)
        default = default if default.is_absolute() else CONFIG_DIR / default
        logger.info("no --config given: running the embedded default %s", default)
        argv = ["--config", str(default), *argv]
    else:
        index = argv.index("--config")
        if index + 1 >= len(argv):
            raise SystemExit("--config needs a YAML file path, e.g. --config recipes/configs/demo/sft.yaml")
        path = argv[index + 1]
        if not os.path.isfile(path):
            available = sorted(str(p.relative_to(CONFIG_DIR.parent.parent)) for p in CONFIG_DIR.rglob("*.yaml"))
            raise SystemExit(f"config file {path!r} not found. Configs in this repo:\n  " + "\n  ".join(available))
    parser = TrlParser(dataclass_types)
    return parser.parse_args_and_config(args=argv)


def run_recipe(main, parsed_args: tuple, user_errors: tuple = ()):
    """Run a recipe's `main`; a mistake in the user's input ends the run with its message, not a traceback.

    Known input mistakes: a model or dataset that cannot be found, a row that breaks the schema, and the
    recipe's own `user_errors`. Anything else is a bug and keeps its traceback.
    """
    from data_filters.schema import DatasetNotFoundError, SchemaError
    from recipes.common.model import ModelNotFoundError

    try:
        return main(*parsed_args)
    except (ModelNotFoundError, DatasetNotFoundError, SchemaError, *user_errors) as error:
        raise SystemExit(f"error: {error}") from None
