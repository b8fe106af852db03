"""What produced a cached file, so that a rerun reuses it only when the same inputs would produce it again.

Rejection sampling and distillation keep their expensive intermediate files (a teacher's traces, a round's
samples and model) so that an interrupted run resumes. "The file exists" is not enough: after the
teacher, the data or an option such as `verify_traces` changed, reusing it trains on stale data. A
fingerprint is a plain mapping of the inputs (config fields, the model's identity, the data file's
identity) stored beside the file; `changes` (and `stale`, for a step's stats) names what differs, and the recipe redoes the step and says why.

A model folder is identified by its config.json and the names, sizes and modification times of its weight
files (hashing the weights of a 7B model would take minutes); a Hub model by its id and revision.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

# Data options of DataArguments that change which rows are read and how their prompts are written.
DATA_FIELDS = (
    "dataset_name", "dataset_config", "dataset_split", "dataset_num_rows", "dataset_seed", "question_field",
    "answer_field", "system_prompt", "user_template", "field_map", "verifier", "require_number", "on_error",
)  # fmt: skip
# TraceArguments that change which completions are sampled and kept (not the held-out evaluation's).
SAMPLING_FIELDS = ("sampling", "max_per_problem", "selection", "require_stop")
# Sampling options that do not change a sample: each draws from its own seeded stream, whatever the batch.
UNCHANGING_SAMPLING_OPTIONS = ("batch_size",)
# Training options that change the trained model.
TRAINING_FIELDS = (
    "learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "weight_decay", "max_grad_norm", "max_steps",
    "num_train_epochs", "per_device_train_batch_size", "gradient_accumulation_steps", "seed", "packing",
    "max_length", "assistant_only_loss", "completion_only_loss", "eos_token", "bf16", "fp16",
)  # fmt: skip
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def path_identity(path: str | Path) -> dict | str:
    """A local file's or folder's identity (name, size, modification time of its files); a name stays a name."""
    path = Path(str(path)).expanduser()
    if path.is_file():
        stat = path.stat()
        return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
        identity = {
            "path": str(path.resolve()),
            "files": [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files],
        }
        config = path / "config.json"
        if config.is_file():
            identity["config_sha256"] = hashlib.sha256(config.read_bytes()).hexdigest()
        return identity
    return str(path)


def fields_of(config, names: tuple[str, ...]) -> dict:
    """The named fields of a dataclass config (those it has), as JSON values."""
    values = {name: getattr(config, name) for name in names if hasattr(config, name)}
    return json.loads(json.dumps(values, default=_as_json))


def _as_json(value):
    """An enum's value; a dataclass's fields (the sampling options, less those that change no sample); else text."""
    if dataclasses.is_dataclass(value):
        return {k: v for k, v in dataclasses.asdict(value).items() if k not in UNCHANGING_SAMPLING_OPTIONS}
    return getattr(value, "value", str(value))


def data_fingerprint(script_args) -> dict:
    """The data options, plus the identity of a local data file or folder."""
    return {**fields_of(script_args, DATA_FIELDS), "data_file": path_identity(script_args.dataset_name)}


def sampling_fingerprint(script_args, extra_fields: tuple[str, ...] = ()) -> dict:
    """The inputs of a step that samples its own training data: the data options and file, and the sampling
    options (SAMPLING_FIELDS and the recipe's `extra_fields`)."""
    fingerprint = {
        "data": data_fingerprint(script_args),
        "sampling": fields_of(script_args, SAMPLING_FIELDS + extra_fields),
    }
    if getattr(script_args, "tools", None):  # only then, as keep_reward_model: samples drawn with tools
        fingerprint["tools"] = fields_of(script_args, ("tools", "tool_options", "max_tool_calling_iterations"))
    if getattr(script_args, "keep_reward_model", None):  # only then: older fingerprints stay valid without one
        fingerprint["keep"] = fields_of(script_args, ("keep_reward_model", "keep_by", "keep_min_score"))
    return fingerprint


def changes(old: dict | None, new: dict) -> list[str]:
    """What differs between a stored fingerprint and the current one, e.g. ["verify_traces: True -> False"]."""
    if old is None:
        return ["no fingerprint stored (written by an older version)"]
    differences = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if isinstance(before, dict) and isinstance(after, dict):
            differences += [f"{key}.{change}" for change in changes(before, after)]
        else:
            differences.append(f"{key}: {_short(before)} -> {_short(after)}")
    return differences


def stale(stats: dict | None, fingerprint: dict) -> list[str]:
    """What changed since a cached step's `stats` (which hold its "fingerprint") were written; [] when there are
    no stats yet, so there is nothing to redo, or when nothing changed."""
    return changes(stats.get("fingerprint"), fingerprint) if stats else []


def _short(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
