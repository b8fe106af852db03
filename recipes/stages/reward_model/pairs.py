"""The outcome reward model (ORM) of recipes/reward_model.py: its options, its preference pairs, its metrics.

Pairs. A problem's samples are split by the row's verifier into correct (`correct is True`) and wrong
(`correct is False`); an unscorable sample (`correct is None`) is neither. With `require_stop` (the default)
a completion cut at the length limit is dropped as well, from the pairs and from the agreement evaluation:
its text ends mid-sentence, and a truncated "wrong" one would teach the ORM to judge length (which the
`overlong` reward already punishes), a truncated "correct" one to reward an answer that never ends. Within
each side, completions equal after normalisation (recipes.common.traces.completion_key) count once. A pair
is (chosen = a correct completion, rejected = a wrong completion of the SAME prompt); a problem with only
correct or only wrong samples gives none. At most `max_pairs_per_problem` pairs per problem are drawn at
random by a generator seeded by (seed, problem id), so a rerun draws the same pairs whatever the other
problems; each completion is used in as few pairs as the cap allows (every completion once before any twice).

Threshold. The ORM's verdict on a sample is `score > threshold`, the threshold set on the TRAINING pairs'
distinct completions (chosen ones labelled correct, rejected ones wrong): `accuracy` (default) is the cut that
classifies them best, the lowest such cut, placed midway between two neighbouring scores; `midpoint` is the
mean of the mean chosen score and the mean rejected score.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from eval.sampling_options import SamplingOptions
from recipes.common.model.loading import DemoModelArguments
from recipes.common.traces import completion_key
from tasks.data_arguments import DataArguments

THRESHOLDS = ("accuracy", "midpoint")


class NoPairsError(ValueError):
    """No training problem had both a correct and a wrong sample: nothing to train the ORM on."""

    def __init__(self, stats: dict):
        super().__init__(
            f"no preference pairs: of {stats.get('problems', 0)} problems, {stats.get('only_correct', 0)} had only "
            f"correct samples, {stats.get('only_wrong', 0)} only wrong ones and {stats.get('neither', 0)} no usable "
            "one (truncated or unscorable); sample more per problem (sampling: {n: ...}), pick problems the policy "
            "solves only sometimes, or raise sampling's max_new_tokens if most samples were cut"
        )


@dataclass
class RewardModelArguments(DemoModelArguments, DataArguments):
    """recipes/reward_model.py: the policy's samples, the pairs, the ORM's base, the held-out evaluation."""

    sampling: dict | str | None = field(
        default=None,
        metadata={
            "help": "How the policy is sampled (eval.sampling_options.SamplingOptions): {n, temperature, top_p, top_k, "
            "max_new_tokens, seed, backend, batch_size}; n >= 2 (a pair needs two samples)."
        },
    )
    max_pairs_per_problem: int = field(default=4, metadata={"help": "Preference pairs per problem at most."})
    require_stop: bool = field(
        default=True,
        metadata={"help": "Pair and evaluate only completions that ended with EOS (a truncated one is dropped)."},
    )
    reward_base: str | None = field(
        default=None,
        metadata={"help": "Model the ORM is initialised from (a new 1-output head on it); default: the policy."},
    )
    merge_lora: bool = field(
        default=True,
        metadata={
            "help": "With use_peft: save the ORM with its LoRA merged (a plain model folder); false: the SEQ_CLS "
            "adapter alone (its score head included), which the reward_model reward also loads."
        },
    )
    eval_dataset_name: str | None = field(
        default=None, metadata={"help": "Held-out problems; default: the training source's eval_split."}
    )
    eval_split: str = field(default="test", metadata={"help": "Split of the held-out problems."})
    eval_num_rows: int | None = field(
        default=None, metadata={"help": "Held-out rows (synthetic: per level; else the first N); 0: no evaluation."}
    )
    agreement_samples_per_problem: int = field(
        default=4,
        metadata={"help": "Fresh samples per held-out problem for verifier agreement and AUC; 0: skip them."},
    )
    threshold: str = field(
        default="accuracy",
        metadata={"help": "How the verdict threshold is set on the training pairs.", "choices": THRESHOLDS},
    )
    scoring_batch_size: int = field(default=16, metadata={"help": "Sequences per forward pass when scoring."})

    def __post_init__(self) -> None:
        super().__post_init__()
        self.sampling = SamplingOptions.from_mapping(self.sampling, "sampling")
        if self.sampling.n < 2:
            raise ValueError(f"sampling: n must be >= 2 (a pair needs two samples), got {self.sampling.n}")
        for name in ("max_pairs_per_problem", "scoring_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("agreement_samples_per_problem", "eval_num_rows"):
            if (getattr(self, name) or 0) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.threshold not in THRESHOLDS:
            raise ValueError(f"threshold must be one of {THRESHOLDS}, got {self.threshold!r}")


# ---------------------------------------------------------------- pairs


def labelled(samples: list[dict], require_stop: bool = True) -> tuple[list[dict], list[dict]]:
    """(correct, wrong): a problem's distinct, scorable completions by verdict (see the module docstring)."""
    sides: dict[bool, list[dict]] = {True: [], False: []}
    seen: set[tuple[bool, str]] = set()
    for sample in samples:
        verdict, text = sample.get("correct"), sample.get("text")
        if verdict not in (True, False) or not isinstance(text, str) or not text.strip():
            continue
        if require_stop and sample.get("finish_reason") != "stop":
            continue
        key = (verdict, completion_key(text))
        if key not in seen:
            seen.add(key)
            sides[verdict].append(sample)
    return sides[True], sides[False]


