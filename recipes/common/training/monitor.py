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
  wrong, but the policy is then trained on length or format alone (a model that never boxes its answer);
* slow rewards: the rewards took more than half of a step (`timing_s/rewards` of `timing_s/step`), with the
  slowest reward's last call;
* reward hacking: with gold rewards (rule rewards computed on the same completions, left out of the loss:
  `gold/<name>` beside the training reward `proxy/reward`), the training reward rose while a gold reward
  fell over the last `patience` + 1 logs. Both changes are read from least-squares lines through the window,
  so one noisy log neither fires nor hides it; the gold's fall must reach `hacking_margin`. A learned reward
  (a reward model, an LLM judge) is the usual cause: the policy has moved to where the reward model is wrong
  (Gao et al. 2023). With `stop_on_hacking` the callback also stops the run; `hacking` then says where the
  divergence began, and recipes/grpo.py saves the last checkpoint from before it.

Every numeric key TRL logs lands in metrics.jsonl, among them the step's time split, token counts and
FLOP/s (`timing_s/*`, `tokens/*`, `perf/*`: recipes.stages.grpo.step_timing). Warnings go to the log and into the
run card; metrics.jsonl is written whatever `report_to` says. SFT runs
(recipes.common.training.sft_step) write their metrics.jsonl through this callback too, so that every run can be
plotted without a checkpoint; the checks read GRPO's metrics only and stay silent there.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from transformers import TrainerCallback

from basics.atomic_files import write_atomic
from basics.did_you_mean import did_you_mean
from recipes.common.checkpoints.folders import TRAINER_STATE, checkpoint_folders

logger = logging.getLogger(__name__)

SLOW_REWARDS_SHARE = 0.5  # a warning when the rewards take more of a step than this


class RLVRMonitor(TrainerCallback):
    def __init__(
        self,
        output_dir: str | Path,
        std_threshold: float = 0.05,
        patience: int = 3,
        accuracy_rewards: list[str] | tuple = (),
        gold_rewards: list[str] | tuple = (),
        hacking_margin: float = 0.05,
        stop_on_hacking: bool = False,
        reward_functions: list | tuple = (),
    ):
        self.path = Path(output_dir) / "metrics.jsonl"
        self.reward_functions = list(reward_functions)  # guarded (rewards.guard): each keeps its last call's time
        self.std_threshold = std_threshold
        self.patience = patience
        self.accuracy_rewards = list(accuracy_rewards)
        self.constant_accuracy_streak = {name: 0 for name in self.accuracy_rewards}
        self.low_std_streak = 0
        self.gold_rewards = list(gold_rewards)
        self.hacking_margin = hacking_margin
        self.stop_on_hacking = stop_on_hacking
        self.history: list[dict] = []  # (step, proxy, gold/<name>...) of each log that has them
        self.hacking: dict | None = None  # the first suspected divergence: where it began, where it was seen
        self.warnings: list[dict] = []
        self._warned = set()
        self._last: tuple[dict, int] | None = None  # the last record written, and its line's length in bytes

    def _warn(self, kind: str, step: int, message: str) -> None:
        self.warnings.append({"step": step, "kind": kind, "message": message})
        if kind not in self._warned:  # the log says it once; the run card keeps every occurrence
            self._warned.add(kind)
            logger.warning("step %d: %s", step, message)

    def on_train_begin(self, args, state, control, **kwargs):
        """metrics.jsonl holds one run (issue 40). A resumed run (the Trainer has loaded the checkpoint's state:
        `global_step` > 0) keeps the lines up to the checkpoint's step and drops those logged after it, which
        it is about to log again; a run that starts afresh moves an earlier run's file aside."""
        if not state.is_world_process_zero or not self.path.is_file():
            return
        if state.global_step > 0:
            kept = [line for line in self.path.read_text().splitlines() if _step_of(line) <= state.global_step]
            write_atomic(self.path, "".join(line + "\n" for line in kept))
            if kept and _step_of(kept[-1]) == state.global_step:  # the checkpoint's own step: merged into, not
                self._last = (json.loads(kept[-1]), len(kept[-1].encode()) + 1)  # written again
            return
        aside = self.path.with_name(f"metrics.previous-{self.path.stat().st_mtime_ns}.jsonl")
        self.path.replace(aside)
        logger.info("%s is an earlier run's: moved aside to %s", self.path, aside.name)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return
        step = state.global_step
        if self.gold_rewards:  # on every process: each must stop at the same step (the logged means are gathered)
            self._watch_gold(step, logs, control, state.is_world_process_zero)
        if not state.is_world_process_zero:
            return
        record = {"step": step, **{key: value for key, value in logs.items() if _is_number(value)}}
        self._write(record)
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
        rewards_s, step_s = logs.get("timing_s/rewards"), logs.get("timing_s/step")
        if _is_number(rewards_s) and _is_number(step_s) and step_s > 0 and rewards_s > SLOW_REWARDS_SHARE * step_s:
            calls = {getattr(f, "__name__", "?"): getattr(f, "last_call_s", 0.0) for f in self.reward_functions}
            slowest = max(calls, key=calls.get) if calls else None
            self._warn(
                "slow_rewards",
                step,
                f"the rewards took {rewards_s:.1f} of the step's {step_s:.1f} s ({rewards_s / step_s:.0%})"
                + (f"; the slowest, {slowest}, took {calls[slowest]:.1f} s on its last call" if slowest else "")
                + ". A reward that waits (a model, a server, a sandbox) holds every step: batch it, cache it, or "
                "give it more workers.",
            )
        reward_stds = {key: value for key, value in logs.items() if key.startswith("rewards/") and key.endswith("/std")}
        if reward_stds and all(value is not None and value == 0 for value in reward_stds.values()):
            self._warn(
                "constant_rewards",
                step,
                "every reward is constant over this log window: the policy cannot change its reward, so the loss "
                "is 0. Check the answer column, the answer extraction and the chat template.",
            )

    def _write(self, record: dict) -> None:
        """Append `record`, one line a step: a second log at the step of the last line (the Trainer's end-of-run
        summary, a held-out evaluation at a logged step) is merged into that line, its keys added, so that
        metrics.jsonl never holds a step twice (issue 57: a finished run's file read ..., 40, 40)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as handle:
            if self._last is not None and self._last[0]["step"] == record["step"] and handle.tell() >= self._last[1]:
                handle.truncate(handle.tell() - self._last[1])  # drop the last line, written again merged below
                record = {**self._last[0], **record}
            line = (json.dumps(record) + "\n").encode()
            handle.write(line)
        self._last = (record, len(line))

    def _watch_gold(self, step: int, logs: dict, control, main: bool = True) -> None:
        """The reward-hacking check (see the module docstring) on this log and the `patience` before it."""
        proxy = logs.get("proxy/reward", logs.get("reward"))
        golds = {name: logs.get(f"gold/{name}") for name in self.gold_rewards}
        if not _is_number(proxy) or not all(_is_number(value) for value in golds.values()):
            return
        self.history.append({"step": step, "proxy": proxy, **golds})
        window = self.history[-(self.patience + 1) :]
        if len(window) < max(3, self.patience + 1):
            return
        steps = [point["step"] for point in window]
        proxy_change = fitted_change(steps, [point["proxy"] for point in window])
        for name in self.gold_rewards:
            gold_change = fitted_change(steps, [point[name] for point in window])
            if proxy_change > 0 and gold_change <= -self.hacking_margin:
                first, last = window[0], window[-1]
                message = (
                    f"reward hacking suspected: from step {first['step']} to step {last['step']} the training reward "
                    f"rose {first['proxy']:.3f} -> {last['proxy']:.3f} (fitted {proxy_change:+.3f}) while the gold "
                    f"reward {name} fell {first[name]:.3f} -> {last[name]:.3f} (fitted {gold_change:+.3f}, margin "
                    f"{self.hacking_margin}). The policy is exploiting the training reward; look at its completions, "
                    "add a format gate, a KL term or an ensemble, or stop at a checkpoint from before step "
                    f"{first['step']}."
                )
                if main:
                    self._warn("reward_hacking", step, message)
                if self.hacking is None:
                    self.hacking = {
                        "diverged_from": first["step"], "seen_at": step, "gold_reward": name,
                        "proxy_change": proxy_change, "gold_change": gold_change,
                    }  # fmt: skip
                if self.stop_on_hacking:
                    control.should_training_stop = True
                    if main:
                        logger.warning("stop_on_reward_hacking: stopping at step %d", step)
                return


def fitted_change(xs: list[float], ys: list[float]) -> float:
    """How much the least-squares line through (xs, ys) rises from the first x to the last (0 if all xs agree)."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return 0.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return slope * (xs[-1] - xs[0])


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


