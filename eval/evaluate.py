"""Evaluate a model: n samples per problem, scored by the verifier, reported as pass@k with CIs and maj@k.

    python -m eval.evaluate --model artifacts/demo/sft --dataset synthetic:5-8 --n 16 --k 1 4 16 --seeds 0 1
    python -m eval.evaluate --model Qwen/Qwen2.5-Math-1.5B --dataset aime24 --dataset math500 \\
        --n 64 --k 1 8 64 --temperature 0.6 --top-p 0.95 --max-new-tokens 4096 --backend auto
    accelerate launch -m eval.evaluate ...      # problems sharded over processes, same results as one

For each dataset, under --output-dir/<dataset>/, written as the run goes:
    samples.jsonl      every completion: extracted answer, verdict, reason, length, finish reason
    per_problem.jsonl  per problem: n and correct count per seed, pass@k and maj@k for each k
    summary.json       pass@k (mean over seeds, std across seeds, 95% bootstrap CI over problems), maj@k,
                       mean@n, mean length, truncation rate, the share of samples per outcome ("correct",
                       "wrong answer", "no boxed answer", ...: why pass@k is what it is, also printed at the end),
                       and the protocol (model, sampling, seeds, prompt template, versions)
    pass_at_k.png      pass@k against k, log axis
With --budgets B1 B2 ..., one such run per thinking budget under --output-dir/budget_<B>/<dataset>/, and
accuracy against budget in --output-dir/budget_curve/<dataset>.json and .png (eval/budget.py: s1's budget
forcing, --min-thinking-tokens, --chat-template-kwargs and --thinking-mode). With --tools, a budget caps the
model's own tokens across its turns instead (tool results not counted, no forcing: eval/tools/trl_sampling.py).
An interrupted run resumes: problems whose samples are on disk are not generated again; a run whose
protocol differs from the one on disk refuses to mix with it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

from basics.atomic_files import write_atomic, write_jsonl
from basics.versions import package_versions
from eval import budget
from eval.cli import FlagParser, UserInputError, check_model
from eval.report import format_outcomes, format_table, outcome_shares, plot_pass_at_k, problem_metrics, summarize
from eval.runner import scored_chunks
from eval.sampler import VLLMUnavailableError, require_vllm
from eval.sampling_options import add_sampling_flags, options_from_flags
from eval.tools.stats import sample_tool_stats
from eval.tools.trl_sampling import add_tool_flags, check_tool_flags, format_tool_table, make_tool_sampler

logger = logging.getLogger("eval.evaluate")
PROTOCOL_KEYS = (
    "model", "n", "temperature", "top_p", "top_k", "max_new_tokens", "system_prompt", "user_template", "forcing",
    "chat_template_kwargs", "thinking_mode", "tools",
)  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    class Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
        """The description as written; every option's default after its help (the sampling ones above all)."""

    parser = FlagParser(description=__doc__, formatter_class=Formatter)
    parser.add_argument("--model", required=True, help="a local folder saved with save_pretrained, or a Hub id")
    # the sampling options (eval.sampling_options), --n per seed, at DeepSeek-R1's evaluation protocol
    add_sampling_flags(parser, n=16, temperature=0.6, top_p=0.95, backend="auto")
    parser.add_argument(
        "--dataset", action="append", required=True, help="registry name, synthetic:<levels> or path; repeatable"
    )
    parser.add_argument(
        "--k", type=int, nargs="+", default=None, help="k values for pass@k and maj@k (default: powers of 2 up to n)"
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run of n samples per seed")
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--num-rows", type=int, default=None, help="first N problems (synthetic: per level)")
    parser.add_argument("--system-prompt", default=None)
    parser.add_argument(
        "--user-template",
        default=None,
        help="user message; {problem} is the question (default: math sets add 'Please reason step by step, and put "
        "your final answer within \\boxed{}.', as the recipes' configs do; code sets and synthetic:/arithmetic: "
        "keep the question alone)",
    )
    parser.add_argument(
        "--question-field",
        default="problem",
        help="column holding the question (files and Hub sets not in the registry)",
    )
    parser.add_argument("--answer-field", default="answer", help="column holding the gold answer (same)")
    parser.add_argument(
        "--verifier",
        default=None,
        help="verifier of rows that name none: math, code, or an accuracy reward, your own included "
        "('path/to/file.py:name', as in a recipe's rewards list)",
    )
    parser.add_argument(
        "--field-map",
        default=None,
        help="schema field -> column as YAML/JSON, e.g. '{answer: final_answer, id: uid, difficulty: level}'",
    )
    parser.add_argument("--chat-template", default=None, help="a Jinja file overriding the tokenizer's chat template")
    parser.add_argument("--no-chat-template", action="store_true", help="feed prompts as plain text (base models)")
    parser.add_argument("--chunk-size", type=int, default=64, help="problems sampled and written per step")
    parser.add_argument("--tensor-parallel-size", type=int, default=1, help="vLLM only")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9, help="vLLM only")
    parser.add_argument(
        "--answer-fallbacks",
        action="store_true",
        help="also read an unboxed final answer ('Answer: X', 'the final answer is X'): for models not trained to "
        "box (instruct models before a cold start); off by default, since training rewards read boxes only",
    )
    parser.add_argument("--overwrite", action="store_true", help="discard results on disk instead of resuming")
    budget.add_arguments(parser)
    add_tool_flags(parser)
    args = parser.parse_args(argv)
    check_tool_flags(parser, args)
    if args.field_map is not None:
        import yaml

        try:
            args.field_map = yaml.safe_load(args.field_map)
        except yaml.YAMLError:
            args.field_map = None
        if not isinstance(args.field_map, dict):
            parser.error("--field-map must be a mapping, e.g. '{answer: final_answer, id: uid}'")
    try:  # a sampling option out of range, a minimum above a budget, a budget of 0: refused before any model loads
        args.sampling = options_from_flags(args)
        for value in args.budgets or [None]:
            budget.forcing_from_args(args, value)
    except ValueError as error:
        parser.error(str(error))
    args.k = sorted(set(args.k or [2**i for i in range(args.n.bit_length()) if 2**i <= args.n]))
    if args.k[0] < 1 or args.k[-1] > args.n:
        parser.error(f"every k must be between 1 and n={args.n}; got {args.k}")
    return args


