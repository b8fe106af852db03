"""The system calls a sandboxed program may not make, as a seccomp filter; and a session keyring of the run's own.

Namespaces give a run its own processes, mounts, network and IPC, but some kernel state belongs to no
namespace and outlives the run: a uid's keyrings (and /proc/key-users, which shows every uid's key count
and bytes), the caller's session keyring, which every child inherits with full rights, and the page cache
of the files the run can read (issue 29: learner programs scored by writing down, run after run, which
answers the judge accepted). The filter takes those calls away, and with them calls that no solution
needs and that reach further into the kernel than a run should: new namespaces (where a user namespace
would give a program mount rights), io_uring and AIO (their own paths around this filter), bpf,
perf_event_open, userfaultfd, ptrace and process_vm_*, kexec, modules, swap, mounts, and sockets (vsock is
not namespaced: a VM's host listens there).

Issue 37 closed the kernel state that every run shares while it lives, or that counts across runs: the
global counters a run can advance and read (the socket cookie; the inode numbers of pipes, sockets and
/proc, which come from one per-CPU counter; those of the kernel's internal tmpfs behind memfd, SysV shm and
shared anonymous maps; pidfd inodes), and what two runs alive at once could signal each other through
(fcntl and flock locks, leases and dnotify on a file both can open, inotify and fanotify, futexes keyed
by a shared mapping, sysinfo's process count and free memory, a core chosen with sched_setaffinity). None
of these is needed by a test program; pipes go with them, so a program cannot start a subprocess.

Denied calls fail with EPERM (clone3 with ENOSYS, so that glibc falls back to clone, whose flags the filter
can read); the program is never killed for trying, so Python's start-up and a program that probes what it
may do both go on. The page cache calls: posix_fadvise, readahead, mincore, cachestat, process_madvise,
madvise(MADV_COLD or MADV_PAGEOUT) and preadv2/pwritev2 with any flag (RWF_NOWAIT says whether a page is
cached); what is left is the timing of a first read, which rewards/code/sandbox/root.py takes away.

The caller compiles the filter once per process with libseccomp (`compile_filter`), names resolved for this
machine's architecture by `seccomp_syscall_resolve_name` (x86_64 and aarch64 alike; a name the library or
the architecture lacks is skipped, or taken from the few numbers that every architecture shares since
Linux 5.1), into the kernel's BPF form; the launcher installs those bytes (`install`) in the program's
process right before execve, after no_new_privs, so libseccomp is needed on the host only, not inside the
sandbox's root. The few functions of libseccomp are bound here through ctypes, not through a PyPI
wrapper: the launcher runs as `python -I -S` and loads this file by path, with the standard library only.
Without libseccomp the sandbox refuses to run (rewards.code.sandbox says how to install it), unless
RLVR_SANDBOX_SECCOMP=off says to run without the filter.
"""

from __future__ import annotations

import ctypes
import errno
import os

SECCOMP_ENV = "RLVR_SANDBOX_SECCOMP"
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
KEYCTL_JOIN_SESSION_KEYRING = 1
# libseccomp's actions, attributes and comparisons (seccomp.h).
ACT_ALLOW, ACT_KILL_PROCESS, ACT_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
ATTR_ACT_BADARCH = 2  # a call of another ABI (int 0x80, x32) on this machine: the process is killed
CMP_NE, CMP_EQ, CMP_MASKED_EQ = 1, 4, 7
NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
MADV_COLD, MADV_PAGEOUT = 20, 21
_KEYCTL = {"x86_64": 250, "aarch64": 219}  # keyctl's number, for a fresh session keyring without libseccomp
CLONE_PIDFD = 0x1000
MAP_SHARED, MAP_HUGETLB = 0x01, 0x40000  # MAP_SHARED_VALIDATE (0x03) includes MAP_SHARED
FUTEX_PRIVATE_FLAG = 128
SOL_SOCKET, SO_COOKIE, SO_NETNS_COOKIE = 1, 57, 71
# fcntl's lock, lease and directory-notification commands: F_GETLK, F_SETLK, F_SETLKW (the same numbers as
# their 64-bit forms on 64-bit machines), the open-file-description locks, F_SETLEASE, F_GETLEASE, F_NOTIFY
FCNTL_SHARED_STATE = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)
# Calls added since Linux 5.1 have one number on every architecture but alpha; an older libseccomp may
# not know their names.
_SHARED_NUMBERS = {"pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
                   "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435,
                   "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442, "quotactl_fd": 443,
                   "pidfd_open": 434, "memfd_secret": 447, "futex_waitv": 449, "cachestat": 451,
                   "futex_wake": 454, "futex_wait": 455, "futex_requeue": 456, "open_tree_attr": 467}  # fmt: skip
