"""Test-time scaling: accuracy against a thinking budget, with s1's budget forcing, and thinking-mode switches.

A reasoning model is a curve, not a number: the same weights score higher with more thinking tokens.
`python -m eval.evaluate --budgets 4 8 16 32 ...` evaluates once per budget and draws accuracy against budget.

Budget forcing (s1, Muennighoff et al. 2025), on either backend, in rounds of `sampler.extend` (each backend's
method, given an eval.continuation.ContinuationRequest):
* down: a sample that reaches the budget B while still thinking gets `</think>` and the answer prompt
  appended and is continued for `answer_tokens` more tokens; it records `forced_answer: true`. The default
  answer prompt is "\\n\\boxed{" (decided here): the continuation starts inside a box, so a forced sample
  always has a place for the verifier to find its answer, and the tiny model's own format
  (`</think>\\n\\boxed{N}`) is kept. A sample that ends its thinking itself before B may use what is left
  of B plus `answer_tokens` for its answer.
* up: with `min_thinking_tokens N`, an end of thinking (or EOS) before N tokens is dropped and "Wait" is
  appended instead, up to `max_waits` times (s1's "Wait"); after that EOS, `</think>` and the other special
  tokens are suppressed until N tokens. Each sample records `waits`.
Thinking tokens are the completion's tokens before `</think>` (the Wait text included); a model that writes
no think tags thinks until the budget, or until its EOS (then it has given no separate answer). A prompt whose template already closed the thinking (Qwen3 with
enable_thinking=False) starts in the answer. Each round's seed is drawn from (seed, problem, sample,
round), so samples stay independent of batch size and sharding, as in eval/sampler.py.

Thinking-mode control (Qwen3's "thinking mode fusion"): `--chat-template-kwargs '{"enable_thinking": false}'`
reaches the template; `--thinking-mode no_think` appends "/no_think" to each prompt's last user turn
(recipes/common/data.py writes the same switches into SFT data).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from basics.atomic_files import write_atomic
from eval.continuation import Continuation, ContinuationRequest, ContinuingSampler
from eval.report import accuracy_plot
from eval.sampling import Sample, SamplingParams, prompt_key, sample_seed

logger = logging.getLogger(__name__)

THINK_END = "</think>"
SWITCHES = {"think": "/think", "no_think": "/no_think"}


@dataclass(frozen=True)
class BudgetForcing:
    """How far thinking may go. `budget=None`: no cap (forcing upward only)."""

    budget: int | None = None
    min_thinking_tokens: int = 0
    wait_text: str = "Wait"
    max_waits: int = 2
    answer_prompt: str = "\n\\boxed{"
    answer_tokens: int = 16
    think_end: str = THINK_END

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 1:
            raise ValueError(f"a thinking budget must be >= 1 token, got {self.budget}")
        if self.budget is not None and self.min_thinking_tokens > self.budget:
            raise ValueError(f"min_thinking_tokens {self.min_thinking_tokens} exceeds the budget {self.budget}")
        if self.answer_tokens < 1 or self.max_waits < 0 or self.min_thinking_tokens < 0:
            raise ValueError("answer_tokens must be >= 1, max_waits and min_thinking_tokens >= 0")


@dataclass
class _Row:
    """One sample in progress."""

    prompt: str
    key: str
    index: int
    thinking: bool
    text: str = ""
    tokens: int = 0
    thinking_tokens: int = 0
    waits: int = 0
    forced: bool = False
    rounds: int = 0
    finish: str | None = None


def closes_thinking(prompt_text: str, think_end: str = THINK_END) -> bool:
    """True when the rendered prompt already ends a thinking block (e.g. Qwen3's empty one in no-think mode)."""
    return prompt_text.rstrip().endswith(think_end)


class BudgetSampler:
    """A sampler (same `generate` interface) that applies `BudgetForcing` on top of a backend's `extend`."""

    def __init__(self, sampler: ContinuingSampler, forcing: BudgetForcing):
        self.sampler = sampler
        self.forcing = forcing
        self.tokenizer = sampler.tokenizer

    def _count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, prompts: list, params: SamplingParams, keys: list[str] | None = None) -> list[list[Sample]]:
        keys = keys or [prompt_key(prompt) for prompt in prompts]
        texts = self.sampler.render(prompts)
        greedy = params.temperature == 0
        rows = [
            _Row(texts[i], keys[i], s, not closes_thinking(texts[i], self.forcing.think_end))
            for i in range(len(texts))
            for s in range(1 if greedy else params.n)
        ]
        while active := [row for row in rows if row.finish is None]:
            requests: dict[tuple, list[_Row]] = {}
            for row in active:
                request = self._request(row, params)
                if request is None:
                    continue
                requests.setdefault(request, []).append(row)
            for (max_tokens, stop, suppress), members in requests.items():
                seeds = [sample_seed(params.seed, f"{row.key}\0round{row.rounds}", row.index) for row in members]
                so_far = [row.prompt + row.text for row in members]
                continuations = self.sampler.extend(
                    ContinuationRequest(so_far, seeds, params, max_tokens, stop, suppress)
                )
                for row, continuation in zip(members, continuations, strict=True):
                    self._advance(row, continuation)
        samples = [Sample(row.text, row.tokens, row.finish, row.thinking_tokens, row.forced, row.waits) for row in rows]
        if greedy:
            return [[samples[i]] * params.n for i in range(len(texts))]
        return [samples[i * params.n : (i + 1) * params.n] for i in range(len(texts))]

    def _request(self, row: _Row, params: SamplingParams) -> tuple[int, str | None, bool] | None:
        """The next round for a row: (max new tokens, stop, suppress); None when it is finished now."""
        forcing = self.forcing
        if not row.thinking:
            if forcing.budget is None:
                left = params.max_new_tokens - row.tokens
            elif row.forced:
                left = forcing.answer_tokens
            else:
                left = forcing.budget - row.thinking_tokens + forcing.answer_tokens
            if left < 1:
                row.finish = "length"
                return None
            return left, None, False
        cap = forcing.budget if forcing.budget is not None else params.max_new_tokens
        if row.thinking_tokens >= cap:
            self._end_thinking(row)  # without a budget the row is finished here (finish = "length")
            return None if row.finish is not None else self._request(row, params)
        short = forcing.min_thinking_tokens - row.thinking_tokens
        if short > 0 and row.waits >= forcing.max_waits:  # no Wait left: hold thinking open up to the minimum
            return min(short, cap - row.thinking_tokens), forcing.think_end, True
        return cap - row.thinking_tokens, forcing.think_end, False

    def _end_thinking(self, row: _Row) -> None:
        """At the cap: with a budget, force the end of thinking and the answer prompt; without one, stop."""
        if self.forcing.budget is None:
            row.finish = "length"
            return
        forced = self.forcing.think_end + self.forcing.answer_prompt
        row.text += forced
        row.tokens += self._count(forced)
        row.thinking, row.forced = False, True

    def _advance(self, row: _Row, continuation: Continuation) -> None:
        forcing = self.forcing
        row.rounds += 1
        ended, text, count = continuation.ended, continuation.text, continuation.num_tokens
        if not row.thinking:
            row.text += text
            row.tokens += count
            row.finish = "stop" if ended == "eos" else "length"
            return
        if forcing.think_end in text:  # an end of thinking spelt over several tokens, which cannot be banned
            text, ended = text[: text.index(forcing.think_end)], forcing.think_end
            # what followed it is dropped (the answer round writes it again): count what is kept, the end included
            count = self._count(text) + self._count(forcing.think_end)
            thinking = self._count(text)
        else:
            thinking = count - (0 if ended == "length" else 1)  # the stop token is not thinking
        row.text += text
        row.tokens += count
        row.thinking_tokens += thinking
        if ended == "length":
            return  # the next request forces the answer at the cap, or holds thinking open no longer
        if row.thinking_tokens < forcing.min_thinking_tokens and row.waits < forcing.max_waits:
            row.text += forcing.wait_text  # the model tried to stop early: s1's "Wait" instead
            row.thinking_tokens += self._count(forcing.wait_text)
            row.tokens += self._count(forcing.wait_text) - 1  # the dropped stop token is not in the text
            row.waits += 1
        elif ended == "eos":
            row.finish = "stop"
        else:
            row.text += forcing.think_end
            row.thinking = False


