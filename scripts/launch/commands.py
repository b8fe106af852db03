"""The commands of a multi-node GRPO run, each as it runs when pasted into a shell on its node: one vLLM server
node (server mode) and N training nodes (accelerate with DeepSpeed ZeRO-3), or N training nodes with vLLM
colocated in each process. For clusters without SLURM: run each printed line on its node;
scripts/launch/train.slurm runs the same lines under SLURM.

    python scripts/launch/commands.py --config recipes/configs/qwen2.5-7b/dapo.yaml --nodes 4 --gpus-per-node 8 \\
        --main-ip 10.0.0.1 [--vllm-mode server --vllm-host 10.0.0.9 --vllm-tp 8] [--node-rank 2 | --vllm-node] \\
        [--global-batch 2048] [-- any recipes/grpo.py option, e.g. --max_steps 100]

Every line starts in the checkout (`cd`, --repo), names its interpreter (--python, the venv's; accelerate runs as
`python -m accelerate.commands.launch`, not whichever `accelerate` a node's PATH finds first) and the environment
it needs: HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 where the model and the data are local (a Hub id is left to
the node's own setting: it downloads, or reads a cache), RLVR_VLLM_PUSH_DIR where --push-dir names the folder a
CPU build of vLLM takes its weights from (recipes.stages.grpo.vllm_cpu). Options after `--` go to recipes/grpo.py
on every training line; a `--model_name_or_path` among them is what the vLLM node serves too.

The global batch, per_device_train_batch_size x gradient_accumulation_steps x processes completions a step, is
what a recipe's results were measured at; a config gives its factors for the process count it was written for,
and CONFIG_PROCESSES below states that count for the shipped GPU configs (the recipes' parser refuses YAML keys
it does not know, and no GRPOConfig field holds a process count, so it cannot live in the YAML). On another count
the printer keeps the batch by setting gradient_accumulation_steps (an override on each training line) and says
so in one line on stderr, or refuses in one line (exit 2) where the batch does not divide. `--global-batch N`
asks for another batch; a config not in CONFIG_PROCESSES keeps its per-process numbers, as that line says.

Server mode: the vLLM node serves the config's model as TRL 1.16 expects it (scripts/launch/vllm_serve.py: `vllm
serve` with the NCCL weight-transfer engine and processed log-probs, as TRL's `vllm_serve.build_command` starts
it), and the training processes push their weights there before each generation. Colocate mode: no vLLM node;
the config's own vLLM options apply. See docs/scaling.md for the memory each choice needs.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "recipes" / "configs"
ZERO3 = "recipes/accelerate/zero3.yaml"
PYTHON = ".venv/bin/python"
MASTER_PORT = 29500
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}

# The processes each shipped GPU GRPO config's batch was written for, by its path under recipes/configs/ (the
# "N GPUs x ..." arithmetic of its comment, which tests/test_launch_commands.py holds to these numbers).
CONFIG_PROCESSES = {
    "deepseek-r1-distill-qwen-1.5b/dapo.yaml": 8,
    "qwen2.5-7b/dapo.yaml": 16,
    "qwen2.5-math-1.5b/dapo.yaml": 8,
    "qwen2.5-math-1.5b/dapo_tools.yaml": 8,
    "qwen2.5-math-1.5b/dr_grpo.yaml": 8,
    "qwen2.5-math-1.5b/grpo.yaml": 8,
    "qwen2.5-coder-1.5b/grpo_code.yaml": 8,
}


class LaunchError(ValueError):
    """An option of the printer is wrong; the message names it and the fix."""


def _to_stderr(line: str) -> None:
    print(f"commands.py: {line}", file=sys.stderr)


def recipe_option(options: list[str], name: str) -> str | None:
    """The last value given to `--name` among recipe options (`--name value` or `--name=value`), else None."""
    value = None
    for index, word in enumerate(options):
        flag, equals, given = word.partition("=")
        if flag == f"--{name}":
            value = given if equals else (options[index + 1] if index + 1 < len(options) else None)
    return value


def reads_the_hub(name: str | None) -> bool:
    """Does a model or dataset name ask the Hub: an `owner/name` id that is no path in the checkout? Local folders,
    files and generated sets (`synthetic:5-10`) run on a node without the Hub."""
    if not name or ":" in name or name.startswith(("/", ".", "~")) or len(name.split("/")) != 2:
        return False
    return not (REPO / name).exists()


def shell_line(repo: str, environment: dict[str, str], argv: list[str]) -> str:
    """`cd REPO && VAR=value ... argv`, quoted for a POSIX shell."""
    assignments = [f"{key}={shlex.quote(value)}" for key, value in environment.items()]
    return " ".join([f"cd {shlex.quote(repo)} &&", *assignments, shlex.join(argv)])


def accumulation_for(
    config: dict, config_name: str, per_device: int, processes: int, global_batch: int | None
) -> tuple[int, str]:
    """(gradient_accumulation_steps that keeps the global batch on `processes`, one line saying what it kept or
    changed). `per_device` is what the training lines run with (the config's, or an override after `--`)."""
    accumulation = int(config.get("gradient_accumulation_steps", 1))
    written_for = CONFIG_PROCESSES.get(config_name)
    if global_batch is None and written_for is None:
        batch = per_device * accumulation * processes
        return accumulation, (
            f"{config_name} is not in CONFIG_PROCESSES (the processes its batch was written for), so its numbers "
            f"are taken per process: {per_device} x {accumulation} accumulation x {processes} processes = {batch} "
            f"completions a step; --global-batch N keeps another"
        )
    if global_batch is None:
        global_batch = int(config["per_device_train_batch_size"]) * accumulation * written_for
        wanted = f"{config_name}'s global batch ({global_batch} completions, written for {written_for} processes)"
    else:
        wanted = f"--global-batch {global_batch}"
    generations = int(config.get("num_generations", 1))
    if global_batch <= 0 or global_batch % generations:
        raise LaunchError(f"--global-batch {global_batch} must be a positive multiple of num_generations {generations}")
    micro_step = per_device * processes
    if global_batch % micro_step:
        nearest = max(1, round(global_batch / micro_step)) * micro_step
        raise LaunchError(
            f"{wanted} does not divide into {processes} processes x per_device_train_batch_size {per_device} = "
            f"{micro_step} completions a micro-step: give --global-batch {nearest} (a multiple of {micro_step}), "
            f"other --nodes/--gpus-per-node, or another per_device_train_batch_size after `--`"
        )
    kept = global_batch // micro_step
    if kept == accumulation:
        return kept, f"{wanted} kept: {processes} processes x {per_device} x {kept} accumulation, as the config has it"
    return kept, (
        f"{wanted} kept on {processes} processes: gradient_accumulation_steps {accumulation} -> {kept} "
        f"(--gradient_accumulation_steps {kept} on each training line)"
    )


def vllm_server_argv(python: str, model: str, port: int, tensor_parallel: int) -> list[str]:
    """The vLLM node's command: scripts/launch/vllm_serve.py, vLLM's server as TRL 1.16 expects it (on a GPU, what
    the deprecated `trl vllm-serve` starts: the NCCL weight-transfer engine, processed log-probs)."""
    return [
        python, "scripts/launch/vllm_serve.py", model, "--host", "0.0.0.0", "--port", str(port),
        "--tensor-parallel-size", str(tensor_parallel), "--data-parallel-size", "1",
    ]  # fmt: skip


def training_argv(args, config: str, node_rank: int, recipe_options: list[str]) -> list[str]:
    """One training node's `accelerate launch` of recipes/grpo.py (ZeRO-3 across all training processes)."""
    return [
        args.python, "-m", "accelerate.commands.launch", "--config_file", args.accelerate_config,
        "--num_machines", str(args.nodes), "--num_processes", str(args.nodes * args.gpus_per_node),
        "--machine_rank", str(node_rank), "--main_process_ip", args.main_ip, "--main_process_port", str(args.main_port),
        "recipes/grpo.py", "--config", config, *recipe_options,
    ]  # fmt: skip


def _config_path(given: str) -> Path:
    for path in (Path(given), REPO / given):
        if path.is_file():
            return path.resolve()
    raise LaunchError(f"--config {given}: no such file (the shipped ones are under recipes/configs/)")


def _check(args) -> None:
    if args.nodes < 1 or args.gpus_per_node < 1:
        raise LaunchError("--nodes and --gpus-per-node must be 1 or more")
    if args.node_rank is not None and not 0 <= args.node_rank < args.nodes:
        raise LaunchError(f"--node-rank {args.node_rank} is not a training node: give 0 to {args.nodes - 1}")
    if args.vllm_mode == "server" and not args.vllm_host:
        raise LaunchError("--vllm-mode server needs --vllm-host (the node that serves vLLM)")
    if args.vllm_mode != "server" and (args.vllm_node or args.push_dir):
        raise LaunchError("--vllm-node and --push-dir are for --vllm-mode server (colocate mode has no vLLM node)")
    if recipe_option(args.recipe_options, "gradient_accumulation_steps") is not None:
        raise LaunchError(
            "--gradient_accumulation_steps after `--`: the printer sets it to keep the global batch; "
            "give --global-batch N instead"
        )


def commands(args, say: Callable[[str], None] = _to_stderr) -> list[tuple[str, str]]:
    """(where, command) for every node asked for; `say` gets the one line on the global batch."""
    _check(args)
    path = _config_path(args.config)
    config = yaml.safe_load(path.read_text()) or {}
    config_name = str(path.relative_to(CONFIG_DIR)) if path.is_relative_to(CONFIG_DIR) else str(path)
    shown = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
    options = list(args.recipe_options)
    model = recipe_option(options, "model_name_or_path") or config["model_name_or_path"]
    dataset = recipe_option(options, "dataset_name") or config.get("dataset_name")
    lines = []
    if args.vllm_mode == "server":
        environment = {} if reads_the_hub(model) else {"HF_HUB_OFFLINE": "1"}
        serve = vllm_server_argv(args.python, model, args.vllm_port, args.vllm_tp)
        lines.append((f"vllm node {args.vllm_host}", shell_line(args.repo, environment, serve)))
        options = [
            "--use_vllm", "true", "--vllm_mode", "server", "--vllm_server_host", args.vllm_host,
            "--vllm_server_port", str(args.vllm_port), *options,
        ]  # fmt: skip
    if args.vllm_node:
        return lines
    per_device = recipe_option(options, "per_device_train_batch_size") or config.get("per_device_train_batch_size")
    if per_device is None:
        raise LaunchError(f"{shown} sets no per_device_train_batch_size: give one after `--`")
    per_device = int(per_device)
    processes = args.nodes * args.gpus_per_node
    accumulation, note = accumulation_for(config, config_name, per_device, processes, args.global_batch)
    say(note)
    if accumulation != int(config.get("gradient_accumulation_steps", 1)):
        options = ["--gradient_accumulation_steps", str(accumulation), *options]
    environment = {} if reads_the_hub(model) or reads_the_hub(dataset) else dict(OFFLINE)
    if args.push_dir:
        environment["RLVR_VLLM_PUSH_DIR"] = args.push_dir
    ranks = range(args.nodes) if args.node_rank is None else [args.node_rank]
    for rank in ranks:
        where = f"training node {rank}" + (f" ({args.main_ip})" if rank == 0 else "")
        lines.append((where, shell_line(args.repo, environment, training_argv(args, shown, rank, options))))
    return [line for line in lines if args.node_rank is None or line[0].startswith("training")]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="a recipes/grpo.py config")
    parser.add_argument("--nodes", type=int, default=1, help="training nodes")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="training processes a node")
    parser.add_argument("--main-ip", default="127.0.0.1", help="the first training node's address")
    parser.add_argument("--main-port", type=int, default=MASTER_PORT, help="its port for the process group")
    parser.add_argument("--node-rank", type=int, default=None, help="print only this training node's command")
    parser.add_argument("--global-batch", type=int, default=None, help="completions a step (default: the config's)")
    parser.add_argument("--vllm-mode", choices=("colocate", "server"), default="colocate")
    parser.add_argument("--vllm-host", default=None, help="server mode: the vLLM node's address")
    parser.add_argument("--vllm-port", type=int, default=8000)
    parser.add_argument("--vllm-tp", type=int, default=8, help="server mode: tensor parallelism of the vLLM node")
    parser.add_argument("--vllm-node", action="store_true", help="server mode: print only the vLLM node's command")
    parser.add_argument("--push-dir", default=None, help="server mode, CPU build of vLLM: a folder both sides read")
    parser.add_argument("--repo", default=str(REPO), help="the checkout on the nodes (default: this one)")
    parser.add_argument("--python", default=PYTHON, help="the interpreter on the nodes, relative to --repo or not")
    parser.add_argument("--accelerate-config", default=ZERO3, help="accelerate's config for the training lines")
    args = parser.parse_args(argv[:split])
    args.recipe_options = argv[split + 1 :]
    return args


def main(argv: list[str] | None = None) -> None:
    try:
        lines = commands(parse_args(argv))
    except LaunchError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    for where, command in lines:
        print(f"# {where}\n{command}")


if __name__ == "__main__":
    main()
