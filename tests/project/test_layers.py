"""The package's shape, read from its source: short functions, private names kept at home, and layers
that only look down.

- No function (nested ones counted on their own and inside their parent) is longer than 80 lines.
- A name starting with one underscore is private to the module that defines it: no other module
  imports it (``from offline_eval.x import _name``) or reaches for it (``x._name`` on an imported
  module), and a private module (``report/_run.py``) is imported only from its own package.
- The library layers (``run``, ``engine``, ``metrics``, ``runtime``) import nothing from a command
  package (``people.agreement``, ``cli*``, ``report``) at module level, and importing the run path and the
  API brings none of those in, not even through another module. The people side (``people``) holds both:
  labels, calibration and estimates, which a run reads, and the commands built on them.
- ``metrics`` imports nothing from ``runtime``, not even lazily: what a metric needs to know about the
  models reaches it in its settings, resolved by the run's setup. The judging steps below it
  (``judging``: asking for JSON, verdicts, windows, the settings) keep to the same rule.
- ``judging`` sits below ``metrics``: it imports nothing from ``metrics``, ``run``, nor the packages
  that read it as the metrics do (``retrieval``, ``testset``), nor a face (the command packages,
  ``api``, ``review``), not even lazily. The metrics, the criteria, the test-set pipeline and answering
  take their judging steps from it, and ``metrics`` holds no copy of them.
- The README's layout section names every package and module of ``offline_eval/`` and every folder at the
  repository's top, and nothing that is not there.
- No module imports itself back through other modules: every import counts, a lazy one inside a function
  (or under ``TYPE_CHECKING``) too, since a loop that only runs late is still a loop in the design.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "offline_eval"
MAX_FUNCTION_LINES = 80
LAYERS = ("run", "engine", "metrics", "judging", "runtime")
# offline_eval.<name>*: every module of the cli package too
COMMAND_PACKAGES = ("people.agreement", "cli", "report")
# what the judging steps may not import: the layers above them and the faces (with the command packages)
ABOVE_JUDGING = ("metrics", "run", "retrieval", "testset", "api", "review", "people")


def modules() -> dict[str, tuple[Path, ast.Module]]:
    """Dotted module name -> (file, syntax tree), for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = (path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return found


def package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def imported_module(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute name of the module a ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = package_of(module, path).split(".")
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def is_command_module(name: str) -> bool:
    parts = name.split(".")
    return len(parts) > 1 and parts[0] == "offline_eval" and ".".join(parts[1:]).startswith(COMMAND_PACKAGES)


def module_level_nodes(tree: ast.Module):
    """The nodes that run when the module is imported: everything but function bodies."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def test_no_function_is_longer_than_80_lines() -> None:
    long = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path, tree in modules().values() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, "functions over 80 lines:\n" + "\n".join(long)


def outside_home(target: str, importer: str, known: set[str]) -> bool:
    """Whether ``importer`` (a package name) reaches into the private module ``target`` from outside the
    package that holds it; False when ``target`` is no private module."""
    parts = target.split(".")
    for index, part in enumerate(parts):
        if private(part) and ".".join(parts[:index + 1]) in known:
            home = ".".join(parts[:index])
            return not (importer == home or importer.startswith(home + "."))
    return False


def private_name_crossings(module: str, path: Path, tree: ast.Module, known: set[str]) -> list[str]:
    """Where ``module`` uses another module's private name, or a private module from another package;
    ``known``: every module of the package."""
    found = []
    where = f"{path.relative_to(PACKAGE.parent)}"
    own_package = package_of(module, path)
    imported_modules: dict[str, str] = {}  # local name -> offline_eval module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("offline_eval."):
                    imported_modules[alias.asname or alias.name] = alias.name
                    if outside_home(alias.name, own_package, known):
                        found.append(f"{where}:{node.lineno} imports the private module {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            source = imported_module(module, path, node)
            if not source.startswith("offline_eval"):
                continue
            if outside_home(source, own_package, known):
                found.append(f"{where}:{node.lineno} imports from the private module {source}")
            for alias in node.names:
                full = f"{source}.{alias.name}"
                imported_modules[alias.asname or alias.name] = full
                if full in known:  # a module: allowed at home (checked above), not elsewhere
                    if outside_home(full, own_package, known):
                        found.append(f"{where}:{node.lineno} imports the private module {full}")
                elif private(alias.name) and source != module:
                    found.append(f"{where}:{node.lineno} imports {full}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            base = ast.unparse(node.value)
            if imported_modules.get(base) in known and imported_modules[base] != module:
                found.append(f"{where}:{node.lineno} reads {imported_modules[base]}.{node.attr}")
    return found


def test_no_private_name_crosses_a_module() -> None:
    found = modules()
    crossings = [line for module, (path, tree) in found.items()
                 for line in private_name_crossings(module, path, tree, set(found))]
    assert not crossings, "private names used outside their module:\n" + "\n".join(crossings)


def test_the_checks_see_a_private_import_and_a_private_module() -> None:
    """The check above is no vacuous pass: it finds each kind of crossing in a module made up here."""
    tree = ast.parse("from offline_eval.runtime.profiles import _hidden\n"
                     "from offline_eval.report._run import lower_is_better\n"
                     "from offline_eval.runtime import profiles\n"
                     "profiles._hidden()\n")
    known = set(modules())
    found = private_name_crossings("offline_eval.run.example", PACKAGE / "run" / "example.py", tree, known)
    assert len(found) == 3, found
    own = ast.parse("from offline_eval.report._run import lower_is_better\n")
    assert not private_name_crossings("offline_eval.report.html", PACKAGE / "report" / "html.py", own, known)


def test_library_layers_import_no_command_package_at_module_level() -> None:
    found = []
    for module, (path, tree) in modules().items():
        parts = module.split(".")
        if len(parts) < 2 or parts[1] not in LAYERS:
            continue
        for node in module_level_nodes(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = imported_module(module, path, node)
                names = [source] + [f"{source}.{alias.name}" for alias in node.names]
            else:
                continue
            names = [n for n in names if is_command_module(n)]
            if names:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} imports {names[0]}")
    assert not found, "command packages imported by a library layer:\n" + "\n".join(found)


def test_the_run_path_and_the_api_load_no_command_package() -> None:
    """Importing what scores a run (its setup, runner, Ray engine, every built-in metric, the model
    loading) and the Python API loads no command package, even indirectly: neither those named above
    nor any other command module (a ``*_cli`` one, were there one outside the ``cli`` package)."""
    code = ("import json, sys, offline_eval.api, offline_eval.run.config, offline_eval.run.runner, "
            "offline_eval.run.ray_engine, offline_eval.runtime.loading, offline_eval.people.calibration\n"
            "from offline_eval.metrics import resolve_metrics\n"
            "resolve_metrics(None, {})\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('offline_eval.'))))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parent, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    assert "offline_eval.run.runner" in loaded and "offline_eval.metrics.ragas" in loaded
    commands = [m for m in loaded if is_command_module(m)
                or any(p == "cli" or p.startswith("cli_") or p.endswith("_cli") for p in m.split("."))]
    assert not commands, commands


def imports_of(module: str, path: Path, tree: ast.Module, known: set[str]) -> dict[str, int]:
    """The package's modules that ``module`` imports, each with the line of its first import there: every
    import statement, wherever it stands. ``from pkg import name`` reads the module ``pkg.name`` when
    there is one, else ``pkg``; a package is its ``__init__``."""
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = imported_module(module, path, node)
            targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # import a.b.c of a name, not a module: a.b
                target = target.rpartition(".")[0]
            if target and target != module:
                found.setdefault(target, node.lineno)
    return found


def import_loops(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One loop of each group of modules that reach each other through imports, as the modules in the
    order they import each other, the first again at the end (``[a, b, a]``)."""
    loops, seen = [], set()
    for start in sorted(graph):
        if start in seen:
            continue
        paths = {start: [start]}  # the shortest import path from start to each module it reaches
        todo = [start]
        while todo:
            module = todo.pop(0)
            for target in sorted(graph.get(module, {})):
                if target == start:
                    loop = paths[module] + [start]
                    loops.append(loop)
                    seen.update(loop)
                    todo = []
                    break
                if target not in paths:
                    paths[target] = paths[module] + [target]
                    todo.append(target)
    return loops


def described(loop: list[str], graph: dict[str, dict[str, int]]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(loop, loop[1:])) + f" -> {loop[-1]}"


def test_no_import_loop() -> None:
    found = modules()
    graph = {module: imports_of(module, path, tree, set(found)) for module, (path, tree) in found.items()}
    loops = import_loops(graph)
    assert not loops, "import loops:\n" + "\n".join(described(loop, graph) for loop in loops)


def test_the_loop_check_sees_a_lazy_loop_through_a_package() -> None:
    """The check above is no vacuous pass: a package that imports a module at its top, which imports the
    package back from inside a function, is a loop."""
    known = {"offline_eval", "offline_eval.metrics", "offline_eval.metrics.base", "offline_eval.records"}
    trees = {"offline_eval.metrics": ("metrics/__init__.py", "from offline_eval.metrics.base import Metric\n"),
             "offline_eval.metrics.base": ("metrics/base.py", "from offline_eval.records import finite\n"),
             "offline_eval.records": ("records.py", "def f():\n    from offline_eval.metrics import names\n"),
             "offline_eval": ("__init__.py", "from offline_eval import records\n")}
    graph = {module: imports_of(module, PACKAGE / file, ast.parse(code), known)
             for module, (file, code) in trees.items()}
    assert graph["offline_eval"] == {"offline_eval.records": 1}
    loops = import_loops(graph)
    assert len(loops) == 1 and set(loops[0]) == known - {"offline_eval"}, loops
    assert "offline_eval.records (line 2) -> offline_eval.metrics" in described(loops[0], graph)


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def imports_between(importers: str, imported: str) -> list[str]:
    """Every import, wherever it stands, of a module of package ``imported`` by a module of package
    ``importers`` (dotted names), as ``file:line imports module``."""
    found = modules()
    return [f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
            for module, (path, tree) in found.items() if within(module, importers)
            for target, line in imports_of(module, path, tree, set(found)).items() if within(target, imported)]


def test_metrics_and_judging_import_nothing_from_runtime() -> None:
    found = [line for package in ("offline_eval.metrics", "offline_eval.judging")
             for line in imports_between(package, "offline_eval.runtime")]
    assert not found, "metrics reach into runtime (resolve it into their settings instead):\n" + "\n".join(found)


def above_judging(target: str) -> bool:
    """Whether ``target`` (a dotted module name) belongs to a layer above the judging steps or a face."""
    return is_command_module(target) or any(within(target, f"offline_eval.{name}") for name in ABOVE_JUDGING) \
        or target.rpartition(".")[2].endswith("_cli")


def upward_imports_of_judging(found: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    """Every import, wherever it stands, by a module of ``judging`` of a module above it
    (:func:`above_judging`), as ``file:line imports module``; ``found``: the modules, as :func:`modules`."""
    return [f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
            for module, (path, tree) in found.items() if within(module, "offline_eval.judging")
            for target, line in imports_of(module, path, tree, set(found)).items() if above_judging(target)]


def test_judging_imports_nothing_above_it() -> None:
    found = upward_imports_of_judging(modules())
    assert not found, "the judging steps reach above their layer:\n" + "\n".join(found)


def test_the_judging_check_sees_an_upward_import() -> None:
    """The check above is no vacuous pass: it finds a judging module's lazy import of a metric, of the run,
    of a face and of the test-set pipeline, and lets one of the engine through."""
    code = ("from offline_eval.engine.requests import Generate\n"
            "def f():\n    from offline_eval.metrics.base import Score\n"
            "    from offline_eval.run import config\n"
            "    from offline_eval.report import html\n"
            "    import offline_eval.testset.pipeline\n")
    found = dict(modules())
    found["offline_eval.judging.example"] = (PACKAGE / "judging" / "example.py", ast.parse(code))
    lines = [line for line in upward_imports_of_judging(found) if "judging/example.py" in line]
    assert [line.split(" imports ")[1] for line in lines] == [
        "offline_eval.metrics.base", "offline_eval.run.config", "offline_eval.report.html",
        "offline_eval.testset.pipeline"], lines


def test_the_judging_steps_live_in_judging_only() -> None:
    """The metrics keep no judging step of their own (no module left at the old paths), and the
    test-set pipeline and answering, which ask the judge as the metrics do, take their steps from
    ``judging``."""
    assert not [name for name in ("judging.py", "parsing.py", "settings.py") if (PACKAGE / "metrics" / name).exists()]
    found = modules()
    for module in ("offline_eval.testset.pipeline", "offline_eval.retrieval.answering"):
        path, tree = found[module]
        targets = imports_of(module, path, tree, set(found))
        assert any(within(target, "offline_eval.judging") for target in targets), module


def test_the_layer_check_sees_a_lazy_import() -> None:
    """The check above is no vacuous pass: it finds a lazy import of runtime by a judging module."""
    known = {"offline_eval.judging.settings", "offline_eval.runtime.registry", "offline_eval.runtime"}
    tree = ast.parse("def f():\n    from offline_eval.runtime.registry import backend_spec\n")
    assert imports_of("offline_eval.judging.settings", PACKAGE / "judging" / "settings.py", tree, known) \
        == {"offline_eval.runtime.registry": 2}


def test_the_people_side_lives_in_people_only() -> None:
    """Labels, calibration, estimates and the agreement commands live in ``people`` (nothing left at the
    old paths), and the layer checks above still see its commands as commands and its calibration,
    which a run reads, as none."""
    old = ("labels.py", "estimate.py", "estimate_cli.py", "calibration.py", "agreement_cli.py",
           "agreement/__init__.py", "agreement/scoring.py")  # files: a stale __pycache__ may stay behind
    assert not [name for name in old if (PACKAGE / name).exists()]
    assert is_command_module("offline_eval.people.agreement.scoring")
    assert is_command_module("offline_eval.cli.agreement")
    assert not is_command_module("offline_eval.people.calibration")
    assert above_judging("offline_eval.people.labels")


def test_the_command_line_lives_in_cli_only() -> None:
    """Every command's module is in the ``cli`` package (none left at the old paths: ``cli_models.py``,
    ``*_cli.py``, ``<package>/cli.py``), and no module outside it imports it, not even lazily: the
    commands sit on top of everything, and what a command below needs of its flags is handed to it (as
    ``people.agreement.scoring`` is given the run's configuration of its flags)."""
    found = modules()
    stray = [str(path.relative_to(PACKAGE.parent)) for module, (path, _) in found.items()
             if not within(module, "offline_eval.cli")
             and (path.stem == "cli" or path.stem.endswith("_cli") or path.stem.startswith("cli_"))]
    assert not stray, f"command modules outside offline_eval/cli/: {stray}"
    importers = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
                 for module, (path, tree) in found.items() if not within(module, "offline_eval.cli")
                 for target, line in imports_of(module, path, tree, set(found)).items()
                 if within(target, "offline_eval.cli")]
    assert not importers, "the command line imported from below it:\n" + "\n".join(importers)


def _layout() -> list[str]:
    """The lines of the README's layout block (its first ```text block after "## Layout")."""
    text = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    block = text[text.index("## Layout"):].split("```text\n", 1)[1].split("```", 1)[0]
    return block.splitlines()


def test_the_readme_layout_matches_the_tree() -> None:
    lines = _layout()
    inside = [line for line in lines if line.startswith("  ")]  # offline_eval/'s entries, indented
    words = set(re.findall(r"[A-Za-z_]+(?:/|\.py)?", " ".join(inside)))
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    modules_here = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert not {f"{p}/" for p in packages} - words, "packages the README's layout does not name"
    joined = " ".join(inside)
    loose = set(re.findall(r"[a-z_]+", joined[joined.index("*.py"):])) if "*.py" in joined else set()
    assert not {m for m in modules_here if m not in loose and f"{m}.py" not in words}, \
        "modules the README's layout does not name (as NAME.py, or after *.py)"
    named = {w[:-1] for w in words if w.endswith("/")} | {w[:-3] for w in words if w.endswith(".py")}
    assert not named - packages - modules_here - {"*"}, "the README's layout names what is not there"
    top = " ".join(line for line in lines if not line.startswith(" "))
    tracked = subprocess.run(["git", "ls-files"], cwd=PACKAGE.parent, capture_output=True, text=True,
                             check=True).stdout.split()
    folders = {path.split("/")[0] for path in tracked if "/" in path and not path.startswith(".")}
    listed = set(re.findall(r"([A-Za-z_]+)/", top))
    assert listed == folders, f"top-level folders: the layout names {sorted(listed)}, the tree has {sorted(folders)}"

