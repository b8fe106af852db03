"""Learned rewards: `reward_model`, sequence-classification reward models (one or an ensemble: TRL RewardTrainer's
kind), and what rewards.learned.llm_judge's `llm_judge` (a causal LM asked whether the final answer equals the reference)
shares with it: checking and loading a model folder, a Hub id or a LoRA adapter folder.

Building either loads nothing (the config check builds every reward once); `fn.prepare(policy_tokenizer, device)`
checks the model folders (one-line RewardConfigError naming the path) and loads them. A reward call never raises.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from rewards.registry import RewardConfigError, register
from rewards.shaping.controls import readable_answer
from rewards.text import column, completion_text

logger = logging.getLogger(__name__)

# What a folder must be, by role: its adapter's task_type, or the ending of its architecture's name.
_ROLES = {
    "reward model": ("SEQ_CLS", ("ForSequenceClassification",), "a sequence classifier (*ForSequenceClassification)"),
    "judge": ("CAUSAL_LM", ("ForCausalLM", "LMHeadModel"), "a causal language model (*ForCausalLM)"),
}


def one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def checked_folder(path: str, revision: str | None, role: str) -> dict | None:
    """Check from its config alone that `path` loads and is a `role`: a one-line RewardConfigError naming the path
    otherwise. Returns the adapter_config of a (local) LoRA adapter folder, None for a model."""
    task, endings, wanted = _ROLES[role]
    folder = Path(path).expanduser()
    if (folder / "adapter_config.json").is_file() and not (folder / "config.json").is_file():
        adapter = json.loads((folder / "adapter_config.json").read_text())
        if adapter.get("task_type") != task:
            raise RewardConfigError(
                f"{role} {path!r} is a LoRA adapter of task_type {adapter.get('task_type')!r}, not {task!r}"
            )
        return adapter
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path, revision=revision)
    except Exception as error:
        raise RewardConfigError(
            f"{role} {path!r} is neither a local model folder nor a model the Hub gives ({one_line(error)})"
        ) from None
    names = getattr(config, "architectures", None) or []
    if not any(name.endswith(endings) for name in names):
        raise RewardConfigError(f"{role} {path!r} is {', '.join(names) or 'of no recorded architecture'}, not {wanted}")
    return None


def load_tokenizer(path: str, revision: str | None, adapter: dict | None):
    """The tokenizer saved with the model; for an adapter saved without one, its base model's."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, revision=revision)
    except Exception:
        if adapter is None:
            raise
        return AutoTokenizer.from_pretrained(adapter["base_model_name_or_path"], revision=adapter.get("revision"))


def load_model(auto_class, path: str, revision: str | None, adapter: dict | None):
    """A model folder or Hub id; or a LoRA adapter's base with the adapter merged in (faster to run)."""
    if adapter is None:
        return auto_class.from_pretrained(path, revision=revision, dtype="auto")
    from peft import PeftModel
    from safetensors import safe_open

    # A SEQ_CLS adapter's base is usually a causal LM, whose config (num_labels=2) would misshape the saved head.
    labels, weights = {}, Path(path).expanduser() / "adapter_model.safetensors"
    if adapter.get("task_type") == "SEQ_CLS" and weights.is_file():
        with safe_open(str(weights), "pt") as file:
            heads = [key for key in file.keys() if key.endswith(("score.weight", "classifier.weight"))]
            labels = {"num_labels": file.get_slice(heads[0]).get_shape()[0]} if heads else {}
    base_path, base_revision = adapter["base_model_name_or_path"], adapter.get("revision")
    base = auto_class.from_pretrained(base_path, revision=base_revision, dtype="auto", **labels)
    return PeftModel.from_pretrained(base, path, revision=revision).merge_and_unload()


def _tokenizer_difference(ours, policy) -> str | None:
    """Why two tokenizers differ (vocabulary, EOS id, pad id where both set one), or None."""
    if ours.get_vocab() != policy.get_vocab():
        return f"vocabularies differ: {len(ours.get_vocab())} vs the policy's {len(policy.get_vocab())} tokens"
    for special in ("eos", "pad"):
        mine, theirs = getattr(ours, f"{special}_token_id"), getattr(policy, f"{special}_token_id")
        if mine != theirs and (special == "eos" or None not in (mine, theirs)):
            return f"{special} id {mine} vs the policy's {theirs}"
    return None


def messages_of(prompt) -> list[dict]:
    """A prompt as chat messages with text content; a string (or anything else) is one user message."""
    if isinstance(prompt, (list, tuple)):
        return [
            {"role": str(m.get("role", "user")), "content": completion_text(m)} for m in prompt if isinstance(m, dict)
        ]
    return [{"role": "user", "content": prompt if isinstance(prompt, str) else ""}]


