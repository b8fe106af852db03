"""What `--help` shows, and the option reference (docs/options.md) generated from the same source.

At db84883 `grpo.py --help` was 1,533 lines: a usage block listing every option, then every option of TRL and
transformers in one list, with no word on what the recipe does, no `--config`, and the embedded demo YAML's
values shown as the defaults (which a config of the user's own does not get). Here the help starts with the
recipe's own description and how to give a config; the options come in groups, this repository's first: the
recipe's own dataclass, then what this repository adds to TRL's training config, then TRL's and
transformers' options, then the model's; and the defaults are those a config of your own gets on this
machine (recipes.common.command_line.config skips the embedded default for --help; recipes.common.command_line.config_defaults sets those
that differ on a machine without an accelerator, and `machine_defaults_table` writes them for docs/options.md).
"""

from __future__ import annotations

import dataclasses
import typing

FOREIGN = ("trl", "transformers")


def is_foreign(kind: type) -> bool:
    """A dataclass of TRL's or transformers' (not held to this repository's option reference)."""
    return kind.__module__.split(".")[0] in FOREIGN


def _fields(kind: type) -> list[dataclasses.Field]:
    return [field for field in dataclasses.fields(kind) if field.init]


class OptionGroup(typing.NamedTuple):
    title: str  # as --help heads the group
    kind: type  # the dataclass the fields are read from (its defaults: a subclass's own where it sets them)
    fields: list
    ours: bool  # this repository's options, rather than TRL's or transformers'
    source: str  # the dataclass that declares them: "GRPOScriptArguments", "trl.GRPOConfig", ...


def _qualified(kind: type) -> str:
    return f"{kind.__module__.split('.')[0]}.{kind.__name__}"


def option_groups(dataclass_types: tuple) -> list[OptionGroup]:
    """The options of a recipe's dataclasses in groups, this repository's first."""
    ours, foreign = [], []
    for kind in dataclass_types:
        if is_foreign(kind):
            label = "model options" if "Model" in kind.__name__ else "TRL's and transformers' options"
            foreign.append(OptionGroup(f"{label} ({_qualified(kind)})", kind, _fields(kind), False, _qualified(kind)))
            continue
        base = next(
            (parent for parent in kind.__mro__[1:] if dataclasses.is_dataclass(parent) and is_foreign(parent)), None
        )
        if base is None:
            ours.append(
                OptionGroup(f"this recipe's options ({kind.__name__})", kind, _fields(kind), True, kind.__name__)
            )
            continue
        inherited = {field.name for field in dataclasses.fields(base)}
        added = [field for field in _fields(kind) if field.name not in inherited]
        title = f"this repository's training options ({kind.__name__}, beside {base.__name__}'s)"
        ours.append(OptionGroup(title, kind, added, True, kind.__name__))
        kept = [field for field in _fields(kind) if field.name in inherited]
        title = f"TRL's and transformers' options ({_qualified(base)})"
        foreign.append(OptionGroup(title, kind, kept, False, _qualified(base)))
    return ours + foreign


def type_name(kind: type, field: dataclasses.Field) -> str:
    try:
        hint = typing.get_type_hints(kind).get(field.name, field.type)
    except Exception:  # noqa: BLE001 - an annotation this Python cannot evaluate: as written
        hint = field.type
    text = hint.__name__ if isinstance(hint, type) else str(hint)
    return text.replace("typing.", "").replace("NoneType", "None")


def default_of(field: dataclasses.Field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def machine_defaults_table() -> list[str]:
    """docs/options.md's table of the options whose default differs by machine, written from the list the run
    applies (recipes.common.command_line.config_defaults.WITHOUT_AN_ACCELERATOR), so the page cannot say otherwise."""
    from recipes.common.command_line.config_defaults import WITHOUT_AN_ACCELERATOR

    lines = ["| option | on a GPU | without an accelerator (no CUDA, XPU or MPS) | why |", "|---|---|---|---|"]
    for default in WITHOUT_AN_ACCELERATOR:
        cells = (f"`{default.option}`", f"`{default.on_a_gpu}`", f"`{default.without_accelerator}`", default.why)
        lines.append(f"| {' | '.join(cells)} |")
    return lines


def organise(parser, dataclass_types: tuple, description: str | None, default_config) -> None:
    """Give `parser` (a TrlParser built from `dataclass_types`) its description, a `--config` entry and the
    groups of `option_groups`, in that order."""
    import argparse

    from recipes.common.command_line.config_defaults import machine_defaults

    summary = (description or "").strip()
    changed = [default.option for default in machine_defaults()]
    on_this_machine = (
        f" (no GPU or other accelerator here: {', '.join(changed)} false, see docs/options.md's table of what "
        "differs by machine)"
        if changed
        else ""
    )
    parser.description = (
        (summary + "\n\n" if summary else "")
        + f"Options are YAML keys of a --config file or flags (a flag wins). With no --config the recipe runs its "
        f"embedded default, recipes/configs/{default_config}, whose values are not the defaults below: these are "
        f"what a config of your own gets on this machine{on_this_machine}. Every option, with its type and "
        "default: docs/options.md."
    )

    class Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
        """The description as written; each option's default after its help."""

    parser.formatter_class = Formatter
    parser.usage = "%(prog)s [--config FILE.yaml] [--OPTION VALUE ...]"
    general = parser._optionals
    general.add_argument(  # read and taken out of the arguments before they are parsed: listed here only
        "--config",
        metavar="FILE.yaml",
        default=argparse.SUPPRESS,
        help="a YAML file of these options (keys without dashes)",
    )
    for option_group in option_groups(dataclass_types):
        group = parser.add_argument_group(option_group.title)
        names = {field.name for field in option_group.fields}
        for action in [action for action in general._group_actions if action.dest in names]:
            general._group_actions.remove(action)  # a boolean's --x and --no_x both
            group._group_actions.append(action)
