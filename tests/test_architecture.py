"""The claims of docs/ARCHITECTURE.md that a test can check, read from the source (lazy imports included):

- each recipe's own code lives in its wing (recipes/stages/<recipe>/); recipes/common/ holds only what two or
  more recipes import directly (a package of recipes/common/ counted as one); no wing imports another wing, and
  recipes/common/ imports no wing;
- every write of a file in the library layers goes through basics.atomic_files.write_atomic (a few writes that are not
  results files are listed below, each with its reason);
- every recipe's training goes through the one resume rule (recipes.common.checkpoints.resume.train_resuming);
- the maximum completion length has one spelling (`max_new_tokens`) outside the mapping to TRL's own.
Each checker is also run on a small planted example, so that it can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO
from tests.test_import_cycles import import_graph, module_names

RECIPES = ("sft", "grpo", "rejection_sampling", "distill", "reward_model")
LIBRARY = ("basics", "rewards", "tasks", "eval", "data_filters", "recipes")


def reached_from(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph.get(module, ())
    return seen


def recipes_using(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """For each module, the recipe scripts whose imports reach it."""
    users: dict[str, set[str]] = {}
    for recipe in RECIPES:
        for module in reached_from(graph, f"recipes.{recipe}"):
            users.setdefault(module, set()).add(recipe)
    return users


def recipe_of(module: str) -> str | None:
    """The recipe a module belongs to: its script (recipes.<recipe>) or its wing (recipes.stages.<recipe>...)."""
    parts = module.split(".")
    if parts[:2] == ["recipes", "stages"] and len(parts) > 2:
        return parts[2] if parts[2] in RECIPES else None
    return parts[1] if len(parts) == 2 and parts[0] == "recipes" and parts[1] in RECIPES else None


def common_unit(module: str) -> str | None:
    """The unit of recipes/common a module is counted in: a module at its top, or the package below it that
    holds the module (recipes.common.command_line for recipes.common.command_line.config); None outside it."""
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[:2] == ["recipes", "common"] and len(parts) > 2 else None


def direct_importers(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """For each unit of recipes/common, the modules outside it that import it or any module of it."""
    importers: dict[str, set[str]] = {}
    for importer, imported in graph.items():
        for target in imported:
            unit = common_unit(target)
            if unit is not None and common_unit(importer) != unit:
                importers.setdefault(unit, set()).add(importer)
    return importers


# Units of recipes/common that fewer than two recipes import, kept there because other modules of recipes/common
# need them, each with its reason (any other module one recipe uses is in that recipe's wing).
COMMON_FOR_ONE_RECIPE: dict[str, str] = {
    "recipes.common.trl_private": "the one list of TRL's and transformers' private names, for an upgrade to port in "
    "one file: the GRPO wing reaches them, and so does recipes.common.checkpoints (the Trainer's own checkpoint "
    "loader, in the rollback after a stop on reward hacking), which no wing module may be imported by",
}


def misplaced(graph: dict[str, set[str]], modules) -> list[str]:
    """Units of recipes/common (a module at its top, or a package counted as one) imported directly by fewer than
    two recipes (a recipe: its script or its wing; a module of recipes/common that imports it does not count, so a
    module is not common because a common module uses it); wing modules reached by a recipe not their own; imports
    from common into a wing or from one wing into another."""
    users = recipes_using(graph)
    importers = direct_importers(graph)
    found = []
    for unit in sorted({common_unit(module) for module in modules} - {None}):
        recipes = {recipe_of(importer) for importer in importers.get(unit, ())} - {None}
        if len(recipes) < 2 and unit not in COMMON_FOR_ONE_RECIPE:
            found.append(f"{unit} is in recipes/common/ but imported directly by {sorted(recipes) or 'no recipe'}")
    for module in modules:
        parts = module.split(".")
        if parts[:2] == ["recipes", "stages"] and len(parts) > 2 and users.get(module, set()) - {parts[2]}:
            found.append(f"{module} is {parts[2]}'s but used by {sorted(users[module] - {parts[2]})}")
    for importer, imported in graph.items():
        for target in imported:
            side, other = importer.split(".")[:3], target.split(".")[:3]
            if other[:2] == ["recipes", "stages"] and len(other) > 2 and side[:2] != ["recipes", "stages"]:
                if side[:2] == ["recipes", "common"]:
                    found.append(f"{importer} (common) imports the wing module {target}")
            elif side[:2] == other[:2] == ["recipes", "stages"] and len(side) > 2 and len(other) > 2:
                if side[2] != other[2]:
                    found.append(f"{importer} imports another wing's {target}")
    return sorted(found)


def test_recipes_common_holds_only_what_two_recipes_use_and_wings_stay_apart():
    modules = module_names(REPO)
    graph = import_graph(modules)
    for recipe in RECIPES:
        assert f"recipes.{recipe}" in modules and f"recipes.stages.{recipe}" in modules, recipe
    assert set(COMMON_FOR_ONE_RECIPE) <= {common_unit(module) for module in modules}, "allowed units that are gone"
    assert not misplaced(graph, modules), "\n".join(misplaced(graph, modules))


def test_the_wing_check_can_fail():
    graph = {
        "recipes.sft": {"recipes.common.only_sft", "recipes.common.shared", "recipes.common.job.a"},
        "recipes.grpo": {"recipes.common.shared", "recipes.stages.grpo.trainer"},
        "recipes.stages.grpo.setup": {"recipes.common.job.b", "recipes.common.grpo_only"},
        "recipes.rejection_sampling": {"recipes.stages.rejection_sampling.rounds"},
        "recipes.stages.rejection_sampling.rounds": {"recipes.stages.grpo.trainer"},
        # reached by sft and grpo, but only through another common module: no recipe imports it
        "recipes.common.shared": {"recipes.stages.grpo.trainer", "recipes.common.helper"},
        # a package is one unit: job.a (sft) and job.b (grpo's wing) make it common, job.c serves job.a
        "recipes.common.job.a": {"recipes.common.job.c", "recipes.common.grpo_only"},
        "scripts.bench": {"recipes.common.only_sft"},  # not a recipe
    }
    modules = {
        "recipes.common.only_sft", "recipes.common.shared", "recipes.common.helper", "recipes.common.grpo_only",
        "recipes.common.job", "recipes.common.job.a", "recipes.common.job.b", "recipes.common.job.c",
        "recipes.stages.grpo.trainer",
    }  # fmt: skip
    assert misplaced(graph, modules) == sorted(
        [
            "recipes.common.only_sft is in recipes/common/ but imported directly by ['sft']",
            "recipes.common.helper is in recipes/common/ but imported directly by no recipe",
            "recipes.common.grpo_only is in recipes/common/ but imported directly by ['grpo']",
            "recipes.stages.grpo.trainer is grpo's but used by ['rejection_sampling', 'sft']",
            "recipes.common.shared (common) imports the wing module recipes.stages.grpo.trainer",
            "recipes.stages.rejection_sampling.rounds imports another wing's recipes.stages.grpo.trainer",
        ]
    )
    assert recipe_of("recipes.stages.grpo.setup") == recipe_of("recipes.grpo") == "grpo"
    assert recipe_of("recipes.stages.plot_curves.figure") is None and recipe_of("recipes.common.model") is None


# ---------------------------------------------------------------- atomic writes

# Writes that are not a results file a reader or a resumed run trusts, each with its reason.
NOT_RESULTS = {
    "basics/atomic_files.py": "the atomic helper itself",
    "recipes/_checkout.py": "the venv's .pth file, written once by make setup",
    "recipes/common/training/monitor.py": "metrics.jsonl is a log appended a line at a time; a reader skips a torn last line",
    "eval/evaluate.py": "samples.part*.jsonl, appended a chunk at a time and fsynced, a torn last line cut on resume; "
    "samples.jsonl, per_problem.jsonl and summary.json are written from them with write_atomic",
    "recipes/stages/grpo/checkpoint_state.py": "adaptive sampling's buffer, a tensor file inside a checkpoint "
    "(recipes.common.checkpoints.folders.damage tells a cut-short checkpoint, and the resume rule passes over it)",
}
SANDBOX = "rewards/code/sandbox/"  # the program's own files inside its sandbox root: no results file


def file_writes(source: str) -> list[int]:
    """Lines that write a file directly: Path.write_text/write_bytes, open(..., 'w'/'a'/'x'), json.dump,
    torch.save, os.replace/rename."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        if name in ("write_text", "write_bytes") or (name == "dump" and owner == "json"):
            lines.append(node.lineno)
        elif (name == "save" and owner == "torch") or (name in ("replace", "rename") and owner == "os"):
            lines.append(node.lineno)
        elif name in ("open", "fdopen"):
            modes = [arg for arg in node.args[1:2]] + [kw.value for kw in node.keywords if kw.arg == "mode"]
            if any(
                isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax") for m in modes
            ):
                lines.append(node.lineno)
    return sorted(lines)


