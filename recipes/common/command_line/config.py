"""Command-line and YAML parsing shared by the recipes.

Every recipe parses `TrlParser((OurScriptArguments, TrlTrainerConfig, ModelConfig))`: YAML through
`--config FILE`, any field overridden by a flag. What this adds to TRL's parser: a recipe run with no
`--config` gets its embedded default (a YAML under recipes/configs/demo/ that trains the tiny model
on the synthetic task), so `python recipes/sft.py` works on a fresh clone with no Hub access; nested
options (`--rewards`, `--curriculum`, `--on_policy`) are YAML on the command line, merged into the
YAML's mapping; and the launch and the whole config are checked (recipes.common.command_line.checks) before anything
loads, a mistake being one line and exit code 2 (`run_recipe_cli`): a misspelled flag or YAML key is
named with the nearest option (no prefix matching: `--max_step` is not taken for `--max_steps`), and Ctrl-C
ends in one line that says where the last checkpoint is and how to resume (recipes.common.checkpoints.interrupt).
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from basics.did_you_mean import did_you_mean
from basics.option_values import yaml_numbers
from recipes.common.checkpoints.resume import finished_run
from recipes.common.command_line.checks import ConfigError, check_launch, validate_config
from recipes.common.command_line.config_defaults import checkpointing_by_its_new_name, ddp_defaults, device_defaults
from recipes.common.command_line.try_here import try_on_this_machine

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"

logger = logging.getLogger(__name__)


def setup_logging(level: int = logging.INFO) -> None:
    """One format for our loggers and the libraries' (transformers and datasets log through `logging` too).

    In a multi-process launch only the main process logs below warnings: one "saved to", not one per process.
    """
    if int(os.environ.get("RANK", "0")) > 0:
        level = max(level, logging.WARNING)
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        level=level,
        force=True,
    )


def _mentions_dict(hint) -> bool:
    """True for `dict`, `dict | str | None`, `list[dict]`: options that hold mappings (or lists of them)."""
    import typing

    if hint is dict or typing.get_origin(hint) is dict:
        return True
    return any(_mentions_dict(arg) for arg in typing.get_args(hint))


def nested_option_names(dataclass_types: tuple) -> set[str]:
    """Options whose values are mappings or lists of mappings (rewards, curriculum, on_policy, field_map ...)."""
    import typing

    names = set()
    for dataclass_type in dataclass_types:
        hints = typing.get_type_hints(dataclass_type)
        names |= {name for name, hint in hints.items() if _mentions_dict(hint)}
    return names


def merge_mappings(base: dict, override: dict) -> dict:
    """`override` over `base`, recursively: `--on_policy '{max_steps: 3}'` keeps the YAML's `beta`."""
    merged = dict(base)
    for key, value in override.items():
        merged[key] = (
            merge_mappings(merged[key], value)
            if isinstance(value, dict) and isinstance(merged.get(key), dict)
            else value
        )
    return merged


def _take_nested_options(argv: list[str], names: set[str]) -> tuple[list[str], dict]:
    """Pull `--name VALUE` / `--name=VALUE` for nested options out of `argv`; VALUE is JSON or YAML."""
    import json

    import yaml

    rest, values, index = [], {}, 0
    while index < len(argv):
        token = argv[index]
        name, _, inline = token[2:].partition("=") if token.startswith("--") else ("", "", "")
        if name in names:
            if not inline and index + 1 >= len(argv):
                raise ConfigError(f"--{name} needs a value, e.g. --{name} '{{key: value}}'")
            text = inline if inline else argv[index + 1]
            index += 1 if inline else 2
            try:  # JSON first: PyYAML (YAML 1.1) reads 1e-4 as a string, JSON as the number
                values[name] = json.loads(text)
            except ValueError:
                pass
            else:
                continue
            try:
                values[name] = yaml_numbers(yaml.safe_load(text))
            except yaml.YAMLError as error:
                first = str(error).splitlines()[0]
                raise ConfigError(
                    f"--{name}: {text!r} is not YAML/JSON ({first}); e.g. --{name} '{{key: value}}'"
                ) from None
            continue
        rest.append(token)
        index += 1
    return rest, values


def _join_negative_numbers(argv: list[str]) -> list[str]:
    """`--learning_rate -1e-4` -> `--learning_rate=-1e-4`: argparse reads '-1e-4' as an unknown flag."""
    out, index = [], 0
    while index < len(argv):
        token = argv[index]
        following = argv[index + 1] if index + 1 < len(argv) else None
        if token.startswith("--") and "=" not in token and following and following.startswith("-"):
            try:
                float(following)
            except ValueError:
                pass
            else:
                out.append(f"{token}={following}")
                index += 2
                continue
        out.append(token)
        index += 1
    return out


