"""A tiny model that answers every question with \\boxed{7} or \\boxed{3}, about half the time each.

The untrained tiny model never answers, so every pass rate it gives is 0 and a keep rule could not be told
from a constant. About 80 steps of supervised training on those two answers (about 6 s on one core) give
a model whose real samples, scored by the real verifier, pass about half the time on rows whose gold is 7
or 3 and never on the others: pass rates a test can predict without the model.
"""

from __future__ import annotations

from pathlib import Path

TARGETS = ("\\boxed{7}", "\\boxed{3}")


def build_guessing_model(target: Path, base_model_dir: Path, steps: int = 80, batch_size: int = 16) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tasks.synthetic import generate_rows

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(base_model_dir)
    model = AutoModelForCausalLM.from_pretrained(base_model_dir)
    prompts = [row["prompt"] for row in generate_rows([1, 2, 3], 20, seed=1)]
    rendered = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in rendered]
    answers = [tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for text in TARGETS]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        pairs = [(encoded[(step * batch_size + i) % len(encoded)], answers[i % 2]) for i in range(batch_size)]
        length = max(len(prompt) + len(answer) for prompt, answer in pairs)
        ids = torch.full((batch_size, length), tokenizer.pad_token_id)
        labels = torch.full((batch_size, length), -100)
        mask = torch.zeros((batch_size, length), dtype=torch.long)
        for i, (prompt, answer) in enumerate(pairs):
            end = len(prompt) + len(answer)
            ids[i, :end] = torch.tensor(prompt + answer)
            labels[i, len(prompt) : end] = torch.tensor(answer)  # loss on the answer and its EOS only
            mask[i, :end] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if loss.item() > 0.2:
        raise RuntimeError(f"the guessing model did not learn its two answers (loss {loss.item():.3f})")
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)


def rows_with_gold(answer: str, split: str, per_level: int, levels=(1, 2, 3), seed: int = 3) -> list[dict]:
    """Real synthetic problems whose gold answer happens to be `answer`: a set the guessing model solves only
    sometimes (about half the time for "7" or "3"), and that training on its own "7"s would teach it to solve."""
    from tasks.synthetic import generate_rows

    return [row for row in generate_rows(list(levels), per_level, seed=seed, split=split) if row["answer"] == answer]
