"""Issue 37: what every run shares with the kernel and with the runs alive beside it is closed.

At db84883 a program could advance and read kernel-wide counters (the socket cookie; the inode numbers of
pipes, sockets and /proc entries, of the kernel's internal tmpfs behind memfd, SysV shm and shared
anonymous maps; pidfd inodes), and runs alive at once could signal each other through locks, leases and
watches on files they shared (the host's /dev/null, the read-only standard library), futexes of a shared
mapping, the machine's process count, and a core of their choosing; /proc/self/cgroup named the caller's
pid and the run's index. Each probe below was allowed there (a test that fails at db84883); now each call
fails with EPERM inside, the run has no /proc and device nodes of its own, and the rest still works. The
learners and relays that used these channels are in tests/test_sandbox_channels.py.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from rewards.code.sandbox import cgroup as sandbox_cgroup
from rewards.code.sandbox import run_python
from tests.support.learners import syscall_numbers
from tests.support.sandbox_checks import require, require_namespaces

PROBE = """
import ctypes, json, mmap, os, struct
N = {numbers!r}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
null = os.open("/dev/null", os.O_RDWR)
here = os.open(".", os.O_RDONLY)
scratch = os.open("scratch", os.O_RDWR | os.O_CREAT)
os.ftruncate(scratch, mmap.PAGESIZE)
page = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
buffer, size = ctypes.create_string_buffer(256), ctypes.c_uint(8)
lock = ctypes.create_string_buffer(struct.pack("hhqqi", 1, 0, 0, 1, 0), 32)  # F_WRLCK of the first byte
mask = ctypes.create_string_buffer(struct.pack("Q", 1), 8)

