"""What a run's tool calls did, for its log: calls and failures counted, and timed, as they happen, and the turns
of each completion read from its tool mask.

TRL's loop (GRPOTrainer._tool_call_loop) counts a call as failed only when the tool raises; the built-in `python`
never raises (a timeout or a traceback is its reply), so `ToolCalls.instrument` wraps each tool, before the trainer
gets it, to count a call as failed when it raises or when its environment says its last call failed
(`last_call_failed`, eval/tools/python.py), and to time it inside a phase the caller gives (the GRPO trainer's
`timing_s/tools`). The metrics (`tool_metrics`): `tools/calls_per_completion`, `tools/failure_frac` (failed calls
over calls) and `tools/turns_mean` (the model's turns per completion: one more than the tool results in it).
Sampling with tools (eval/tools/trl_sampling.py) also reads each environment's own counts (`take_owner`: one
trajectory's) and sums an evaluation's sample records (`sample_tool_stats`: its summary's `tools`).

A batch's calls side by side (`ToolCalls.ahead_of`, around TRL's loop): before the first call of a turn, every
rollout whose last message is a turn TRL parsed and has not run hands its environment that turn's `tool_calls`
(`environment.prefetcher.prefetch_tool_calls`, eval/tools/python.py), which starts them; TRL's loop then makes each
call as before and gets the result started ahead. A call is timed from TRL's asking to its answer, so the `tools`
phase is the wall time TRL waited on tools, not the sum of the calls' own times.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

RESERVED_METHODS = ("reset", "get_reward")  # an environment's methods that TRL does not make tools of


class ToolCalls:
    """Counts and times the calls of one run's tools. `phase()`: a context manager each call runs inside (a step
    timer's phase; by default nothing). `take()` returns the counts since the last take."""

    def __init__(self):
        self.phase: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
        self._lock = threading.Lock()  # async tools run on TRL's event-loop thread
        self._calls = self._failures = 0
        self._by_owner: dict[int, list[int]] = {}  # per environment instance (one per trajectory): calls, failures
        self.owned_tool_names: set[str] = set()  # the environments' tool methods, by name
        self._ahead: _Lookahead | None = None  # inside `ahead_of`: TRL's turns and environments

    @contextlib.contextmanager
    def ahead_of(self, completions, environments):
        """Around TRL's tool loop (GRPOTrainer._tool_call_loop) on `completions` (per rollout, its messages as TRL
        parsed them; the loop appends to them) with `environments` (per rollout, or None): each turn's calls are
        started before TRL makes them, where an environment can (`prefetcher`); what is not taken is dropped after."""
        self._ahead = _Lookahead(completions, environments or [])
        try:
            yield
        finally:
            self._ahead = None
            for environment in environments or []:
                prefetcher = getattr(environment, "prefetcher", None)
                if prefetcher is not None:
                    prefetcher.finish()  # the trajectory's calls are made: its live interpreter ends too

    def take(self) -> tuple[int, int]:
        """(calls, failed calls) since the last take."""
        with self._lock:
            counts, self._calls, self._failures = (self._calls, self._failures), 0, 0
        return counts

    def take_owner(self, owner) -> tuple[int, int]:
        """(calls, failed calls) of environment `owner`'s tools since its last take ((0, 0) for None)."""
        with self._lock:
            calls, failures = self._by_owner.pop(id(owner), (0, 0)) if owner is not None else (0, 0)
        return calls, failures

    def _count(self, failed: bool, owner=None) -> None:
        with self._lock:
            self._calls += 1
            self._failures += int(failed)
            if owner is not None:
                tally = self._by_owner.setdefault(id(owner), [0, 0])
                tally[0] += 1
                tally[1] += int(failed)

    def wrap(self, tool: Callable, owner=None) -> Callable:
        """`tool` counted and timed; its name, docstring, signature and types (the schema the model sees) and its
        being async or not kept. A failure: it raised (re-raised, for TRL to report), or `owner` says its last call
        failed."""

        def failed_by_owner() -> bool:
            return bool(getattr(owner, "last_call_failed", False))

        if inspect.iscoroutinefunction(tool):

            @functools.wraps(tool)
            async def called_async(*args, **kwargs):
                try:
                    result = await tool(*args, **kwargs)
                except Exception:
                    self._count(True, owner)
                    raise
                self._count(failed_by_owner(), owner)
                return result

            return called_async

        @functools.wraps(tool)
        def called(*args, **kwargs):
            with self.phase():
                ahead = self._ahead
                if ahead is not None and owner is not None:
                    ahead.before_call(owner)
                try:
                    result = tool(*args, **kwargs)
                except Exception:
                    self._count(True, owner)
                    raise
            self._count(failed_by_owner(), owner)
            return result

        return called

    def instrument(self, tools=None, environment_factory=None) -> dict:
        """GRPOTrainer's `tools` and `environment_factory` (one factory or a dict of them) with every tool wrapped:
        the functions directly, an environment's tool methods on each instance its factory makes."""

        def factory_of(make):
            @functools.wraps(make, updated=())
            def made(*args, **kwargs):
                instance = make(*args, **kwargs)
                for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction):
                    if not name.startswith("_") and name not in RESERVED_METHODS:
                        setattr(instance, name, self.wrap(getattr(instance, name), owner=instance))
                        self.owned_tool_names.add(name)
                return instance

            return made

        if isinstance(environment_factory, dict):
            factories = {name: factory_of(make) for name, make in environment_factory.items()}
        else:
            factories = None if environment_factory is None else factory_of(environment_factory)
        return {"tools": [self.wrap(tool) for tool in tools or []], "environment_factory": factories}


