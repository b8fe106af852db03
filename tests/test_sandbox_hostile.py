"""The hostile corpus: programs a policy will sooner or later write, each run through `run_python`.

For every program, observed from outside the run: this test process survives, the run returns within
its wall-clock ceiling + 0.5 s, no file outside the sandbox changes, a secret planted in our environment
never shows in the output, no process of the run is left, and (when the network is isolated) a TCP
listener that we open on 127.0.0.1 receives no connection.

Three setups: namespaces as this test's user (root in CI), namespaces as an unprivileged user (a
laptop: the user namespace path), and the fallback without namespaces, for the guarantees it still gives.

What is skipped where, and why (each skip says so when it happens):
- every namespaces test: where the kernel refuses the sandbox's namespaces, except under CI (`CI` set),
  where that is a failure instead (tests/support/sandbox_checks.require_namespaces);
- the /run socket test: without write access to /run (not root);
- the fallback as root with a uid of its own, and the unprivileged-user run: without root, or without a
  python3 that an unprivileged uid can run (e.g. /usr/bin/python3); the latter also where the kernel
  refuses unprivileged user namespaces (a sysctl says so).
The attacks on the judge itself (a wrong program that tries to score) are in tests/test_humaneval.py and
tests/test_sandbox_judge.py; the containment findings of issue 15 in tests/test_sandbox_containment.py; the
kernel state that outlived a run (issue 29: keyrings, the page cache, /proc) in tests/test_sandbox_crossrun.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from rewards.code import sandbox
from rewards.code.sandbox import root as sandbox_root
from rewards.code.sandbox import run as sandbox_run
from rewards.code.sandbox import run_python
from tests.support.sandbox_checks import (
    TOKEN_VARIABLE,
    Listener,
    outside_directory,
    processes_with_token,
    require_namespaces,
    snapshot,
)

TIMEOUT_S = 1.0
SECRET_VARIABLE = "RLVR_PLANTED_SECRET"

HOSTILE = {
    "infinite_loop": "while True:\n    pass\n",
    "long_sleep": "import time\ntime.sleep(60)\n",
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "memory_bomb": "blocks = []\nwhile True:\n    blocks.append(bytearray(32 * 1024 * 1024))\n",
    "stdout_flood": "import sys\nwhile True:\n    sys.stdout.write('flood ' * 10000)\n",
    "write_outside": "open({marker!r}, 'w').write('escaped')\nprint('wrote')\n",
    "delete_outside": "import os\nos.remove({victim!r})\nprint('deleted')\n",
    "print_secret": """
import os
print(os.environ.get({secret_variable!r}))
print(dict(os.environ))
for entry in os.listdir('/proc') if os.path.isdir('/proc') else []:
    try:
        print(open('/proc/%s/environ' % entry, 'rb').read())
    except OSError:
        pass
""",
    "kill_parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('parent signalled')\n",
    "detached_child": """
import os, sys
if os.fork() == 0:  # a new interpreter in a session of its own (no subprocess: the sandbox gives no pipes)
    os.setsid()
    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)'])
if os.fork() == 0:  # the classic daemon: fork, setsid, fork again, let the middle one die
    os.setsid()
    if os.fork() == 0:
        import time
        time.sleep(60)
    os._exit(0)
print('detached')
""",
    "connect_listener": """
import socket
connection = socket.create_connection(('127.0.0.1', {port}), timeout=0.5)
connection.sendall(b'escaped')
print('connected')
""",
}
# Programs whose outcome is certain under namespaces (the others may end either way; only their
# containment is checked).
EXPECTED_STATUS = {
    "infinite_loop": "timeout",
    "long_sleep": "timeout",
    "fork_bomb": "timeout",
    "memory_bomb": "memory",
    "stdout_flood": "error",
    "write_outside": "error",
    "delete_outside": "error",
    "connect_listener": "error",
    "detached_child": "ok",
}


@pytest.fixture
def world(monkeypatch):
    """The outside world of one run: a directory with a victim file, a planted secret, a listener."""
    outside = outside_directory()
    victim = outside / "victim.txt"
    victim.write_text("precious")
    victim.chmod(0o666)
    secret = f"secret-{uuid.uuid4().hex}"
    monkeypatch.setenv(SECRET_VARIABLE, secret)
    listener = Listener()
    yield {"outside": outside, "victim": victim, "secret": secret, "listener": listener}
    listener.close()
    shutil.rmtree(outside, ignore_errors=True)


@pytest.fixture
def secret_holder(world):
    """A process of ours with the secret in its initial environment, where /proc/PID/environ shows it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={"PATH": "/usr/bin:/bin", SECRET_VARIABLE: world["secret"]},
    )
    yield holder
    holder.kill()
    holder.wait()


