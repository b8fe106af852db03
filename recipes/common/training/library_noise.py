"""Warnings the libraries print on every training run that say nothing about the run: silenced at their source.

* DeepSpeed's "Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it"
  on a machine without a GPU, whether or not DeepSpeed is used. accelerate imports DeepSpeed whenever it is
  installed (it is in the `dev` extra), at the first `unwrap_model` (every `save_pretrained`, every trainer),
  and DeepSpeed's import probes for an accelerator and warns when it finds none. Its own switch,
  `DS_ACCELERATOR`, names the accelerator instead of probing: set to `cpu` here only where DeepSpeed's probe
  would have concluded `cpu` anyway (torch sees no accelerator and none of DeepSpeed's device plugins is
  installed), and never over a value the user set.
* transformers 5 renamed `gradient_checkpointing*` to `activation_checkpointing*` and warns on the old names;
  TRL 1.16 reads `model.is_gradient_checkpointing` (and, with checkpointing on, calls
  `gradient_checkpointing_disable/enable`) around every generation. Python prints a warning once per place,
  but the Trainer's `warnings.catch_warnings` around each checkpoint save resets that memory, so with a
  checkpoint every step the warning came back every step. The calls are TRL's, not ours, and cannot be
  avoided from here without copying its generation code, so these three messages, from
  transformers.modeling_utils, are filtered out; every other deprecation warning still shows.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings

# DeepSpeed's accelerator plugins (deepspeed/accelerator/real_accelerator.py probes these before CUDA).
_DEEPSPEED_DEVICE_PLUGINS = (
    "intel_extension_for_pytorch", "torch_npu", "torch_sdaa", "habana_frameworks", "torch_mlu", "torch_supa",
    "torch_xmlir",
)  # fmt: skip


def quiet_deepspeed_accelerator_probe() -> bool:
    """Tell DeepSpeed it runs on the CPU where its probe would find nothing else; True when it was set."""
    if "DS_ACCELERATOR" in os.environ or "deepspeed" in sys.modules or not _installed("deepspeed"):
        return False
    if any(_installed(plugin) for plugin in _DEEPSPEED_DEVICE_PLUGINS):
        return False
    import torch

    if torch.accelerator.is_available():
        return False
    os.environ["DS_ACCELERATOR"] = "cpu"
    return True


def ignore_trl_checkpointing_aliases() -> None:
    """Filter transformers' deprecation of the checkpointing aliases that TRL calls (see the module docstring)."""
    warnings.filterwarnings(
        "ignore",
        message=r"`(is_gradient_checkpointing|gradient_checkpointing_enable|gradient_checkpointing_disable)` "
        r"is deprecated",
        category=FutureWarning,
        module=r"transformers\.modeling_utils",
    )


def quiet_library_noise() -> None:
    """Both of the above; called by the training entry points before they load or save a model."""
    quiet_deepspeed_accelerator_probe()
    ignore_trl_checkpointing_aliases()


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
