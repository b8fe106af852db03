"""A curriculum from pass rates: difficulty buckets, and a sampler that favours what the policy still fails.

Kimi k1.5 samples problems in proportion to 1 - pass rate: solved problems give GRPO groups without
reward variance, so their draws are wasted. The pass rate of a problem changes while the policy trains,
so the sampler takes the training rewards back (`update`) and re-weights as it goes.

`CurriculumSampler` is a `torch.utils.data.Sampler` of dataset indices. Each draw picks `batch_size`
indices with replacement, index i with probability w_i / sum(w), where

    w_i = max(1 - p_i, floor)         # floor > 0: a solved problem is rarely drawn, never starved forever
    p_i = the row's pass rate, or `unknown_pass_rate` when it was never measured

and lays them out as TRL's `RepeatSampler` does, so that a GRPOTrainer subclass can swap it in:

    for each draw of `batch_size` indices:            # one generation batch of distinct groups
        repeat `repeat_count` times:                  # TRL: num_iterations * steps_per_generation
            for each index: yield it `mini_repeat_count` times   # TRL: num_generations (one group)

recipes/stages/grpo/trainer.py is that subclass (`sampler: pass_rate_weighted` in a recipes/grpo.py config):
it returns this sampler from `_get_train_sampler` and, after each generation, calls `update` with the ids
and accuracy rewards of every process's rows.

Every process must see the same updates (the gathered ids and rewards) so that all of them draw
the same indices: accelerate gives each process its slice of one shared sequence. Updates act on the
draws after them; the DataLoader may already hold a prefetched batch, which is drawn with older weights.

Online estimate, per problem, from each `update` (all of a problem's samples in one update count as one
observation, their mean, so a group of 16 weighs no more than one of 4 per step):
- `estimator="ema"`: p <- (1 - alpha) p + alpha * mean   (tracks a policy that improves; default)
- `estimator="mean"`: the running mean of all observations, the offline pass rate counting as
  `prior_weight` observations (a stationary estimate, for a frozen policy or a diagnosis).
A problem without any estimate takes its first observed mean as is.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Sampler

from tasks.rows import set_column

logger = logging.getLogger(__name__)

DEFAULT_EDGES = (1 / 3, 2 / 3)
DEFAULT_LABELS = ("hard", "medium", "easy")
ESTIMATORS = ("ema", "mean")


def difficulty_bucket(
    pass_rate: float | None, edges: Sequence[float] = DEFAULT_EDGES, labels: Sequence[str] = DEFAULT_LABELS
) -> str:
    """'unsolved' (p = 0), 'solved' (p = 1), 'unknown' (no pass rate), else `labels[k]` for the k-th band
    between `edges` (a pass rate equal to an edge falls in the band above it)."""
    if len(labels) != len(edges) + 1:
        raise ValueError(f"{len(edges)} edges need {len(edges) + 1} labels, got {len(labels)}: {list(labels)}")
    if list(edges) != sorted(edges) or any(not 0 < edge < 1 for edge in edges):
        raise ValueError(f"edges must be increasing and inside (0, 1), got {list(edges)}")
    if pass_rate is None or (isinstance(pass_rate, float) and math.isnan(pass_rate)):
        return "unknown"
    if pass_rate <= 0:
        return "unsolved"
    if pass_rate >= 1:
        return "solved"
    return labels[sum(1 for edge in edges if pass_rate >= edge)]


def add_difficulty_buckets(dataset, edges: Sequence[float] = DEFAULT_EDGES, labels: Sequence[str] = DEFAULT_LABELS):
    """The dataset with a `difficulty_bucket` column from its `pass_rate`, and the count per bucket."""
    if "pass_rate" not in dataset.column_names:
        raise ValueError("difficulty buckets need a pass_rate column: run the pass_rate step first")
    buckets = [difficulty_bucket(rate, edges, labels) for rate in dataset["pass_rate"]]
    order = ["unsolved", *labels, "solved", "unknown"]
    counts = {label: buckets.count(label) for label in order if label in buckets}
    return set_column(dataset, "difficulty_bucket", buckets, "string"), counts


class CurriculumSampler(Sampler[int]):
    """Dataset indices drawn with weight max(1 - p, floor), p updated online; laid out like TRL's RepeatSampler."""

    def __init__(
        self,
        pass_rates: Sequence[float | None],
        ids: Sequence[str] | None = None,
        num_samples: int | None = None,
        batch_size: int = 1,
        mini_repeat_count: int = 1,
        repeat_count: int = 1,
        floor: float = 0.05,
        unknown_pass_rate: float = 0.5,
        estimator: str = "ema",
        ema_alpha: float = 0.3,
        prior_weight: float = 8.0,
        seed: int = 0,
    ):
        if not pass_rates:
            raise ValueError("CurriculumSampler needs at least one row")
        if ids is not None and len(ids) != len(pass_rates):
            raise ValueError(f"{len(ids)} ids for {len(pass_rates)} pass rates")
        if not 0 < floor <= 1:
            raise ValueError(f"floor must be in (0, 1], got {floor}: 0 would starve solved problems forever")
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
        if not 0 < ema_alpha <= 1:
            raise ValueError(f"ema_alpha must be in (0, 1], got {ema_alpha}")
        if min(batch_size, mini_repeat_count, repeat_count) < 1:
            raise ValueError("batch_size, mini_repeat_count and repeat_count must be >= 1")
        self.floor, self.unknown_pass_rate = floor, unknown_pass_rate
        self.estimator, self.ema_alpha, self.prior_weight = estimator, ema_alpha, prior_weight
        self.batch_size, self.mini_repeat_count, self.repeat_count = batch_size, mini_repeat_count, repeat_count
        self.num_samples = len(pass_rates) if num_samples is None else num_samples
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)
        self.pass_rates: list[float | None] = [_clean_rate(rate) for rate in pass_rates]
        self.counts = [  # running-mean state: (successes, observations), the offline rate as a prior
            (0.0, 0.0) if rate is None else (rate * prior_weight, prior_weight) for rate in self.pass_rates
        ]
        self.index_of: dict[str, list[int]] = defaultdict(list)
        for index, key in enumerate(ids if ids is not None else []):
            self.index_of[str(key)].append(index)

    @classmethod
    def from_dataset(cls, dataset, pass_rate_column: str = "pass_rate", id_column: str = "id", **options):
        """A sampler over a `datasets.Dataset` (rows without a pass-rate column all start unknown)."""
        columns = dataset.column_names
        rates = dataset[pass_rate_column] if pass_rate_column in columns else [None] * len(dataset)
        ids = dataset[id_column] if id_column in columns else None
        return cls(rates, ids=ids, **options)

    def weights(self) -> torch.Tensor:
        """The current sampling weights, one per row (not normalised)."""
        rates = [self.unknown_pass_rate if rate is None else rate for rate in self.pass_rates]
        return torch.tensor([max(1.0 - rate, self.floor) for rate in rates], dtype=torch.float64)

    def draw(self) -> list[int]:
        """`batch_size` indices, with replacement, with probability proportional to the current weights."""
        return torch.multinomial(self.weights(), self.batch_size, replacement=True, generator=self.generator).tolist()

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.num_samples // self.batch_size):
            chunk = self.draw()  # drawn lazily: updates made while training move the next draws
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def __len__(self) -> int:
        return (self.num_samples // self.batch_size) * self.batch_size * self.mini_repeat_count * self.repeat_count

    def update(self, keys: Sequence, outcomes: Sequence) -> None:
        """Fold training outcomes into the pass rates. `keys` are row ids (str) or dataset indices (int), one per
        sample; `outcomes` are correct flags or rewards in [0, 1] (clipped; None and NaN are skipped)."""
        if len(keys) != len(outcomes):
            raise ValueError(f"{len(keys)} keys for {len(outcomes)} outcomes")
        grouped: dict[int, list[float]] = defaultdict(list)
        for key, outcome in zip(keys, outcomes, strict=True):
            if outcome is None or (isinstance(outcome, float) and math.isnan(outcome)):
                continue
            for index in self._indices(key):
                grouped[index].append(min(1.0, max(0.0, float(outcome))))
        for index, values in grouped.items():
            mean = sum(values) / len(values)
            successes, observations = self.counts[index]
            self.counts[index] = (successes + mean, observations + 1)
            current = self.pass_rates[index]
            if current is None:
                self.pass_rates[index] = mean
            elif self.estimator == "ema":
                self.pass_rates[index] = (1 - self.ema_alpha) * current + self.ema_alpha * mean
            else:
                self.pass_rates[index] = self.counts[index][0] / self.counts[index][1]

    def _indices(self, key) -> list[int]:
        if key is None:
            raise KeyError("update: a key is None; give each sample's row id (the schema gives every row one) or index")
        if isinstance(key, str):
            if key not in self.index_of:
                raise KeyError(f"update: unknown row id {key!r}; build the sampler with the dataset's ids")
            return self.index_of[key]
        index = int(key)
        if not 0 <= index < len(self.pass_rates):
            raise IndexError(f"update: index {index} is outside the dataset (0..{len(self.pass_rates) - 1})")
        return [index]

    def state_dict(self) -> dict:
        """Everything needed to resume (the estimates and the random generator's state), in plain JSON types
        so that a trainer can write it beside its checkpoint with `json.dump`."""
        return {
            "pass_rates": list(self.pass_rates),
            "counts": [list(pair) for pair in self.counts],
            "generator": self.generator.get_state().tolist(),
        }

    def load_state_dict(self, state: dict) -> None:
        if len(state["pass_rates"]) != len(self.pass_rates):
            raise ValueError(f"state has {len(state['pass_rates'])} rows, this sampler {len(self.pass_rates)}")
        self.pass_rates = [_clean_rate(rate) for rate in state["pass_rates"]]
        self.counts = [(float(successes), float(total)) for successes, total in state["counts"]]
        self.generator.set_state(torch.tensor(state["generator"], dtype=torch.uint8))


def _clean_rate(rate) -> float | None:
    if rate is None or (isinstance(rate, float) and math.isnan(rate)):
        return None
    rate = float(rate)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"pass rates must be in [0, 1], got {rate}")
    return rate
