"""How a recipe's process ends in a multi-process launch: it leaves the process group in order, and a finished
process exits without the interpreter's teardown (`run_recipe_cli` calls both)."""

from __future__ import annotations

import logging
import os
import sys


def end_process_group(wait_for_others: bool = True) -> bool:
    """Leave the process group in order before the interpreter exits; True when there was one to leave.

    A gloo group still alive at exit can abort a process that has finished ("terminate called without an
    active exception", exit code -6), and the launcher then reports the whole finished run as failed. After
    Ctrl-C the other processes may be gone: waiting for them at a barrier would hang, so only leave.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return False
    try:
        if wait_for_others:
            dist.barrier()
    finally:
        dist.destroy_process_group()
    return True


def exit_without_teardown(code: int) -> None:
    """End a finished process of a multi-process launch without the interpreter's teardown.

    Leaving the group is not enough under DeepSpeed: its ZeRO-3 hooks keep the model, and with it process
    groups and their pending gloo work, alive in module globals (deepspeed.runtime.zero.parameter_offload's
    FWD_MODULE_STACK, its autograd Function classes), so they are destroyed during interpreter finalization, in
    no set order; one finished CI run aborted there ("terminate called without an active exception", exit -6)
    after its model was saved. Every file is written and every process has passed the barrier by now, so the
    process flushes its logs and streams and ends with `os._exit`, which runs no finalizers.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe has nothing left to lose
            pass
    os._exit(code)
