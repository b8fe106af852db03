"""The process that starts an untrusted program for `rewards.sandbox` and makes sure it ends.

`rewards.sandbox` runs this file as `python -I -S sandbox_launcher.py CONFIG` (a marshalled dict, in
hex) in a new session with a reduced environment. It is a script, not a module of the package, on
purpose: it imports only the standard library, so it starts fast and is the same whatever the caller's
virtualenv holds. It writes one line per event to the file descriptor `status_fd`: `isolated`
(namespaces are in place), `setup_error` (they could not be; the program never ran), `exit` (the
program's return code).

Namespaced mode (the default where the kernel allows it):

    launcher (parent's pid namespace)          unshare(mount, pid, net, ipc, uts [, user])
      └─ init (pid 1 of the new pid namespace)  mounts: everything read-only, fresh /tmp, /dev/shm, /proc
           └─ program (unprivileged uid)        rlimits, no_new_privs, execve(python main.py)

When init exits the kernel kills every process left in its pid namespace, detached or not, and waits
for them: nothing outlives a run. The launcher ends the run on SIGTERM by killing init.

Fallback mode (no namespaces): the program gets a process group of its own, which one killpg ends, fork
bomb included; the launcher becomes a child subreaper, so that descendants that left the group (setsid)
are re-parented to it instead of to the system's init, and kills them too when the program ends. As root
with a uid of the run's own, one kill(-1) under that uid ends them all.
"""

from __future__ import annotations

import ctypes
import errno
import marshal
import os
import resource
import select
import signal
import stat
import sys

# clone(2) flags for unshare(2); each gives the program its own copy of one kind of kernel state.
CLONE_NEWNS = 0x00020000  # mount table: our read-only remounts and tmpfs mounts stay private
CLONE_NEWUTS = 0x04000000  # hostname
CLONE_NEWIPC = 0x08000000  # System V IPC and POSIX message queues
CLONE_NEWUSER = 0x10000000  # uids and capabilities: lets an unprivileged user do the rest
CLONE_NEWPID = 0x20000000  # process ids: the program sees and can signal only its own processes
CLONE_NEWNET = 0x40000000  # network: only a loopback device, down; no route anywhere
# mount(2) flags.
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
# prctl(2) options.
PR_SET_PDEATHSIG = 1  # a signal the kernel sends us when our parent dies
PR_SET_CHILD_SUBREAPER = 36  # orphaned descendants are re-parented to us, not to the system's init
PR_SET_NO_NEW_PRIVS = 38  # execve can never grant privileges again (setuid binaries, file capabilities)

SANDBOX_TMP = "/tmp"  # a fresh tmpfs inside the namespaces, the program's only writable place (with /dev/shm)
WORK_DIR = "/tmp/work"  # the program's working directory, in it: nothing there but its own files
SETUP_FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class SetupError(Exception):
    """Isolation could not be set up; the program must not run."""


class Stop(Exception):
    """The caller asked (SIGTERM) to end the run now."""


def _raise_stop(signum, frame):
    raise Stop


def _call(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    source, fstype, data = (None if value is None else os.fsencode(value) for value in (source, fstype, data))
    _call(_libc.mount(source, os.fsencode(target), fstype, flags, data), f"mount {target}")


def prctl(option: int, value: int) -> None:
    _call(_libc.prctl(option, value, 0, 0, 0), f"prctl {option}")


def report(config: dict, event: str, **fields) -> None:
    # One Python literal per line (read back with ast.literal_eval): json would cost this launcher a third of
    # its start-up time.
    os.write(config["status_fd"], (repr({"event": event, **fields}) + "\n").encode())


# ---------------------------------------------------------------- namespaces


def enter_namespaces(config: dict) -> bool:
    """unshare into new namespaces; returns whether the network namespace is among them.

    As root the program later drops to an unprivileged uid, so no user namespace is needed (and none is
    made: a root-mapped user namespace would leave the program owning every root file). An unprivileged
    caller needs a user namespace to get the capabilities for the rest; its uid maps to itself, so
    the program keeps the caller's uid and loses those capabilities at execve.
    """
    base = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    if os.geteuid() != 0:
        base |= CLONE_NEWUSER
    uid, gid = os.geteuid(), os.getegid()
    network = True
    if _libc.unshare(base | CLONE_NEWNET) != 0:
        # Some kernels and containers refuse new network namespaces only: run without, and say so.
        network = False
        if _libc.unshare(base) != 0:
            code = ctypes.get_errno()
            raise SetupError(f"unshare: {os.strerror(code)}")
    if base & CLONE_NEWUSER:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    return network


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            # Field 5 is the mount point, with space, tab, newline and backslash written as octal escapes.
            raw = line.split()[4]
            point = raw.encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "surrogateescape")
            if point not in points:
                points.append(point)
    return points


