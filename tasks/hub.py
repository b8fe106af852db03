"""Can a Hub model or dataset be had from here? One answer, in one line, in seconds.

Without this, a Hub id on a machine that cannot reach the Hub (a cluster's compute nodes, this project's
machines) costs about 50 s of the Hub client's retries, each warning printed twice, then a traceback; with
HF_HUB_OFFLINE=1 it is immediate, but a user has to know that variable. So before anything is loaded, the
recipes, the evaluator and the data loader ask `hub_problem`: nothing to say when the files are in the
local cache or the Hub answers (a TCP connection to its endpoint within a few seconds, asked once per
process); otherwise the reason, naming the id, HF_HUB_OFFLINE=1 and a local path. What this adds to
huggingface_hub: a bounded look before the client's own retries.
"""

from __future__ import annotations

import functools
import os
import socket
from urllib.parse import urlparse

REACH_TIMEOUT_S = 3.0


def offline() -> bool:
    """HF_HUB_OFFLINE is set (to anything but 0/false)."""
    return os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() not in ("0", "", "false", "no")


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


@functools.lru_cache(maxsize=4)
def hub_reachable(url: str, timeout_s: float = REACH_TIMEOUT_S) -> bool:
    """Does a TCP connection to the Hub's endpoint open within `timeout_s` (DNS included)?"""
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "", port), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def _cached(repo_id: str, kind: str) -> bool:
    from huggingface_hub import scan_cache_dir, try_to_load_from_cache

    if kind == "model":
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    try:  # a dataset's files have no one name to look for: any cached revision of the repository will do
        return any(repo.repo_id == repo_id and repo.repo_type == "dataset" for repo in scan_cache_dir().repos)
    except Exception:  # noqa: BLE001 - no cache folder yet, or one the scanner cannot read: nothing cached
        return False


def hub_problem(repo_id: str, kind: str = "model") -> str | None:
    """None if the Hub `kind` ("model" or "dataset") `repo_id` can be had here; else why not, in one line."""
    if kind not in ("model", "dataset"):
        raise ValueError(f"kind must be model or dataset, not {kind!r}")
    download = f"hf download {repo_id}" + (" --repo-type dataset" if kind == "dataset" else "")
    if offline():
        if kind == "dataset" or _cached(repo_id, kind):
            return None  # datasets reads its own cache offline, and names a set that is not in it
        return (
            f"Hub {kind} {repo_id!r} is not in the local cache and HF_HUB_OFFLINE is set: download it where the Hub "
            f"is reachable ({download}) or give a local path"
        )
    if hub_reachable(endpoint()):
        return None
    if _cached(repo_id, kind):
        return f"Hub {kind} {repo_id!r}: the Hub ({endpoint()}) cannot be reached from this machine; the {kind} is in the local cache: set HF_HUB_OFFLINE=1 to use it"
    return (
        f"Hub {kind} {repo_id!r}: the Hub ({endpoint()}) cannot be reached from this machine and the {kind} is not "
        f"in the local cache: give a local path, or download it where the Hub is reachable ({download}) and run "
        "with HF_HUB_OFFLINE=1"
    )
