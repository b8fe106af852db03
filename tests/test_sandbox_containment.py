"""The containment findings of issue 15, each observed from outside the run.

1. Memory is the run's, not each process's: several processes, each under `memory_mb`, must not hold more
   than `memory_mb` together (before: RLIMIT_AS per process let 5 processes of 300 MB live at 512 MB).
2. A unix socket or a FIFO that the host opened outside /run is out of reach (before: reachable, since a
   read-only mount stops neither connect() nor a write to a FIFO).
3. A correct program is not failed by a neighbour that spins on every core (before: a wall-clock timeout).
4. Fork bombs under load end within the wall-clock ceiling plus 0.5 s, with no process left when the
   call returns (before: 2.16 s for a 1 s timeout, processes outliving the call).

5. The judge is inside the run's budget (issue 29): its CPU time and memory, spent on the test code or on
   decoding a reply built to be slow (a set of integers that all hash alike) or large (8 MB), are the
   run's (before: 3 s of the judge's CPU and 225 MB uncounted, and such a reply's case judged anyway).

Where the machine gives no cgroups (no root, no delegation) 1 still holds through the NPROC x AS budget
and 2 and 4 through the namespaces; 3 holds through CPU-time accounting only where a cgroup counts it, and
the check of the neighbour's single core needs the `cpu` controller: those skip, saying so.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from rewards.code.sandbox import cgroup as sandbox_cgroup
from rewards.code.sandbox import process as sandbox_process
from rewards.code.sandbox import run_judged, run_python
from tests.support.sandbox_checks import TOKEN_VARIABLE, outside_directory, processes_with_token, require_namespaces

BLOCK_MB = 300
SHARED_MEMORY = f"""
import os, time
SIZE = {BLOCK_MB} * 1024 * 1024
ready_read, ready_write = os.pipe()
children = []
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        try:
            block = b"\\x01" * SIZE  # every page written, so every page is really held
            os.write(ready_write, b"1")
            time.sleep(30)
        finally:
            os._exit(0)
    children.append(pid)
os.close(ready_write)
os.set_blocking(ready_read, False)
reported, dead = 0, set()
deadline = time.monotonic() + 6
while time.monotonic() < deadline and reported + len(dead) < len(children):
    try:
        reported += len(os.read(ready_read, 16))
    except BlockingIOError:
        pass
    for pid in children:
        if pid not in dead and os.waitpid(pid, os.WNOHANG)[0]:
            dead.add(pid)
    time.sleep(0.02)
time.sleep(0.3)  # let the kernel finish whatever killing it started
for pid in children:
    if pid not in dead and os.waitpid(pid, os.WNOHANG)[0]:
        dead.add(pid)
print(reported, len(children) - len(dead))
"""


def test_processes_of_a_run_share_one_memory_budget():
    result = run_python(SHARED_MEMORY, memory_mb=512, timeout_s=8.0)
    reported, alive = (int(value) for value in result.stdout.split()) if result.stdout else (0, 0)
    # Alive children that finished their allocation each hold BLOCK_MB at once.
    holding = min(reported, alive)
    assert holding * BLOCK_MB <= 512, (result.stdout, result.status, result.reason)


@pytest.fixture
def host_endpoints():
    """A FIFO with a reader and a listening unix socket, in a world-writable directory outside /run and /tmp."""
    directory = outside_directory()
    fifo, path = directory / "pipe", directory / "service.sock"
    os.mkfifo(fifo, 0o666)
    fifo.chmod(0o666)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    path.chmod(0o777)
    server.listen(4)
    server.setblocking(False)
    yield {"fifo": str(fifo), "socket": str(path), "reader": reader, "server": server}
    server.close()
    os.close(reader)
    for entry in directory.iterdir():
        entry.unlink()
    directory.rmdir()


def test_host_sockets_and_fifos_outside_run_are_out_of_reach(host_endpoints):
    require_namespaces()
    code = f"""