def hostile_code(name: str, world: dict) -> str:
    return HOSTILE[name].format(
        marker=str(world["outside"] / "marker.txt"),
        victim=str(world["victim"]),
        secret_variable=SECRET_VARIABLE,
        port=world["listener"].port,
    )


def run_contained(name: str, world: dict, **options):
    """Run one hostile program and check every containment property that the mode promises."""
    token = uuid.uuid4().hex
    before = snapshot(world["outside"])
    start = time.monotonic()
    result = run_python(
        hostile_code(name, world),
        timeout_s=TIMEOUT_S,
        wall_timeout_s=TIMEOUT_S,
        memory_mb=256,
        extra_env={TOKEN_VARIABLE: token},
        **options,
    )
    elapsed = time.monotonic() - start
    assert elapsed < TIMEOUT_S + 0.5, f"{name} took {elapsed:.2f} s"
    assert world["secret"] not in result.stdout + result.stderr
    assert processes_with_token(token) == [], f"{name} left processes behind"
    return result, before


@pytest.fixture(scope="module")
def namespaces():
    require_namespaces()


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_program_is_contained_by_namespaces(name, world, secret_holder, namespaces):
    result, before = run_contained(name, world, isolation="namespaces")
    assert result.isolation == "namespaces" and result.network_isolated
    assert snapshot(world["outside"]) == before
    assert world["listener"].connections() == 0
    if name in EXPECTED_STATUS:
        assert result.status == EXPECTED_STATUS[name], result
    if name == "stdout_flood":
        assert result.output_truncated
    if name == "print_secret":
        assert result.status == "ok" and "None" in result.stdout  # it ran, and found nothing


def test_signalling_every_process_reaches_only_the_run(world, secret_holder, namespaces):
    # kill(-1) signals every process the sender may signal; in its pid namespace that is its own processes.
    token = uuid.uuid4().hex
    code = """
import os, signal, sys
if os.fork() == 0:
    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(9)'])
os.kill(-1, signal.SIGKILL)
"""
    result = run_python(
        code, timeout_s=TIMEOUT_S, wall_timeout_s=TIMEOUT_S, isolation="namespaces", extra_env={TOKEN_VARIABLE: token}
    )
    assert result.isolation == "namespaces" and result.wall_s < TIMEOUT_S + 0.5
    assert processes_with_token(token) == []
    assert secret_holder.poll() is None  # a bystander process of ours is untouched


def test_host_service_sockets_are_out_of_reach(namespaces):
    # A read-only mount does not stop connect() on a unix socket; the sandbox hides /run, where services
    # (D-Bus, systemd, docker, a desktop session) keep theirs.
    if not os.access("/run", os.W_OK):
        pytest.skip("needs write access to /run to plant a socket there")
    directory = Path(tempfile.mkdtemp(prefix="rlvr-socket-", dir="/run"))
    directory.chmod(0o777)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(directory / "service.sock"))
        (directory / "service.sock").chmod(0o777)
        server.listen(4)
        server.setblocking(False)
        code = f"import socket\nsocket.socket(socket.AF_UNIX).connect({str(directory / 'service.sock')!r})\nprint('in')"
        result = run_python(code, timeout_s=TIMEOUT_S, isolation="namespaces")
        assert result.status == "error" and "in" not in result.stdout
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
        shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------- the fallback

# What the fallback still guarantees, whoever runs it: limits, the time bound, the environment, the kill of
# every descendant while the launcher lives. (No fork bomb here: as root with an interpreter that an
# unprivileged uid cannot reach, the fallback runs programs as root, where RLIMIT_NPROC does not hold.)
FALLBACK_SAFE = ["infinite_loop", "long_sleep", "memory_bomb", "stdout_flood", "print_secret", "detached_child"]


@pytest.mark.parametrize("name", FALLBACK_SAFE)
def test_fallback_still_limits_and_cleans_up(name, world, monkeypatch):
    monkeypatch.setattr(sandbox_run, "_warned", set())
    result, before = run_contained(name, world, isolation="fallback")
    assert result.isolation == "fallback" and not result.network_isolated
    assert snapshot(world["outside"]) == before  # none of these programs writes; the run itself must not either
    if name in EXPECTED_STATUS:
        assert result.status == EXPECTED_STATUS[name], result
    if name == "print_secret":
        assert "None" in result.stdout