def build_pairs(row: dict, samples: list[dict], max_pairs: int, seed: int | str = 0, require_stop: bool = True):
    """The preference pairs of one problem: `{id, prompt, chosen, rejected, difficulty}`, chosen correct."""
    if max_pairs < 1:
        raise ValueError(f"max_pairs must be >= 1, got {max_pairs}")
    correct, wrong = labelled(samples, require_stop)
    combos = [(i, j) for i in range(len(correct)) for j in range(len(wrong))]
    random.Random(f"{seed}:{row['id']}").shuffle(combos)
    picked: dict[tuple[int, int], None] = {}  # in the order picked
    uses_correct, uses_wrong = [0] * len(correct), [0] * len(wrong)
    limit, bound = min(max_pairs, len(combos)), 1
    while len(picked) < limit:  # every completion once before any twice, then twice before thrice, ...
        for i, j in combos:
            if len(picked) < limit and (i, j) not in picked and max(uses_correct[i], uses_wrong[j]) < bound:
                picked[i, j] = None
                uses_correct[i] += 1
                uses_wrong[j] += 1
        bound += 1
    return [
        {
            "id": row["id"],
            "prompt": row["prompt"],
            "chosen": correct[i]["text"],
            "rejected": wrong[j]["text"],
            "difficulty": row.get("difficulty"),
        }
        for i, j in sorted(picked)
    ]


def pairs_of(rows: list[dict], results: list, max_pairs: int, seed: int, require_stop: bool = True):
    """Every problem's pairs (eval.runner results in row order); returns `(pairs, stats)`."""
    pairs, stats = [], {"problems": len(rows), "with_pairs": 0, "only_correct": 0, "only_wrong": 0, "neither": 0}
    for row, result in zip(rows, results, strict=True):
        correct, wrong = labelled(result.samples, require_stop)
        if correct and wrong:
            stats["with_pairs"] += 1
            pairs += build_pairs(row, result.samples, max_pairs, seed, require_stop)
        else:
            stats["only_correct" if correct else "only_wrong" if wrong else "neither"] += 1
    samples = [sample for result in results for sample in result.samples]
    stats.update(
        pairs=len(pairs),
        samples=len(samples),
        correct=sum(sample.get("correct") is True for sample in samples),
        truncated=sum(sample.get("finish_reason") != "stop" for sample in samples),
    )
    return pairs, stats


def plain_prompt(prompt) -> str:
    """A prompt as plain text for a model without a chat template: its messages' contents, joined (as the
    `reward_model` reward's scorer writes it)."""
    if isinstance(prompt, str):
        return prompt
    return "".join(message.get("content") or "" for message in prompt)


