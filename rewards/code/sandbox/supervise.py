"""How the launcher waits for a run's two sides, the program's (init, or the fallback's program) and the judge's,
and its signals: SIGTERM from the caller (end the run now), SIGUSR1 (the run's time is up: end the program's
side, and let the judge decide the cases answered before).

Loaded by rewards/code/sandbox/launcher.py by path, as sandbox_supervise (standard library only, like it). The
order it keeps is the judge's rule of no feedback (rewards/code/sandbox/judge.py): no answer is compared while
anything of the program lives, so the program's side is ended, and reaped, before the judge may go on.
"""

from __future__ import annotations

import os
import select
import signal
import time

# After the judge's live phase ended on end of file from the program (it exited, or closed its reply channel and
# lingers): how long the program's side may take to exit by itself, so that its exit status (a crash, the memory
# limit) is still reported, before it is ended. Nothing it does in that time reaches the judge.
EXIT_GRACE_S = 0.2


class Stop(Exception):
    """The caller asked (SIGTERM) to end the run now."""


def _raise_stop(signum, frame):
    raise Stop


_wakeup: list[int] = []  # a pipe that signal.set_wakeup_fd writes to: a signal wakes the launcher's select
_end_asked = False  # the caller's SIGUSR1: the run's time is up; end the program's side, let the judge decide


def _ask_end(signum, frame):
    global _end_asked
    _end_asked = True


def as_child() -> None:
    """In a forked child of the launcher (init, the judge): none of the launcher's signal handling."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)


def install_handlers() -> None:
    """In the launcher, before anything is forked: SIGTERM raises Stop, SIGUSR1 asks for the end of the program's
    side, and either wakes `supervise`'s select (through a pipe the signal writes to)."""
    signal.signal(signal.SIGTERM, _raise_stop)
    _wakeup[:] = os.pipe()
    os.set_blocking(_wakeup[1], False)
    signal.set_wakeup_fd(_wakeup[1])
    signal.signal(signal.SIGUSR1, _ask_end)


def supervise(config: dict, side: int, judge: int | None, end_side, side_gone) -> tuple[int | None, object, bool]:
    """Wait until the program's side (init, or the fallback's program) and the judge have both exited.

    The side is ended (`end_side`) when the judge's live phase is over while it still runs (after EXIT_GRACE_S
    where the phase ended on end of file from the program, at once otherwise), when the judge
    exits first (nothing the program does after that counts), and when the caller asks (SIGUSR1: the run's CPU
    time or wall clock ran out, and the cases answered so far are still to be judged). Once the side has been
    reaped (and `side_gone` has killed what it left), the judge is told to go on to its verdicts: no answer
    is compared while anything of the program lives. Returns the side's wait status and resource usage (None
    if it was not reaped), and whether it was ended here."""
    done, go = config.pop("judge_sync", (None, None))
    pending = {side} | ({judge} if judge else set())
    watched: dict[int, int] = {}  # pid -> its pidfd, readable once the process has exited
    for pid in pending:
        try:
            watched[pid] = os.pidfd_open(pid)
        except (AttributeError, OSError):  # before Linux 5.3: look every few milliseconds instead
            for fd in watched.values():
                os.close(fd)
            watched = {}
            break
    polling = not watched
    status = usage = None
    ended = False
    grace_until = None  # the live phase ended on the program's end of file: end the side at this time
    lingered = False  # the side was ended because it outlived that grace

    def end() -> None:
        nonlocal ended
        if side in pending and not ended:
            ended = True
            end_side()

    try:
        while pending:
            wait = 0.005 if polling else None
            if grace_until is not None:
                wait = max(0.0, min(wait if wait is not None else EXIT_GRACE_S, grace_until - time.monotonic()))
            ready = select.select([*watched.values(), _wakeup[0]] + ([done] if done is not None else []), [], [], wait)[
                0
            ]
            if _wakeup[0] in ready:
                os.read(_wakeup[0], 4096)
            if _end_asked:
                end()
            elif grace_until is not None and time.monotonic() >= grace_until and side in pending and not ended:
                lingered = True  # it closed its channel to the judge and did not exit
                end()
            if ended or side not in pending:
                grace_until = None  # nothing left to wait for: no busy loop while the judge decides
            if done is not None and done in ready:
                word = os.read(done, 1)
                os.close(done)
                done = None
                if word == b"E":  # the program's end of file: it has exited, or is about to, or lingers
                    grace_until = time.monotonic() + EXIT_GRACE_S
                else:  # "K": the live phase is over and the side still runs; "": the judge died
                    end()
            for pid in sorted(pending):
                found, wait_status, rusage = os.wait4(pid, os.WNOHANG)
                if found != pid:
                    continue
                pending.discard(pid)
                if pid in watched:  # an exited process's pidfd stays readable: watched on, it would make this a
                    os.close(watched.pop(pid))  # busy loop for as long as the judge decides (issue 58)
                if pid == side:
                    status, usage = wait_status, rusage
                    side_gone()
                    if go is not None:  # "k": it closed its channel, did not exit, and was ended for that
                        os.write(go, b"k" if lingered else b"g")
                        os.close(go)
                        go = None
                elif side in pending:
                    end()  # the judge has gone: nothing the program does now counts
    except Stop:
        end()
        for pid in pending - {side}:
            os.kill(pid, signal.SIGKILL)
        for pid in pending:
            os.waitpid(pid, 0)
        side_gone()
        raise
    finally:
        for fd in [*watched.values(), done, go]:
            if fd is not None:
                os.close(fd)
    return status, usage, ended
