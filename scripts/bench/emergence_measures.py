"""What scripts/bench/emergence.py measures and trains on: whether a completion shows its working, whether it
writes text after its boxed answer, the reward that penalises that text, the steps at which a per-step share
crosses its thresholds, and the bases' SFT rows (a seeded, exact share of them showing working).

The three reward-form functions (`shows_working`, `text_after_box`, `no_text_after_box`) are named to
recipes/grpo.py as `scripts/bench/emergence_measures.py:<name>` (rewards/external.py: a callable whose first
parameter is `completions` is a reward taken as it is). The first two are logged as gold rewards (gold/<name>
in metrics.jsonl, never in the loss); the third is the drift arm's training reward.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

from rewards.math import THINK_CLOSE, THINK_OPEN, final_segment
from rewards.math.answers import find_boxes
from rewards.text import completion_text

DIRECT_ANSWER = "<think>\n</think>\n\\boxed{{{answer}}}"  # a row's answer without its working
THRESHOLDS = (0.05, 0.5, 0.95)
LOOKUP_LEARNED = 0.8  # a base's level-1 pass@1 below this has not learned the one-hop lookup (the report says so)
EVAL_LEVELS = list(range(2, 7))  # the held-out levels of every share the report gives (level 1: the lookup)


# ---------------------------------------------------------------- one completion


def thinking_of(text: str) -> str:
    """The completion's reasoning: what precedes its first `</think>` (or, with none, its first box, or else the
    whole text), with the think tags taken out."""
    cut = text.find(THINK_CLOSE)
    if cut < 0:
        boxes = find_boxes(text)
        cut = boxes[0].start if boxes else len(text)
    return text[:cut].replace(THINK_OPEN, "")


def is_working(text: str) -> bool:
    """Does the completion show its working: any non-blank reasoning before its answer (the task's solution
    writes one hop a line; a direct answer is `<think>\\n</think>\\n\\boxed{N}`)."""
    return bool(thinking_of(text).strip())


def has_text_after_box(text: str) -> bool:
    """Is anything but whitespace written after the first box of the completion's answer (the part after its
    last `</think>`; a think block never closed has no answer)? The verifier reads the boxes; what follows the
    answer, the reward does not check."""
    segment = final_segment(text)
    boxes = find_boxes(segment) if segment else []
    return bool(boxes) and bool(segment[boxes[0].end :].strip())


# ---------------------------------------------------------------- as rewards (TRL's form)


def shows_working(completions, **kwargs) -> list[float]:
    """1.0 for each completion that shows its working (`is_working`), else 0.0: logged as gold/shows_working."""
    return [float(is_working(completion_text(completion))) for completion in completions]


def text_after_box(completions, **kwargs) -> list[float]:
    """1.0 for each completion with text after its boxed answer (`has_text_after_box`), else 0.0: logged as
    gold/text_after_box."""
    return [float(has_text_after_box(completion_text(completion))) for completion in completions]


def no_text_after_box(completions, **kwargs) -> list[float]:
    """The drift arm's format reward: -1.0 for a completion with text after its boxed answer, else 0.0. It says
    nothing about the working (think_format would pay for it: a direct answer's think block is empty)."""
    return [-float(has_text_after_box(completion_text(completion))) for completion in completions]


# ---------------------------------------------------------------- a run's series


def crossing_steps(
    series: Mapping[int, float] | Sequence[float], thresholds: Sequence[float] = THRESHOLDS
) -> dict[float, int | None]:
    """The first step whose share is at least each threshold (a share equal to it crosses it), or None when no
    step reaches it. `series` maps step -> share, or lists the shares of steps 1, 2, ...; NaN never crosses."""
    points = sorted(series.items()) if isinstance(series, Mapping) else list(enumerate(series, start=1))
    return {
        threshold: next((step for step, share in points if share == share and share >= threshold), None)
        for threshold in thresholds
    }


# ---------------------------------------------------------------- the bases' rows


def working_indices(levels: Sequence[int], share: float, seed: int) -> set[int]:
    """Indices of the rows that keep their working: for each level, the first round(share x rows of the level)
    of a seeded shuffle of its rows, so the share is exact per level and a smaller share's rows are a subset of
    a larger one's (the same shuffle for every share)."""
    by_level: dict[int, list[int]] = defaultdict(list)
    for index, level in enumerate(levels):
        by_level[level].append(index)
    chosen: set[int] = set()
    for level, indices in sorted(by_level.items()):
        shuffled = random.Random(f"emergence:{seed}:{level}").sample(indices, len(indices))
        chosen.update(shuffled[: round(share * len(indices))])
    return chosen


def base_rows(rows: Sequence[dict], share: float, seed: int) -> list[dict]:
    """The SFT rows of one base: the same rows in the same order, each answering directly (`DIRECT_ANSWER`)
    except the seeded `share` that keep the task's own solution (its working)."""
    keep = working_indices([row["difficulty"] for row in rows], share, seed)
    return [
        dict(row) if index in keep else {**row, "solution": DIRECT_ANSWER.format(answer=row["answer"])}
        for index, row in enumerate(rows)
    ]


# ---------------------------------------------------------------- held-out samples


def evaluate(model_dir: Path, levels: list[int], args) -> dict:
    """Held-out problems of `levels` sampled at temperature 1: per problem its correct, working and after-box
    counts; per level and over EVAL_LEVELS their shares with 95% bootstrap intervals over problems."""
    from transformers import AutoTokenizer

    from eval.metrics import bootstrap_ci
    from scripts.bench.sample_efficiency_runs import sample_held_out
    from tasks.synthetic import generate_rows

    rows = generate_rows(levels, args.eval_problems, seed=args.eval_seed, split="eval")
    results, params, _, cpu = sample_held_out(model_dir, AutoTokenizer.from_pretrained(model_dir), rows, args)
    per_problem = {
        result.id: {"level": result.difficulty, "n": result.n, "correct": result.num_correct,
                    "working": sum(is_working(sample["text"]) for sample in result.samples),
                    "after_box": sum(has_text_after_box(sample["text"]) for sample in result.samples)}
        for result in results
    }  # fmt: skip

    def shares(chosen: list[int]) -> dict:
        """The mean share of each count over the problems of the `chosen` levels, with its interval."""
        problems = [p for p in per_problem.values() if p["level"] in chosen]
        out = {}
        for key in ("correct", "working", "after_box"):
            values = [p[key] / p["n"] for p in problems]
            out[key] = {"mean": sum(values) / len(values), "ci95": list(bootstrap_ci(values))}
        return out

    by_level = {str(level): shares([level]) for level in levels}
    overall = shares([level for level in levels if level in EVAL_LEVELS])
    return {"by_level": by_level, "overall": overall, "per_problem": per_problem, "protocol": params.__dict__,
            "eval_cpu_seconds": cpu}  # fmt: skip


# ---------------------------------------------------------------- the report


def _series(saved: dict, key: str) -> dict[int, float]:
    """A run's per-step series of `key` ("working", "after_box", "accuracy"), steps as ints (JSON keys are text)."""
    return {int(step): value for step, value in saved["series"][key].items()}


def _share(value: dict) -> str:
    """A held-out share with its interval: `0.123 [0.100, 0.150]`."""
    return f"{value['mean']:.3f} [{value['ci95'][0]:.3f}, {value['ci95'][1]:.3f}]"


def _tail_mean(series: dict[int, float]) -> float | None:
    """The mean of the last tenth of a run's steps (at least one): its share at the end, less noisy than one step."""
    steps = sorted(series)[-max(1, len(series) // 10) :]
    return sum(series[step] for step in steps) / len(steps) if steps else None


def _pct(value: float | None) -> str:
    """A share as a percentage, `-` for none."""
    return "-" if value is None else f"{100 * value:.1f}%"


def after_box_difference(plain: dict, fixed: dict) -> str:
    """Held-out share with text after the box, fixed minus plain, paired by problem, with its 95% interval."""
    from eval.metrics import paired_difference

    first, second = (
        {key: p["after_box"] / p["n"] for key, p in saved["per_problem"].items()} for saved in (plain, fixed)
    )
    mean, (low, high), _ = paired_difference(first, second)
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def pooled_difference(after: list[dict], before: list[dict], key: str) -> dict:
    """Seed k of `after` minus seed k of `before` (one start repeated when it is the base), on the problems all
    share: per problem the mean over seeds of the difference in the share `key`, the mean over problems with a
    95% bootstrap interval over problems."""
    from eval.metrics import pooled_paired_difference

    if len(after) != len(before) or not after:
        raise ValueError("pair each run with one run or start")

    def shares(saved: dict) -> dict[str, float]:
        return {problem: p[key] / p["n"] for problem, p in saved["per_problem"].items()}

    pooled = pooled_paired_difference([(shares(ref), shares(run)) for run, ref in zip(after, before, strict=True)])
    return {"mean": pooled["mean"], "ci95": pooled["ci95"], "problems": pooled["problems"]}


def _pooled(d: dict) -> str:
    return f"{d['mean']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"


def write_table(path, bases: dict[str, dict], runs: dict[tuple[str, str, int], dict], setup: dict) -> None:
    """The markdown report: the bases, the crossing steps per run, accuracy over steps, the drift and its fix."""
    from basics.atomic_files import write_atomic

    steps, seeds = setup["steps"], " ".join(map(str, setup["seeds"]))
    lines = [
        "# Does RL create long reasoning, or select a behaviour the base already has? (issue 59, item 3)", "",
        f"Bases: recipes/sft.py (recipes/configs/demo/sft.yaml) continuing {setup.get('start', 'the tiny base')}, "
        f"{setup['sft_steps']} "
        f"steps on the same {setup['sft_rows']} rows per level of levels 1-4, in the same order; they differ only in "
        "the share of rows whose completion shows its working (the rest answer `<think>\\n</think>\\n\\boxed{N}`). "
        f"Runs: recipes/grpo.py with recipes/configs/demo/dapo.yaml, math_accuracy the only reward, {steps} steps on "
        f"levels {setup['train_levels']}, seeds {seeds}. Held-out: {setup['eval_problems']} problems per level x "
        f"{setup['eval_samples']} samples at temperature 1 (eval seed {setup['eval_seed']}), the same for every "
        "model; [95% bootstrap intervals over problems]. Made by `python scripts/bench/emergence.py`.", "",
        "## The bases", "",
        "| base | SFT rows showing working | level-1 pass@1 | pass@1, levels 2-6 | samples showing working, "
        "levels 2-6 | samples with text after the box |", "|---|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for name, saved in bases.items():
        lines.append(f"| {name} | {saved['working_rows']} of {saved['rows']} ({_pct(saved['working_rows'] / saved['rows'])})"
                     f" | {_share(saved['by_level']['1']['correct'])} | {_share(saved['overall']['correct'])} | "
                     f"{_share(saved['overall']['working'])} | {_share(saved['overall']['after_box'])} |")  # fmt: skip
    unlearned = [name for name, saved in bases.items() if saved["by_level"]["1"]["correct"]["mean"] < LOOKUP_LEARNED]
    if unlearned:
        lines += ["", f"**Level-1 pass@1 under {LOOKUP_LEARNED} for {', '.join(unlearned)}: the one-hop lookup is not "
                  "learned, so their runs say little; rebuild them with more --sft-steps.**"]  # fmt: skip
    runs = dict(sorted(runs.items(), key=lambda item: (list(setup["arms"]).index(item[0][0]),
                                                       setup["bases"].index(item[0][1]), item[0][2])))  # fmt: skip
    lines += [
        "", "## When the share of completions showing working crosses 5%, 50% and 95%", "",
        "Per training step, the share of the step's completions that show their working (gold/shows_working, "
        "logged beside the reward, never in it); a threshold is crossed at the first step whose share is at least "
        f"it (`never`: not within {steps} steps). `end`: the mean of the last tenth of the steps.", "",
        "| arm | base | seed | step 1 | >= 5% | >= 50% | >= 95% | end | held-out pass@1 | held-out showing working |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for (arm, base, seed), saved in runs.items():
        working = _series(saved, "working")
        crossed = [str(step) if step else "never" for step in crossing_steps(working).values()]
        lines.append(f"| {setup['arms'][arm]} | {base} | {seed} | {_pct(working.get(min(working, default=0)))} | "
                     f"{' | '.join(crossed)} | {_pct(_tail_mean(working))} | {_share(saved['overall']['correct'])} | "
                     f"{_share(saved['overall']['working'])} |")  # fmt: skip
    lines += ["", "## What RL changed, pooled over seeds", "",
              "Each run minus its base on the held-out levels 2-6 (per problem the mean over seeds of the difference, "
              "[95% bootstrap interval over problems]); for the penalty arm, minus the accuracy-only arm of the same "
              "seed.", "", "| arm | base | seeds | pass@1 | share showing working | share with text after the box |",
              "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for arm, base in dict.fromkeys((arm, base) for arm, base, _ in runs):
        seeds = [seed for (a, b, seed) in runs if (a, b) == (arm, base)]
        after = [runs[(arm, base, seed)] for seed in seeds]
        if arm == "accuracy" and base in bases:
            before = [bases[base]] * len(seeds)
        else:
            seeds = [seed for seed in seeds if ("accuracy", base, seed) in runs]
            after = [runs[(arm, base, seed)] for seed in seeds]
            before = [runs[("accuracy", base, seed)] for seed in seeds]
        if seeds:
            cells = [_pooled(pooled_difference(after, before, key)) for key in ("correct", "working", "after_box")]
            lines.append(f"| {setup['arms'][arm]} | {base}{'' if arm == 'accuracy' else ' (vs accuracy only)'} "
                         f"| {len(seeds)} | " + " | ".join(cells) + " |")  # fmt: skip
    marks = sorted({max(1, round(steps * part / 5)) for part in range(6)})
    lines += ["", "## Training accuracy over steps", "", "The batch's math_accuracy at these steps, mean over seeds.", "",
              "| arm | base | " + " | ".join(f"step {mark}" for mark in marks) + " |", "|---|---|" + "---:|" * len(marks)]  # fmt: skip
    for arm, base in dict.fromkeys((arm, base) for arm, base, _ in runs):
        cells = []
        for mark in marks:
            values = [_series(saved, "accuracy").get(mark) for key, saved in runs.items() if key[:2] == (arm, base)]
            values = [value for value in values if value is not None]
            cells.append(f"{sum(values) / len(values):.3f}" if values else "-")
        lines.append(f"| {setup['arms'][arm]} | {base} | " + " | ".join(cells) + " |")
    fix = setup["fix_base"]
    lines += [
        "", f"## Text after the box, and a format reward against it ({fix} base, paired by seed)", "",
        "What the accuracy reward does not check: text after the boxed answer. Held-out share of samples with it "
        f"at the end (training share over the last tenth of the steps in brackets); the second arm adds "
        f"{setup['fix_weight']} x a reward of -1 for such a completion. Difference: penalty minus accuracy only, "
        "paired by problem.", "",
        "| seed | accuracy only | + penalty | difference [95% CI] | held-out pass@1: accuracy only / + penalty |",
        "|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for seed in setup["seeds"]:
        plain, fixed = runs.get(("accuracy", fix, seed)), runs.get(("no_after_box", fix, seed))
        if plain and fixed:
            shares = [f"{s['overall']['after_box']['mean']:.3f} ({_pct(_tail_mean(_series(s, 'after_box')))})"
                      for s in (plain, fixed)]  # fmt: skip
            lines.append(f"| {seed} | {shares[0]} | {shares[1]} | {after_box_difference(plain, fixed)} | "
                         f"{plain['overall']['correct']['mean']:.3f} / {fixed['overall']['correct']['mean']:.3f} |")  # fmt: skip
    write_atomic(path, "\n".join(lines) + "\n")


def write_plot(path, runs: dict[tuple[str, str, int], dict], setup: dict) -> None:
    """Per step: the share showing working, the share with text after the box and the batch accuracy; one line
    per run, coloured by base (the penalty arm dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharex=True)
    colours = {base: f"C{index}" for index, base in enumerate(setup["bases"])}
    labelled = set()
    for (arm, base, _), saved in sorted(runs.items(), key=lambda item: setup["bases"].index(item[0][1])):
        label = None if (arm, base) in labelled else f"{base}, {setup['arms'][arm]}"
        labelled.add((arm, base))
        for axis, key in zip(axes, ("working", "after_box", "accuracy"), strict=True):
            series = _series(saved, key)
            axis.plot(list(series), list(series.values()), color=colours[base], alpha=0.8, label=label,
                      linestyle="--" if arm != "accuracy" else "-")  # fmt: skip
    titles = ("share showing working", "share with text after the box", "batch accuracy (math_accuracy)")
    for axis, title in zip(axes, titles, strict=True):
        axis.set_title(title)
        axis.set_xlabel("GRPO step")
        axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    figure.suptitle(f"Emergence of working under an accuracy-only reward, seeds {setup['seeds']}")
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
