"""Two processes of adaptive dynamic sampling whose groups differ in variance (tests/test_dynamic_sampling.py).

    accelerate launch --config_file recipes/accelerate/multi_cpu.yaml tests/support/adaptive_two_processes.py \\
        MODEL_DIR OUT_DIR

Each process's reward follows its own script (PATTERNS[rank]), so the processes want rounds of different
sizes and hold buffers of different lengths; each writes what it did to OUT_DIR/rank<r>.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

G = 4
V, Z = True, False
PATTERNS = {
    0: [V, V] + [V, V, V, Z] + [V, Z, Z, Z],
    1: [Z, Z] + [V, Z, V, Z] + [V, V, Z, Z],
}


def main(model_dir: str, out: str) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback

    from recipes.common.model.loading import load_tokenizer
    from recipes.common.training.monitor import RLVRMonitor
    from recipes.stages.grpo.config import RLVRGRPOConfig
    from recipes.stages.grpo.trainer import RLVRGRPOTrainer
    from tasks.synthetic import generate_rows

    args = RLVRGRPOConfig(
        output_dir=out, max_steps=2, num_generations=G, per_device_train_batch_size=2 * G,
        max_completion_length=8, learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to=[],
        bf16=False, gradient_checkpointing=False, use_cpu=True, disable_tqdm=True, beta=0.0, seed=0,
        generation_kwargs={"use_cache": True}, dynamic_sampling=True, dynamic_sampling_max_rounds=3,
        dynamic_sampling_mode="adaptive", trim_padding=False, share_prompts=False,
    )  # fmt: skip
    rank = args.process_index  # after the arguments: they set up the (gloo) process group
    pattern = list(PATTERNS[rank])

    def scripted(completions, id, **kwargs):
        groups = len(completions) // G
        flags = pattern[:groups]
        del pattern[:groups]
        return [float(i % 2) if flags[i // G] else 1.0 for i in range(len(completions))]

    steps = []

    class Record(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            steps.append({"sizes": trainer.dynamic.last_round_sizes, "buffer": len(trainer.dynamic.buffer)})

    trainer = RLVRGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        reward_funcs=[scripted],
        args=args,
        train_dataset=Dataset.from_list(generate_rows([1, 2], 20, seed=5)),
        processing_class=load_tokenizer(model_dir),
        callbacks=[Record(), RLVRMonitor(Path(out))],
    )
    trainer.train()
    (Path(out) / f"rank{rank}.json").write_text(json.dumps({"steps": steps, "left": pattern}))


if __name__ == "__main__":
    from recipes.common.command_line.process_end import end_process_group, exit_without_teardown

    main(*sys.argv[1:3])
    # as a recipe ends (recipes.common.command_line.config.run_recipe_cli): a gloo group alive at the interpreter's teardown
    # aborted a finished process in one CI run ("terminate called without an active exception", exit -6)
    if end_process_group():
        exit_without_teardown(0)
