"""The filter pipeline behind `python -m data_filters --config FILE.yaml`: load, run steps in order, write.

A config names the input (the fields of `DataArguments`), an ordered list of steps, the model that the
sampling steps use, and where the result and its report go:

    input: {dataset_name: ../shared/data/math/math_train.jsonl, on_error: drop}
    model: {name_or_path: artifacts/tiny-base, backend: transformers, batch_size: 64}
    steps:
      - {step: dedup}
      - {step: question_type, drop_types: [multiple_choice, true_false, yes_no, proof, unverifiable_answer]}
      - {step: decontaminate, eval_sets: [aime24, math500], n: 8, min_coverage: 0.5}
      - {step: pass_rate, n: 8, max_new_tokens: 1024, keep: window, lo: 0.0, hi: 0.875}
    output: {path: artifacts/filtered/math_train.jsonl}

Steps: dedup, question_type, decontaminate, pass_rate, no_think, curriculum_buckets (options: the
keyword arguments of the `_step_*` functions below; a wrong option is an error that lists the right ones).
Output: `.jsonl`/`.json` or `.parquet` files, or any other path as a `save_to_disk` folder; `push_to_hub`
names a Hub repository to push to as well. The report (`<output>.report.md` and `.json`, or `report_dir`)
has rows in, kept and dropped per step and why; steps may write side files (the decontamination matches).
"""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from data_filters.report import PipelineReport, StepReport
from tasks.schema import DataArguments, load_rows_with_report

logger = logging.getLogger(__name__)

_TOP_LEVEL = ("input", "steps", "model", "output")
_OUTPUT_OPTIONS = ("path", "format", "push_to_hub", "private", "report_dir")
_MODEL_OPTIONS = ("name_or_path", "backend", "batch_size")


class ConfigError(ValueError):
    """The pipeline config is malformed; the message names the section, step or option and how to fix it."""


@dataclass
class _Context:
    """What steps share: the question column, the report folder, the loaded samplers, the step number."""

    question_field: str
    report_dir: Path
    report_stem: str
    model: dict
    progress: bool = True
    step_number: int = 0
    samplers: dict = field(default_factory=dict)

    def sampler(self, override: dict | None):
        spec = {"backend": "auto", "batch_size": 64, **self.model, **(override or {})}
        unknown = sorted(set(spec) - set(_MODEL_OPTIONS))
        if unknown:
            raise ConfigError(f"model: unknown option(s) {unknown}; options: {', '.join(_MODEL_OPTIONS)}")
        if not spec.get("name_or_path"):
            raise ConfigError("the sampling steps need a model: add `model: {name_or_path: <path or Hub id>}`")
        key = (spec["name_or_path"], spec["backend"], spec["batch_size"])
        if key not in self.samplers:
            self.samplers[key] = load_sampler(spec["name_or_path"], spec["backend"], spec["batch_size"])
        return self.samplers[key]


def load_sampler(name_or_path: str, backend: str = "auto", batch_size: int = 64):
    """A sampler from eval's factory (transformers or vLLM), or a transformers sampler built here."""
    try:
        from eval.sampler import make_sampler
    except ImportError:  # an eval/ without the factory: the transformers backend is always there
        make_sampler = None
    if make_sampler is not None:
        return make_sampler(backend, str(name_or_path), batch_size=batch_size)
    if backend not in ("transformers", "auto"):
        raise ConfigError(f"model backend {backend!r} is not available in this eval/; use transformers")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from eval.sampler import TransformersSampler

    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=torch.bfloat16 if device == "cuda" else None)
    return TransformersSampler(model.to(device), tokenizer, batch_size=batch_size)


# Steps that sample take the sampling options (eval.sampling_options.SamplingOptions, one spelling everywhere):
# their YAML options n, temperature, top_p, top_k, max_new_tokens and seed are gathered into a `sampling` argument
# by `_step_spec` (the backend and its batch size are the `model:` section's). Only what a step's rule needs
# differs from the options' defaults.
SAMPLING_STEPS = ("pass_rate", "no_think")
SAMPLING_FIELDS = ("n", "temperature", "top_p", "top_k", "max_new_tokens", "seed")