def test_every_results_file_is_written_atomically():
    offenders = []
    for package in LIBRARY:
        for path in sorted((REPO / package).rglob("*.py")):
            name = str(path.relative_to(REPO))
            if name in NOT_RESULTS or name.startswith(SANDBOX):
                continue
            offenders += [f"{name}:{line}" for line in file_writes(path.read_text())]
    assert not offenders, "files written in place (use basics.atomic_files.write_atomic):\n" + "\n".join(offenders)


def test_the_write_check_can_fail():
    source = (
        "import json, os, torch\n"
        "p.write_text('x')\n"
        "open(f, 'w')\n"
        "open(f)\n"
        "json.dump(d, h)\n"
        "torch.save(t, f)\n"
        "os.replace(a, b)\n"
        "'a'.replace('a', 'b')\n"
        "open(f, mode='a')\n"
    )
    assert file_writes(source) == [2, 3, 5, 6, 7, 9]


# ---------------------------------------------------------------- the resume rule


def train_calls(source: str) -> list[int]:
    """Lines that call `<something>.train(...)`: a trainer's training run."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "train"
    )


def test_every_recipe_trains_through_the_one_resume_rule():
    rule = REPO / "recipes" / "common" / "checkpoints" / "resume.py"
    assert len(train_calls(rule.read_text())) == 1
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted((REPO / "recipes").rglob("*.py"))
        if path != rule
        for line in train_calls(path.read_text())
    ]
    assert not offenders, "training that bypasses recipes.common.checkpoints.resume.train_resuming:\n" + "\n".join(
        offenders
    )
    users = [
        path.stem
        for path in sorted((REPO / "recipes").rglob("*.py"))
        if "train_resuming(" in path.read_text() and path != rule
    ]
    assert set(users) >= {"grpo", "sft_step", "stages", "training"}  # GRPO, SFT, on-policy distill, the ORM


def test_the_train_check_can_fail():
    assert train_calls("trainer.train()\nmodel.train()\nx = train()\n") == [1, 2]


# ---------------------------------------------------------------- one spelling of the completion length


def identifiers(source: str) -> set[str]:
    """Names the code uses (variables, attributes, arguments, keywords, fields), not words in strings or comments."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            found.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
    return found


