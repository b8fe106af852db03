"""What a sandbox run returns (RunResult), and the error raised when the isolation asked for cannot be had."""

from __future__ import annotations

from dataclasses import dataclass, field


class SandboxUnavailableError(RuntimeError):
    """The isolation asked for cannot be had here: `isolation="namespaces"` where the kernel refuses them, or
    any run without libseccomp (see rewards/code/sandbox/seccomp.py)."""


@dataclass(frozen=True)
class RunResult:
    """What one run did.

    `status` is "ok" (exit code 0), "timeout" (wall clock or CPU limit), "memory" (the address-space
    limit, or the kernel's OOM killer) or "error" (any other failure, including output past the cap).
    `reason` says it in words. `network_isolated` is True only when the program ran in its own network
    namespace; `isolation` is the mode that was used.
    """

    status: str
    stdout: str
    stderr: str
    returncode: int | None
    wall_s: float
    network_isolated: bool
    isolation: str
    output_truncated: bool = False
    reason: str = ""
    cpu_s: float | None = None  # CPU seconds of the whole run, where a cgroup counted them
    cases: dict[int, tuple[bool, str]] = field(default_factory=dict)  # run_judged: case -> (passed, detail)
    cgroup: bool = False  # the run had a cgroup of its own
