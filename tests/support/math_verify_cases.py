"""math-verify's own regression cases, read from its source distribution on PyPI.

Its sdist ships `tests/` with about 290 (gold, prediction, expected) cases in `pytest.mark.parametrize`
lists. We do not copy them into this repository: `fetch_cases` downloads the sdist of the installed
version with pip and reads the literal cases out of its test files with `ast`, at test time.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path


@dataclass(frozen=True)
class Case:
    gold: str
    pred: str
    expected: bool
    source: str  # file::function[index]
    options: dict = field(default_factory=dict)  # extra parametrize columns (precision, strict, ...)


def download_sdist(target: Path) -> Path:
    """The extracted sdist folder of the installed math-verify; raises RuntimeError when pip cannot get it."""
    version = metadata.version("math-verify")
    target.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "--quiet"]
    result = subprocess.run(
        [*command, f"math-verify=={version}", "-d", str(target)], capture_output=True, text=True, timeout=300
    )
    archives = sorted(target.glob("math_verify-*.tar.gz"))
    if not archives:
        raise RuntimeError(f"pip could not download the math-verify {version} sdist: {result.stderr[-500:]}")
    with tarfile.open(archives[0]) as archive:
        archive.extractall(target, filter="data")
    return target / archives[0].name.removesuffix(".tar.gz")


def read_cases(sdist: Path) -> list[Case]:
    cases = []
    for path in sorted((sdist / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text())
        for function in (node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)):
            for decorator in function.decorator_list:
                if not (isinstance(decorator, ast.Call) and getattr(decorator.func, "attr", "") == "parametrize"):
                    continue
                try:
                    names = [name.strip() for name in ast.literal_eval(decorator.args[0]).split(",")]
                    rows = ast.literal_eval(decorator.args[1])
                except (ValueError, SyntaxError, IndexError):
                    continue  # cases built from code (sympy objects): not text we can feed a verifier
                if not {"gold", "pred"} <= set(names):
                    continue
                outcome = "expected" if "expected" in names else "result" if "result" in names else None
                if outcome is None:
                    continue
                for index, row in enumerate(rows):
                    values = dict(zip(names, row, strict=True))
                    options = {k: v for k, v in values.items() if k not in ("gold", "pred", outcome)}
                    cases.append(
                        Case(
                            str(values["gold"]),
                            str(values["pred"]),
                            bool(values[outcome]),
                            f"{path.name}::{function.name}[{index}]",
                            options,
                        )
                    )
    return cases