# What the Trainer logs once, at the end of a run (merged into the last step's line of metrics.jsonl; a file
# written before that merge has it as a line of its own, holding these, the step and the epoch)
RUN_SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss")


def without_run_summary(record: dict) -> dict | None:
    """A metrics.jsonl record with the end-of-run summary taken out, or None where nothing of a step is left."""
    kept = {key: value for key, value in record.items() if key not in RUN_SUMMARY_KEYS}
    return kept if set(kept) - {"step", "epoch"} else None


def _step_of(line: str) -> float:
    """The step of one metrics.jsonl line; a line that cannot be read counts as past any step (it is dropped)."""
    try:
        return float(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return math.inf


# Reading a run's records back (recipes/plot_curves.py): metrics.jsonl as this monitor writes it, else the
# log_history of trainer_state.json (a run made by another tool or an older version).


def read_records(run: Path) -> list[dict]:
    """A run's logged records, each with its `step`: metrics.jsonl, else trainer_state.json's log_history."""
    metrics = run / "metrics.jsonl"
    if metrics.is_file():
        records = []
        for number, line in enumerate(metrics.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError:
                logger.warning("%s: line %d is not JSON (a run killed mid-write?), skipped", metrics, number)
        return records
    states = [run / TRAINER_STATE] + [folder / TRAINER_STATE for folder in checkpoint_folders(run)]
    existing = [state for state in states if state.is_file()]
    if not existing:
        raise FileNotFoundError(
            f"{run} holds neither metrics.jsonl nor a trainer_state.json: is it a training run's output_dir?"
        )
    return json.loads(existing[-1].read_text()).get("log_history", [])


def logged_metrics(records: dict[str, list[dict]]) -> set[str]:
    """The metric names with a number in some step's record of some run: what `curves` can draw."""
    return {
        key
        for run_records in records.values()
        for record in run_records
        if "step" in record
        for key, value in record.items()
        if key != "step" and isinstance(value, int | float)
    }


def check_metrics(metrics: list[str], logged: set[str], runs: list[Path]) -> None:
    """Fail, in one line, on a name that no run logged: a typo would otherwise drop its panel silently."""
    for metric in metrics:
        if metric in logged:
            continue
        hint = did_you_mean([metric], sorted(logged), cutoff=0.6, quote=True)
        hint = f"; {hint}" if hint else ""
        raise ValueError(
            f"no run logged the metric {metric!r}{hint} ({', '.join(map(str, runs))} logged: "
            f"{', '.join(sorted(logged)) or 'nothing'})"
        )


def curves(records: list[dict], metric: str) -> list[tuple[float, float]]:
    return [
        (record["step"], record[metric])
        for record in records
        if "step" in record and isinstance(record.get(metric), int | float)
    ]
