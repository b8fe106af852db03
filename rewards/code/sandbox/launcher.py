"""The process that starts an untrusted program for `rewards.code.sandbox` and makes sure it ends.

`rewards.code.sandbox` runs this file as `python -I -S launcher.py FD`, where FD is a memory file
holding the configuration (a marshalled dict: the program's files and, for assert-style runs, the tests;
never on the command line, which /proc shows to every user). It is a script, not a module of the package,
on purpose: it imports only the standard library (and its sibling files mounts.py, seccomp.py,
program.py, supervise.py and, for the judge, judge.py and protocol.py, loaded by path), so it starts fast
and is the same whatever the caller's virtualenv holds. It writes one
line per event to the file descriptor `status_fd`: `isolated` (namespaces are in place), `setup_error`
(they could not be; the program never ran), `seccomp_error` (the filter could not be installed; the
program never ran), `exit` (the program's return code), and from the judge `case` (one verdict), `judged`
(all of them), `judge_error`.

Namespaced mode (the default where the kernel allows it):

    launcher (parent's pid namespace)
      ├─ judge (forked first: the host's view, a uid of its own, the run's cgroups)   runs the tests
      └─ init (pid 1 of a new pid namespace)       joins the run's cgroups, builds a root from nothing
           └─ program (unprivileged uid)           rlimits, a fresh session keyring, no_new_privs, the
                                                   seccomp filter, execve(python -I main.py|serve.py)

When init exits the kernel kills every process left in its pid namespace, detached or not, and waits
for them: nothing outlives a run. When the judge has asked its last question, init is killed: nothing
the program does after its last answer counts; only then, with nothing of the program alive, does the
judge compare the answers (supervise.py keeps that order; judge.py says why). On SIGUSR1 (the run's time
is up) init is killed the same way and the judge decides what was answered. The launcher ends the run on
SIGTERM by killing init and the judge; the caller also kills the run's cgroup as a whole.

Fallback mode (no namespaces): the program gets a process group of its own, which one killpg ends, fork
bomb included; the launcher becomes a child subreaper, so that descendants that left the group (setsid)
are re-parented to it instead of to the system's init, and kills them too when the program ends. As root
with a uid of the run's own, one kill(-1) under that uid ends them all.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import resource
import select
import signal
import sys


def _load(name: str):
    """Import the module `sandbox_<name>` from the file `<name>.py` next to this one, by its path, once. The folder
    itself is not put on sys.path, and the prefix keeps the sibling files' names (`seccomp`, `protocol`, ...) apart
    from any other module's: they import each other by the prefixed names (`import sandbox_mounts`)."""
    import importlib.util

    module_name = f"sandbox_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


# Loaded now, before any namespace: after pivot_root this folder is not there. sandbox_program imports the
# other two by name.
mounts = _load("mounts")
_load("seccomp")
sandbox_program = _load("program")
supervise = _load("supervise")
prctl, report = sandbox_program.prctl, sandbox_program.report

# clone(2) flags for unshare(2); each gives the program its own copy of one kind of kernel state.
CLONE_NEWNS = 0x00020000  # mount table: our read-only remounts and tmpfs mounts stay private
CLONE_NEWUTS = 0x04000000  # hostname
CLONE_NEWIPC = 0x08000000  # System V IPC and POSIX message queues
CLONE_NEWUSER = 0x10000000  # uids and capabilities: lets an unprivileged user do the rest
CLONE_NEWPID = 0x20000000  # process ids: the program sees and can signal only its own processes
CLONE_NEWNET = 0x40000000  # network: only a loopback device, down; no route anywhere
CLONE_NEWCGROUP = 0x02000000  # the run's cgroup is its root: its name (the caller's pid, the run's index) unseen
# prctl(2) options.
PR_SET_PDEATHSIG = 1  # a signal the kernel sends us when our parent dies
PR_SET_CHILD_SUBREAPER = 36  # orphaned descendants are re-parented to us, not to the system's init
PR_SET_NO_NEW_PRIVS = sandbox_program.PR_SET_NO_NEW_PRIVS

WORK_DIR = "/tmp/work"  # in the new root: the program's working directory, on its private /tmp
SETUP_FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)
_libc.unshare.argtypes = [ctypes.c_int]


