"""Sampling with tools through TRL's own tool loop (`GRPOTrainer._tool_call_loop`): the sampler that evaluation
(`python -m eval.evaluate --tools python`), rejection sampling and distillation's traces use when a model may call
tools, so that a model is evaluated and its traces drawn by the loop it is trained with, not by a second one.

`ToolSampler` has the samplers' `generate(prompts, params, keys)` (eval/sampling.py). Inside, a trl.GRPOTrainer
is built around the model purely as a sampler: never trained, with one dummy row, a reward that only records what
TRL hands every reward (each completion's conversation, its token ids and its environment), the tools as TRL's
`environment_factory` / `tools` (eval.tools.registry.trainer_tools, wrapped by eval.tools.stats), the calls capped
by `max_tool_calling_iterations`, and the sampling options as its temperature, top_p, top_k and
`max_completion_length`. Each batch is one call of TRL's generation and scoring in evaluation mode (beta 0: no
reference, no log-prob pass on this path). The trainer is TRL's with one override, as GRPO's: its tool loop starts
each turn's calls side by side before TRL makes them one by one (eval.tools.stats.ToolCalls.ahead_of).

What a Sample adds with tools (`Sample.tool_use`): the whole `conversation` (assistant turns, their `tool_calls`,
and the `tool` messages), `tool_calls` (the calls run, as GRPO counts them: one whose result TRL then dropped for
length included, and a call of an unknown tool),
`tool_failures` (a call that raised or that its environment says failed, eval.tools.stats; or a call TRL could not
make), `turns` (the model's turns: one more than the runs of tool tokens, as GRPO logs it) and `tool_tokens`. Its
`num_tokens` are the model's tokens alone (TRL's tool mask), so lengths and token budgets never count a tool's
output; `text` is the assistant turns joined, as the rewards read a conversation (rewards.text).

Batches and seeds: the samples of several problems share one TRL generation of up to `batch_size` rows (`pack`:
with 4 samples a problem and batches of 64, 16 problems a batch; a problem with more samples than a batch is cut in
batch-sized pieces). TRL's generation draws a batch from torch's one stream, so each batch is seeded from (seed,
its first problem's key, that problem's first sample index): a problem's samples depend on the seed, n, batch_size
and the problems it is batched with (those beside it in the call's order), not on the machine's timing; a resume
that redoes whole calls (eval.evaluate writes a chunk of problems at a time) draws them again alike. One process only (TRL gathers
across processes at every batch), the transformers path only (not vLLM), and no budget forcing (it continues text
outside TRL's loop): the callers refuse those in one line. A budget (`--budgets`) is a cap on the model's own tokens
across its turns instead (`ModelTokenCap`, `ToolSampler.capped`).

Why here and not in recipes: eval sits below recipes (docs/ARCHITECTURE.md) and cannot import
recipes/common/trl_private.py, so the one private name of TRL this module calls is listed and reached in
`PRIVATE` / `generate_and_score` below; trl_private.py imports that list, so its file still names TRL's whole
private surface and a built GRPO trainer checks these too (tests/test_trl_private.py).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import warnings

from eval.sampling import Sample, SamplerBase, SamplingParams, prompt_key, sample_seed
from eval.tools.stats import ToolCalls, failed_calls, tool_turns
from eval.tools.token_budget import CappedToolSampler, ModelTokenCap
from rewards.text import completion_text

logger = logging.getLogger(__name__)

# The private names of trl.GRPOTrainer this module reaches, each with what for (recipes/common/trl_private.py
# lists them with its own).
PRIVATE = {
    "_generate_and_score_completions": "trl.GRPOTrainer: one batch through TRL's generation, tool loop included "
    "(eval/tools/trl_sampling.py samples with tools by it)",
}
# ... and those it overrides (calling super()); RLVRGRPOTrainer overrides the first too (trl_private.OVERRIDDEN).
OVERRIDDEN = {
    "_tool_call_loop": "trl.GRPOTrainer: each turn's parsed calls started side by side before TRL makes them",
    "_generate_single_turn": "trl.GRPOTrainer: one turn's generation, by eval.decoding (a repeated prompt prefilled "
    "once, a finished row out of the batch), each row's new tokens capped at what is left of its model-token budget "
    "(eval.evaluate --tools --budgets)",
}


def missing(trainer) -> list[str]:
    from trl import GRPOTrainer

    gone = [name for name in PRIVATE if not hasattr(trainer, name)]
    return gone + [name for name in OVERRIDDEN if name not in vars(GRPOTrainer)]


def sampling_trainer_class(calls: ToolCalls, caps: ModelTokenCap | None = None):
    """trl.GRPOTrainer whose tool loop starts each turn's calls side by side (`calls.ahead_of`) and whose turns keep
    to `caps`' model-token budget when one is set; TRL's otherwise."""
    from trl import GRPOTrainer

    caps = caps or ModelTokenCap()

    class ToolSamplingTrainer(GRPOTrainer):
        def _tool_call_loop(self, prompts, prompt_ids, completion_ids, completions, *rest):
            with calls.ahead_of(completions, self.environments), caps.in_loop():
                return super()._tool_call_loop(prompts, prompt_ids, completion_ids, completions, *rest)

        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            turn = self._decode_turn if not images and not multimodal_fields else super()._generate_single_turn
            if caps.cap is None:
                return turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
            return caps.turn(turn, self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images)

        def _decode_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            return decode_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images)

    return ToolSamplingTrainer


def decode_turn(trainer, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
    """TRL's transformers turn (a completion a row, its stop token kept, no log-probs) by eval.decoding: a prompt
    repeated in the batch (a problem's n samples) is prefilled once, so is the start that a later turn's prompts
    share (the tools' system block, the problem), and a finished row leaves the batch, where TRL's `generate`
    prefills every row whole and runs each until the slowest stops. A module function, so that a test can script
    every sampling trainer's turns at once."""
    import torch

    from eval.decoding import global_sampler, sample_tokens

    model = trainer.accelerator.unwrap_model(trainer.model)
    with torch.no_grad():
        ids = sample_tokens(
            model, [list(ids) for ids in prompt_ids], max_new_tokens=trainer.generation_config.max_new_tokens,
            stop_ids=set(trainer.eos_token_ids), pad_id=trainer.processing_class.pad_token_id,
            pick=global_sampler(*trainer.distribution), share_prefixes=True,
        )  # fmt: skip
    return ids, None


def generate_and_score(trainer, rows: list[dict]) -> dict:
    """trl.GRPOTrainer's generation of one batch of rows (its tool loop included) and its scoring."""
    return trainer._generate_and_score_completions(rows)


def parse_tool_options(value) -> dict:
    """--tool-options: a JSON mapping, or key=value pairs separated by commas or spaces (numbers read as numbers),
    as GRPO's `tool_options`. ValueError naming the problem."""
    import yaml

    from basics.option_values import mapping_option, yaml_numbers

    if value is None or isinstance(value, dict):
        return dict(value or {})
    text = str(value).strip()
    if not text:
        return {}
    if text.startswith("{"):
        return mapping_option(text, "--tool-options")
    options = {}
    for pair in text.replace(",", " ").split():
        key, equals, raw = pair.partition("=")
        if not equals or not key:
            raise ValueError(f"--tool-options: {pair!r} is not key=value (or give a JSON mapping)")
        options[key] = yaml_numbers(yaml.safe_load(raw)) if raw else ""  # 1e3 a number, as in the YAML configs
    return options


class ToolSampler(SamplerBase):
    """Samples through TRL's tool loop (the module docstring says how). `tools`: tool names (eval.tools.registry);
    `tool_options`: the python tool's budgets; `max_tool_calls`: TRL's max_tool_calling_iterations."""

    backend = "transformers"

    def __init__(
        self, model, tokenizer, tools, tool_options: dict | None = None, max_tool_calls: int | None = 4,
        batch_size: int = 64, chat_template: str | None = None, chat_template_kwargs: dict | None = None,
    ):  # fmt: skip
        from eval.tools.chat_template import with_tool_template
        from eval.tools.registry import trainer_tools

        if chat_template is not None:
            tokenizer.chat_template = chat_template
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.model, self.tokenizer = model, with_tool_template(tokenizer)
        self.tool_names, self.tool_options = list(tools), dict(tool_options or {})
        self.max_tool_calls, self.batch_size = max_tool_calls, max(1, int(batch_size))
        self.chat_template, self.use_chat_template, self.chat_template_kwargs = None, True, chat_template_kwargs
        self.tool_kwargs = trainer_tools(self.tool_names, **self.tool_options)  # a wrong name: ValueError now
        self.calls = ToolCalls()  # every call counted, for a run's totals (eval.tools.stats)
        self.caps = ModelTokenCap()  # the model-token budget while `capped(...)` samples
        self._trainers: dict[tuple, object] = {}
        self._folder = tempfile.mkdtemp(prefix="tool-sampler-")  # the trainer's output_dir: nothing is saved there
        self._seen = None

    def trainer_for(self, params: SamplingParams):
        """The GRPO trainer that samples with `params`' temperature, top_p, top_k and length (built once each)."""
        key = (params.temperature, params.top_p, params.top_k, params.max_new_tokens)
        if key not in self._trainers:
            self._trainers[key] = self._build(params)
        return self._trainers[key]

    def _build(self, params: SamplingParams):
        import torch
        from datasets import Dataset
        from trl import GRPOConfig

        greedy = params.temperature == 0
        args = GRPOConfig(
            output_dir=self._folder, per_device_train_batch_size=2, num_generations=2, num_generations_eval=1,
            max_completion_length=params.max_new_tokens, temperature=1.0 if greedy else params.temperature,
            top_p=params.top_p, top_k=params.top_k or 0, generation_kwargs={"do_sample": False} if greedy else None,
            beta=0.0, max_tool_calling_iterations=self.max_tool_calls, chat_template_kwargs=self.chat_template_kwargs,
            mask_truncated_completions=False, report_to=[], use_cpu=not torch.cuda.is_available(), bf16=False,
            save_strategy="no", log_completions=False, gradient_checkpointing=False,
        )  # fmt: skip
        with warnings.catch_warnings():  # TRL's note that environment_factory is experimental: known, and pinned
            warnings.filterwarnings("ignore", message=".*'environment_factory'.*experimental", category=UserWarning)
            trainer = sampling_trainer_class(self.calls, self.caps)(
                model=self.model, reward_funcs=[self._record], args=args, processing_class=self.tokenizer,
                train_dataset=Dataset.from_list([{"prompt": [{"role": "user", "content": "x"}]}]),
                **self.calls.instrument(**self.tool_kwargs),
            )  # fmt: skip
        trainer.distribution = (0.0 if greedy else params.temperature, params.top_p, params.top_k)  # _decode_turn's
        gone = missing(trainer)
        if gone:
            import trl

            raise RuntimeError(
                f"trl {trl.__version__} lacks {gone}, which eval/tools/trl_sampling.py calls to sample with tools; "
                "install the pinned trl (1.16) or port that file"
            )
        return trainer

    def _record(self, completions, completion_ids, environments=None, **_):
        """The reward TRL calls once a batch is generated: records what it is handed, scores nothing."""
        self._seen = (completions, completion_ids, environments)
        return [0.0] * len(completions)

    def schemas(self, params: SamplingParams | None = None) -> list[dict]:
        """The tools' JSON schemas as the model saw them (for SFT rows' `tools` column)."""
        from transformers.utils import get_json_schema

        trainer = self.trainer_for(params or SamplingParams(max_new_tokens=1))
        return [tool if isinstance(tool, dict) else get_json_schema(tool) for tool in trainer.tools]

    def generate(self, prompts: list, params: SamplingParams, keys: list[str] | None = None) -> list[list[Sample]]:
        from transformers import set_seed

        from eval.decoding import SEQUENCES_DONE  # eval.evaluate's progress bar: it moves a batch at a time

        heard = SEQUENCES_DONE.get()
        keys = keys or [prompt_key(prompt) for prompt in prompts]
        if any(isinstance(prompt, str) for prompt in prompts):
            raise ValueError("sampling with tools needs chat prompts (messages), not plain text")
        trainer = self.trainer_for(params)
        count = 1 if params.temperature == 0 else params.n
        generated: list[list[Sample]] = [[] for _ in prompts]
        for batch in pack(len(prompts), count, self.batch_size):
            first, start, _ = batch[0]
            set_seed(sample_seed(params.seed, keys[first], start) % 2**32)
            rows = [prompts[problem] for problem, _, size in batch for _ in range(size)]
            quiet = SEQUENCES_DONE.set(None)  # a turn's rows are not samples: the batch is heard once, whole
            try:
                samples = iter(self._batch(trainer, rows))
            finally:
                SEQUENCES_DONE.reset(quiet)
            for problem, _, size in batch:
                generated[problem] += [next(samples) for _ in range(size)]
            if heard is not None:
                heard(len(rows))
        return [samples * params.n if count == 1 else samples for samples in generated]

    def capped(self, budget: int) -> CappedToolSampler:
        """This sampler with each completion's model tokens capped at `budget` (ModelTokenCap)."""
        return CappedToolSampler(self, budget)

    def _batch(self, trainer, prompts: list[list[dict]]) -> list[Sample]:
        """One call of TRL's generation: a sample for each row (`prompts`, one a row), in row order."""
        trainer.model.eval()
        self._seen = None
        output = generate_and_score(trainer, [{"prompt": prompt} for prompt in prompts])
        conversations, completion_ids, environments = self._seen
        masks = output.get("tool_mask")
        stop_ids = set(trainer.eos_token_ids) if getattr(trainer, "eos_token_ids", None) else set()
        stop_ids.add(self.tokenizer.eos_token_id)
        env_tools = set(self.calls.owned_tool_names)
        samples = []
        for index, (conversation, ids) in enumerate(zip(conversations, completion_ids, strict=True)):
            mask = [1] * len(ids) if masks is None else [int(value) for value in masks[index][: len(ids)]]
            owner = environments[index] if environments else None
            calls, owner_failures = self.calls.take_owner(owner)
            conversation = _plain(conversation)
            tool_messages = [message for message in conversation if message.get("role") == "tool"]
            unowned = [message for message in tool_messages if message.get("name") not in env_tools]
            tool_use = {
                "conversation": conversation,
                "tool_calls": calls + len(unowned),
                "tool_failures": failed_calls(tool_messages, owner_failures, env_tools),
                "turns": 1 + tool_turns([mask])[0],
                "tool_tokens": len(mask) - sum(mask),
            }
            finish = "stop" if ids and ids[-1] in stop_ids else "length"
            text = completion_text(conversation)
            samples.append(Sample(text, sum(mask), finish, tool_use=tool_use))
        return samples

    def close(self) -> None:
        self._trainers.clear()
        self.model = None
        shutil.rmtree(self._folder, ignore_errors=True)
        super().close()


def pack(problems: int, count: int, batch_size: int) -> list[list[tuple[int, int, int]]]:
    """The batches of one `generate` call: each a list of (problem, first sample index, samples), at most
    `batch_size` rows in all. A problem's `count` samples are cut in pieces of at most `batch_size`, and the pieces,
    in problem order, fill a batch until the next would overflow it: with 4 samples a problem and batches of 64, 16
    problems a batch (one TRL generation of 64 rows instead of 16 of 4: several times the throughput on a CPU)."""
    batches, current, rows = [], [], 0
    for problem in range(problems):
        for start in range(0, count, batch_size):
            size = min(batch_size, count - start)
            if current and rows + size > batch_size:
                batches.append(current)
                current, rows = [], 0
            current.append((problem, start, size))
            rows += size
    return batches + [current] if current else batches


def _plain(messages) -> list[dict]:
    """A conversation as JSON: TRL's messages with anything else (a tool's object result) as text."""
    return json.loads(json.dumps(list(messages), default=str))


def make_tool_sampler(model_path: str, tools, tool_options=None, max_tool_calls=4, batch_size=64, **template):
    """A ToolSampler for the model in `model_path` (a folder or a Hub id), on this process's device."""
    import torch
    from accelerate import PartialState
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = PartialState().device
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(device)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    options = {key: template[key] for key in ("chat_template", "chat_template_kwargs") if key in template}
    return ToolSampler(model, tokenizer, tools, tool_options, max_tool_calls, batch_size, **options)


# ---------------------------------------------------------------- python -m eval.evaluate's tool flags


def add_tool_flags(parser) -> None:
    group = parser.add_argument_group("tools (eval/tools: sampled through TRL's tool loop, as GRPO trains)")
    group.add_argument(
        "--tools", nargs="+", default=None, help="tools the model may call: python, or path/to/file.py:function"
    )
    group.add_argument("--max-tool-calls", type=int, default=4, help="TRL's max_tool_calling_iterations")
    group.add_argument(
        "--tool-options",
        default=None,
        help="the python tool's budgets, as JSON or key=value: timeout_s=5 memory_mb=512",
    )


def check_tool_flags(parser, args) -> None:
    """The tool flags checked before any model loads: a mistake is one line (parser.error)."""
    try:
        args.tool_options = parse_tool_options(args.tool_options)
    except ValueError as error:
        parser.error(str(error))
    if not args.tools:
        return
    refused = [
        (args.min_thinking_tokens, "--min-thinking-tokens"), (args.no_chat_template, "--no-chat-template"),
        (args.backend == "vllm", "--backend vllm"),
    ]  # fmt: skip
    for given, flag in refused:
        if given:
            parser.error(
                f"--tools does not run with {flag}: tools need chat prompts and TRL's transformers generation, and "
                "budget forcing continues text outside TRL's tool loop (--budgets with --tools caps the model's "
                "tokens instead)"
            )
    if args.max_tool_calls < 0:
        parser.error(f"--max-tool-calls must be >= 0, got {args.max_tool_calls}")
    from eval.tools.registry import trainer_tools

    try:
        trainer_tools(args.tools, **args.tool_options)
    except (ValueError, TypeError) as error:
        parser.error(str(error))


def format_tool_table(summaries: dict[str, dict]) -> str:
    """The tool figures of each dataset's summary, as a markdown table."""
    header = ["dataset", "calls/completion", "failed calls", "turns", "used a tool", "correct that used one"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for slug, summary in summaries.items():
        tools = summary.get("tools") or {}
        if tools:
            cells = [tools["calls_per_completion"], tools["failure_frac"], tools["turns_mean"], tools["used_tool_frac"]]
            cells.append(tools["correct_used_tool_frac"])
            lines.append("| " + " | ".join([slug, *(f"{value:.3f}" for value in cells)]) + " |")
    return "\n".join(lines)
