"""`llm_judge`: a causal LM asked whether a completion's final answer equals the reference (a generative verifier).

The judge sees the problem (the prompt's last user message), the reference and the completion's boxed final
answer alone (rewards.shaping.controls.readable_answer), never the reasoning, so that what the policy writes outside
its answer cannot instruct the judge; its reply is read strictly (exactly yes or no). Loading and the checks
of the folder are rewards.learned.reward_models's; building loads nothing, `fn.prepare(policy_tokenizer, device)` loads it.
"""

from __future__ import annotations

import logging
import math

from rewards.learned.reward_models import (
    checked_folder,
    load_model,
    load_tokenizer,
    messages_of,
    on_failure,
    one_line,
    require,
)
from rewards.registry import register
from rewards.shaping.controls import readable_answer
from rewards.text import column, completion_text

logger = logging.getLogger(__name__)

JUDGE_TEMPLATE = (
    "Problem:\n{problem}\n\nReference answer: {reference}\nProposed final answer: {answer}\n\n"
    "Is the proposed final answer equal to the reference answer? Reply with yes or no."
)


def parse_verdict(reply) -> float | None:
    """1.0 for exactly "yes", 0.0 for exactly "no" (any case, after stripping whitespace and one trailing period),
    None for anything else: "Yes, because", "yes yes" and "YES!" are not verdicts."""
    text = reply.strip() if isinstance(reply, str) else ""
    return {"yes": 1.0, "no": 0.0}.get((text[:-1] if text.endswith(".") else text).lower())


def judge_prompt(template: str, prompt, reference, answer: str) -> str:
    """The judge's question: the problem (the prompt's last user message), the reference and the extracted final
    answer, nothing else."""
    users = [message["content"] for message in messages_of(prompt) if message["role"] == "user"]
    return template.format(problem=users[-1] if users else "", reference=str(reference), answer=answer)


class _Judge:
    """The judge model, loaded on first use; `ask` returns its replies."""

    def __init__(self, path: str, revision: str | None, temperature: float, max_reply_tokens: int, seed: int):
        self.path, self.revision, self.device, self.model, self.tokenizer = path, revision, "cpu", None, None
        self.temperature, self.max_reply_tokens, self.seed, self.calls = temperature, max_reply_tokens, seed, 0

    def load(self) -> None:
        if self.model is None:
            from transformers import AutoModelForCausalLM

            adapter = checked_folder(self.path, self.revision, "judge")
            tokenizer = load_tokenizer(self.path, self.revision, adapter)
            tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
            model = load_model(AutoModelForCausalLM, self.path, self.revision, adapter)
            self.tokenizer, self.model = tokenizer, model.to(self.device).eval()

    def ask(self, questions: list[str], batch_size: int) -> list[str]:
        """Greedy replies at temperature 0; else sampled, torch seeded with seed + the number of earlier calls
        (reproducible, yet not the same draws at every call), the global RNG state restored afterwards."""
        import torch

        self.load()
        tokenizer, model = self.tokenizer, self.model
        templated = bool(getattr(tokenizer, "chat_template", None))
        if templated:
            texts = [
                tokenizer.apply_chat_template(
                    [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
                )
                for question in questions
            ]
        else:
            texts = [question + "\nAnswer:" for question in questions]
        sampling = (
            {"do_sample": True, "temperature": self.temperature} if self.temperature > 0 else {"do_sample": False}
        )
        replies, self.calls = [], self.calls + 1
        with torch.no_grad(), torch.random.fork_rng(devices=[model.device] if model.device.type == "cuda" else []):
            torch.manual_seed(self.seed + self.calls - 1)
            for start in range(0, len(texts), batch_size):
                batch = tokenizer(
                    texts[start : start + batch_size],
                    return_tensors="pt",
                    padding=True,
                    padding_side="left",
                    add_special_tokens=not templated,
                ).to(model.device)
                output = model.generate(
                    **batch, max_new_tokens=self.max_reply_tokens, pad_token_id=tokenizer.pad_token_id, **sampling
                )
                replies += tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        return replies


@register("llm_judge")
def make_llm_judge(
    path: str | None = None,
    template: str | None = None,
    temperature: float = 0.0,
    max_reply_tokens: int = 4,  # the verdict is one word: a few tokens of reply, not a completion
    batch_size: int = 16,
    revision: str | None = None,
    seed: int = 0,
):
    """1.0 when the judge (a causal LM) replies exactly "yes" to "does the final answer equal the reference?".

    A completion without a readable boxed answer scores 0.0 unasked, a row without a reference None, any reply
    but yes/no 0.0 (one log line per call counts them). `template` (default JUDGE_TEMPLATE) may use {problem},
    {reference} and {answer}; `seed` seeds sampling when temperature > 0.
    """
    require(
        isinstance(path, str) and bool(path),
        f"path must be the judge model (a folder, a Hub id or a LoRA adapter folder), got {path!r}",
    )
    template = JUDGE_TEMPLATE if template is None else template
    try:
        template.format(problem="", reference="", answer="")
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(
            f"template may use only {{problem}}, {{reference}} and {{answer}} (double any other brace): {one_line(error)}"
        ) from None
    require(
        "{answer}" in template and "{reference}" in template, "template must show the judge {answer} and {reference}"
    )
    require(math.isfinite(temperature) and temperature >= 0, f"temperature must be >= 0, got {temperature!r}")
    require(
        max_reply_tokens >= 1 and batch_size >= 1,
        f"max_reply_tokens and batch_size must be >= 1, got {max_reply_tokens!r}, {batch_size!r}",
    )
    judge, failed = _Judge(path, revision, temperature, max_reply_tokens, seed), on_failure("llm_judge")

    def llm_judge(completions, **kwargs) -> list[float | None]:
        size = len(completions)
        try:
            prompts, references = column(kwargs, "prompts", size), column(kwargs, "answer", size)
            answers = [readable_answer(completion_text(completion)) for completion in completions]
            scores: list[float | None] = [None if reference is None else 0.0 for reference in references]
            asked = [i for i in range(size) if answers[i] is not None and references[i] is not None]
            if asked:
                questions = [judge_prompt(template, prompts[i], references[i], answers[i]) for i in asked]
                verdicts = [parse_verdict(reply) for reply in judge.ask(questions, batch_size)]
                for i, verdict in zip(asked, verdicts, strict=True):
                    scores[i] = verdict or 0.0
                if None in verdicts:
                    logger.warning(
                        "llm_judge: %d of %d replies of the judge were unparseable (not exactly yes or no): scored 0.0",
                        verdicts.count(None),
                        len(verdicts),
                    )
            return scores
        except Exception as error:
            return failed(error, size)

    def prepare(policy_tokenizer=None, device="cpu") -> None:
        """Check that the judge is a causal LM (RewardConfigError), load it onto `device`; any tokenizer will do."""
        judge.device = device
        judge.load()

    llm_judge.prepare, llm_judge.judge = prepare, judge
    return llm_judge