def _reachable_python() -> str | None:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"):
        if os.path.exists(candidate) and sandbox_root.interpreter_reachable(candidate):
            return candidate
    return None


def test_fallback_as_root_runs_programs_under_their_own_uid(world, tmp_path):
    python = _reachable_python()
    if os.geteuid() != 0 or python is None:
        pytest.skip("needs root and a python3 that an unprivileged uid can run (e.g. /usr/bin/python3)")
    locked = outside_directory()
    locked.chmod(0o755)  # root's: an unprivileged uid may read, not write
    (locked / "file.txt").write_text("root's")
    try:
        for name in ("fork_bomb", "detached_child", "kill_parent"):
            result, _ = run_contained(name, world, isolation="fallback", python=python)
            assert result.isolation == "fallback"
        code = f"import os\nprint(os.getuid())\nos.remove({str(locked / 'file.txt')!r})"
        result = run_python(code, timeout_s=TIMEOUT_S, isolation="fallback", python=python)
        assert int(result.stdout.split()[0]) >= sandbox.UID_BASE
        assert result.status == "error" and "Permission denied" in result.stderr
        assert (locked / "file.txt").read_text() == "root's"
    finally:
        shutil.rmtree(locked, ignore_errors=True)


# ---------------------------------------------------------------- an unprivileged user (user namespaces)

_AS_USER = """
import json, os, sys, uuid
sys.path.insert(0, {module_dir!r})
from rewards.code import sandbox
programs = json.loads(sys.argv[1])
results = {{}}
for name, code in programs.items():
    token = uuid.uuid4().hex
    result = sandbox.run_python(code, timeout_s={timeout}, wall_timeout_s={timeout}, memory_mb=256,
                                isolation="namespaces", extra_env={{{token_variable!r}: token}})
    results[name] = [result.status, result.isolation, result.network_isolated, result.wall_s, token,
                     result.stdout[-300:], result.stderr[-300:]]
judged = sandbox.run_judged("def add(a, b):\\n    return a + b\\n", "", ["assert add(1, 2) == 3", "assert add(1, 1) == 3"])
print(json.dumps({{"uid": os.getuid(), "results": results, "judged": [judged.status, judged.cases]}}))
"""


def _user_namespaces_refused() -> str | None:
    for path, refused in (
        ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
        ("/proc/sys/user/max_user_namespaces", "0"),
        ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"),
    ):
        if os.path.exists(path) and Path(path).read_text().strip() == refused:
            return f"{path} is {refused}"
    return None


def test_an_unprivileged_user_gets_the_same_containment(world):
    python = _reachable_python()
    if os.geteuid() != 0 or python is None:
        pytest.skip("needs root (to become an unprivileged user) and a python3 that user can run")
    if refused := _user_namespaces_refused():
        pytest.skip(f"this kernel refuses unprivileged user namespaces: {refused}")
    module_dir = Path(tempfile.mkdtemp(prefix="rlvr-sandbox-module-", dir=str(world["outside"].parent)))
    try:
        package = module_dir / "rewards"
        (package / "code").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "code" / "__init__.py").write_text("")
        copy = package / "code" / "sandbox"
        shutil.copytree(Path(sandbox.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
        for path in (module_dir, package, package / "code", copy):  # the sandbox package: standard library only
            path.chmod(0o755)
        names = ["fork_bomb", "write_outside", "delete_outside", "detached_child", "connect_listener", "kill_parent"]
        programs = {name: hostile_code(name, world) for name in names}
        script = _AS_USER.format(module_dir=str(module_dir), timeout=TIMEOUT_S, token_variable=TOKEN_VARIABLE)
        before = snapshot(world["outside"])
        completed = subprocess.run(
            [python, "-I", "-c", script, json.dumps(programs)],
            user=65534,
            group=65534,
            extra_groups=[],
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        assert completed.returncode == 0, completed.stderr
        report = json.loads(completed.stdout)
        assert report["uid"] == 65534
        assert report["judged"] == ["ok", {"0": [True, ""], "1": [False, "AssertionError: "]}]
        for name, (status, isolation, network, wall_s, token, stdout, stderr) in report["results"].items():
            assert isolation == "namespaces" and network, (name, stderr)
            assert wall_s < TIMEOUT_S + 0.5, name
            assert processes_with_token(token) == [], name
            if name in EXPECTED_STATUS:
                assert status == EXPECTED_STATUS[name], (name, status, stdout, stderr)
        assert snapshot(world["outside"]) == before
        assert world["listener"].connections() == 0
    finally:
        shutil.rmtree(module_dir, ignore_errors=True)