class SequenceScorer:
    """Scores (prompt, completion) pairs with one or more sequence-classification reward models. Over calling them:
    the text formatted as TRL's RewardTrainer trained on it, over-long inputs cut from the left, scores that do not
    depend on the batch (pad = EOS included: `_forward`). Loads on `load()` or first use."""

    def __init__(self, paths, device="cpu", batch_size=16, max_length=2048, revision=None, tokenizer=None):
        self.paths = [paths] if isinstance(paths, str) else list(paths)
        if not self.paths:
            raise ValueError("SequenceScorer needs at least one model path")
        self.device, self.batch_size, self.max_length, self.revision = device, batch_size, max_length, revision
        self._given_tokenizer, self._tokenizers, self.models = tokenizer, None, None

    def _adapters(self) -> list[dict | None]:
        return [checked_folder(path, self.revision, "reward model") for path in self.paths]

    @property
    def tokenizers(self) -> list:
        if self._tokenizers is None:
            given = self._given_tokenizer
            pairs = zip(self.paths, self._adapters(), strict=True)
            self._tokenizers = [given or load_tokenizer(path, self.revision, adapter) for path, adapter in pairs]
        return self._tokenizers

    def check(self, policy_tokenizer=None) -> None:
        """A one-line RewardConfigError naming the path of a model that is missing, not a sequence classifier or
        (given `policy_tokenizer`) tokenized differently from the policy. Reads configs and tokenizers only."""
        self._adapters()
        for path, tokenizer in zip(self.paths, self.tokenizers if policy_tokenizer is not None else [], strict=False):
            difference = _tokenizer_difference(tokenizer, policy_tokenizer)
            if difference:
                raise RewardConfigError(f"reward model {path!r} uses another tokenizer than the policy ({difference})")

    def load(self) -> SequenceScorer:
        if self.models is None:
            from transformers import AutoModelForSequenceClassification

            models = []
            for path, adapter, tokenizer in zip(self.paths, self._adapters(), self.tokenizers, strict=True):
                model = load_model(AutoModelForSequenceClassification, path, self.revision, adapter)
                if model.config.pad_token_id is None:  # else the library's forward refuses batches; never read
                    model.config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
                models.append(model.to(self.device).eval())
            self.models = models
        return self

    def format(self, prompt, completion, model: int = 0) -> str:
        """The text model number `model` scores: the prompt's chat template with the completion as an assistant
        turn; without a chat template, prompt + completion + EOS (TRL's RewardTrainer appends EOS to plain text)."""
        tokenizer = self.tokenizers[model]
        completion = completion if isinstance(completion, str) else completion_text(completion)
        messages = messages_of(prompt)
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(
                [*messages, {"role": "assistant", "content": completion}], tokenize=False
            )
        text, eos = "".join(message["content"] for message in messages) + completion, tokenizer.eos_token
        return text if not eos or text.endswith(eos) else text + eos

    def _encode(self, index: int, text: str) -> list[int]:
        """Token ids, cut from the left beyond max_length or the model's context: the prompt's start goes first."""
        tokenizer, config = self.tokenizers[index], self.models[index].config
        templated = bool(getattr(tokenizer, "chat_template", None))  # the template wrote its own special tokens
        ids = tokenizer(text, add_special_tokens=not templated, verbose=False)["input_ids"]
        ids = ids[-min(self.max_length, getattr(config, "max_position_embeddings", None) or self.max_length) :]
        return ids or [tokenizer.eos_token_id or 0]

    def _forward(self, model, batch: list[list[int]]) -> list[float]:
        """Label 0's logit at each sequence's last real token. Right padding keeps every token at its position alone
        and a causal model's tokens never see the pads after them: the numbers of one at a time (left padding moves
        positions, which changes models with absolute position embeddings). The library's pooling reads the last
        token that is not pad_token_id, wrong when pad = EOS and the text ends with EOS (plain text, some chat
        templates): so the head's per-token output is read here at the last attended position instead."""
        import torch

        lengths = torch.tensor([len(ids) for ids in batch])
        input_ids = torch.full((len(batch), int(lengths.max())), model.config.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(input_ids)
        for row, ids in enumerate(batch):
            input_ids[row, : len(ids)], mask[row, : len(ids)] = torch.tensor(ids), 1
        head, captured, hook = getattr(model, "score", None), [], None
        if isinstance(head, torch.nn.Module):  # decoders; an encoder (BERT-like) pools its CLS token itself
            hook = head.register_forward_hook(lambda module, args, output: captured.append(output))
        try:
            output = model(input_ids=input_ids.to(model.device), attention_mask=mask.to(model.device), use_cache=False)
        finally:
            if hook is not None:
                hook.remove()
        per_token = captured and captured[0].dim() == 3  # else the head saw pooled states: the model's own logits
        logits = captured[0][torch.arange(len(batch)), lengths - 1] if per_token else output.logits
        return logits[:, 0].float().tolist()

    def score_each(self, prompts, completions) -> list[list[float]]:
        """Raw scores (label 0's logit), one list per model, in the order of `completions`."""
        import torch

        self.load()
        prompts = list(prompts) if prompts is not None else [None] * len(completions)
        results = []
        for index, model in enumerate(self.models):
            encoded = [self._encode(index, self.format(p, c, index)) for p, c in zip(prompts, completions, strict=True)]
            order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))  # similar lengths: less padding
            scores = [0.0] * len(encoded)
            with torch.no_grad():
                for start in range(0, len(order), self.batch_size):
                    chunk = order[start : start + self.batch_size]
                    for i, score in zip(chunk, self._forward(model, [encoded[i] for i in chunk]), strict=True):
                        scores[i] = score
            results.append(scores)
        return results


