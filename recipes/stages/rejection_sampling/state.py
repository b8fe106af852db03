"""What a run knows of one round of rejection sampling, as a typed state instead of a dict read by string keys.

A round moves through three phases, and `round_K/stats.json` records which one it reached, so that a rerun
goes on from there: `SAMPLED` (its samples are in `dataset.jsonl`; the SFT on them has not finished), `TRAINED`
(its model is saved and evaluated) and `STOPPED` (it solved no problem that earlier rounds had not: the loop
ends there and the model stays the one it started from). A round with no file, or with a file made from other
inputs (recipes.common.fingerprint), is `NEW`. The JSON written is the flat mapping `summary.json` and the
demo's reports read (`problems_solved`, `pass@1_before`, `pass@1_after`, `model`, ...).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Phase(enum.Enum):
    NEW = "new"
    SAMPLED = "sampled"
    TRAINED = "trained"
    STOPPED = "stopped"


@dataclass
class RoundState:
    """Round `round`'s progress and figures; `to_json`/`from_json` map it to and from `stats.json`."""

    round: int
    phase: Phase = Phase.NEW
    start_model: str | None = None
    counts: dict = field(default_factory=dict)  # problems, problems_solved, samples_drawn, ... (rounds.py)
    fingerprint: dict = field(default_factory=dict)
    new_problems_solved: int | None = None
    pass_at_1_before: dict | None = None
    pass_at_1_after: dict | None = None
    model: str | None = None  # the model the round ends with
    stopped_because: str | None = None

    @property
    def finished(self) -> bool:
        """Nothing is left to do for this round: a rerun skips it."""
        return self.phase in (Phase.TRAINED, Phase.STOPPED)

    @property
    def samples_kept(self) -> int:
        return self.counts.get("samples_kept", 0) + self.counts.get("rationalized_kept", 0)

    def to_json(self) -> dict:
        data = {"round": self.round, "start_model": self.start_model, "sampled": self.phase is not Phase.NEW}
        data.update(self.counts)
        data["fingerprint"] = self.fingerprint
        if self.new_problems_solved is not None:
            data.update({"new_problems_solved": self.new_problems_solved, "pass@1_before": self.pass_at_1_before})
        if self.finished:
            data.update(complete=True, model=self.model)
        if self.phase is Phase.STOPPED:
            data["stopped"] = self.stopped_because
        if self.phase is Phase.TRAINED:
            data["pass@1_after"] = self.pass_at_1_after
        return data

    @classmethod
    def from_json(cls, data: dict) -> RoundState:
        known = {"round", "start_model", "sampled", "fingerprint", "new_problems_solved", "pass@1_before",
                 "complete", "model", "stopped", "pass@1_after"}  # fmt: skip
        if data.get("complete"):
            phase = Phase.STOPPED if data.get("stopped") else Phase.TRAINED
        else:
            phase = Phase.SAMPLED if data.get("sampled") else Phase.NEW
        return cls(
            round=data["round"],
            phase=phase,
            start_model=data.get("start_model"),
            counts={key: value for key, value in data.items() if key not in known},
            fingerprint=data.get("fingerprint") or {},
            new_problems_solved=data.get("new_problems_solved"),
            pass_at_1_before=data.get("pass@1_before"),
            pass_at_1_after=data.get("pass@1_after"),
            model=data.get("model"),
            stopped_because=data.get("stopped"),
        )