def _sampling_params(step: str, options: dict):
    """The step's SamplingParams from its YAML options (the sampling fields are popped from `options`)."""
    from eval.sampling_options import SamplingOptions

    if step == "no_think":  # the rule asks for an answer without reasoning: a few samples, each short
        from data_filters.pass_rate import NO_THINK_ANSWER_TOKENS

        defaults = {"n": 4, "max_new_tokens": NO_THINK_ANSWER_TOKENS}
    else:
        defaults = {"n": 8}  # enough samples for a pass-rate window
    given = {name: options.pop(name) for name in SAMPLING_FIELDS if name in options}
    return SamplingOptions(**{**defaults, **given}).params(seed=0)


# ---------------------------------------------------------------- steps: (dataset, context, **options) -> (dataset, report)


def _step_dedup(dataset, context: _Context, key: str = "normalized", mode: str = "drop"):
    from data_filters.dedup import deduplicate

    return deduplicate(dataset, key=key, mode=mode, question_field=context.question_field)


def _step_question_type(dataset, context: _Context, drop_types: list | None = None, mode: str = "drop"):
    from data_filters.question_type import TYPES, filter_question_types

    return filter_question_types(
        dataset,
        TYPES if drop_types is None else drop_types,
        mode=mode,
        question_field=context.question_field,
        progress=context.progress,
    )


def _step_decontaminate(
    dataset, context: _Context, eval_sets: list, n: int = 8, min_coverage: float = 0.0, mode="drop"
):
    from data_filters.decontaminate import decontaminate

    if isinstance(eval_sets, str):
        eval_sets = [eval_sets]
    report_path = context.report_dir / f"{context.report_stem}.step{context.step_number}.decontamination.jsonl"
    return decontaminate(
        dataset, eval_sets, n, min_coverage, mode, context.question_field, report_path, progress=context.progress
    )


def _step_pass_rate(
    dataset,
    context: _Context,
    sampling=None,
    keep: str = "window",
    lo: float = 0.0,
    hi: float = 1.0,
    rewards: list | None = None,
    success_threshold: float | None = None,
    chunk_size: int = 64,
    mode: str = "drop",
    model: dict | None = None,
):
    from data_filters.pass_rate import pass_rate_filter

    return pass_rate_filter(
        dataset,
        context.sampler(model),
        sampling or _sampling_params("pass_rate", {}),
        rule=keep,
        lo=lo,
        hi=hi,
        mode=mode,
        rewards=rewards,
        success_threshold=success_threshold,
        chunk_size=chunk_size,
        progress=context.progress,
    )


def _step_no_think(
    dataset,
    context: _Context,
    sampling=None,
    threshold: float = 0.0,
    user_template: str | None = None,
    system_prompt: str | None = None,
    chunk_size: int = 64,
    mode: str = "drop",
    model: dict | None = None,
):
    from data_filters.pass_rate import DEFAULT_NO_THINK_TEMPLATE, no_think_filter

    return no_think_filter(
        dataset,
        context.sampler(model),
        sampling or _sampling_params("no_think", {}),
        threshold=threshold,
        user_template=user_template or DEFAULT_NO_THINK_TEMPLATE,
        system_prompt=system_prompt,
        question_field=context.question_field,
        mode=mode,
        chunk_size=chunk_size,
        progress=context.progress,
    )


def _step_curriculum_buckets(dataset, context: _Context, edges: list | None = None, labels: list | None = None):
    from data_filters.curriculum import DEFAULT_EDGES, DEFAULT_LABELS, add_difficulty_buckets

    started = time.perf_counter()
    tagged, counts = add_difficulty_buckets(dataset, edges or DEFAULT_EDGES, labels or DEFAULT_LABELS)
    report = StepReport("curriculum_buckets", len(dataset), len(tagged), "tag", 0, {}, time.perf_counter() - started)
    report.details = {"buckets": counts}
    return tagged, report