class SetupError(Exception):
    """Isolation could not be set up; the program must not run."""


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


def run_init(config: dict, alive: int, network: bool) -> None:
    """pid 1 of the new pid namespace: join the run's cgroups, build the root, start the program, reap, report."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # if the launcher dies, init dies, and with it the namespace
    if select.select([alive], [], [], 0)[0]:  # end of file: the launcher died before the line above
        os._exit(SETUP_FAILED)
    supervise.as_child()
    for fd in config.pop("judge_sync", ()):
        os.close(fd)
    uid, gid = sandbox_program.program_ids(config)
    try:
        os.setsid()  # a session and process group of its own: a program's kill(0) stays inside the namespace
        os.umask(0o022)
        mounts.join_cgroup(config)
        if config.get("cgroup_procs") and _libc.unshare(CLONE_NEWCGROUP) != 0:
            raise SetupError(f"unshare(CLONE_NEWCGROUP): {os.strerror(ctypes.get_errno())}")
        mounts.build_root(config, WORK_DIR, uid, gid)
    except Exception as error:
        report(config, "setup_error", message=f"{type(error).__name__}: {error}")
        os._exit(SETUP_FAILED)
    report(config, "isolated", network=network)
    program = os.fork()
    if program == 0:
        sandbox_program.exec_program(config, WORK_DIR)
    _close_program_pipes(config)
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


def run_namespaced(config: dict, judge: int | None) -> None:
    try:
        network = enter_namespaces(config)
    except (OSError, SetupError) as error:
        report(config, "setup_error", message=str(error))
        if judge:
            os.kill(judge, signal.SIGKILL)
            os.waitpid(judge, 0)
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
    _close_program_pipes(config)
    # init's death takes every process of the namespace with it: once it is reaped, none of them is left
    supervise.supervise(config, init, judge, lambda: os.kill(init, signal.SIGKILL), lambda: None)


# ---------------------------------------------------------------- the judge


def start_judge(config: dict) -> int | None:
    """Fork the trusted judge (assert-style runs), before any namespace: see judge.py."""
    if not config.get("judge"):
        return None
    to_program = os.pipe()
    from_program = os.pipe()
    done, go = os.pipe(), os.pipe()  # the judge's "the live phase is over", the launcher's "the program has gone"
    config["program_pipes"] = (to_program[0], from_program[1])  # the program's fds 3 and 4
    judge = os.fork()
    if judge == 0:
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            supervise.as_child()
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)
            os.close(done[0])
            os.close(go[1])
            # The run's cgroups, first: the judge's CPU time and memory (decoding a reply, comparing) are the
            # run's, so a reply built to be slow or large to judge ends the run within its own budget.
            mounts.join_cgroup(config)
            os.close(to_program[0])
            os.close(from_program[1])
            sandbox_judge = _load("protocol") and _load("judge")  # before the uid changes

            if config["drop_uid"] and config["judge"]["interpreter_reachable"]:
                # A uid of the judge's own: neither the caller's (root) nor the program's. Where the standard
                # library is closed to other users (pyenv under /root), the judge keeps the caller's uid.
                os.setgroups([])
                os.setresgid(config["judge_uid"], config["judge_uid"], config["judge_uid"])
                os.setresuid(config["judge_uid"], config["judge_uid"], config["judge_uid"])
            prctl(PR_SET_NO_NEW_PRIVS, 1)
            # Where no cgroup counts them, the run's limits hold the judge by rlimits: CPU seconds as for
            # the program, and an address space of a process of the run (with a memory cgroup, the run's
            # memory: the most it could get there).
            limit = config["judge"]["memory_bytes"]
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            if config["judge"]["cpu_s"]:
                resource.setrlimit(resource.RLIMIT_CPU, (config["judge"]["cpu_s"], config["judge"]["cpu_s"] + 1))

            def report_case(index: int, passed: bool, detail: str) -> None:
                report(config, "case", index=index, passed=passed, detail=detail)

            def live_over(channel_ended: bool) -> bool:
                os.write(done[1], b"E" if channel_ended else b"K")
                # returns once the program's side is gone (or at end of file: the launcher died): whether it was
                # ended for having closed its channel without exiting
                return os.read(go[0], 1) == b"k"

            sandbox_judge.judge(config["judge"], to_program[1], from_program[0], report_case, live_over)
            report(config, "judged")
            os._exit(0)
        except BaseException as error:  # noqa: B036 - the judge must end here, whatever happened
            try:
                report(config, "judge_error", message=f"{type(error).__name__}: {error}"[:500])
            except BaseException:  # noqa: B036
                pass
        os._exit(0)
    os.close(to_program[1])
    os.close(from_program[0])
    os.close(done[1])
    os.close(go[0])
    config["judge_sync"] = (done[0], go[1])
    return judge


def _close_program_pipes(config: dict) -> None:
    """Once the program has its copies: the judge must see end of file when the program's side is gone."""
    for fd in config.pop("program_pipes", ()):
        os.close(fd)


