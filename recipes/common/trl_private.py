"""Every private name of TRL (1.16) and transformers (5.x) this repository reads, writes, calls or replaces, in one
place, each with what it is for.

A private name is no contract: a TRL or transformers upgrade may rename or drop any of them without notice. An
override of the trainer's own methods that calls `super()` is the GRPO trainer's seam with TRL and stays with the
trainer; everything else that reaches into TRL's or transformers' internals goes through the accessors here, so
that an upgrade is this file's work. `missing(trainer)` names whatever the installed versions lack: the GRPO
trainer calls it once built and stops in one line naming the attribute (the CPU vLLM adapter does the same with
`missing_in_vllm_generation()` before it patches anything) (tests/test_trl_private.py holds the
list to the installed versions, and no other module of the repository to reach these names itself).
"""

from __future__ import annotations

from eval.tools.trl_sampling import PRIVATE as TOOL_SAMPLING

# trl.GRPOTrainer (and transformers.Trainer below it): attributes and methods read or called on the trainer.
TRAINER = {
    "_metrics": "trl.GRPOTrainer: per mode, the lists of values TRL averages into each log record; ours go beside",
    "_buffered_inputs": "trl.GRPOTrainer: the generation batch TRL slices into micro-batches (share_prompts "
    "regroups a fresh one)",
    "_step": "trl.GRPOTrainer: the micro-batch counter that picks the next slice of the buffered batch",
    "_tokenizer": "trl.GRPOTrainer: the tokenizer inside the processing class; its pad id pads the batches we assemble",
    "_dist": "trl.GRPOTrainer: its distributed backend; summons ZeRO-3 / FSDP parameters around compact generation",
    "_get_per_token_logps_and_entropies": "trl.GRPOTrainer: per-token log-probs of a model on a batch (the "
    "reference KL, dynamic sampling's merged batches)",
    "_tokenize_prompts": "trl.GRPOTrainer: prompt tokenisation as TRL does it (chat template, truncation), for the "
    "rollout worker",
    "_get_num_items_in_batch": "transformers.Trainer: the token count a loss is normalised by, for the rollout "
    "worker's batches",
    "_get_output_dir": "transformers.Trainer: the folder checkpoints go to; our state is saved beside the Trainer's",
    "_load_from_checkpoint": "transformers.Trainer: its weight loader (full weights or a LoRA adapter)",
    "_entropy_bonus_enabled": "trl.GRPOTrainer: whether its loss adds an entropy bonus (then a row with zero "
    "advantage still changes the loss: skip_zero_advantage keeps it)",
}

# trl.GRPOTrainer names that eval's tool sampler reaches (eval/tools/trl_sampling.py, TOOL_SAMPLING above): eval sits
# below recipes and cannot import this module, so that module lists and reaches them itself; they are named here too,
# so that this file names TRL's whole private surface and a built trainer is checked for them (`missing`).

# trl.generation.vllm_generation.VLLMGeneration: what the CPU weight push (recipes/stages/grpo/vllm_cpu.py) uses.
VLLM_GENERATION = {
    "_iter_named_params": "the policy's parameters under vLLM's names (LoRA merged, ZeRO-3 gathered)",
    "sync_weights": "replaced: a push vLLM's CPU kernels can take (one file and a reload, or a layer-wise reload)",
}
# ... and an attribute its methods set (so it is read from the class's source, not the class).
VLLM_GENERATION_STATE = {
    "_llm_weights_sleeping": "TRL's flag that a colocated engine's weights sleep; cleared after our push",
}
# Module attributes of TRL that vllm_cpu.py replaces (no NCCL group on a CPU; an engine built without compile).
# Named module:attribute, as pkgutil.resolve_name reads them.
PATCHED = {
    "trl.generation.vllm_client:VLLMClient.init_communicator": "replaced by a no-op: no NCCL group on a CPU",
    "trl.generation.vllm_client:VLLMClient.close_communicator": "replaced by a no-op, as init_communicator",
    "trl.generation.vllm_generation:LLM": "wrapped to build the colocated engine with enforce_eager (vLLM only)",
}


# The methods of TRL's and transformers' trainers that RLVRGRPOTrainer overrides (recipes/stages/grpo/trainer.py, each
# calling super()). Overriding is the trainer's seam, not a reach into TRL; but were an upgrade to rename one, the
# override would never run again and nothing would fail: the step would silently lose what it adds there.
OVERRIDDEN = {
    "_get_train_sampler": "transformers.Trainer: the curriculum's and dynamic sampling's order of prompts",
    "get_batch_samples": "transformers.Trainer: the rollout worker's batches in place of the dataloader's",
    "_generate_and_score_completions": "trl.GRPOTrainer: dynamic sampling's rounds, gold rewards, zero-advantage skip",
    "_generate": "trl.GRPOTrainer: partial rollouts and step timing around TRL's generation (its tool loop included)",
    "_generate_single_turn": "trl.GRPOTrainer: compact generation in place of model.generate",
    "_tool_call_loop": "trl.GRPOTrainer: each turn's parsed tool calls handed to their environments before TRL "
    "makes them, so that a batch's python calls run side by side (eval.tools.stats.ToolCalls.ahead_of)",
    "_calculate_rewards": "trl.GRPOTrainer: reward timing and the rewards' own logs",
    "training_step": "transformers.Trainer: the zero-loss step when no row trains, step timing",
    "_prepare_inputs": "trl.GRPOTrainer: shared prompts, the reference log-probs, the rollout worker's batches",
    "_get_per_token_logps_and_entropies": "trl.GRPOTrainer: the shared-prompt forward and the sampler correction",
    "compute_loss": "transformers.Trainer: the loss pass's timing and its token counts",
    "_compute_loss": "trl.GRPOTrainer: marks what the loss pass's forward does with its log-probs",
    "_save_checkpoint": "transformers.Trainer: our state (dynamic sampling, curriculum, held-out) saved beside",
    "_load_optimizer_and_scheduler": "transformers.Trainer: our state restored on resume",
    "log": "transformers.Trainer: our metrics merged into each log record",
}