import os, socket
try:
    fd = os.open({host_endpoints["fifo"]!r}, os.O_WRONLY | os.O_NONBLOCK)
    os.write(fd, b"escaped")
    print("fifo reached")
except OSError as error:
    print("fifo:", error.strerror)
try:
    socket.socket(socket.AF_UNIX).connect({host_endpoints["socket"]!r})
    print("socket reached")
except OSError as error:
    print("socket:", error.strerror)
"""
    result = run_python(code, isolation="namespaces")
    assert result.status == "ok", result
    assert "reached" not in result.stdout
    assert "fifo: No such file or directory" in result.stdout  # the path does not exist inside
    assert "socket: Operation not permitted" in result.stdout  # and no socket can be made (issue 37)
    try:
        data = os.read(host_endpoints["reader"], 100)  # b"": no writer ever; data: a writer reached the FIFO
    except BlockingIOError:  # a writer is still connected
        data = b"connected"
    assert data == b""
    with pytest.raises(BlockingIOError):
        host_endpoints["server"].accept()


HOG = "import os\nfor _ in range(3):\n    os.fork()\nwhile True:\n    pass\n"  # 8 processes spinning
CORRECT = "import time\nwhile time.process_time() < 0.5:\n    pass\nprint('done')\n"  # 0.5 s of CPU, then the answer


def test_a_correct_program_is_not_failed_by_a_cpu_hogging_neighbour():
    if sandbox_cgroup.cpu_counted() is False:
        pytest.skip("no cgroup counts a run's CPU time here: timeouts are per-process RLIMIT_CPU and the ceiling")
    with ThreadPoolExecutor(max_workers=2) as pool:
        neighbour = pool.submit(run_python, HOG, timeout_s=1.5)
        time.sleep(0.3)  # the neighbour's processes are spinning
        # 1 s of CPU time for 0.5 s of work; the ceiling is generous because the machine may be loaded.
        result = run_python(CORRECT, timeout_s=1.0, wall_timeout_s=15.0)
        hog = neighbour.result()
    assert (result.status, result.stdout) == ("ok", "done\n"), result
    assert hog.status == "timeout"


def test_a_run_spinning_on_many_processes_gets_one_core():
    if "cpu" not in sandbox_cgroup.available() or sandbox_cgroup.cpu_counted() is False:
        pytest.skip("needs the cgroup cpu controller and CPU accounting (root with a writable cgroup hierarchy)")
    result = run_python(HOG, timeout_s=30.0, wall_timeout_s=1.5)
    assert result.status == "timeout" and result.cpu_s is not None
    assert result.cpu_s <= 1.5 * 1.0 + 0.2, result  # one core for the ceiling's 1.5 s, not both


FORK_BOMB = """
import os, sys
if os.fork() == 0:  # a new interpreter in a session of its own (no subprocess: the sandbox gives no pipes)
    os.setsid()
    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)'])
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


def _bomb(timeout_s: float) -> tuple[float, list[int], str]:
    token = uuid.uuid4().hex
    start = time.monotonic()
    result = run_python(FORK_BOMB, timeout_s=timeout_s, wall_timeout_s=timeout_s, extra_env={TOKEN_VARIABLE: token})
    elapsed = time.monotonic() - start
    return elapsed, processes_with_token(token), result.status  # looked at the moment the call returns


def test_fork_bombs_under_load_end_within_the_ceiling_and_leave_nothing():
    # One bomb more than the runs the process allows at once (one per core): the last waits for a slot, then
    # has its own ceiling. No bomb outlives its call, and none holds its slot past its ceiling.
    bombs = sandbox_process.max_runs() + 1
    with ThreadPoolExecutor(max_workers=bombs) as pool:
        outcomes = list(pool.map(_bomb, [1.0] * bombs))
    for elapsed, survivors, status in outcomes:
        assert status == "timeout"
        assert survivors == [], "processes outlived the call"
        assert elapsed <= 2 * (1.0 + 0.5), f"took {elapsed:.2f} s"
    assert sorted(elapsed for elapsed, _, _ in outcomes)[-2] <= 1.0 + 0.5  # those that had a slot at once