def to_preference_dataset(pairs: list[dict], conversational: bool = True):
    """The pairs as TRL's preference dataset, written as the `reward_model` reward's scorer writes what it scores:
    the prompt's messages with each answer as the assistant's turn; without a chat template, plain text."""
    from datasets import Dataset

    def turn(text: str) -> list[dict] | str:
        return [{"role": "assistant", "content": text}] if conversational else text

    return Dataset.from_list(
        [
            {
                "prompt": pair["prompt"] if conversational else plain_prompt(pair["prompt"]),
                "chosen": turn(pair["chosen"]),
                "rejected": turn(pair["rejected"]),
            }
            for pair in pairs
        ]
    )


# ---------------------------------------------------------------- metrics


def pairwise_accuracy(chosen: list[float], rejected: list[float]) -> float | None:
    """Share of pairs whose chosen completion scores strictly above the rejected one (a tie is a miss)."""
    if len(chosen) != len(rejected):
        raise ValueError(f"{len(chosen)} chosen scores for {len(rejected)} rejected ones")
    return sum(c > r for c, r in zip(chosen, rejected, strict=True)) / len(chosen) if chosen else None


def choose_threshold(positive: list[float], negative: list[float], rule: str = "accuracy") -> float:
    """The verdict threshold (`score > threshold` means correct) from scores of correct and wrong completions."""
    if not positive or not negative:
        raise ValueError("a threshold needs scores of both correct and wrong completions")
    if rule == "midpoint":
        return (sum(positive) / len(positive) + sum(negative) / len(negative)) / 2
    if rule != "accuracy":
        raise ValueError(f"rule must be one of {THRESHOLDS}, got {rule!r}")
    scores = sorted({*positive, *negative})
    cuts = [scores[0] - 1.0] + [(a + b) / 2 for a, b in zip(scores, scores[1:], strict=False)] + [scores[-1]]
    by_score: dict[float, int] = {}  # wrong minus correct completions at each score
    for score in negative:
        by_score[score] = by_score.get(score, 0) + 1
    for score in positive:
        by_score[score] = by_score.get(score, 0) - 1
    right, best, best_cut = len(positive), len(positive), cuts[0]  # below every score: all judged correct
    for score, cut in zip(scores, cuts[1:], strict=True):  # raising the cut past `score` flips its completions
        right += by_score[score]
        if right > best:
            best, best_cut = right, cut
    return best_cut


def roc_auc(scores: list[float], labels: list[bool]) -> float | None:
    """P(score of a correct sample > score of a wrong one), ties counted half; None without both kinds."""
    positives = sum(1 for label in labels if label)
    negatives = len(labels) - positives
    if not positives or not negatives:
        return None
    order = sorted(range(len(scores)), key=lambda k: scores[k])
    ranks, start = [0.0] * len(scores), 0
    while start < len(order):  # average ranks (1-based) over runs of tied scores
        end = start
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        for k in order[start : end + 1]:
            ranks[k] = (start + end) / 2 + 1
        start = end + 1
    rank_sum = sum(rank for rank, label in zip(ranks, labels, strict=True) if label)
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def agreement_metrics(scores: list[float], labels: list[bool], threshold: float) -> dict:
    """How the ORM's verdicts (`score > threshold`) agree with the verifier's labels on the same samples."""
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    if not scores:
        return {"samples": 0}
    verdicts = [score > threshold for score in scores]
    base_rate = sum(labels) / len(labels)

    def agreement_on(kind: bool) -> float | None:
        matches = [verdict == label for verdict, label in zip(verdicts, labels, strict=True) if label is kind]
        return sum(matches) / len(matches) if matches else None

    return {
        "samples": len(scores),
        "agreement": sum(v == label for v, label in zip(verdicts, labels, strict=True)) / len(scores),
        "auc": roc_auc(scores, labels),
        "base_rate": base_rate,  # the policy's accuracy on these samples, by the verifier
        "majority_agreement": max(base_rate, 1 - base_rate),  # always giving the majority verdict
        "orm_positive_rate": sum(verdicts) / len(verdicts),
        "agreement_on_correct": agreement_on(True),  # the ORM's recall of correct samples
        "agreement_on_wrong": agreement_on(False),
        "threshold": threshold,
    }