# ---------------------------------------------------------------- fallback


def run_fallback(config: dict, judge: int | None) -> None:
    prctl(PR_SET_CHILD_SUBREAPER, 1)  # a daemonizing grandchild comes back to us, not to the system's init
    uid, gid = sandbox_program.program_ids(config)
    for name, data in config["files"].items():
        with open(os.path.join(config["host_dir"], name), "wb") as handle:
            handle.write(data)
    if config["drop_uid"]:
        for root, dirs, files in os.walk(config["host_dir"]):
            for name in [root, *(os.path.join(root, entry) for entry in dirs + files)]:
                os.chown(name, uid, gid)
    program = os.fork()
    if program == 0:
        sandbox_program.exec_program(config, config["host_dir"])
    _close_program_pipes(config)
    try:
        os.setpgid(program, program)  # also here, so that the group exists before any killpg below
    except OSError:
        pass  # the child got there first (or has already exited)
    report(config, "started", pid=program)

    def end_side() -> None:  # the program is not reaped yet: its group id is still ours
        try:
            os.killpg(program, signal.SIGKILL)  # a fork bomb's processes, all at once
        except OSError:
            pass
        if config["drop_uid"]:
            sandbox_program.kill_uid(config["uid"])

    def side_gone() -> None:  # what left the group (setsid) came back to us as a subreaper
        if config["drop_uid"]:
            sandbox_program.kill_uid(config["uid"])
        sandbox_program.kill_descendants(spare=judge)

    status, usage, ended = supervise.supervise(config, program, judge, end_side, side_gone)
    returncode = None if ended or status is None else os.waitstatus_to_exitcode(status)
    report(config, "exit", returncode=returncode, cpu_s=usage.ru_utime + usage.ru_stime if usage else None)


def _read_config(fd: int) -> dict:
    size, chunks, offset = os.fstat(fd).st_size, [], 0
    while offset < size:
        chunks.append(os.pread(fd, size - offset, offset))
        offset += len(chunks[-1])
        if not chunks[-1]:
            break
    os.close(fd)
    return marshal.loads(b"".join(chunks))


def main() -> None:
    # The configuration (the program, and for assert-style runs the tests) comes in a memory file, not on
    # the command line, which every user of the machine may read in /proc.
    config = _read_config(int(sys.argv[1]))
    parent = os.getppid()
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the caller died (and with it the run's deadline): end the run
    if os.getppid() != parent:
        return
    os.set_inheritable(config["status_fd"], False)  # the program must not be able to write events
    supervise.install_handlers()
    if config["drop_uid"]:
        # Here, before the user namespace of an unprivileged caller: the ids that root may take.
        config["uid"] = sandbox_program.mapped_id(config["uid"])
        config["judge_uid"] = sandbox_program.mapped_id(config["judge_uid"])
        if config["uid"] is None or config["judge_uid"] is None:
            if config["mode"] == "namespaces":
                report(config, "setup_error", message="no unprivileged uid is mapped in this user namespace")
                return
            config["drop_uid"] = False
    judge = None
    try:
        judge = start_judge(config)
        if config["mode"] == "namespaces":
            run_namespaced(config, judge)
        else:
            run_fallback(config, judge)
    except supervise.Stop:
        if config["mode"] == "fallback":
            if config["drop_uid"]:
                sandbox_program.kill_uid(config["uid"])
            sandbox_program.kill_descendants()


if __name__ == "__main__":
    main()