STEPS = {
    "dedup": _step_dedup,
    "question_type": _step_question_type,
    "decontaminate": _step_decontaminate,
    "pass_rate": _step_pass_rate,
    "no_think": _step_no_think,
    "curriculum_buckets": _step_curriculum_buckets,
}


# ---------------------------------------------------------------- config


def _step_spec(entry, number: int) -> tuple[str, dict]:
    """`{step: name, **options}` or `{name: {options}}` -> (name, options), with the options checked."""
    if isinstance(entry, str):
        name, options = entry, {}
    elif isinstance(entry, dict) and "step" in entry:
        options = dict(entry)
        name = options.pop("step")
    elif isinstance(entry, dict) and len(entry) == 1:
        name, options = next(iter(entry.items()))
        options = dict(options or {})
    else:
        raise ConfigError(f"steps[{number}]: write {{step: <name>, <option>: <value>, ...}}, not {entry!r}")
    if name not in STEPS:
        raise ConfigError(f"steps[{number}]: unknown step {name!r}; steps: {', '.join(STEPS)}")
    parameters = [p for p in list(inspect.signature(STEPS[name]).parameters.values())[2:] if p.name != "sampling"]
    accepted = {parameter.name for parameter in parameters}
    if name in SAMPLING_STEPS:
        accepted |= set(SAMPLING_FIELDS)
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ConfigError(
            f"steps[{number}] ({name}): unknown option(s) {unknown}; its options: {', '.join(sorted(accepted))}"
        )
    missing = [p.name for p in parameters if p.default is inspect.Parameter.empty and p.name not in options]
    if missing:
        raise ConfigError(f"steps[{number}] ({name}): option(s) {missing} are required")
    if name in SAMPLING_STEPS:
        try:
            options["sampling"] = _sampling_params(name, options)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"steps[{number}] ({name}): {error}") from None
    return name, options


def _found_path(value, config_dir: Path):
    """A relative path that exists beside the config file, else (as configs were first written) in the cwd."""
    if not isinstance(value, str) or not value or Path(value).expanduser().is_absolute() or ":" in value:
        return value
    beside = config_dir / value
    if beside.exists():
        return str(beside)
    return value  # relative to the current directory, or a Hub/registry name: loaded as before


def resolve_input_paths(config: dict, config_dir: str | Path) -> dict:
    """The config with its input paths (dataset, model, steps' eval_sets) found relative to `config_dir`.

    A config then runs from any directory. A path that is not beside the config keeps its meaning relative
    to the current directory, so configs written against the repository root still work from there. Outputs
    (output.path, report_dir) are written relative to the current directory, like the --output flag.
    """
    config_dir = Path(config_dir)
    config = dict(config)
    if isinstance(config.get("input"), dict):
        config["input"] = {
            **config["input"],
            "dataset_name": _found_path(config["input"].get("dataset_name"), config_dir),
        }
    if isinstance(config.get("model"), dict) and "name_or_path" in config["model"]:
        config["model"] = {**config["model"], "name_or_path": _found_path(config["model"]["name_or_path"], config_dir)}
    steps = []
    for entry in config.get("steps") or []:
        if isinstance(entry, dict) and isinstance(entry.get("eval_sets"), list):
            entry = {**entry, "eval_sets": [_found_path(name, config_dir) for name in entry["eval_sets"]]}
        if isinstance(entry, dict) and isinstance(entry.get("model"), dict) and "name_or_path" in entry["model"]:
            entry = {
                **entry,
                "model": {**entry["model"], "name_or_path": _found_path(entry["model"]["name_or_path"], config_dir)},
            }
        steps.append(entry)
    if "steps" in config and isinstance(config["steps"], list):
        config["steps"] = steps
    return config