DENIED = (
    # keyrings: a uid's keys outlive its runs, and /proc/key-users shows them to every run
    "add_key", "keyctl", "request_key",
    # the page cache of shared files: what another run cached or evicted
    "fadvise64", "fadvise64_64", "arm_fadvise64_64", "readahead", "mincore", "cachestat", "process_madvise",
    # paths of their own around this filter
    "io_uring_setup", "io_uring_enter", "io_uring_register", "io_setup", "io_submit",
    # new namespaces, and the rights over mounts that a user namespace gives
    "unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot", "open_tree", "open_tree_attr",
    "move_mount", "mount_setattr", "fsopen", "fsconfig", "fsmount", "fspick",
    # the kernel itself, and other processes
    "bpf", "perf_event_open", "userfaultfd", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "swapon", "swapoff",
    "reboot", "acct", "syslog", "quotactl", "quotactl_fd", "lookup_dcookie", "name_to_handle_at",
    "open_by_handle_at", "fanotify_init", "uselib", "iopl", "ioperm", "vhangup",
    # kernel-wide counters that any run can advance and read (issue 37): the inode numbers of pipes, sockets
    # and the kernel's internal tmpfs (memfd, SysV shm, POSIX message queues), pidfd inodes; sockets also
    # carry the socket-cookie counter, and no test program needs a socket (there is no network anyway)
    "pipe", "pipe2", "socket", "socketpair", "memfd_create", "memfd_secret", "shmget", "mq_open",
    "pidfd_open", "pidfd_send_signal",
    # what runs alive at the same time could pass between them (issue 37): locks and watches on files they
    # share (the read-only standard library, a device node), futexes of a shared mapping, the machine's
    # process count and free memory, and a core of one's choosing (per-CPU counters, contention timing)
    "flock", "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_mark", "futex_waitv",
    "futex_wait", "futex_wake", "futex_requeue", "sysinfo", "sched_setaffinity",
)  # fmt: skip


class SeccompUnavailableError(RuntimeError):
    """The filter cannot be built here (no libseccomp), and RLVR_SANDBOX_SECCOMP=off does not waive it."""


class _ArgumentTest(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]


class _Program(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def wanted() -> bool:
    """False where RLVR_SANDBOX_SECCOMP=off (or 0, false, no) asks to run programs without the filter."""
    return os.environ.get(SECCOMP_ENV, "on").strip().lower() not in ("off", "0", "false", "no")


def _library() -> ctypes.CDLL:
    import ctypes.util  # here, not at the top: the launcher, which loads this file too, does without it

    names = ["libseccomp.so.2", ctypes.util.find_library("seccomp")]
    for name in filter(None, names):
        try:
            library = ctypes.CDLL(name, use_errno=True)
            break
        except OSError:
            continue
    else:
        raise SeccompUnavailableError("libseccomp.so.2 is not installed")
    library.seccomp_init.restype = ctypes.c_void_p
    library.seccomp_init.argtypes = [ctypes.c_uint32]
    library.seccomp_release.argtypes = [ctypes.c_void_p]
    library.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    library.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    library.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgumentTest),
    ]
    library.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return library


def _rules() -> list[tuple[str, int, list[tuple[int, int, int, int]]]]:
    """(call, errno, argument tests that must all hold) for every rule; several rules of one call are ORed."""
    rules = [(name, errno.EPERM, []) for name in DENIED]
    rules += [("madvise", errno.EPERM, [(2, CMP_EQ, advice, 0)]) for advice in (MADV_COLD, MADV_PAGEOUT)]
    rules += [(name, errno.EPERM, [(5, CMP_NE, 0, 0)]) for name in ("preadv2", "pwritev2")]  # flags: RWF_NOWAIT...
    # clone's flags are its first argument on x86_64 and aarch64; clone3's are in memory, out of a filter's reach
    rules += [("clone", errno.EPERM, [(0, CMP_MASKED_EQ, flag, flag)]) for flag in NAMESPACE_FLAGS]
    rules += [("clone", errno.EPERM, [(0, CMP_MASKED_EQ, CLONE_PIDFD, CLONE_PIDFD)]), ("clone3", errno.ENOSYS, [])]
    # No shared mapping at all (issue 58). A shared anonymous one is a new inode of the kernel's internal tmpfs,
    # and so is a shared map of /dev/zero, which the filter cannot tell from a shared map of any other file (it
    # sees the descriptor's number, not what it is): 500 of them moved the next run's stdin inode number by 500.
    # A huge-page mapping is an inode of hugetlbfs. MAP_SHARED_VALIDATE (0x03) has the MAP_SHARED bit too.
    rules += [("mmap", errno.EPERM, [(3, CMP_MASKED_EQ, MAP_SHARED, MAP_SHARED)])]
    rules += [("mmap", errno.EPERM, [(3, CMP_MASKED_EQ, MAP_HUGETLB, MAP_HUGETLB)])]
    # a futex without FUTEX_PRIVATE_FLAG is keyed by the inode of a shared mapping: another run's wake reaches it
    rules += [("futex", errno.EPERM, [(1, CMP_MASKED_EQ, FUTEX_PRIVATE_FLAG, 0)])]
    rules += [("fcntl", errno.EPERM, [(1, CMP_EQ, command, 0)]) for command in FCNTL_SHARED_STATE]
    rules += [("getsockopt", errno.EPERM, [(1, CMP_EQ, SOL_SOCKET, 0), (2, CMP_EQ, option, 0)])
              for option in (SO_COOKIE, SO_NETNS_COOKIE)]  # fmt: skip
    return rules