class _Lookahead:
    """TRL's turns during its tool loop: before a call of an environment with nothing started ahead, each rollout's
    turn not yet seen (its last message, an assistant's with `tool_calls`) is handed to its environment."""

    def __init__(self, completions, environments):
        self.completions, self.environments = completions, environments
        self.seen: dict[int, dict] = {}  # id -> the turn (held, so that an id is not reused while the loop runs)

    def before_call(self, owner) -> None:
        prefetcher = getattr(owner, "prefetcher", None)
        if prefetcher is None or prefetcher.prefetched:
            return
        try:
            for messages, environment in zip(self.completions, self.environments, strict=False):
                turn = messages[-1] if messages else None
                if not isinstance(turn, dict) or turn.get("role") != "assistant" or not turn.get("tool_calls"):
                    continue
                if id(turn) in self.seen:
                    continue
                self.seen[id(turn)] = turn
                target = getattr(environment, "prefetcher", None)
                if target is not None:
                    target.prefetch_tool_calls(turn["tool_calls"])
        except Exception as error:  # noqa: BLE001 - the calls then run one by one, as TRL makes them
            logger.warning("tools: calls not started ahead: %s: %s", type(error).__name__, error)


def tool_turns(tool_mask) -> list[int]:
    """Per completion, the tool results in it: the runs of 0 in its tool mask (rows of 0/1: lists or a tensor)."""
    turns = []
    for row in tool_mask:
        values = [int(value) for value in row]
        turns.append(sum(1 for index, value in enumerate(values) if value == 0 and (index == 0 or values[index - 1])))
    return turns


def tool_metrics(calls: int, failures: int, completions: int, tool_results: int) -> dict[str, float]:
    """The log's tool figures over a batch: calls and turns per completion, the failed share of calls (0 with no
    call). `tool_results`: the tool results in the batch's completions (tool_turns summed)."""
    completions = max(completions, 1)
    return {
        "tools/calls_per_completion": calls / completions,
        "tools/failure_frac": failures / calls if calls else 0.0,
        "tools/turns_mean": 1.0 + tool_results / completions,
    }


def batch_tool_metrics(calls: ToolCalls, completions: int, tool_mask, gather, device) -> dict[str, float]:
    """tool_metrics of one generation batch, every process's counts summed (`gather`: accelerate's): the calls
    `calls` counted since its last take, this process's `completions` and their `tool_mask` (None: no tool result)."""
    import torch

    local = [*calls.take(), completions, sum(tool_turns(tool_mask or []))]
    totals = gather(torch.tensor(local, device=device)).view(-1, len(local)).sum(0).tolist()
    return tool_metrics(*totals)


def failed_calls(tool_messages: list[dict], owner_failures: int, owned_names) -> int:
    """A trajectory's failed calls: those its environment counted (`owner_failures`: raised, or said failed), and
    the tool messages TRL wrote as an error for a tool no environment owns (a plain tool that raised, an unknown
    tool's name, an unsupported call type)."""
    unowned = [message for message in tool_messages if message.get("name") not in owned_names]
    return owner_failures + sum(1 for message in unowned if str(message.get("content", "")).startswith("{'error': "))


def sample_tool_stats(samples: list[dict]) -> dict[str, float] | None:
    """An evaluation's tool figures from its sample records (None when none was sampled with tools): calls and turns
    per completion, the failed share of calls, the share of completions that called a tool, and the share of the
    correct completions that called one."""
    with_tools = [sample for sample in samples if "tool_calls" in sample]
    if not with_tools:
        return None
    calls = sum(sample["tool_calls"] for sample in with_tools)
    correct = [sample for sample in with_tools if sample.get("correct")]
    return {
        "calls_per_completion": calls / len(with_tools),
        "failure_frac": sum(sample["tool_failures"] for sample in with_tools) / calls if calls else 0.0,
        "turns_mean": sum(sample["turns"] for sample in with_tools) / len(with_tools),
        "used_tool_frac": sum(sample["tool_calls"] > 0 for sample in with_tools) / len(with_tools),
        "correct_used_tool_frac": sum(s["tool_calls"] > 0 for s in correct) / len(correct) if correct else 0.0,
        "tool_tokens_mean": sum(sample["tool_tokens"] for sample in with_tools) / len(with_tools),
    }