def _given_by_the_libraries(trainer, name: str) -> bool:
    """Whether TRL or transformers, not this repository, give `trainer` the name: an instance attribute their
    constructors set, or an attribute of one of their classes in the trainer's MRO (an override of ours hides a
    renamed base method from hasattr, so the classes are read one by one)."""
    if name in vars(trainer):
        return True
    return any(name in vars(klass) for klass in type(trainer).__mro__ if klass.__module__.split(".")[0] in LIBRARIES)


LIBRARIES = ("trl", "transformers")


def missing(trainer) -> list[str]:
    """The names of TRAINER, TOOL_SAMPLING and OVERRIDDEN that TRL and transformers do not give `trainer` (a built
    GRPO trainer)."""
    names = dict.fromkeys([*TRAINER, *TOOL_SAMPLING, *OVERRIDDEN])  # one read and overridden is named once
    return [name for name in names if not _given_by_the_libraries(trainer, name)]


def missing_in_vllm_generation() -> list[str]:
    """The names of VLLM_GENERATION, VLLM_GENERATION_STATE and PATCHED that the installed TRL lacks (LLM only where
    vLLM is installed: TRL imports it from vLLM)."""
    import inspect
    import pkgutil
    from importlib.util import find_spec

    from trl.generation import vllm_generation

    source = inspect.getsource(vllm_generation.VLLMGeneration)
    gone = [name for name in VLLM_GENERATION if not hasattr(vllm_generation.VLLMGeneration, name)]
    gone += [name for name in VLLM_GENERATION_STATE if f"self.{name}" not in source]
    for name in PATCHED:
        if name.endswith(":LLM") and find_spec("vllm") is None:
            continue
        try:
            pkgutil.resolve_name(name)
        except (ImportError, AttributeError):
            gone.append(name)
    return gone


def check(trainer=None) -> None:
    """Stop in one line when the installed TRL / transformers lack a name this repository relies on: those of a
    built `trainer`, or, without one, those of TRL's vLLM generation that the CPU adapter patches."""
    gone = missing(trainer) if trainer is not None else missing_in_vllm_generation()
    if gone:
        import transformers
        import trl

        raise RuntimeError(
            f"trl {trl.__version__} / transformers {transformers.__version__} lack {gone}, which this repository "
            "reads (recipes/common/trl_private.py says what for); install the pinned versions (trl 1.16) or port "
            "that file to the new ones"
        )


# ---------------------------------------------------------------- the accessors


def metrics(trainer, mode: str = "train"):
    """The lists TRL averages into the next log record of `mode` ("train" or "eval"): append to log a value."""
    return trainer._metrics[mode]


def all_metrics(trainer) -> dict:
    """Every mode's lists (a callback that logs into whichever mode is running keeps the whole mapping)."""
    return trainer._metrics


def buffered_inputs(trainer):
    return trainer._buffered_inputs


def set_buffered_inputs(trainer, batches) -> None:
    trainer._buffered_inputs = batches


def micro_step(trainer) -> int:
    return trainer._step


def pad_token_id(trainer) -> int:
    return trainer._tokenizer.pad_token_id


def distributed(trainer):
    return trainer._dist


def per_token_logps_and_entropies(trainer, model, *args, **kwargs):
    """trl.GRPOTrainer's per-token log-probs (and entropies) of `model` on a batch."""
    return trainer._get_per_token_logps_and_entropies(model, *args, **kwargs)


def tokenize_prompts(trainer, prompts):
    return trainer._tokenize_prompts(prompts)


def num_items_in_batch(trainer, batches, device):
    return trainer._get_num_items_in_batch(batches, device)


def entropy_bonus_enabled(trainer) -> bool:
    return trainer._entropy_bonus_enabled


def output_dir(trainer, trial=None) -> str:
    return trainer._get_output_dir(trial=trial)


def load_checkpoint_weights(trainer, checkpoint: str) -> None:
    trainer._load_from_checkpoint(checkpoint)


def vllm_named_params(generation):
    return generation._iter_named_params()


def mark_vllm_weights_awake(generation) -> None:
    generation._llm_weights_sleeping = False