def _number(library: ctypes.CDLL, name: str) -> int | None:
    number = library.seccomp_syscall_resolve_name(name.encode())
    if number < 0:  # unknown to this libseccomp (-1), or not a call of this architecture (a negative pseudo number)
        return _SHARED_NUMBERS.get(name) if number == -1 else None
    return number


def compile_filter() -> dict:
    """{"filter": the BPF program as bytes, "keyctl": keyctl's number here}; SeccompUnavailableError without
    libseccomp."""
    library = _library()
    context = library.seccomp_init(ACT_ALLOW)
    if not context:
        raise SeccompUnavailableError("seccomp_init failed")
    try:
        library.seccomp_attr_set(context, ATTR_ACT_BADARCH, ACT_KILL_PROCESS)
        for name, code, tests in _rules():
            number = _number(library, name)
            if number is None:
                continue
            array = (_ArgumentTest * max(1, len(tests)))(*[_ArgumentTest(*test) for test in tests])
            result = library.seccomp_rule_add_array(context, ACT_ERRNO | code, number, len(tests), array)
            if result < 0:
                raise SeccompUnavailableError(f"seccomp_rule_add({name}): {os.strerror(-result)}")
        fd = os.memfd_create("rlvr-seccomp", 0)
        try:
            result = library.seccomp_export_bpf(context, fd)
            if result < 0:
                raise SeccompUnavailableError(f"seccomp_export_bpf: {os.strerror(-result)}")
            program = os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)
    finally:
        library.seccomp_release(context)
    return {"filter": program, "keyctl": _number(library, "keyctl")}


_compiled: dict | None = None


def for_runs() -> dict:
    """What the launcher needs for every run: the compiled filter and keyctl's number (compiled once).

    Fails closed: without libseccomp, SeccompUnavailableError says how to install it, unless
    RLVR_SANDBOX_SECCOMP=off waives the filter (then a warning says what is open, once, and runs still get a
    session keyring of their own)."""
    global _compiled
    if not wanted():
        import logging

        if _compiled is None:
            logging.getLogger("rewards.code.sandbox").warning(
                "code sandbox: %s=off: programs run WITHOUT the seccomp filter. A run can leave keys in its uid's "
                "keyring and evict or probe the page cache, and a later run can read what it left there: what the "
                "judge accepted, learned run after run (issue 29).",
                SECCOMP_ENV,
            )
            _compiled = {"keyctl": _KEYCTL.get(os.uname().machine)}
        return {"keyctl": _compiled.get("keyctl")}
    if _compiled is None or "filter" not in _compiled:
        try:
            _compiled = compile_filter()
        except SeccompUnavailableError as error:
            raise SeccompUnavailableError(
                f"{error}. Programs run only under a seccomp filter, built with libseccomp: install it (Debian and "
                "Ubuntu: apt-get install libseccomp2; Fedora: dnf install libseccomp), or set "
                f"{SECCOMP_ENV}=off to run without the filter (then runs can pass what they learn to later runs "
                "through kernel keyrings and the page cache)"
            ) from error
    return _compiled


def join_fresh_session_keyring(keyctl: int | None) -> None:
    """Give this process a new anonymous session keyring, whatever it inherited (pam_keyinit, systemd's
    KeyringMode=private give the caller one that every child could read and write). Where keyrings are not
    there (ENOSYS) or already refused to us (EPERM from a container's own filter), there is nothing to hide."""
    if keyctl is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(keyctl), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), None) < 0:
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EPERM):
            raise OSError(code, f"keyctl(JOIN_SESSION_KEYRING): {os.strerror(code)}")


def install(program: bytes) -> None:
    """Install the compiled filter in this process (no_new_privs must be set): from here on, and across
    execve, for this process and all it forks."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    buffer = ctypes.create_string_buffer(program, len(program))
    header = _Program(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))  # struct sock_filter: 8 bytes
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(header), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_SECCOMP): {os.strerror(code)}")