def _one_line_parser(dataclass_types: tuple, description: str | None = None, default_config=None):
    """TrlParser whose usage errors are one ConfigError line instead of 200 lines of usage.

    No abbreviations: argparse would take `--max_step 2` for `--max_steps` silently, and a prefix that is
    right today becomes ambiguous when TRL adds a field.
    """
    from trl import TrlParser

    class Parser(TrlParser):
        def error(self, message: str):
            raise ConfigError(f"{message} (see --help)")

    parser = Parser(dataclass_types, allow_abbrev=False)
    # a `bool | None` option (use_vllm: unset means "where installed") is a switch too: `--use_vllm` alone is true
    for action in parser._actions:
        if getattr(action.type, "__name__", "") == "string_to_bool" and action.nargs is None:
            action.nargs, action.const = "?", True
    if default_config is not None:  # the recipes' command lines: --help as recipes/common/command_line/help.py says
        from recipes.common.command_line.help import organise

        organise(parser, dataclass_types, description, default_config)
    return parser


def _option_names(parser) -> list[str]:
    """The parser's long options with underscores (TRL's spelling), for suggestions."""
    names = {option for action in parser._actions for option in action.option_strings if option.startswith("--")}
    return sorted(name for name in names if "-" not in name[2:] or name.replace("-", "_") not in names)


# Options that have a new name or a new home: a config written for the old one is told where it went.
RENAMED_OPTIONS = {
    **dict.fromkeys(("cold_start_if_missing", "teacher_cold_start_if_missing", "build_tiny_model"), "demo_model_if_missing"),
    "samples_per_problem": "sampling: {n: ...}", "sample_temperature": "sampling: {temperature: ...}",
    "sample_top_p": "sampling: {top_p: ...}", "sample_max_new_tokens": "sampling: {max_new_tokens: ...}",
    "sampling_backend": "sampling: {backend: ...}", "sampling_batch_size": "sampling: {batch_size: ...}",
}  # fmt: skip


def _did_you_mean(unknown: list[str], known: list[str]) -> str:
    """'; did you mean --x?' for the nearest known option of each misspelled one; 'check the spelling' if none;
    for an option that was renamed, its new name."""
    moved = [
        f"{word} is now {RENAMED_OPTIONS[word.lstrip('-')]}" for word in unknown if word.lstrip("-") in RENAMED_OPTIONS
    ]
    if moved:
        return "; " + ", ".join(moved)
    hint = did_you_mean(unknown, known)
    return f"; {hint}" if hint else "; check the spelling"


def _unknown_flags_message(remaining: list[str], known: list[str]) -> str:
    flags = [token.partition("=")[0] for token in remaining if token.startswith("-")]
    return f"unknown option(s) on the command line: {' '.join(remaining)}{_did_you_mean(flags, known)} (see --help)"