def call(name, *args):
    result = libc.syscall(ctypes.c_long(N[name]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if result == 0 and name == "clone":
        os._exit(0)  # the child of a clone that was allowed
    import errno
    return "allowed" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

probes = {{
    "pipe2": ("pipe2", buffer, 0), "socket(AF_UNIX)": ("socket", 1, 1, 0),
    "socketpair": ("socketpair", 1, 1, 0, buffer), "memfd_create": ("memfd_create", b"x", 0),
    "shmget": ("shmget", 0, 4096, 0o1600), "mq_open": ("mq_open", b"rlvr", 0o102, 0o600, None),
    "pidfd_open": ("pidfd_open", os.getpid(), 0), "clone(CLONE_PIDFD)": ("clone", 0x1000 | 17, 0, buffer, 0, 0),
    "mmap(MAP_SHARED|MAP_ANONYMOUS)": ("mmap", 0, mmap.PAGESIZE, 3, 0x21, -1, 0),
    "mmap(MAP_SHARED, a file)": ("mmap", 0, mmap.PAGESIZE, 3, 0x01, scratch, 0),
    "mmap(MAP_SHARED_VALIDATE, a file)": ("mmap", 0, mmap.PAGESIZE, 3, 0x03, scratch, 0),
    "mmap(MAP_HUGETLB)": ("mmap", 0, 2 << 20, 3, 0x40022, -1, 0),
    "getsockopt(SO_COOKIE)": ("getsockopt", 0, 1, 57, buffer, ctypes.byref(size)),
    "flock": ("flock", null, 2), "fcntl(F_SETLK)": ("fcntl", null, 6, lock), "fcntl(F_GETLK)": ("fcntl", null, 5, lock),
    "fcntl(F_OFD_SETLK)": ("fcntl", null, 37, lock), "fcntl(F_OFD_GETLK)": ("fcntl", null, 36, lock),
    "fcntl(F_SETLEASE)": ("fcntl", null, 1024, 0), "fcntl(F_NOTIFY)": ("fcntl", here, 1026, 1),
    "inotify_init1": ("inotify_init1", 0), "futex(shared FUTEX_WAKE)": ("futex", address, 1, 1, None, None, 0),
    "sysinfo": ("sysinfo", buffer), "sched_setaffinity": ("sched_setaffinity", 0, 8, mask),
}}
denied = {{label: call(*args) for label, args in probes.items() if args[0] in N}}
works = {{"futex(private FUTEX_WAKE)": call("futex", address, 129, 1, None, None, 0),
          "fcntl(F_GETFD)": call("fcntl", null, 1, 0), "sched_getaffinity": len(os.sched_getaffinity(0)) > 0}}
os.write(null, b"still a device")
works["no /dev/zero"] = not os.path.exists("/dev/zero")
works["a file mapped privately"] = mmap.mmap(scratch, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE)[:1] == bytes(1)
print(json.dumps({{"denied": denied, "works": works, "proc": os.path.exists("/proc")}}))
"""
NAMES = ["pipe2", "socket", "socketpair", "memfd_create", "shmget", "mq_open", "pidfd_open", "clone", "mmap"]
NAMES += ["getsockopt", "flock", "fcntl", "inotify_init1", "futex", "sysinfo", "sched_setaffinity"]


def test_shared_kernel_state_is_refused_inside_and_the_rest_still_works():
    require_namespaces()
    result = run_python(PROBE.format(numbers=syscall_numbers(*NAMES)), timeout_s=10)
    assert result.status == "ok", result.stderr
    report = json.loads(result.stdout)
    assert report["denied"] == {label: "EPERM" for label in report["denied"]}
    assert len(report["denied"]) == 24  # every probe's call exists on x86_64 and aarch64
    assert report["works"] == {
        "futex(private FUTEX_WAKE)": "allowed",
        "fcntl(F_GETFD)": "allowed",
        "sched_getaffinity": True,
        "no /dev/zero": True,
        "a file mapped privately": True,
    }
    assert report["proc"] is False  # /proc/<pid> inode numbers come from the same counter as pipes'


def test_threads_and_their_locks_still_work():
    """Private futexes are all that threads, locks, queues and joins use."""
    code = """
import queue, threading
results = queue.Queue()
lock, total = threading.Lock(), [0]
def work(n):
    for _ in range(1000):
        with lock:
            total[0] += 1
    results.put(n)
threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(sorted(results.get() for _ in range(4)), total[0])
"""
    result = run_python(code, timeout_s=10)
    assert (result.status, result.stdout) == ("ok", "[0, 1, 2, 3] 4000\n"), result


def test_numpy_still_runs_without_shared_maps():
    """Issue 58 refused every shared map: numpy's import, its BLAS and its linear algebra map nothing shared."""
    pytest.importorskip("numpy", reason="numpy is installed with torch; without it there is nothing to allow")
    code = "import numpy as np\na = np.arange(16.0).reshape(4, 4)\nprint(int((a @ a).trace()), round(np.linalg.det(a + np.eye(4)), 6))"
    result = run_python(code, packages=("numpy",), timeout_s=10)
    assert (result.status, result.stdout) == ("ok", "1060 -49.0\n"), result


def test_device_nodes_are_the_runs_own():
    """Not the host's /dev/null, whose locks and watches every run alive at once shared (as root: mknod)."""
    require_namespaces()
    require(
        os.geteuid() == 0, "only root may make device nodes; a user namespace binds the host's (the filter closes them)"
    )
    code = "import os\nfor name in ('null', 'full', 'urandom'):\n    s = os.stat('/dev/' + name)\n"
    code += "    print(s.st_dev, s.st_ino, s.st_rdev)\n"
    result = run_python(code)
    assert result.status == "ok", result
    for line, name in zip(result.stdout.splitlines(), ("null", "full", "urandom"), strict=True):
        device, inode, rdev = map(int, line.split())
        host = os.stat(f"/dev/{name}")
        assert rdev == host.st_rdev  # the same device
        assert (device, inode) != (host.st_dev, host.st_ino)  # through a node of the run's own


def test_a_program_that_kills_its_own_process_group_is_not_said_to_be_out_of_memory():
    require(
        "memory" in sandbox_cgroup.available(),
        "without a memory cgroup the OOM killer's kills are not counted: the reason names both",
    )
    result = run_python("import os, signal\nos.killpg(0, signal.SIGKILL)\n")
    assert result.returncode == -signal.SIGKILL
    assert result.status == "error" and "not by the out-of-memory killer" in result.reason, result
    memory = run_python("blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))\n", memory_mb=128)
    assert memory.status == "memory", memory