_SQUASH = {"none": lambda x: x, "sigmoid": lambda x: 0.5 * (1.0 + math.tanh(0.5 * x)), "tanh": math.tanh}
_COMBINE = {"min": min, "mean": lambda values: sum(values) / len(values)}


def on_failure(name: str):
    """For a failure inside a reward call: a warning the first time, with its reason (later ones at debug level),
    and None for every completion of the call. Not 0.0 and never scores for part of the batch: a constant over the
    call favours no completion of a group, and None is TRL's "cannot score" (out of the logged means; a row every
    reward leaves None gets advantage 0), where 0.0 would pass for a real score (the worst, after a sigmoid)."""
    count = [0]

    def failed(error: BaseException, size: int) -> list[None]:
        count[0] += 1
        logger.log(
            logging.WARNING if count[0] == 1 else logging.DEBUG,
            "%s failed: %d completions scored None (%s); later failures are logged at debug level",
            name,
            size,
            one_line(error),
        )
        return [None] * size

    return failed


def require(condition: bool, message: str) -> None:
    """A factory's check of its values (the registry has checked their types)."""
    if not condition:
        raise ValueError(message)


@register("reward_model")
def make_reward_model(
    path: str | list | None = None,
    combine: str = "mean",
    squash: str = "none",
    center: float = 0.0,
    scale: float = 1.0,
    gate: str | None = None,
    gate_score: float | None = None,
    batch_size: int = 16,
    max_length: int = 2048,
    revision: str | None = None,
):
    """squash((raw - center) / scale) of each reward model, combined over the models by `combine` (min | mean).

    `gate: format`: a completion without a readable boxed answer is not scored and gets `gate_score`, by default
    the lowest score of the call (so it never beats a formatted one).
    """
    paths = [path] if isinstance(path, str) else list(path or [])
    require(
        paths and all(isinstance(p, str) and p for p in paths),
        f"path must be a reward model (a folder, a Hub id or a LoRA adapter folder) or a list of them, got {path!r}",
    )
    require(combine in _COMBINE, f"combine must be one of {sorted(_COMBINE)}, got {combine!r}")
    require(squash in _SQUASH, f"squash must be one of {sorted(_SQUASH)}, got {squash!r}")
    require(
        math.isfinite(center) and math.isfinite(scale) and scale > 0,
        f"center must be finite and scale > 0, got center={center!r}, scale={scale!r}",
    )
    require(gate in (None, "format"), f"gate must be 'format' or null, got {gate!r}")
    require(
        gate_score is None or (gate is not None and math.isfinite(gate_score)),
        f"gate_score {gate_score!r} needs gate: format and a finite value",
    )
    require(
        batch_size >= 1 and max_length >= 1,
        f"batch_size and max_length must be >= 1, got {batch_size!r}, {max_length!r}",
    )
    scorer = SequenceScorer(paths, batch_size=batch_size, max_length=max_length, revision=revision)
    failed, squash_fn, combine_fn = on_failure("reward_model"), _SQUASH[squash], _COMBINE[combine]

    def reward_model(completions, **kwargs) -> list[float | None]:
        size = len(completions)
        try:
            prompts, texts = column(kwargs, "prompts", size), [completion_text(c) for c in completions]
            kept = [i for i, text in enumerate(texts) if gate is None or readable_answer(text) is not None]
            if not kept and gate_score is not None:
                return [float(gate_score)] * size
            scored = kept or list(range(size))  # none formatted: all scored, for the lowest score of the call
            raw = scorer.score_each([prompts[i] for i in scored], [texts[i] for i in scored])
            values = [combine_fn([squash_fn((model[j] - center) / scale) for model in raw]) for j in range(len(scored))]
            scores = [float(gate_score) if gate_score is not None else min(values, default=0.0)] * size
            for i, value in zip(kept, values if kept else [], strict=True):  # kept is scored when not empty
                scores[i] = value
            return scores
        except Exception as error:
            return failed(error, size)

    def prepare(policy_tokenizer=None, device="cpu") -> None:
        """Check the models (RewardConfigError) and load them onto `device`."""
        scorer.check(policy_tokenizer)
        scorer.device = device
        scorer.load()

    reward_model.prepare, reward_model.scorer = prepare, scorer
    return reward_model