# ---------------------------------------------------------------- evaluate's options and the sweep


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """eval.evaluate's options for budgets, forcing and thinking mode."""
    group = parser.add_argument_group("test-time scaling (eval/budget.py)")
    group.add_argument("--budgets", type=int, nargs="+", default=None, help="thinking-token budgets to sweep")
    group.add_argument("--min-thinking-tokens", type=int, default=0, help="force thinking up to N tokens (s1)")
    group.add_argument("--wait-text", default="Wait", help="appended when the model ends its thinking too early")
    group.add_argument("--max-waits", type=int, default=2, help="Wait at most this often, then suppress the end")
    group.add_argument(
        "--answer-prompt",
        default="\n\\boxed{",
        help="appended after a forced </think> (default: a newline, then \\boxed{)",
    )
    group.add_argument("--answer-tokens", type=int, default=16, help="tokens allowed for the answer after </think>")
    group.add_argument("--think-end", default=THINK_END, help="the text that ends thinking")
    group.add_argument(
        "--chat-template-kwargs",
        type=json.loads,
        default=None,
        help='JSON for the template: {"enable_thinking": false}',
    )
    group.add_argument("--thinking-mode", choices=sorted(SWITCHES), default=None, help="append /think or /no_think")


def forcing_from_args(args: argparse.Namespace, budget: int | None) -> BudgetForcing | None:
    """The forcing for one budget of the sweep; None when neither a budget nor a minimum is asked for."""
    if budget is None and not args.min_thinking_tokens:
        return None
    return BudgetForcing(
        budget, args.min_thinking_tokens, args.wait_text, args.max_waits, args.answer_prompt, args.answer_tokens,
        args.think_end,
    )  # fmt: skip


