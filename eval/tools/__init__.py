"""Tools a model calls while it samples: the built-in `python` (model-written code run in the code sandbox as a
session kept for one trajectory, eval/tools/python.py, by replay, eval/tools/replay.py) and a user's own tools named
`path/to/file.py:function` (eval/tools/registry.py), in the forms TRL's GRPOTrainer takes (`tools=`,
`environment_factory=`); and a tokenizer made able to carry tool calls (eval/tools/chat_template.py).
May import: eval, tasks, rewards and basics only, as the rest of eval (tests/test_layering.py checks); the sandbox
it runs code in is rewards.code.sandbox's.
"""

from eval.tools.python import PythonEnvironment, PythonSession, run_calls
from eval.tools.registry import check_schema, is_environment, resolve_tool, tool_names, trainer_tools

__all__ = [
    "PythonEnvironment",
    "PythonSession",
    "check_schema",
    "is_environment",
    "resolve_tool",
    "run_calls",
    "tool_names",
    "trainer_tools",
]