# TRL's trainers name it max_completion_length; compact generation hands TRL's value to eval.decoding's
# max_new_tokens: the one mapping.
TRL_MAPPING = "recipes/stages/grpo/compact_generation.py"
# ... and the other way: sampling with tools hands its max_new_tokens to TRL's GRPOConfig (the sampler is TRL's loop)
TO_TRL = "eval/tools/trl_sampling.py"
OLD_SPELLINGS = {"sample_max_new_tokens", "eval_max_new_tokens"}  # (vLLM's own max_tokens is its API)


def length_spellings(files: dict[str, str]) -> list[str]:
    offenders = []
    for name, text in sorted(files.items()):
        used = identifiers(text)
        offenders += [f"{name}: {word}" for word in sorted(used & OLD_SPELLINGS)]
        if "max_completion_length" in used and name not in (TRL_MAPPING, TO_TRL):
            offenders.append(f"{name}: max_completion_length outside the TRL mapping")
    return offenders


def test_the_completion_length_has_one_spelling():
    """`max_new_tokens` in the code everywhere; TRL's `max_completion_length` only where it is mapped to it."""
    files = {
        str(path.relative_to(REPO)): path.read_text() for package in LIBRARY for path in (REPO / package).rglob("*.py")
    }
    assert not length_spellings(files), "\n".join(length_spellings(files))


def test_the_spelling_check_can_fail():
    files = {
        "a.py": "x = args.sample_max_new_tokens\n# max_completion_length in a comment\n",
        TRL_MAPPING: "n = self.max_completion_length\n",
        "b.py": "f(max_completion_length=3)\n",
    }
    assert length_spellings(files) == [
        "a.py: sample_max_new_tokens",
        "b.py: max_completion_length outside the TRL mapping",
    ]


def test_claims_and_files_agree():
    """Every module path docs/ARCHITECTURE.md names exists."""
    import re

    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"`((?:rewards|tasks|eval|data_filters|recipes|scripts)/[\w/]+\.py)`", text))
    assert named, "ARCHITECTURE.md names no file"
    missing = sorted(name for name in named if not Path(REPO / name).is_file())
    assert not missing, f"docs/ARCHITECTURE.md names files that do not exist: {missing}"


# ---------------------------------------------------------------- the architecture document held to the tree


def test_the_architecture_document_names_every_module_and_no_module_that_is_gone():
    """docs/ARCHITECTURE.md's layout names every module of the library layers (issue 56: it had left out
    tasks/generation.py and grpo/reference_kl.py), and every `name.py` it names exists somewhere in the tree."""
    import re

    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    layout = text[text.index("## Layout") :]
    modules = [
        path
        for package in LIBRARY
        for path in sorted((REPO / package).rglob("*.py"))
        if "__pycache__" not in path.parts and path.name != "__init__.py"
    ]
    unnamed = [str(path.relative_to(REPO)) for path in modules if not re.search(rf"\b{re.escape(path.name)}", layout)]
    assert not unnamed, f"modules docs/ARCHITECTURE.md's layout does not name: {unnamed}"
    files = {path.name for path in REPO.rglob("*.py") if ".venv" not in path.parts}
    gone = sorted(set(re.findall(r"\b(\w+\.py)\b", layout)) - files)
    assert not gone, f"docs/ARCHITECTURE.md's layout names files that do not exist: {gone}"
