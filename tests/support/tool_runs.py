"""What the python tool ran in the sandbox, for tests that count or time its calls: each call's launch
(`PythonSession._launch`: a one-call program on the replay path, or on the live path the exchange with the session's
interpreter, its start included when the call starts one)."""

from __future__ import annotations

import time


def record_tool_runs(monkeypatch) -> list[tuple[float, float]]:
    """From now on, every sandbox run or live exchange the python tool makes: (start, end), perf_counter seconds."""
    from eval.tools import python as python_tool

    runs, launch = [], python_tool.PythonSession._launch

    def timed(call):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                runs.append((start, time.perf_counter()))

        return wrapper

    monkeypatch.setattr(python_tool.PythonSession, "_launch", timed(launch))
    return runs
