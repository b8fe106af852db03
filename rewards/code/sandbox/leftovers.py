"""What callers killed mid-run left behind: entries named after their maker's pid, whose maker is gone.

The sandbox names what it makes outside a run after the process that made it (cgroups, rewards.code.sandbox.cgroup;
copies of the root, rewards.code.sandbox.root), so that a later caller can tell the leftovers of one that died
without cleaning up (killed: atexit never ran) from the live ones of its neighbours.
"""

from __future__ import annotations

import os
from collections.abc import Callable


def stale_entries(directory: str, prefix: str, pid_part: int, fits: Callable[[list[str]], bool]) -> list[str]:
    """The paths of the entries of `directory` named `prefix...` whose maker is gone: its pid is part `pid_part`
    of the name split at dashes, and no such process is running. `fits(parts)` says which names to consider at
    all; none when the directory cannot be read."""
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    stale = []
    for entry in entries:
        parts = entry.split("-")
        if entry.startswith(prefix) and fits(parts) and parts[pid_part].isdigit():
            if not os.path.exists(f"/proc/{parts[pid_part]}"):
                stale.append(os.path.join(directory, entry))
    return stale
