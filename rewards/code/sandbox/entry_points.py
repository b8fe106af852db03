"""The sandbox's entry points: `run_python` (the program's stdout comes back), `run_judged` (assert-style
tests on the trusted side), `run_many` (a batch), and what this machine gives a run (`isolation_info`,
`default_concurrency`)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rewards.code.sandbox.process import max_runs
from rewards.code.sandbox.results import RunResult
from rewards.code.sandbox.run import namespaces_problem, run_program
from rewards.code.sandbox.settings import with_defaults

PROTOCOL = Path(__file__).with_name("protocol.py")  # copied into the sandbox as the call server


def default_concurrency() -> int:
    """The runs this process may have at once: the cores its affinity and cgroup grant, one per run
    (rewards.code.sandbox.process.max_runs, the limit every launch waits on anyway)."""
    return max_runs()


def run_python(
    code: str, stdin: str | None = None, timeout_s: float = 5.0, memory_mb: int = 512, **options
) -> RunResult:
    """Run `code` as `python main.py` in a fresh working directory, feeding it `stdin`.

    Options: `timeout_s` (CPU seconds), `wall_timeout_s` (the wall-clock ceiling; default 3 x timeout + 1 s),
    `memory_mb` (the whole run), `file_size_mb` (each file), `disk_mb` (the private /tmp and /dev/shm: a tmpfs,
    so memory), `max_processes`, `max_open_files`, `max_output_bytes`, `packages` (names of installed
    packages the program may import, besides the standard library), `isolation` ("auto": namespaces where
    the kernel allows, else the fallback; "namespaces": raise SandboxUnavailableError if not possible;
    "fallback"; None reads RLVR_SANDBOX_ISOLATION), `python` (default: this interpreter), `extra_env`.
    """
    settings = with_defaults(timeout_s=timeout_s, memory_mb=memory_mb, **options)
    return run_program({"main.py": code.encode()}, "main.py", stdin, None, settings)


def run_judged(
    solution: str,
    setup: str,
    cases: Sequence[str],
    names: Sequence[str] = (),
    **options,
) -> RunResult:
    """Judge `solution` against assert-style `cases` (after `setup`), the tests on the trusted side.

    `names` are the solution's functions that the tests call (the entry point); names that the cases call
    and the setup does not define are added. `RunResult.cases` maps each judged case to (passed, detail);
    index -1 means the solution or the setup failed before any case. Every case runs to its end whatever the
    program answers, and the answers are compared only after the program has gone (rewards/code/sandbox/judge.py):
    nothing a program sees while it runs depends on whether its answers were right. Options as for `run_python`.
    """
    settings = with_defaults(**options)
    files = {"serve.py": PROTOCOL.read_bytes(), "solution.py": solution.encode()}
    spec = {"setup": setup, "cases": list(cases), "names": list(names)}
    return run_program(files, "serve.py", None, spec, settings)


def run_many(
    programs: Sequence[tuple[str, str | None]], max_concurrency: int | None = None, **limits
) -> list[RunResult]:
    """Run `(code, stdin)` pairs, at most `max_concurrency` at a time (default: one per core), in order."""
    workers = max(1, max_concurrency or default_concurrency())
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as pool:
        return list(pool.map(lambda program: run_python(program[0], program[1], **limits), programs))


def isolation_info(isolation: str | None = None) -> dict[str, object]:
    """The mode a run gets on this machine and whether its network is isolated, found by running a no-op."""
    result = run_python("print('ok')", timeout_s=10.0, isolation=isolation)
    return {
        "isolation": result.isolation,
        "network_isolated": result.network_isolated,
        "works": result.status == "ok" and result.stdout.strip() == "ok",
        "namespaces_problem": namespaces_problem(),
    }
