"""The settings of one sandbox run: its options with their defaults, the limits they make, and the program's
environment (an allowlist: nothing of the caller's is inherited)."""

from __future__ import annotations

MAX_OUTPUT_BYTES = 1_000_000
# The wall-clock ceiling over a run's CPU-time limit (issue 37): verdicts are by CPU time, and a run on a
# loaded host gets its CPU seconds slower; at db84883 the ceiling was the limit plus half a second, and a
# correct program that needed 70% of its CPU time failed while the trainer held the cores. A program that
# only sleeps holds its slot this long.
WALL_FACTOR, WALL_EXTRA_S = 3.0, 1.0
# Without a memory cgroup a run may have this many processes (threads count too), each with memory_mb / this
# of address space: together never more than memory_mb. Most programs are one process; 4 leaves room for a few.
FALLBACK_PROCESSES = 4


def with_defaults(**options) -> dict:
    """The options of a run: those given, checked by name, and the defaults for the rest."""
    defaults = {
        "timeout_s": 5.0,
        "wall_timeout_s": None,
        "memory_mb": 512,
        "file_size_mb": 64,
        "disk_mb": 128,
        "max_processes": 64,
        "max_open_files": 256,
        "max_output_bytes": MAX_OUTPUT_BYTES,
        "isolation": None,
        "python": None,
        "extra_env": None,
        "packages": (),
    }
    unknown = set(options) - set(defaults)
    if unknown:
        raise TypeError(f"unknown sandbox options: {sorted(unknown)}")
    return {**defaults, **options}


def run_limits(
    timeout_s: float, wall_timeout_s: float | None, memory_mb: int, max_processes: int, group, options: dict
) -> dict:
    """The numbers of one run. Without a memory cgroup, processes x address space stays within memory_mb."""
    processes = max_processes
    address_space = memory_mb
    if group is None or not group.limits_memory:
        processes = max(1, min(max_processes, FALLBACK_PROCESSES))
        address_space = memory_mb // processes
    return {
        "cpu_s": timeout_s,
        "wall_s": wall_timeout_s if wall_timeout_s is not None else WALL_FACTOR * timeout_s + WALL_EXTRA_S,
        "rlimit_cpu_s": max(1, int(timeout_s + 0.999)),
        "memory_mb": memory_mb,
        "max_output_bytes": options["max_output_bytes"],
        "launcher": {
            "address_space": address_space * 1024 * 1024,
            "cpu_s": max(1, int(timeout_s + 0.999)),
            "file_size": options["file_size_mb"] * 1024 * 1024,
            "nproc": processes,
            "open_files": options["max_open_files"],
        },
    }


def environment(home: str, extra_env: dict[str, str] | None) -> dict[str, str]:
    """The program's whole environment: nothing is inherited, so no token or secret of the caller leaks."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": home,
        "TMPDIR": home,
        # Under RLIMIT_AS every thread's malloc arena and every BLAS thread reserves address space.
        "MALLOC_ARENA_MAX": "2",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update(extra_env or {})
    return env
