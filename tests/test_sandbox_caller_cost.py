"""Issue 58: what a run costs outside its own budget (the caller's CPU, the launcher's, a slot held for nothing).

At b6ef81d a judged program that wrote a reply too long to read, or closed its reply channel and lingered, held
its slot for the whole wall-clock ceiling at almost no CPU (the judge took either for "the program ended by
itself", so the launcher waited for it to exit), and the launcher spun on an exited process's pidfd for as long
as the judge took to decide the cases. The caller's side of a stdin/stdout comparison is counted in
tests/test_code_reward.py; its time in scripts/bench/caller_cost.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewards.code.sandbox import run_judged
from rewards.code.sandbox.protocol import MAX_MESSAGE_BYTES
from tests.support.sandbox_checks import require

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 5.0  # the wall-clock ceiling is 16 s: a run that waits for it is unmistakable
WITHIN_S = 1.5  # "within a second", and half a second for a loaded 2-core machine

# 200 MB with no newline, written by the solution itself on the reply channel (fd 4) at its first call.
NO_NEWLINE = f"""
import os
def f():
    chunk = b"x" * (1 << 20)
    for _ in range(200):
        os.write(4, chunk)
    return 1
assert 200 << 20 > {MAX_MESSAGE_BYTES}
"""
# Closes both ends of its channel to the judge at its first call, then lingers.
CLOSES_AND_LINGERS = """
import os, time
def f():
    os.close(3)
    os.close(4)
    time.sleep(60)
"""
CASES = ["assert f() == 1", "assert f() == 1"]


@pytest.mark.parametrize(
    "solution, first, second",
    [
        (NO_NEWLINE, "a reply past the size limit", "an earlier reply of the run was past the size limit"),
        (CLOSES_AND_LINGERS, "closed its reply channel without exiting", "closed its reply channel without exiting"),
    ],
    ids=["200 MB without a newline", "closed channel, lingering"],
)
def test_a_reply_too_long_to_read_or_a_closed_channel_ends_the_program_at_once(solution, first, second):
    result = run_judged(solution, "", CASES, ["f"], timeout_s=TIMEOUT_S)
    assert result.status == "ok", result  # every case has its verdict: no timeout
    assert result.wall_s < WITHIN_S, result.wall_s  # at b6ef81d: 16 s, the ceiling
    assert result.cases[0][0] is False and first in result.cases[0][1], result.cases
    assert result.cases[1][0] is False and second in result.cases[1][1], result.cases


def test_a_program_that_ends_by_itself_is_not_said_to_have_lingered():
    """The grace after end of file is for exiting: a program that exits in it keeps the plain reason."""
    result = run_judged("import os\ndef f():\n    os._exit(3)\n", "", CASES, ["f"], timeout_s=TIMEOUT_S)
    assert result.cases == {0: (False, "the program ended"), 1: (False, "the program ended")}, result
    assert result.wall_s < WITHIN_S, result.wall_s


# In a fresh interpreter whose only children are this run's launcher, init, program and judge: the pytest worker may
# reap a child of an earlier test's (a process pool) in the middle of the measurement.
MEASURE = """
import json, resource, sys
from rewards.code.sandbox import run_judged
setup = "import time\\nstart = time.process_time()\\nwhile time.process_time() - start < 0.8:\\n    pass\\n"
result = run_judged("def f():\\n    return 1\\n", setup, ["assert f() == 1"], ["f"], timeout_s=float(sys.argv[1]))
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"cases": result.cases, "run_cpu_s": result.cpu_s, "children_cpu_s": usage.ru_utime + usage.ru_stime}))
"""


def test_the_launcher_waits_without_spinning_while_the_judge_decides():
    """The judge runs the setup twice (live, then for the verdicts), here 0.8 s of CPU each, inside the run's
    cgroup; the launcher, outside it, waits on the judge. At b6ef81d it spun on the exited program's pidfd for
    the whole verdict phase: the run's children used ~0.85 s more CPU than the run's cgroup counted."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(TIMEOUT_S)], capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)}, check=True,
    )  # fmt: skip
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    require(measured["run_cpu_s"] is not None, "the run's CPU time is counted only where a cgroup counts it")
    assert measured["cases"] == {"0": [True, ""]}, measured
    assert measured["run_cpu_s"] >= 1.5, measured  # both phases ran inside the run's budget
    outside = measured["children_cpu_s"] - measured["run_cpu_s"]
    assert outside < 0.4, measured  # the launcher's start-up and waits only