def parse_recipe_args(
    dataclass_types: tuple, default_config: str | Path, argv: list[str] | None = None, description: str | None = None
) -> tuple:
    """Parse the recipe's dataclasses from `argv`, reading `default_config` when no `--config` is given.

    `default_config` is a path relative to recipes/configs/ (or absolute). What this adds to TrlParser: nested
    options (`--rewards`, `--curriculum`, `--on_policy` ...) are YAML/JSON on the command line and a mapping is
    merged into the YAML's, not put in its place; negative numbers are values, not flags; a multi-process
    launch without a GPU trains with gloo (recipes.common.command_line.checks.check_launch); on a machine without an
    accelerator a config that leaves bf16, activation recomputation and pinned memory unset gets them off
    (recipes.common.command_line.config_defaults.WITHOUT_AN_ACCELERATOR), not TRL's GPU defaults; and the whole config,
    TRL's fields included, is checked before anything loads (`ConfigError`, a ValueError, on a mistake).
    """
    import yaml

    command_line = argv is None
    argv = _join_negative_numbers(list(sys.argv[1:] if argv is None else argv))
    argv = check_launch(argv, relaunch=command_line)
    default = Path(default_config)
    embedded = default if default.is_absolute() else CONFIG_DIR / default
    if "--config" not in argv:
        config_path = embedded
        if not {"-h", "--help"} & set(argv):  # help shows the defaults; it runs nothing
            logger.info("no --config given: running the embedded default %s", config_path)
    else:
        index = argv.index("--config")
        if index + 1 >= len(argv):
            raise ConfigError("--config needs a YAML file path, e.g. --config recipes/configs/demo/sft.yaml")
        config_path = Path(argv[index + 1])
        argv = argv[:index] + argv[index + 2 :]
        if not config_path.is_file():
            available = sorted(str(p.relative_to(CONFIG_DIR.parent.parent)) for p in CONFIG_DIR.rglob("*.yaml"))
            raise ConfigError(
                f"config file {str(config_path)!r} not found; configs in this repo: {', '.join(available)}"
            )
    try:
        # --help without --config shows the defaults a config of your own gets, not the embedded default's values
        helping = bool({"-h", "--help"} & set(argv)) and config_path == embedded
        config = {} if helping else yaml.safe_load(config_path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{config_path}: not valid YAML ({str(error).splitlines()[0]})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{config_path} must hold a YAML mapping of option names to values")
    for key, value in (config.pop("env", None) or {}).items():  # TrlParser's `env:` section
        os.environ[key] = str(value)
    argv, nested = _take_nested_options(argv, nested_option_names(dataclass_types))
    for name, value in nested.items():
        old = config.get(name)
        config[name] = merge_mappings(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    argv = try_on_this_machine(config, argv, dataclass_types, config_path)  # --try_on_this_machine: a few steps here
    device_defaults(config, argv, dataclass_types)
    ddp_defaults(config, argv, dataclass_types)
    argv = checkpointing_by_its_new_name(config, argv, dataclass_types)
    parser = _one_line_parser(dataclass_types, description, default_config)
    unknown = parser.set_defaults_with_config(**config)[::2]
    known = _option_names(parser)
    if unknown:
        hint = _did_you_mean(unknown, known).replace("--", "")  # YAML keys are written without dashes
        raise ConfigError(f"{config_path}: unknown option(s) {', '.join(u[2:] for u in unknown)}{hint}")
    *parsed, remaining = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    if remaining:
        raise ConfigError(_unknown_flags_message(remaining, known))
    validate_config(*parsed)
    return tuple(parsed)


def run_recipe(main, parsed_args: tuple, user_errors: tuple = ()):
    """Run a recipe's `main`; a mistake in the user's input ends the run with one line and exit code 2.

    Known input mistakes: a model or dataset that cannot be found, a row that breaks the schema, a config
    value, and the recipe's own `user_errors`. Anything else is a bug and keeps its traceback.
    """
    from recipes.common.model.loading import ModelNotFoundError
    from rewards.guard import RewardFailedError
    from rewards.registry import RewardConfigError
    from tasks.schema import DatasetNotFoundError, SchemaError

    known = (ModelNotFoundError, DatasetNotFoundError, SchemaError, ConfigError, RewardConfigError, RewardFailedError)
    known = (*known, *user_errors)
    try:
        return main(*parsed_args)
    except known as error:
        _exit_with(error)


def _exit_with(error: Exception):
    sys.stderr.write(f"error: {error}\n")
    raise SystemExit(2) from None


def run_recipe_cli(
    main,
    dataclass_types: tuple,
    default_config: str | Path,
    user_errors: tuple = (),
    argv: list[str] | None = None,
    description: str | None = None,
):
    """A recipe's command line: parse and check the config (one line, exit 2, on a mistake), then run.

    Ctrl-C ends with one line naming the last checkpoint and the flag that resumes from it, exit code 130.
    """
    from recipes.common.checkpoints.interrupt import INTERRUPTED_EXIT_CODE, interrupted_message
    from recipes.common.command_line.process_end import end_process_group, exit_without_teardown
    from recipes.common.training.library_noise import quiet_library_noise

    setup_logging()
    quiet_library_noise()  # before anything loads or saves a model (the tiny base built on demand does both)
    try:
        parsed = parse_recipe_args(dataclass_types, default_config, argv, description)
    except ValueError as error:  # ConfigError, and the dataclasses' own checks in __post_init__
        _exit_with(error)
    training_args = next((args for args in parsed if hasattr(args, "resume_from_checkpoint")), None)
    finished = finished_run(training_args) if training_args is not None else None
    if finished:  # a relaunch after the end: say so and leave the run as it is (exit 0)
        logger.info(finished)
        return Path(training_args.output_dir)
    interrupted = False
    try:
        result = run_recipe(main, parsed, user_errors)
    except KeyboardInterrupt:
        interrupted = True  # the message comes below, once the stopped run's frames (its progress bars) are gone
    finally:
        left_group = end_process_group(wait_for_others=not interrupted)
    if not interrupted:
        if left_group and argv is None:
            exit_without_teardown(0)  # this process is the command line of one process of a finished launch
        return result
    import gc

    gc.collect()  # a progress bar closed later would print itself after the message
    training_args = next((args for args in parsed if hasattr(args, "output_dir")), None)
    sys.stderr.write(f"\n{interrupted_message(training_args)}\n")
    raise SystemExit(INTERRUPTED_EXIT_CODE)


@dataclass(frozen=True)
class RecipeParser:
    """A recipe's command line as one object (what each recipe's `make_parser()` returns), so the demo, the
    benchmarks and the tests parse a recipe's flags exactly as `python recipes/<name>.py` does.

    `parse_args(argv)` gives the recipe's dataclasses (raising ConfigError/ValueError on a mistake);
    `run(main, argv)` is the command line itself: one line and exit code 2 on a user's mistake.
    """

    dataclass_types: tuple
    default_config: str | Path
    user_errors: tuple = ()
    description: str | None = None  # the recipe's docstring: the top of --help

    def parse_args(self, argv: list[str] | None = None) -> tuple:
        return parse_recipe_args(self.dataclass_types, self.default_config, argv, self.description)

    def run(self, main, argv: list[str] | None = None):
        return run_recipe_cli(main, self.dataclass_types, self.default_config, self.user_errors, argv, self.description)