def protocol_entry(forcing: BudgetForcing | None) -> dict | None:
    return None if forcing is None else asdict(forcing)


def with_thinking_switch(prompt: list[dict], mode: str | None) -> list[dict]:
    """The prompt with "/think" or "/no_think" at the end of its last user turn (Qwen3's soft switch)."""
    if mode is None or isinstance(prompt, str):
        return prompt
    last_user = max((i for i, message in enumerate(prompt) if message["role"] == "user"), default=None)
    if last_user is None:
        raise ValueError("a thinking-mode switch needs a user turn in the prompt")
    switched = [dict(message) for message in prompt]
    switched[last_user]["content"] = re.sub(r"\s*/(no_)?think\s*$", "", switched[last_user]["content"])
    switched[last_user]["content"] += " " + SWITCHES[mode]
    return switched


def forcing_counts(samples_path: Path) -> dict:
    """From a samples.jsonl: how many samples had their answer forced, waited, and their mean thinking length."""
    samples = [json.loads(line) for line in samples_path.read_text().splitlines()]
    counts = {
        "samples": len(samples),
        "forced_answers": sum(bool(sample.get("forced_answer")) for sample in samples),
        "waits": sum(sample.get("waits") or 0 for sample in samples),
        "mean_thinking_tokens": sum(sample.get("thinking_tokens") or 0 for sample in samples) / max(len(samples), 1),
    }
    if any("tool_calls" in sample for sample in samples):  # with tools: the budget counts the model's tokens
        counts["mean_model_tokens"] = sum(sample.get("num_tokens") or 0 for sample in samples) / max(len(samples), 1)
    return counts


