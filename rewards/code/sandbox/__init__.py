"""Run an untrusted Python program on this machine, with nothing else installed, and always get an answer.

During RL a policy will sooner or later write infinite loops, fork bombs, memory bombs, floods of output,
code that deletes files, and code that attacks the judge itself. Two entry points:

- `run_python(code, stdin)`: the program's stdout comes back; the caller compares it (stdin/stdout tests).
- `run_judged(solution, setup, cases, names)`: assert-style tests. The tests run in a trusted judge
  process outside the sandbox (rewards/code/sandbox/judge.py); the sandbox runs only a small server with the
  solution, which answers calls with plain data over a pipe (rewards/code/sandbox/protocol.py). The judge never
  shares a process, a uid or a file system view with the program it judges, but it shares the run's
  cgroups and limits: its CPU time and memory (a reply built to be slow or large to decode) are the run's.

The sandbox (`isolation="namespaces"`, Linux; the launcher, rewards/code/sandbox/launcher.py, does the work):
- a root file system built from nothing (rewards/code/sandbox/root.py): the interpreter, its standard library,
  the libraries they load and an allowlist of packages, read-only, from a copy in memory (so no page of a
  shared disk file, whose cache state would outlive the run); a private size-capped tmpfs for /tmp and
  /dev/shm; a /proc of the run's processes only; no project tree, no site-packages, no host /tmp, /work,
  /run, sockets or FIFOs;
- pid, network (no route anywhere), IPC and hostname namespaces; as root, a uid of the run's own, drawn at
  random; otherwise a user namespace gives the unprivileged caller the rights to set this up;
- no kernel state that outlives the run (issue 29): a seccomp filter (rewards/code/sandbox/seccomp.py) denies
  keyrings, page cache probes, new namespaces, io_uring, bpf, ptrace and the like; the program gets a
  session keyring of its own, and stdin is a sealed memory file it cannot write;
- a cgroup per run where the host lets us make one (rewards/code/sandbox/cgroup.py): memory, processes and
  cores for the run as a whole, killed as a whole and empty before the call returns; elsewhere the
  process count times the per-process address space is kept within `memory_mb`;
- `timeout_s` counts CPU seconds (of the whole run where a cgroup counts them, else per process): verdicts
  are by CPU time, not by the host's load. The wall-clock ceiling (`wall_timeout_s`, default three times
  the timeout plus a second) is only for a program that sleeps or waits; runs go at most one per core this
  process may use, across threads and reward calls (rewards/code/sandbox/process.py); the call returns within
  the ceiling plus half a second (two and a half for a judged run, whose judge then decides the cases
  answered before), with no process of the run left;
- always: rlimits, an environment reduced to an allowlist, stdout and stderr read as they come and capped.
- fallback (`isolation="fallback"`, or where the kernel refuses namespaces): rlimits, cgroups where
  available, a temporary directory, the kill of every descendant, and as root a uid of its own. A
  one-time warning says what is not isolated: the file system above all, so a program can read whatever
  its uid may (a dataset's answers included). Training should not rely on it.

`RLVR_SANDBOX_ISOLATION` (auto, namespaces, fallback) sets the default mode. Without libseccomp every run
raises SandboxUnavailableError, unless `RLVR_SANDBOX_SECCOMP=off` waives the filter. Nothing here uses signals
in the calling thread, so runs may be made from worker threads; `run_many` runs a batch with a
concurrency limit.

The caller's side, by job: entry_points.py (the calls above), run.py (one run: its mode, cgroup, root and
cleanup), settings.py (a run's options, limits and environment), results.py (RunResult), process.py (the
launch), leftovers.py (what killed callers left behind), live.py (a program kept across exchanges with its caller,
with per-exchange budgets: the python tool's interpreter); the rest is named above.
"""

from rewards.code.sandbox.entry_points import default_concurrency, isolation_info, run_judged, run_many, run_python
from rewards.code.sandbox.results import RunResult, SandboxUnavailableError
from rewards.code.sandbox.run import ISOLATION_ENV, UID_BASE
from rewards.code.sandbox.settings import MAX_OUTPUT_BYTES

__all__ = [
    "ISOLATION_ENV",
    "MAX_OUTPUT_BYTES",
    "UID_BASE",
    "RunResult",
    "SandboxUnavailableError",
    "default_concurrency",
    "isolation_info",
    "run_judged",
    "run_many",
    "run_python",
]
