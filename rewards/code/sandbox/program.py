"""The program's own process, from fork to execve, and the ways the launcher ends all of a run's processes.

Loaded by rewards/code/sandbox/launcher.py by path, after seccomp.py and mounts.py, which it imports by the
names the launcher loads them under, sandbox_seccomp and sandbox_mounts (standard library only, like the
launcher). `exec_program` runs in the forked
child that becomes the program: its working directory and file descriptors, its rlimits, an unprivileged
uid, a session keyring of its own, no_new_privs, the seccomp filter, then execve. The rest serves the
launcher: `report` (its events), `prctl`, the uids of a run, and the kills of the fallback mode.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import signal

import sandbox_mounts
import sandbox_seccomp

PR_SET_NO_NEW_PRIVS = 38  # execve can never grant privileges again (setuid binaries, file capabilities)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl {option}: {os.strerror(code)}")


def report(config: dict, event: str, **fields) -> None:
    # One Python literal per line (read back with ast.literal_eval): json would cost this launcher a third of
    # its start-up time.
    os.write(config["status_fd"], (repr({"event": event, **fields}) + "\n").encode())


def program_ids(config: dict) -> tuple[int, int]:
    """The uid and gid the program runs as.

    Root ignores RLIMIT_NPROC, so as root the program gets a uid of its own, drawn at random by the caller
    among 2**30 (`mapped_id` in `main`), so that each run's process count is its own and no other run's
    program can signal its processes. Not the launcher's pid: every process that any run forks takes the
    next pid of the machine, so a uid made of a pid would tell a run how many processes ran before it.
    """
    if config["drop_uid"]:
        return config["uid"], config["uid"]
    return os.geteuid(), os.getegid()


def mapped_id(preferred: int) -> int | None:
    """`preferred` if this user namespace maps it as uid and gid, else another mapped id but 0, else None.

    Root in a rootless container is itself in a user namespace that maps only some ids, and setresuid to an
    unmapped id fails; outside any container every id is mapped and `preferred` is kept.
    """
    tables = []
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/self/{name}") as handle:
            tables.append([(int(fields[0]), int(fields[2])) for fields in map(str.split, handle) if len(fields) == 3])

    def mapped(ident: int) -> bool:
        return all(any(start <= ident < start + count for start, count in table) for table in tables)

    if mapped(preferred):
        return preferred
    for start, count in sorted(tables[0], key=lambda entry: -entry[1]):
        low, high = max(start, 1), start + count
        if high > low and mapped(candidate := low + preferred % (high - low)):
            return candidate
    return None


def processes() -> list[tuple[int, int, int]]:
    """(pid, parent pid, uid) of every process this launcher can see."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
                found.append((int(entry), parent, os.stat(f"/proc/{entry}").st_uid))
            except OSError:
                continue
    return found


def exec_program(config: dict, cwd: str) -> None:
    """In the forked child: limits, an unprivileged uid, no way back to privileges, the filter, then execve."""
    try:
        if config["mode"] == "fallback":
            os.setpgid(0, 0)  # a process group of its own: one killpg ends it and all it forked (see run_fallback)
        os.chdir(cwd)
        if config["mode"] == "fallback":
            sandbox_mounts.join_cgroup(config)
        # The event pipe stays open (close-on-exec) until execve, for a filter that cannot be installed.
        events = fcntl.fcntl(config["status_fd"], fcntl.F_DUPFD_CLOEXEC, 10)
        config = {**config, "status_fd": events}
        pipes = config.get("program_pipes")
        if pipes:
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in pipes]
            for number, fd in zip((3, 4), high, strict=True):
                os.dup2(fd, number, inheritable=True)
        first = 5 if pipes else 3  # nothing else of the launcher's crosses into the program
        os.closerange(first, events)
        os.closerange(events + 1, 1 << 16)
        limits = config["limits"]
        nproc = limits["nproc"]
        if not config["drop_uid"] and config["mode"] == "fallback" and os.geteuid() != 0:
            # Without a namespace the count is per user over the whole machine: allow for what already runs.
            nproc += sum(1 for _, _, uid in processes() if uid == os.geteuid())
        elif not config["drop_uid"] and config["mode"] == "namespaces":
            nproc += 2  # the user namespace's count includes the launcher and init, of the same uid
        for which, value in (
            (resource.RLIMIT_AS, limits["address_space"]),  # memory, as virtual address space
            (resource.RLIMIT_CPU, limits["cpu_s"]),  # CPU seconds: SIGXCPU, then SIGKILL one second later
            (resource.RLIMIT_FSIZE, limits["file_size"]),  # largest file it may write (SIGXFSZ beyond)
            (resource.RLIMIT_NPROC, nproc),  # processes and threads of this uid: the fork-bomb cap
            (resource.RLIMIT_NOFILE, limits["open_files"]),
            (resource.RLIMIT_CORE, 0),  # no core dumps
        ):
            hard = value + 1 if which == resource.RLIMIT_CPU else value
            resource.setrlimit(which, (value, hard))
        seccomp = config.get("seccomp") or {}
        try:
            # Not the caller's session keyring (its keys, and a place to leave some for the next run). Made
            # before the uid changes, so that it is charged to the caller: the run's own uid never holds a key.
            sandbox_seccomp.join_fresh_session_keyring(seccomp.get("keyctl"))
        except OSError as error:
            report(config, "seccomp_error", message=str(error))
            os._exit(127)
        if config["drop_uid"]:
            uid, gid = program_ids(config)
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)  # from root to a plain uid: every capability is dropped here
        prctl(PR_SET_NO_NEW_PRIVS, 1)  # no setuid binary (mount, su) can give back what was dropped
        if seccomp.get("filter"):
            try:
                sandbox_seccomp.install(seccomp["filter"])
            except OSError as error:
                report(config, "seccomp_error", message=str(error))
                os._exit(127)
        os.execve(config["argv"][0], config["argv"], config["env"])
    except BaseException as error:  # noqa: B036 - whatever happens, this forked child must not return
        os.write(2, f"sandbox: cannot start the program: {error}\n".encode())
    os._exit(127)


def kill_descendants(spare: int | None = None) -> None:
    """Kill and reap every descendant but `spare` (the judge): as a subreaper, the orphans of the dead come back
    to us."""
    while True:
        children = [pid for pid, parent, _ in processes() if parent == os.getpid() and pid != spare]
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)  # killed: it exits at once
            except ChildProcessError:
                pass


def kill_uid(uid: int) -> None:
    """Kill every process of `uid` at once: a helper takes that uid and sends SIGKILL to all it may signal.

    kill(-1) reaches every process the sender may signal, except itself, in one sweep of the process table;
    a fork bomb's forks fail once SIGKILL is pending, so no descendant slips through, detached or not.
    """
    helper = os.fork()
    if helper == 0:
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(helper, 0)
