"""What the sandbox tests observe from outside a run: files, processes, a TCP listener, the mode in use.

The checks look at the machine itself, not at what `run_python` reports: a file that changed, a process
that carries the run's token in its environment, a connection that reached the listener.
"""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from pathlib import Path

import pytest

from rewards.code.sandbox import SandboxUnavailableError, run_python

REPO = Path(__file__).resolve().parents[2]
TOKEN_VARIABLE = "RLVR_RUN_TOKEN"


def require_namespaces() -> None:
    """Skip where the kernel refuses namespaces, except in CI, whose machines must have them."""
    try:
        result = run_python("print('ok')", timeout_s=20, isolation="namespaces")
    except SandboxUnavailableError as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"this kernel does not allow the sandbox's namespaces: {error}")
    assert result.status == "ok" and result.stdout == "ok\n", result


def require(condition: bool, why: str) -> None:
    """Skip where this machine lacks what a test needs, except in CI, whose machines must have it (as root, with
    writable cgroups): there a missing part is a failure, so that no skip can hide a gap where it counts."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must have this: {why}")
    pytest.skip(why)


def outside_directory() -> Path:
    """A fresh world-writable directory that the sandbox can see (not under /tmp, which it replaces)."""
    for parent in ("/var/tmp", str(REPO)):
        if os.path.isdir(parent) and os.access(parent, os.W_OK):
            path = Path(tempfile.mkdtemp(prefix="rlvr-outside-", dir=parent))
            path.chmod(0o777)
            return path
    raise RuntimeError("no writable directory outside /tmp")


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `directory` with its content and mode."""
    return {
        str(path.relative_to(directory)): (
            path.read_bytes() if path.is_file() else b"",
            stat.S_IMODE(path.stat().st_mode),
        )
        for path in sorted(directory.rglob("*"))
    }


def processes_with_token(token: str) -> list[int]:
    """Live (non-zombie) processes whose environment holds `RLVR_RUN_TOKEN=token`."""
    needle = f"{TOKEN_VARIABLE}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue  # gone, or a zombie, or not ours to read
    return found


class Listener:
    """A TCP listener on 127.0.0.1 at a free port; `connections()` says how many reached it."""

    def __init__(self):
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.socket.setblocking(False)
        self.port = self.socket.getsockname()[1]

    def connections(self) -> int:
        count = 0
        while True:
            try:
                connection, _ = self.socket.accept()
            except BlockingIOError:
                return count
            connection.close()
            count += 1

    def close(self) -> None:
        self.socket.close()
