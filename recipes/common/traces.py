"""Sample from a model, verify, keep the correct completions: the data step of rejection sampling and distillation.

Both recipes turn a model's own completions into SFT data by one rule, written once here:

1. sample `n` completions per problem with eval's sampler (`eval.runner.sample_and_score`), so each
   completion is scored by its row's own verifier, the same one that reports pass@k;
2. keep a completion when the verifier says it is correct (`correct is True`; an unscorable row keeps
   nothing) and, by default, when it ended with EOS: a truncated completion teaches the model not to stop;
3. drop duplicates within a problem: completions equal after normalisation (case, spacing, LaTeX
   dressing, as data_filters.dedup compares questions) are one completion, the first one kept;
4. keep at most `m` per problem, chosen `shortest` first (fewest tokens, then fewest characters, then
   sampling order), at `random` (a generator seeded by the run seed and the problem id, so a rerun
   keeps the same ones whatever the other problems) or `best` (the highest reward-model score first).

With `keep_reward_model` (a `reward_model` reward's options: rewards.learned), every sample is also scored by
that learned reward, and `keep_by` says what keeps it: the `verifier` (step 2, the default), the
`reward_model` alone (a score of at least `keep_min_score`: the rule for tasks no verifier can check), or
`both`. Best-of-n by a reward model is `selection: best` with `max_per_problem: 1`.

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

SELECTIONS = ("random", "shortest", "best")  # best: the highest keep_reward_model score first
KEEP_BY = ("verifier", "reward_model", "both")
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
    keep_reward_model: dict | None = field(
        default=None,
        metadata={
            "help": "A learned reward that scores every sample: the options of the `reward_model` reward, e.g. "
            "{path: artifacts/demo/reward_model, squash: sigmoid}; keep_by, keep_min_score and selection: best read it."
        },
    )
    keep_by: str = field(
        default="verifier",
        metadata={
            "help": "What keeps a sample: 'verifier' (verified correct), 'reward_model' (a keep_reward_model score of at "
            "least keep_min_score: tasks without a verifier) or 'both'."
        },
    )
    keep_min_score: float | None = field(
        default=None, metadata={"help": "The lowest keep_reward_model score a kept sample may have (None: no floor)."}
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
        if self.keep_by not in KEEP_BY:
            raise ValueError(f"keep_by must be one of {KEEP_BY}, got {self.keep_by!r}")
        needs_scores = [name for name, on in (("keep_by", self.keep_by != "verifier"), ("selection: best",
                        self.selection == "best"), ("keep_min_score", self.keep_min_score is not None)) if on]  # fmt: skip
        if needs_scores and not self.keep_reward_model:
            raise ValueError(
                f"{needs_scores[0]} reads a reward model's scores: set keep_reward_model, e.g. "
                "{path: artifacts/demo/reward_model}"
            )
        if self.keep_reward_model is not None:
            from rewards.registry import check_reward_specs

            if not isinstance(self.keep_reward_model, dict):
                raise ValueError(
                    f"keep_reward_model must be a mapping of reward_model options, got {self.keep_reward_model!r}"
                )
            check_reward_specs([{"name": "reward_model", **self.keep_reward_model}], "keep_reward_model")
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
    min_score: float | None = None,
) -> list[dict]:
    """The samples of one problem that become training data, in sampling order (see the module docstring).

    `samples` are eval.runner's dicts (`text`, `correct`, `num_tokens`, `finish_reason`, and `reward_score` when
    a reward model scored them: `min_score` and `selection: best` read it; an unscored sample fails both).
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
        score = sample.get("reward_score")
        if (min_score is not None or selection == "best") and score is None:
            continue
        if min_score is not None and score < min_score:
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
    elif selection == "best":
        chosen = sorted(unique, key=lambda item: (-item[1]["reward_score"], item[0]))[:max_per_problem]
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
        "reward_score": sample.get("reward_score"),  # keep_reward_model's score, when one scored the samples
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
    if args.keep_reward_model:
        score_with_reward_model(sampler, rows, results, args.keep_reward_model)
    by_verifier = args.keep_by != "reward_model"
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
            require_correct=(require_correct and by_verifier) or hint_template is not None,
            require_stop=args.require_stop,
            min_score=args.keep_min_score if args.keep_by != "verifier" else None,
        )
        kept += [_training_row(row, sample, rationalized=hint_template is not None) for sample in chosen]
    return kept, results


def score_with_reward_model(sampler, rows: list[dict], results, options: dict) -> None:
    """Score every sample of `results` with the `reward_model` reward built from `options` (rewards.learned),
    checked against the sampler's tokenizer; each sample dict gets `reward_score` (None where it could not be
    scored). The prompt scored is the row's own (a rationalisation's hint is not part of it)."""
    from rewards import build_rewards

    (reward,), _ = build_rewards([{"name": "reward_model", **options}], "keep_reward_model")
    device = getattr(getattr(sampler, "model", None), "device", None) or "cpu"
    reward.prepare(sampler.tokenizer, device)
    for row, result in zip(rows, results, strict=True):
        texts = [sample["text"] for sample in result.samples]
        scores = reward(
            [[{"role": "assistant", "content": text}] for text in texts], prompts=[row["prompt"]] * len(texts)
        )
        for sample, score in zip(result.samples, scores, strict=True):
            sample["reward_score"] = score


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
