"""Sample from a model, verify, keep the correct completions: the data step of rejection sampling and distillation.

Both recipes turn a model's own completions into SFT data by one rule, written once here:

1. sample `n` completions per problem with eval's sampler (`eval.runner.sample_and_score`), so each
   completion is scored by its row's own verifier, the same one that reports pass@k;
2. keep a completion when the verifier says it is correct (`correct is True`; an unscorable row keeps
   nothing) and, by default, when it ended with EOS: a truncated completion teaches the model not to stop;
3. drop duplicates within a problem: completions equal after normalisation (case, spacing, LaTeX
   dressing, as data_filters.dedup compares questions) are one completion, the first one kept;
4. keep at most `m` per problem, chosen `shortest` first (fewest tokens, then fewest characters, then
   sampling order) or at `random` (a generator seeded by the run seed and the problem id, so a rerun
   keeps the same ones whatever the other problems).

STaR's rationalisation (Zelikman et al. 2022) reuses the same rule: problems the model did not solve are
sampled again with the gold answer given as a hint (`add_answer_hint`), and the verified rationales are
stored with the ORIGINAL prompt, so the model learns to reach the answer without being told it.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

from eval.runner import sample_and_score, summarize_by_difficulty
from eval.sampler import SamplingParams
from rewards.verdicts import verifier_of
from tasks.text import normalized_text

logger = logging.getLogger(__name__)

SELECTIONS = ("random", "shortest")
BACKENDS = ("auto", "transformers", "vllm")
DEFAULT_HINT = "\n\nHint: the answer is {answer}."


@dataclass
class TraceArguments:
    """How completions are sampled, which are kept, and how the result is evaluated."""

    samples_per_problem: int = field(default=8, metadata={"help": "Completions sampled per problem (n)."})
    max_per_problem: int = field(default=4, metadata={"help": "Kept completions per problem at most (m)."})
    selection: str = field(
        default="random",
        metadata={"help": "Which of a problem's correct, distinct completions to keep: 'random' or 'shortest'."},
    )
    require_stop: bool = field(
        default=True, metadata={"help": "Keep only completions that ended with EOS (not cut at the length limit)."}
    )
    sample_temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the traces."})
    sample_top_p: float = field(default=1.0, metadata={"help": "Nucleus sampling of the traces."})
    sample_max_new_tokens: int = field(
        default=SamplingParams.max_new_tokens, metadata={"help": "Length limit of a sampled completion."}
    )
    sampling_backend: str = field(
        default="transformers",
        metadata={"help": "'transformers', 'vllm' (GPU) or 'auto' (vLLM when it is installed and a GPU is present)."},
    )
    sampling_batch_size: int = field(default=64, metadata={"help": "Sequences per generate call (transformers)."})
    eval_dataset_name: str | None = field(
        default=None,
        metadata={"help": "Held-out problems to report pass@1 on; default: the training source's eval_split."},
    )
    eval_split: str = field(default="test", metadata={"help": "Split of the held-out problems."})
    eval_num_rows: int | None = field(
        default=None, metadata={"help": "Held-out rows (synthetic: per level; else the first N). None: all."}
    )
    eval_samples_per_problem: int = field(
        default=4, metadata={"help": "Samples per held-out problem for pass@1; 0 turns evaluation off."}
    )
    eval_temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the evaluation."})

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:  # DataArguments' checks, when a recipe's arguments combine the two
            parent()
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}, got {self.selection!r}")
        if self.sampling_backend not in BACKENDS:
            raise ValueError(f"sampling_backend must be one of {BACKENDS}, got {self.sampling_backend!r}")
        for name in ("samples_per_problem", "max_per_problem", "sample_max_new_tokens", "sampling_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.eval_samples_per_problem < 0:
            raise ValueError(f"eval_samples_per_problem must be >= 0, got {self.eval_samples_per_problem}")

    def sampling_params(self, seed: int) -> SamplingParams:
        return SamplingParams(
            n=self.samples_per_problem,
            temperature=self.sample_temperature,
            top_p=self.sample_top_p,
            max_new_tokens=self.sample_max_new_tokens,
            seed=seed,
        )


# ---------------------------------------------------------------- the keep rule


def completion_key(text: str) -> str:
    """Two completions with the same key are duplicates (case, whitespace and LaTeX spacing do not count)."""
    return normalized_text(text)


def select_samples(
    samples: list[dict],
    max_per_problem: int,
    selection: str = "random",
    seed: int | str = 0,
    problem_id: str = "",
    require_correct: bool = True,
    require_stop: bool = True,
) -> list[dict]:
    """The samples of one problem that become training data, in sampling order (see the module docstring).

    `samples` are eval.runner's dicts (`text`, `correct`, `num_tokens`, `finish_reason`).
    """
    if max_per_problem < 1:
        raise ValueError(f"max_per_problem must be >= 1, got {max_per_problem}")
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    seen: set[str] = set()
    unique: list[tuple[int, dict]] = []
    for index, sample in enumerate(samples):
        if require_correct and sample.get("correct") is not True:
            continue
        if require_stop and sample.get("finish_reason") != "stop":
            continue
        text = sample.get("text")
        if not isinstance(text, str) or not text.strip():
            continue
        key = completion_key(text)
        if key in seen:
            continue
        seen.add(key)
        unique.append((index, sample))
    if selection == "shortest":
        chosen = sorted(unique, key=lambda item: (item[1].get("num_tokens", 0), len(item[1]["text"]), item[0]))
        chosen = chosen[:max_per_problem]
    else:
        rng = random.Random(f"{seed}:{problem_id}")
        chosen = rng.sample(unique, min(max_per_problem, len(unique)))
    return [sample for _, sample in sorted(chosen, key=lambda item: item[0])]


def add_answer_hint(prompt: list[dict], answer: str, template: str = DEFAULT_HINT) -> list[dict]:
    """A copy of `prompt` whose last user message ends with the gold answer as a hint (STaR's rationalisation)."""
    if "{answer}" not in template:
        raise ValueError(f"hint_template must contain '{{answer}}', got {template!r}")
    hint = template.replace("{answer}", str(answer))  # replace, not format: answers hold LaTeX braces
    messages = [dict(message) for message in prompt]
    for message in reversed(messages):
        if message.get("role") == "user":
            message["content"] = f"{message['content']}{hint}"
            return messages
    raise ValueError("the prompt has no user message to add the hint to")


def mentions_hint(text: str, answer: str, template: str = DEFAULT_HINT) -> bool:
    """True when a rationale quotes the hint: it would teach the model to cite a hint it will not be given."""
    hint = template.replace("{answer}", str(answer)).strip()
    return bool(hint) and completion_key(hint) in completion_key(text)


# ---------------------------------------------------------------- sampling


def _training_row(row: dict, sample: dict, rationalized: bool) -> dict:
    return {
        "id": row["id"],
        "prompt": row["prompt"],  # always the original prompt: a rationalised sample is stored without its hint
        "solution": sample["text"],
        "answer": row.get("answer"),
        "verifier": verifier_of(row),
        "difficulty": row.get("difficulty"),
        "num_tokens": sample.get("num_tokens"),
        "correct": sample.get("correct"),
        "rationalized": rationalized,
    }


def collect_traces(
    sampler,
    rows: list[dict],
    args: TraceArguments,
    seed: int,
    require_correct: bool = True,
    hint_template: str | None = None,
    progress: bool = True,
) -> tuple[list[dict], list]:
    """Sample every row, keep by the rule above; returns `(kept training rows, eval.runner results)`.

    With `hint_template`, each row is sampled with its gold answer as a hint, and kept samples are
    rationalisations: they must be verified and must not quote the hint; they carry the original prompt.
    """
    rows = list(rows)
    sampled_rows = rows
    if hint_template is not None:
        sampled_rows = [
            {**row, "id": f"{row['id']}#hint", "prompt": add_answer_hint(row["prompt"], row["answer"], hint_template)}
            for row in rows
        ]
    results = sample_and_score(sampler, sampled_rows, args.sampling_params(seed), progress=progress)
    kept = []
    for row, result in zip(rows, results, strict=True):
        samples = result.samples
        if hint_template is not None:
            samples = [s for s in samples if not mentions_hint(s["text"], row["answer"], hint_template)]
        chosen = select_samples(
            samples,
            args.max_per_problem,
            args.selection,
            seed=seed,
            problem_id=row["id"],
            require_correct=require_correct or hint_template is not None,
            require_stop=args.require_stop,
        )
        kept += [_training_row(row, sample, rationalized=hint_template is not None) for sample in chosen]
    return kept, results


def solved_ids(results) -> set[str]:
    """Ids of problems with at least one verified completion."""
    return {result.id for result in results if result.num_correct > 0}


def evaluate_pass_at_1(sampler, rows: list[dict], args: TraceArguments, seed: int, n: int | None = None) -> dict | None:
    """Mean pass@1 over held-out rows (`n`, default `eval_samples_per_problem`, samples each), overall and by level."""
    if not rows or args.eval_samples_per_problem == 0:
        return None
    params = replace(
        args.sampling_params(seed), n=n or args.eval_samples_per_problem, temperature=args.eval_temperature, top_p=1.0
    )  # the traces' protocol, at the evaluation's temperature
    results = sample_and_score(sampler, rows, params, progress=False)
    by_level = summarize_by_difficulty(results)
    return {
        "pass@1": sum(result.pass_at(1) for result in results) / len(results),
        "problems": len(results),
        "samples_per_problem": params.n,
        "by_level": {str(level): round(values["pass@1"], 4) for level, values in by_level.items()},
    }


def make_trace_sampler(args: TraceArguments, model_path: str | Path):
    from eval.sampler import make_sampler

    return make_sampler(args.sampling_backend, str(model_path), batch_size=args.sampling_batch_size)


def evaluate_model(args: TraceArguments, model_path: str | Path, rows: list[dict], seed: int, n: int | None = None):
    """`evaluate_pass_at_1` of the model in `model_path`, loaded for it and freed after (None when evaluation is off)."""
    if not rows or args.eval_samples_per_problem == 0:
        return None
    sampler = make_trace_sampler(args, model_path)
    try:
        return evaluate_pass_at_1(sampler, rows, args, seed, n)
    finally:
        sampler.close()


# ---------------------------------------------------------------- data in and out


def load_eval_rows(args) -> list[dict]:
    """Held-out rows: `eval_dataset_name` (all of its `eval_split`), else the training source's `eval_split`."""
    from tasks.schema import load_rows

    if args.eval_samples_per_problem == 0:
        return []
    name = args.eval_dataset_name or args.dataset_name
    if not args.eval_dataset_name and Path(name).expanduser().exists():
        logger.warning(
            "no eval_dataset_name: pass@1 is measured on %s itself (a local source has no held-out split); "
            "set eval_dataset_name to held-out problems",
            name,
        )
    source = replace(args, dataset_name=name, dataset_num_rows=args.eval_num_rows, dataset_split=args.eval_split)
    return list(load_rows(source))


def to_conversations(kept: list[dict], source: str):
    """Kept rows as SFTTrainer's conversational dataset."""
    from datasets import Dataset

    from recipes.common.data import to_sft_conversations

    dataset = Dataset.from_list(
        [{"id": row["id"], "prompt": row["prompt"], "solution": row["solution"]} for row in kept]
    )
    return to_sft_conversations(dataset, source)
