"""What each filter did to the rows, in a form a person reads (markdown) and a program reads (JSON).

Every filter returns a `StepReport` beside its dataset: rows in, rows out, and why rows were dropped
(or, in `tag` mode, tagged). A data set for RL is only as trustworthy as the account of how it was cut:
"7470 -> 1210 rows" means nothing without "2317 multiple choice, 412 too similar to MATH-500, ...".
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from basics.atomic_files import write_atomic

MODES = ("drop", "tag")


def check_mode(mode: str, step: str) -> None:
    if mode not in MODES:
        raise ValueError(
            f"{step}: mode must be 'drop' (remove flagged rows) or 'tag' (keep them, add a column), not {mode!r}"
        )


def without_rows(dataset, flagged):
    """`dataset` less the rows at the indices in `flagged`, the others in their order: what drop mode returns."""
    flagged = set(flagged)
    return dataset.select([index for index in range(len(dataset)) if index not in flagged])


@dataclass
class StepReport:
    """The account of one step. `reasons` counts rows by why they were dropped (drop mode) or tagged (tag mode);
    a row may have several reasons, so the counts can sum to more than `flagged`."""

    step: str
    rows_in: int
    rows_out: int
    mode: str = "drop"
    flagged: int = 0  # rows the step found (dropped in drop mode, tagged in tag mode)
    reasons: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    details: dict = field(default_factory=dict)  # step-specific figures (match counts, pass-rate histogram, ...)
    files: list[str] = field(default_factory=list)  # side reports the step wrote

    @classmethod
    def timed(cls, step: str, dataset, result, mode: str, flagged: int, reasons: dict, started: float, **extra):
        """The report of a step that read `dataset` and returned `result`, begun at `started` (time.perf_counter)."""
        seconds = time.perf_counter() - started
        return cls(step, len(dataset), len(result), mode, flagged, reasons, seconds, **extra)

    @property
    def dropped(self) -> int:
        return self.rows_in - self.rows_out

    def to_dict(self) -> dict:
        return {**asdict(self), "dropped": self.dropped}


@dataclass
class PipelineReport:
    """All steps of one run, with where the rows came from and went."""

    input: str
    output: str | None = None
    loading: dict = field(default_factory=dict)
    steps: list[StepReport] = field(default_factory=list)

    @property
    def rows_in(self) -> int:
        return self.loading.get("rows_in", self.steps[0].rows_in if self.steps else 0)

    @property
    def rows_out(self) -> int:
        return self.steps[-1].rows_out if self.steps else self.loading.get("rows_kept", 0)

    def to_dict(self) -> dict:
        return {
            "input": self.input,
            "output": self.output,
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "loading": self.loading,
            "steps": [step.to_dict() for step in self.steps],
        }

    def to_markdown(self) -> str:
        lines = [
            "# data_filters report",
            "",
            f"- input: `{self.input}`",
            f"- output: `{self.output}`" if self.output else "- output: (not written)",
            f"- rows: {self.rows_in} in, {self.rows_out} out",
            "",
            "| # | step | mode | rows in | kept | dropped | flagged | seconds | why |",
            "|---:|---|---|---:|---:|---:|---:|---:|---|",
        ]
        if self.loading:
            reasons = _reasons_text(self.loading.get("reasons", {}))
            lines.append(
                f"| 0 | load (schema) | {self.loading.get('on_error', 'raise')} | {self.loading.get('rows_in', 0)} | "
                f"{self.loading.get('rows_kept', 0)} | {self.loading.get('rows_dropped', 0)} | "
                f"{self.loading.get('rows_dropped', 0)} | | {reasons} |"
            )
        for number, step in enumerate(self.steps, start=1):
            lines.append(
                f"| {number} | {step.step} | {step.mode} | {step.rows_in} | {step.rows_out} | {step.dropped} | "
                f"{step.flagged} | {step.seconds:.1f} | {_reasons_text(step.reasons)} |"
            )
        for number, step in enumerate(self.steps, start=1):
            if step.details or step.files:
                lines += ["", f"## {number}. {step.step}", ""]
                lines += [f"- {key}: {_value_text(value)}" for key, value in step.details.items()]
                lines += [f"- report file: `{path}`" for path in step.files]
        return "\n".join(lines) + "\n"

    def write(self, folder: str | Path, stem: str = "report") -> tuple[Path, Path]:
        """`<stem>.md` and `<stem>.json` in `folder`; returns their paths."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        markdown, data = folder / f"{stem}.md", folder / f"{stem}.json"
        write_atomic(markdown, self.to_markdown())
        write_atomic(data, json.dumps(self.to_dict(), indent=2, default=str) + "\n")
        return markdown, data


def _reasons_text(reasons: dict) -> str:
    return ", ".join(f"{reason}: {count}" for reason, count in reasons.items()).replace("|", "\\|") or "-"


def _value_text(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{key}: {_value_text(item)}" for key, item in value.items())
    return str(value)