def test_every_run_removes_its_cgroups():
    usable = sandbox_cgroup._usable()
    if not usable:
        pytest.skip("no cgroup hierarchy is writable here (no root, no delegation): runs use per-process limits")
    result = run_python(FORK_BOMB, timeout_s=0.5, wall_timeout_s=0.5)
    assert result.cgroup and result.status == "timeout"
    prefix = f"rlvr-sandbox-{os.getpid()}-"
    left = [entry for _, directory in usable.values() for entry in os.listdir(directory) if entry.startswith(prefix)]
    assert left == []


# ---------------------------------------------------------------- the judge's budget (issue 29)

ADD = "def add(a, b):\n    return a + b\n"


def _judge_counted() -> None:
    if sandbox_cgroup.cpu_counted() is False:
        pytest.skip("no cgroup counts a run's CPU time here: the judge is held by its own RLIMIT_CPU only")


def test_the_judges_cpu_time_is_the_runs():
    """Test code that spins (here the setup) is the run's CPU time: before, the judge ran outside the run's
    cgroup, its seconds uncounted, and this correct program passed after 4 s of the judge's CPU."""
    _judge_counted()
    setup = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 4:\n    pass\n"
    result = run_judged(ADD, setup, ["assert add(1, 2) == 3"], ["add"], timeout_s=1.0, wall_timeout_s=10.0)
    assert result.status == "timeout" and "CPU" in result.reason, result
    assert result.cases == {} and result.cpu_s >= 1.0, result  # ended by the CPU time, not the 10 s ceiling


def test_the_judges_memory_is_the_runs():
    setup = "block = bytearray(300 << 20)\nblock[::4096] = b'x' * len(range(0, len(block), 4096))\n"
    result = run_judged(ADD, setup, ["assert add(1, 2) == 3"], ["add"], memory_mb=128, timeout_s=5.0)
    assert result.cases.get(-1, (True, ""))[0] is False or not result.cases.get(0, (False, ""))[0], result


# A solution that writes its own reply on the pipe (it may: that is no more than returning that value): a set
# of integers that all hash alike (multiples of 2**61 - 1), which costs the judge n**2 / 2 comparisons to build.
COLLIDING = """
import os, time
def f():
    items = ",".join(str((2**61 - 1) * i) for i in range(1, 60000))
    os.write(4, ('{"ok":["S",[' + items + ']]}\\n').encode())
    time.sleep(60)
"""
# A reply near the 8 MB cap, of many small lists: a few hundred MB for the judge to decode.
OVERSIZED = """
import os, time
def f():
    os.write(4, ('{"ok":["L",[' + ",".join(['["L",[]]'] * 700_000) + ']]}\\n').encode())
    time.sleep(60)
"""


def test_a_hash_colliding_reply_fails_within_the_runs_budget():
    _judge_counted()
    result = run_judged(COLLIDING, "", ["assert f() == set()"], ["f"], timeout_s=1.0)
    assert not result.cases.get(0, (False, ""))[0], result
    assert result.wall_s <= 1.0 + 0.5 + 0.5, result  # the ceiling, and the teardown
    if result.status == "timeout" and "CPU" in result.reason:
        assert result.cpu_s >= 0.9  # the judge's seconds, counted as the run's


def test_an_oversized_reply_is_decoded_within_the_runs_memory():
    """Right, but 8 MB: before, the judge took the 225 MB it needed outside the run's memory and passed it."""
    result = run_judged(OVERSIZED, "", ["assert f() == [[]] * 700_000"], ["f"], memory_mb=96, timeout_s=5.0)
    assert not result.cases.get(0, (False, ""))[0], result
