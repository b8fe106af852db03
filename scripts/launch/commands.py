"""The commands of a multi-node GRPO run: one vLLM server node (server mode) and N training nodes (accelerate with
DeepSpeed ZeRO-3), or N training nodes with vLLM colocated in each process. For clusters without SLURM: run each
printed line on its node; scripts/launch/train.slurm runs the same lines under SLURM.

    python scripts/launch/commands.py --config recipes/configs/qwen2.5-7b/dapo.yaml --nodes 4 --gpus-per-node 8 \\
        --main-ip 10.0.0.1 [--vllm-mode server --vllm-host 10.0.0.9 --vllm-tp 8] [--node-rank 2]

Server mode: the vLLM node serves the config's model as TRL 1.16 expects it (scripts/launch/vllm_serve.py: `vllm
serve` with the NCCL weight-transfer engine and processed log-probs, as TRL's `vllm_serve.build_command` starts
it), and the training processes push their weights there before each generation. Colocate mode: no vLLM node; the config's own vLLM options apply. See
docs/scaling.md for the memory each choice needs.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
ZERO3 = "recipes/accelerate/zero3.yaml"
MASTER_PORT = 29500


def vllm_server_command(model: str, port: int, tensor_parallel: int, data_parallel: int = 1) -> str:
    """The vLLM node's command: scripts/launch/vllm_serve.py, vLLM's server as TRL 1.16 expects it (on a GPU, what
    the deprecated `trl vllm-serve` starts: the NCCL weight-transfer engine, processed log-probs)."""
    return (
        f"python scripts/launch/vllm_serve.py {shlex.quote(model)} --host 0.0.0.0 --port {port} "
        f"--tensor-parallel-size {tensor_parallel} --data-parallel-size {data_parallel}"
    )


def training_command(
    config: str, nodes: int, gpus_per_node: int, node_rank: int, main_ip: str, vllm: dict | None
) -> str:
    """One training node's `accelerate launch` of recipes/grpo.py (ZeRO-3 across all training processes)."""
    launch = (
        f"accelerate launch --config_file {ZERO3} --num_machines {nodes} --num_processes {nodes * gpus_per_node} "
        f"--machine_rank {node_rank} --main_process_ip {main_ip} --main_process_port {MASTER_PORT}"
    )
    recipe = f"recipes/grpo.py --config {shlex.quote(config)}"
    if vllm is not None:
        recipe += (
            f" --use_vllm true --vllm_mode server --vllm_server_host {vllm['host']} --vllm_server_port {vllm['port']}"
        )
    return f"{launch} {recipe}"


def commands(args) -> list[tuple[str, str]]:
    """(where, command) for every node of the run."""
    path = Path(args.config) if Path(args.config).is_file() else REPO / args.config
    config = yaml.safe_load(path.read_text())
    lines = []
    vllm = None
    if args.vllm_mode == "server":
        if not args.vllm_host:
            raise SystemExit("error: --vllm-mode server needs --vllm-host (the node that serves vLLM)")
        model = config["model_name_or_path"]
        lines.append((f"vllm node {args.vllm_host}", vllm_server_command(model, args.vllm_port, args.vllm_tp)))
        vllm = {"host": args.vllm_host, "port": args.vllm_port}
    ranks = range(args.nodes) if args.node_rank is None else [args.node_rank]
    for rank in ranks:
        where = f"training node {rank}" + (f" ({args.main_ip})" if rank == 0 else "")
        lines.append((where, training_command(args.config, args.nodes, args.gpus_per_node, rank, args.main_ip, vllm)))
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="a recipes/grpo.py config")
    parser.add_argument("--nodes", type=int, default=1, help="training nodes")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--main-ip", default="127.0.0.1", help="the first training node's address")
    parser.add_argument("--node-rank", type=int, default=None, help="print only this training node's command")
    parser.add_argument("--vllm-mode", choices=("colocate", "server"), default="colocate")
    parser.add_argument("--vllm-host", default=None, help="server mode: the vLLM node's address")
    parser.add_argument("--vllm-port", type=int, default=8000)
    parser.add_argument("--vllm-tp", type=int, default=8, help="server mode: tensor parallelism of the vLLM node")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    for where, command in commands(parse_args(argv)):
        print(f"# {where}\n{command}")


if __name__ == "__main__":
    main()