def check_config(config: dict) -> None:
    """Every mistake that can be found before loading data: unknown sections, steps and options."""
    if not isinstance(config, dict):
        raise ConfigError(f"the config must be a mapping with sections {', '.join(_TOP_LEVEL)}")
    unknown = sorted(set(config) - set(_TOP_LEVEL))
    if unknown:
        raise ConfigError(f"unknown config section(s) {unknown}; sections: {', '.join(_TOP_LEVEL)}")
    input_fields = {f.name for f in fields(DataArguments)}
    bad_input = sorted(set(config.get("input") or {}) - input_fields)
    if bad_input:
        raise ConfigError(f"input: unknown option(s) {bad_input}; options: {', '.join(sorted(input_fields))}")
    if not (config.get("input") or {}).get("dataset_name"):
        raise ConfigError("input: dataset_name is required (a local file or folder, a Hub name, or synthetic:<levels>)")
    steps = config.get("steps") or []
    if not isinstance(steps, list):
        raise ConfigError("steps: an ordered list, e.g. [{step: dedup}, {step: question_type}]")
    for number, entry in enumerate(steps):
        _step_spec(entry, number)
    bad_output = sorted(set(config.get("output") or {}) - set(_OUTPUT_OPTIONS))
    if bad_output:
        raise ConfigError(f"output: unknown option(s) {bad_output}; options: {', '.join(_OUTPUT_OPTIONS)}")


def write_dataset(dataset, path: str | Path, output_format: str = "auto") -> Path:
    """JSONL (`.jsonl`/`.json`), Parquet (`.parquet`) or a `save_to_disk` folder (any other path, or `disk`)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if output_format == "auto":
        output_format = {".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}.get(suffix, "disk")
    if output_format not in ("jsonl", "parquet", "disk"):
        raise ConfigError(f"output.format must be auto, jsonl, parquet or disk, not {output_format!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if output_format == "jsonl":
        dataset.to_json(str(path), lines=True, force_ascii=False)
    elif output_format == "parquet":
        dataset.to_parquet(str(path))
    else:
        dataset.save_to_disk(str(path))
    return path


def run_pipeline(config: dict, progress: bool = True) -> tuple[object, PipelineReport]:
    """Run a config (already parsed from YAML); returns the final dataset and the report (also written)."""
    check_config(config)
    try:
        args = DataArguments(**config["input"])
    except ValueError as error:
        raise ConfigError(f"input: {error}") from error
    output = dict(config.get("output") or {})
    out_path = Path(output["path"]) if output.get("path") else None
    report_dir = Path(output.get("report_dir") or (out_path.parent if out_path else "artifacts/data_filters"))
    report_stem = f"{out_path.name}.report" if out_path else "report"
    model = dict(config.get("model") or {})
    context = _Context(args.resolved_field_map()["problem"], report_dir, report_stem, model, progress)

    dataset, loading = load_rows_with_report(args)
    loaded = loading.to_dict() | {"on_error": args.on_error}
    loaded["dropped_rows"] = loaded["dropped_rows"][:50]  # the first ones, each with its row, field and problem
    report = PipelineReport(input=args.dataset_name, loading=loaded)
    logger.info("loaded %d rows from %s", len(dataset), args.dataset_name)
    for number, entry in enumerate(config.get("steps") or []):
        name, options = _step_spec(entry, number)
        context.step_number = number + 1
        if len(dataset) == 0:
            logger.warning("step %d (%s): no rows left; skipped", number + 1, name)
            report.steps.append(StepReport(name, 0, 0, options.get("mode", "drop"), details={"skipped": "no rows"}))
            continue
        logger.info("step %d: %s %s on %d rows", number + 1, name, options, len(dataset))
        started = time.perf_counter()
        try:
            dataset, step_report = STEPS[name](dataset, context, **options)
        except ValueError as error:
            if isinstance(error, ConfigError) or type(error).__module__.startswith("tasks.schema"):
                raise
            raise ConfigError(f"steps[{number}] ({name}): {error}") from error
        step_report.seconds = step_report.seconds or time.perf_counter() - started
        report.steps.append(step_report)
    if out_path is not None:
        report.output = str(write_dataset(dataset, out_path, output.get("format", "auto")))
    if output.get("push_to_hub"):
        dataset.push_to_hub(output["push_to_hub"], private=bool(output.get("private", True)))
        report.output = f"{report.output or ''} (pushed to {output['push_to_hub']})".strip()
    markdown, data = report.write(report_dir, report_stem)
    logger.info("report: %s and %s", markdown, data)
    return dataset, report
