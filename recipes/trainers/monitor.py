"""A training monitor for RLVR runs: every logged metric to a local metrics.jsonl, and warnings when a run
has stopped learning.

* entropy collapse: the mean within-group reward std (`groups/std_mean`) stays under a threshold for
  `patience` consecutive logs. When every completion of a prompt gets the same reward, GRPO has no
  gradient; the group std falls before the loss or the mean reward show anything;
* constant rewards: every reward function's std is zero over a log window: nothing the policy does
  changes its reward (a wrong `answer` column, an extraction that never matches, a format the template
  breaks). This is the usual cause of "the loss is 0" reports (trl#2703);
* constant accuracy: the accuracy reward (the verifier) has not varied for `patience` consecutive logs,
  whatever the other rewards do. A length or format reward keeps the loss moving, so nothing else looks
  wrong, but the policy is then trained on length or format alone (a model that never boxes its answer).

Every numeric key TRL logs lands in metrics.jsonl, among them the step's time split, token counts and
FLOP/s (`timing_s/*`, `tokens/*`, `perf/*`: recipes.common.step_timing). Warnings go to the log and into the
run card; metrics.jsonl is written whatever `report_to` says. SFT runs
(recipes.common.sft_training) write their metrics.jsonl through this callback too, so that every run can be
plotted without a checkpoint; the checks read GRPO's metrics only and stay silent there.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from transformers import TrainerCallback

logger = logging.getLogger(__name__)


class RLVRMonitor(TrainerCallback):
    def __init__(
        self,
        output_dir: str | Path,
        std_threshold: float = 0.05,
        patience: int = 3,
        accuracy_rewards: list[str] | tuple = (),
    ):
        self.path = Path(output_dir) / "metrics.jsonl"
        self.std_threshold = std_threshold
        self.patience = patience
        self.accuracy_rewards = list(accuracy_rewards)
        self.constant_accuracy_streak = {name: 0 for name in self.accuracy_rewards}
        self.low_std_streak = 0
        self.warnings: list[dict] = []
        self._warned = set()

    def _warn(self, kind: str, step: int, message: str) -> None:
        self.warnings.append({"step": step, "kind": kind, "message": message})
        if kind not in self._warned:  # the log says it once; the run card keeps every occurrence
            self._warned.add(kind)
            logger.warning("step %d: %s", step, message)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not state.is_world_process_zero:
            return
        step = state.global_step
        record = {"step": step, **{key: value for key, value in logs.items() if _is_number(value)}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record) + "\n")
        std_mean = logs.get("groups/std_mean")
        if std_mean is not None:
            self.low_std_streak = self.low_std_streak + 1 if std_mean < self.std_threshold else 0
            if self.low_std_streak >= self.patience:
                self._warn(
                    "entropy_collapse",
                    step,
                    f"entropy collapse suspected: the mean within-group reward std has stayed under "
                    f"{self.std_threshold} for {self.low_std_streak} logs (now {std_mean:.4f}); groups give no "
                    "gradient. Raise the temperature, use harder prompts (curriculum), or enable dynamic sampling.",
                )
        for name in self.accuracy_rewards:
            std, mean = logs.get(f"rewards/{name}/std"), logs.get(f"rewards/{name}/mean")
            if std is None:
                continue
            streak = self.constant_accuracy_streak[name] + 1 if std == 0 else 0
            self.constant_accuracy_streak[name] = streak
            if streak >= self.patience:
                self._warn(
                    "constant_accuracy",
                    step,
                    f"the accuracy reward {name} has been constant ({mean}) for {streak} logs: whatever the other "
                    "rewards do, the policy is not learning to be correct. Check that completions reach an answer "
                    "the verifier reads (a cold start that teaches the format, a longer max_completion_length) and "
                    "the answer column.",
                )
        reward_stds = {key: value for key, value in logs.items() if key.startswith("rewards/") and key.endswith("/std")}
        if reward_stds and all(value is not None and value == 0 for value in reward_stds.values()):
            self._warn(
                "constant_rewards",
                step,
                "every reward is constant over this log window: the policy cannot change its reward, so the loss "
                "is 0. Check the answer column, the answer extraction and the chat template.",
            )


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))
