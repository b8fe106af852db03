"""The held-out pass@1 that rejection sampling and distillation report before and after they train on sampled
traces: the traces' sampler (recipes.common.traces) at the evaluation's temperature. Not part of the
sample -> verify -> keep rule, so it lives beside traces/, not in it."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from eval.runner import sample_and_score, summarize_by_difficulty
from recipes.common.traces.collect import make_trace_sampler
from recipes.common.traces.options import TraceArguments

logger = logging.getLogger(__name__)


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


def evaluate_pass_at_1(sampler, rows: list[dict], args: TraceArguments, seed: int, n: int | None = None) -> dict | None:
    """Mean pass@1 over held-out rows (`n`, default `eval_samples_per_problem`, samples each), overall and by level."""
    if not rows or args.eval_samples_per_problem == 0:
        return None
    # the traces' protocol, at the evaluation's temperature
    params = args.sampling.params(
        seed, n=n or args.eval_samples_per_problem, temperature=args.eval_temperature, top_p=1.0
    )
    results = sample_and_score(sampler, rows, params, progress=False)
    by_level = summarize_by_difficulty(results)
    return {
        "pass@1": sum(result.pass_at(1) for result in results) / len(results),
        "problems": len(results),
        "samples_per_problem": params.n,
        "by_level": {str(level): round(values["pass@1"], 4) for level, values in by_level.items()},
    }


def evaluate_model(args: TraceArguments, model_path: str | Path, rows: list[dict], seed: int, n: int | None = None):
    """`evaluate_pass_at_1` of the model in `model_path`, loaded for it and freed after (None when evaluation is off)."""
    if not rows or args.eval_samples_per_problem == 0:
        return None
    sampler = make_trace_sampler(args, model_path)
    try:
        return evaluate_pass_at_1(sampler, rows, args, seed, n)
    finally:
        sampler.close()