def budget_curve(summaries: dict[int, dict], folders: dict[int, Path], ks: list[int]) -> dict:
    """Per budget: pass@k and maj@k with their 95% intervals, and the forcing counts."""
    curve = {}
    for budget, summary in sorted(summaries.items()):
        metrics = {name: summary["metrics"][name] for name in [f"pass@{k}" for k in ks] + [f"maj@{k}" for k in ks]}
        curve[str(budget)] = {"metrics": metrics, **forcing_counts(folders[budget] / "samples.jsonl")}
    return curve


def plot_budget_curves(curves: dict[str, dict], ks: list[int], path: Path, title: str) -> None:
    """Accuracy against thinking budget (log x) with 95% bands: pass@1, pass@k_max and maj@k_max of one
    model, or pass@1 and maj@k_max of each model when `curves` holds several (label -> curve)."""
    names = (
        [f"pass@{ks[0]}", f"pass@{ks[-1]}", f"maj@{ks[-1]}"] if len(curves) == 1 else [f"pass@{ks[0]}", f"maj@{ks[-1]}"]
    )
    with accuracy_plot(path, title, "thinking budget (tokens)", "accuracy", legend_size=8) as axis:
        for label, curve in curves.items():
            budgets = sorted(int(budget) for budget in curve)
            for name in dict.fromkeys(names):
                points = [curve[str(b)]["metrics"][name] for b in budgets]
                line = axis.plot(
                    budgets,
                    [p["mean"] for p in points],
                    marker="o",
                    label=name if len(curves) == 1 else f"{label} {name}",
                )
                lows, highs = [p["ci95"][0] for p in points], [p["ci95"][1] for p in points]
                axis.fill_between(budgets, lows, highs, alpha=0.15, color=line[0].get_color())


def format_curve_table(curves: dict[str, dict], ks: list[int], first_column: str = "dataset") -> str:
    header = [first_column, "budget", f"pass@{ks[0]}", f"pass@{ks[-1]}", f"maj@{ks[-1]}", "forced", "thinking tokens"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for slug, curve in curves.items():
        for budget, point in curve.items():
            cells = [slug, budget]
            for name in (f"pass@{ks[0]}", f"pass@{ks[-1]}", f"maj@{ks[-1]}"):
                metric = point["metrics"][name]
                cells.append(f"{metric['mean']:.3f} [{metric['ci95'][0]:.3f}, {metric['ci95'][1]:.3f}]")
            tokens = point.get("mean_model_tokens", point["mean_thinking_tokens"])  # with tools, the model's tokens
            cells += [f"{point['forced_answers']}/{point['samples']}", f"{tokens:.1f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_sweep(sampler, datasets: dict[str, list[dict]], args, state, evaluate_dataset) -> dict[str, dict]:
    """One evaluation per budget under --output-dir/budget_<B>/<dataset>/, then per dataset the curve in
    --output-dir/budget_curve/<dataset>.json and .png. Returns the curves (main process; {} elsewhere)."""
    summaries: dict[str, dict[int, dict]] = {slug: {} for slug in datasets}
    for budget in args.budgets:
        if hasattr(sampler, "capped"):  # with tools: the model's own tokens capped (eval.tools.trl_sampling)
            budget_sampler = sampler.capped(budget)
        else:
            budget_sampler = BudgetSampler(sampler, forcing_from_args(args, budget))
        for slug, rows in datasets.items():
            summary = evaluate_dataset(budget_sampler, rows, args, args.output_dir / f"budget_{budget}" / slug, state)
            if summary is not None:
                summaries[slug][budget] = summary
    if not state.is_main_process:
        return {}
    curves = {}
    (args.output_dir / "budget_curve").mkdir(parents=True, exist_ok=True)
    for slug, by_budget in summaries.items():
        folders = {budget: args.output_dir / f"budget_{budget}" / slug for budget in by_budget}
        curves[slug] = budget_curve(by_budget, folders, args.k)
        write_atomic(args.output_dir / "budget_curve" / f"{slug}.json", json.dumps(curves[slug], indent=2))
        plot_budget_curves({slug: curves[slug]}, args.k, args.output_dir / "budget_curve" / f"{slug}.png", slug)
    return curves