def dataset_slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(name).stem if os.path.exists(name) else name).strip("_")


# ---------------------------------------------------------------- samples on disk


def read_samples(folder: Path) -> dict[tuple[str, int], dict[int, dict]]:
    """Samples already on disk, by (problem id, seed) then sample index; a torn last line is ignored."""
    found: dict[tuple[str, int], dict[int, dict]] = defaultdict(dict)
    for path in sorted(folder.glob("samples*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                sample = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill
            found[(sample["id"], sample["seed"])][sample["index"]] = sample
    return found


def drop_torn_tail(path: Path) -> None:
    """Cut a last line that a kill left unfinished, so that appended lines do not glue onto it."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


def append_lines(path: Path, records: list[dict]) -> None:
    with open(path, "a") as handle:
        handle.write("".join(json.dumps(record) + "\n" for record in records))
        handle.flush()
        os.fsync(handle.fileno())


# ---------------------------------------------------------------- the run


def check_protocol(folder: Path, protocol: dict, overwrite: bool) -> None:
    path = folder / "protocol.json"
    if overwrite and folder.exists():
        for old in folder.glob("*"):
            old.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    if path.exists():
        previous = json.loads(path.read_text())
        changed = {
            key: (previous.get(key), protocol.get(key))
            for key in PROTOCOL_KEYS
            if previous.get(key) != protocol.get(key)
        }
        if changed:
            raise SystemExit(
                f"{folder} holds a run with another protocol {changed}; use another --output-dir or --overwrite"
            )
    else:
        write_atomic(path, json.dumps(protocol, indent=2))


def evaluate_dataset(sampler, rows: list[dict], args, folder: Path, state) -> dict | None:
    """Sample what is missing for this process's share of the problems, then (main process) summarize. The
    progress bar counts samples as the decoder finishes them (before: problems, a chunk at a time, so that a
    small set sat at 0 until all of it was done)."""
    from tqdm.auto import tqdm

    from eval.decoding import SEQUENCES_DONE

    done = read_samples(folder)
    mine = [row for index, row in enumerate(rows) if index % state.num_processes == state.process_index]
    part = folder / (f"samples.part{state.process_index}.jsonl" if state.num_processes > 1 else "samples.jsonl")
    drop_torn_tail(part)
    for seed in args.seeds:
        params = args.sampling.params(seed)
        todo = [row for row in mine if len(done.get((row["id"], seed), {})) < args.n]
        bar = tqdm(
            total=len(mine) * args.n,
            initial=(len(mine) - len(todo)) * args.n,
            desc=f"{folder.name} seed {seed}",
            unit="sample",
            disable=not state.is_local_main_process,
        )
        heard = [0]  # samples the decoder reported finished in this chunk: the bar moves as they finish

        def finished(count: int, heard=heard, bar=bar) -> None:
            heard[0] += count
            bar.update(count)

        listening = SEQUENCES_DONE.set(finished)
        math_options = {"fallbacks": args.answer_fallbacks}
        for chunk in scored_chunks(sampler, todo, params, args.chunk_size, math_options=math_options):
            records = []
            for row, scored in chunk:
                for index, (sample, score) in enumerate(scored):
                    records.append(
                        {"id": row["id"], "seed": seed, "index": index, "text": sample.text,
                         "extracted": score.extracted, "correct": score.correct, "reason": score.reason,
                         "num_tokens": sample.num_tokens, "finish_reason": sample.finish_reason,
                         **({} if sample.forced_answer is None else {"thinking_tokens": sample.thinking_tokens,
                            "forced_answer": sample.forced_answer, "waits": sample.waits}),
                         **(sample.tool_use or {})}  # with --tools: the conversation and its tool figures
                    )  # fmt: skip
            append_lines(part, records)
            bar.update(max(0, len(records) - heard[0]))  # a backend that reports nothing moves it here
            heard[0] = 0
        SEQUENCES_DONE.reset(listening)
        bar.close()
    state.wait_for_everyone()
    if not state.is_main_process:
        return None
    return finish_dataset(rows, args, folder)


def finish_dataset(rows: list[dict], args, folder: Path) -> dict:
    """Merge the samples into one ordered samples.jsonl, then write per_problem.jsonl and summary.json."""
    done = read_samples(folder)
    ordered, per_problem = [], []
    for row in rows:
        by_seed = {seed: [done[(row["id"], seed)][i] for i in range(args.n)] for seed in args.seeds}
        ordered += [sample for seed in args.seeds for sample in by_seed[seed]]
        per_problem.append(problem_metrics(row, by_seed, args.k))
    write_jsonl(folder / "samples.jsonl", ordered)
    for part in folder.glob("samples.part*.jsonl"):
        part.unlink()
    write_jsonl(folder / "per_problem.jsonl", per_problem)
    summary = summarize(per_problem, args.k, args.seeds)
    summary["protocol"] = json.loads((folder / "protocol.json").read_text())
    summary["dataset"] = folder.name
    summary["samples"] = len(ordered)
    summary["outcomes"] = outcome_shares(ordered)  # why samples fail: the share of each reason
    if (tools := sample_tool_stats(ordered)) is not None:  # --tools only: calls, failures, turns (eval/tools/stats)
        summary["tools"] = tools
    write_atomic(folder / "summary.json", json.dumps(summary, indent=2))
    plot_pass_at_k({Path(args.model).name or args.model: summary}, args.k, folder / "pass_at_k.png", folder.name)
    return summary


def main(argv: list[str] | None = None) -> dict[str, dict]:
    """The command line: a mistake in the model, a data file or a flag ends it with one line and exit code 2."""
    from tasks.schema import DatasetNotFoundError, SchemaError

    args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    try:
        if args.backend == "vllm":
            require_vllm("--backend vllm", "--backend transformers (or auto: vLLM where it is installed)")
        check_model(args.model)
        return run(args)
    except (UserInputError, DatasetNotFoundError, SchemaError, VLLMUnavailableError) as error:
        sys.stderr.write(f"error: {error}\n")
        raise SystemExit(2) from None


def run(args: argparse.Namespace) -> dict[str, dict]:
    import torch
    from accelerate import PartialState

    from eval.sampler import make_sampler, resolve_backend
    from tasks.datasets import default_user_template, load_eval_dataset

    # Without a GPU, `accelerate launch --multi_gpu --num_processes 2` starts two processes that only
    # form a (gloo) process group when the state is told it runs on the CPU.
    state = PartialState(cpu=not torch.cuda.is_available())
    if args.tools and state.num_processes > 1:
        raise UserInputError(
            "--tools samples in one process (TRL's loop gathers every batch): run it without accelerate"
        )
    # the protocol names the backend that ran, not "auto"; with --tools, TRL's transformers generation
    args.backend = "transformers" if args.tools else resolve_backend(args.backend)
    protocol = {
        "model": args.model, "n": args.n, "temperature": args.temperature, "top_p": args.top_p, "top_k": args.top_k,
        "max_new_tokens": args.max_new_tokens, "system_prompt": args.system_prompt, "user_template": args.user_template,
        "seeds": args.seeds, "k": args.k, "backend": args.backend, "processes": state.num_processes,
        "chat_template": args.chat_template, "plain_text_prompts": args.no_chat_template,
        "answer_fallbacks": args.answer_fallbacks,
        "chat_template_kwargs": args.chat_template_kwargs, "thinking_mode": args.thinking_mode,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "versions": package_versions(),
    }  # fmt: skip
    if args.tools:  # only then, so that a run without tools writes what it always wrote
        protocol["tools"] = {"names": args.tools, "options": args.tool_options, "max_tool_calls": args.max_tool_calls}
    datasets, templates = {}, {}
    for name in args.dataset:
        given = args.user_template is not None  # an explicit template wins, for every set
        templates[dataset_slug(name)] = args.user_template if given else default_user_template(name)
        rows = load_eval_dataset(
            name,
            num_rows=args.num_rows,
            system_prompt=args.system_prompt,
            user_template=args.user_template,
            question_field=args.question_field,
            answer_field=args.answer_field,
            field_map=args.field_map,
            verifier=args.verifier,
        )
        datasets[dataset_slug(name)] = [
            {**row, "prompt": budget.with_thinking_switch(row["prompt"], args.thinking_mode)} for row in rows
        ]
    runs = [(value, args.output_dir / f"budget_{value}") for value in args.budgets or []] or [(None, args.output_dir)]
    if state.is_main_process:
        for value, out in runs:
            forcing = budget.protocol_entry(budget.forcing_from_args(args, value))
            if args.tools and value is not None:  # the model's tokens capped, tool results not counted, no forcing
                forcing = {"model_token_cap": value}
            for slug in datasets:
                entries = {"forcing": forcing, "user_template": templates[slug]}
                check_protocol(out / slug, {**protocol, **entries}, args.overwrite)
    state.wait_for_everyone()
    template = Path(args.chat_template).read_text() if args.chat_template else None
    options = {"chat_template": template, "use_chat_template": not args.no_chat_template}
    options["chat_template_kwargs"] = args.chat_template_kwargs
    if args.backend != "transformers":
        options.update(
            tensor_parallel_size=args.tensor_parallel_size, gpu_memory_utilization=args.gpu_memory_utilization
        )
    if args.tools:  # TRL's own tool loop, as GRPO trains with it (eval/tools/trl_sampling.py)
        sampler = make_tool_sampler(
            args.model, args.tools, args.tool_options, args.max_tool_calls, args.batch_size, **options
        )
    else:
        sampler = make_sampler(args.backend, args.model, batch_size=args.batch_size, **options)
    if args.budgets:
        curves = budget.run_sweep(sampler, datasets, args, state, evaluate_dataset)
        if state.is_main_process:
            print(budget.format_curve_table(curves, args.k))
            folders = {f"{out.name}/{slug}": out / slug for _, out in runs for slug in datasets}
            finished = {key: json.loads((folder / "summary.json").read_text()) for key, folder in folders.items()}
            print(format_outcomes(finished, folders))
        return curves
    if forcing := budget.forcing_from_args(args, None):
        sampler = budget.BudgetSampler(sampler, forcing)
    summaries = {}
    for slug, rows in datasets.items():
        summary = evaluate_dataset(sampler, rows, args, args.output_dir / slug, state)
        if summary is not None:
            summaries[slug] = summary
    if state.is_main_process:
        print(format_table(summaries, args.k))
        print(format_outcomes(summaries, {slug: args.output_dir / slug for slug in summaries}))
        if args.tools:
            print(format_tool_table(summaries))
    return summaries


if __name__ == "__main__":
    main()