def remount_all_readonly() -> None:
    """Make every mount read-only in this mount namespace; the host's mounts are untouched.

    MS_BIND with MS_REMOUNT changes the flags of this namespace's mount only, never the file system's
    own (a plain MS_REMOUNT|MS_RDONLY would turn the host's disk read-only). Flags the kernel locks in
    a user namespace (nodev, noexec) are kept; nosuid is added everywhere.
    """
    for point in _mount_points():
        try:
            flags = os.statvfs(point).f_flag
            extra = MS_NOSUID | (MS_NODEV if flags & os.ST_NODEV else 0) | (MS_NOEXEC if flags & os.ST_NOEXEC else 0)
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | extra)
        except OSError as error:
            # A mount point this user cannot reach is one the program cannot reach either.
            if error.errno in (errno.EACCES, errno.ENOENT, errno.ENOTDIR):
                continue
            raise SetupError(f"cannot make {point} read-only: {error}") from error


def expose(paths: list[str]) -> None:
    """Make `paths` (the interpreter's installation) reachable for the program's unprivileged uid.

    An interpreter under /root (pyenv, conda) sits behind a directory that only root may enter. For
    each such directory we mount an empty tmpfs over it in this namespace and bind only the needed
    paths back: the program can run Python, and sees nothing else of that directory.
    """
    blocked: dict[str, list[str]] = {}
    for path in paths:
        current = "/"
        for part in path.strip("/").split("/"):
            current = os.path.join(current, part)
            mode = os.stat(current).st_mode
            if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                blocked.setdefault(current, []).append(path)
                break
    for blocker, targets in blocked.items():
        handles = [(target, os.open(target, os.O_PATH)) for target in sorted(set(targets))]
        mount("tmpfs", blocker, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
        for target, handle in handles:
            os.makedirs(target, exist_ok=True)
            mount(f"/proc/self/fd/{handle}", target, None, MS_BIND | MS_REC)
            os.close(handle)


def _strictly_under(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip("/") + "/")


def hold_paths_under(directory: str, paths: list[str]) -> list[tuple[str, int]]:
    """O_PATH handles to those of `paths` that lie under `directory`, outermost only, taken before a fresh
    mount there hides them: a virtualenv in a checkout under /tmp would otherwise vanish under our /tmp."""
    held: list[tuple[str, int]] = []
    for path in sorted(set(paths)):
        if _strictly_under(path, directory) and os.path.isdir(path):
            if not any(_strictly_under(path, outer) for outer, _ in held):
                held.append((path, os.open(path, os.O_PATH)))
    return held


def restore_paths(held: list[tuple[str, int]]) -> None:
    """Bind the held paths back, read-only, at their old places inside the fresh mount."""
    for path, handle in held:
        os.makedirs(path, exist_ok=True)  # root-owned directories the program may traverse but not change
        mount(f"/proc/self/fd/{handle}", path, None, MS_BIND | MS_REC)
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
        os.close(handle)


def prepare_filesystem(config: dict, files: dict[str, bytes], uid: int, gid: int) -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount from here on propagates to the host
    if config["drop_uid"]:
        expose(config["expose"])
    remount_all_readonly()
    needed = [config["argv"][0], *config["expose"]]
    for path in ("/run", "/var/run"):
        # The sockets of the host's services (D-Bus, systemd, docker, a desktop session's /run/user) live
        # here. A read-only mount does not stop connect() on a socket; an empty mount over them does.
        if os.path.isdir(path) and not os.path.islink(path) and not any(p.startswith(path + "/") for p in needed):
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k,mode=0755")
    owner = f"uid={uid},gid={gid}"
    size_mb = config["tmpfs_mb"]
    # The interpreter's installation (the folder above bin/python, and the prefixes) must stay visible.
    roots = [os.path.dirname(os.path.dirname(os.path.abspath(config["argv"][0]))), *config["expose"]]
    # The only writable places: a fresh /tmp (the working directory) and /dev/shm, both capped in size
    # and inode count so that a program cannot fill memory through them.
    held = hold_paths_under(SANDBOX_TMP, roots)
    mount("tmpfs", SANDBOX_TMP, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,{owner},size={size_mb}m,nr_inodes=4096")
    restore_paths(held)
    if os.path.isdir("/dev/shm"):
        held = hold_paths_under("/dev/shm", roots)
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,{owner},size={size_mb}m,nr_inodes=256")
        restore_paths(held)
    try:
        # A /proc of the new pid namespace: the program cannot see (or read about) the host's processes.
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
    except OSError:
        pass  # e.g. a container that masks parts of /proc; the host's /proc stays, read-only
    os.mkdir(WORK_DIR, 0o700)
    os.chown(WORK_DIR, uid, gid)
    for name, data in files.items():
        path = os.path.join(WORK_DIR, name)
        with open(path, "wb") as handle:
            handle.write(data)
        os.chown(path, uid, gid)


def run_init(config: dict, alive: int, network: bool) -> None:
    """pid 1 of the new pid namespace: set up the file system, start the program, reap, report."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # if the launcher dies, init dies, and with it the namespace
    if select.select([alive], [], [], 0)[0]:  # end of file: the launcher died before the line above
        os._exit(SETUP_FAILED)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    uid, gid = _program_ids(config)
    try:
        os.setsid()  # a session and process group of its own: a program's kill(0) stays inside the namespace
        os.umask(0o022)
        files = {}
        for name in config["files"]:
            with open(os.path.join(config["host_dir"], name), "rb") as handle:
                files[name] = handle.read()
        prepare_filesystem(config, files, uid, gid)
    except Exception as error:
        report(config, "setup_error", message=f"{type(error).__name__}: {error}")
        os._exit(SETUP_FAILED)
    report(config, "isolated", network=network)
    program = os.fork()
    if program == 0:
        exec_program(config, WORK_DIR)
    returncode, cpu_s = None, None
    while True:  # as pid 1, init also reaps every orphan of the program
        try:
            pid, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break
        if pid == program:
            returncode, cpu_s = os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime
            break
    report(config, "exit", returncode=returncode, cpu_s=cpu_s)
    os._exit(0)  # the kernel now kills whatever is left in the namespace


def run_namespaced(config: dict) -> None:
    try:
        network = enter_namespaces(config)
    except (OSError, SetupError) as error:
        report(config, "setup_error", message=str(error))
        return
    alive_read, alive_write = os.pipe()  # init watches this for end of file: the launcher has died
    init = os.fork()
    if init == 0:
        os.close(alive_write)
        try:
            run_init(config, alive_read, network)
        finally:
            os._exit(SETUP_FAILED)
    os.close(alive_read)
    try:
        os.waitpid(init, 0)
    except Stop:
        os.kill(init, signal.SIGKILL)  # init's death takes every process of the namespace with it
        os.waitpid(init, 0)


# ---------------------------------------------------------------- the program


def _program_ids(config: dict) -> tuple[int, int]:
    """The uid and gid the program runs as.

    Root ignores RLIMIT_NPROC, so as root the program gets a uid of its own: a fixed base plus the
    launcher's pid (set in `main`), unique among running sandboxes, so that each run's process count
    is its own and no other run's program can signal its processes.
    """
    if config["drop_uid"]:
        return config["uid"], config["uid"]
    return os.geteuid(), os.getegid()


def _mapped_id(preferred: int) -> int | None:
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


def _processes() -> list[tuple[int, int, int]]:
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
    """In the forked child: limits, an unprivileged uid, no way back to privileges, then execve."""
    try:
        if config["mode"] == "fallback":
            os.setpgid(0, 0)  # a process group of its own: one killpg ends it and all it forked (see run_fallback)
        os.chdir(cwd)
        limits = config["limits"]
        nproc = limits["nproc"]
        if not config["drop_uid"] and config["mode"] == "fallback" and os.geteuid() != 0:
            # Without a namespace the count is per user over the whole machine: allow for what already runs.
            nproc += sum(1 for _, _, uid in _processes() if uid == os.geteuid())
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
        if config["drop_uid"]:
            uid, gid = _program_ids(config)
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)  # from root to a plain uid: every capability is dropped here
        prctl(PR_SET_NO_NEW_PRIVS, 1)  # no setuid binary (mount, su) can give back what was dropped
        os.execve(config["argv"][0], config["argv"], config["env"])
    except BaseException as error:  # noqa: B036 - whatever happens, this forked child must not return
        os.write(2, f"sandbox: cannot start the program: {error}\n".encode())
    os._exit(127)


# ---------------------------------------------------------------- fallback


def kill_descendants() -> None:
    """Kill and reap every descendant: as a subreaper, the orphans of the dead come back to us."""
    while True:
        for pid in [pid for pid, parent, _ in _processes() if parent == os.getpid()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # no child left, not even a zombie: every descendant is gone


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


def run_fallback(config: dict) -> None:
    prctl(PR_SET_CHILD_SUBREAPER, 1)  # a daemonizing grandchild comes back to us, not to the system's init
    if config["drop_uid"]:
        uid, gid = _program_ids(config)
        for root, dirs, files in os.walk(config["host_dir"]):
            for name in [root, *(os.path.join(root, entry) for entry in dirs + files)]:
                os.chown(name, uid, gid)
    program = os.fork()
    if program == 0:
        exec_program(config, config["host_dir"])
    try:
        os.setpgid(program, program)  # also here, so that the group exists before any killpg below
    except OSError:
        pass  # the child got there first (or has already exited)
    report(config, "started", pid=program)
    stopped = False
    try:
        os.waitid(os.P_PID, program, os.WEXITED | os.WNOWAIT)  # exited, not reaped: its group id stays ours
    except Stop:
        stopped = True
    finally:
        try:
            os.killpg(program, signal.SIGKILL)  # a fork bomb's processes, all at once
        except OSError:
            pass
        if config["drop_uid"]:
            kill_uid(config["uid"])
        _, status, usage = os.wait4(program, 0)
        kill_descendants()
    returncode = None if stopped else os.waitstatus_to_exitcode(status)
    report(config, "exit", returncode=returncode, cpu_s=usage.ru_utime + usage.ru_stime)


def main() -> None:
    config = marshal.loads(bytes.fromhex(sys.argv[1]))
    os.set_inheritable(config["status_fd"], False)  # the program must not be able to write events
    signal.signal(signal.SIGTERM, _raise_stop)
    if config["drop_uid"]:
        # Computed here, before the pid namespace (where we would be pid 1).
        config["uid"] = _mapped_id(config["uid_base"] + os.getpid())
        if config["uid"] is None:
            if config["mode"] == "namespaces":
                report(config, "setup_error", message="no unprivileged uid is mapped in this user namespace")
                return
            config["drop_uid"] = False
    try:
        if config["mode"] == "namespaces":
            run_namespaced(config)
        else:
            run_fallback(config)
    except Stop:
        if config["mode"] == "fallback":
            if config["drop_uid"]:
                kill_uid(config["uid"])
            kill_descendants()


if __name__ == "__main__":
    main()
