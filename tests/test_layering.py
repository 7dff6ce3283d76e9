"""The package DAG base <- models <- inference <- evals <- zoo: no module imports a package above its own, and no
module imports itself through others (no import cycle between modules); the experiments (`zoo.experiments`) sit
above the library: no library module imports them but the command line, and no test outside tests/experiments.

(a) statically: every Import / ImportFrom node of every module (function-level imports included, relative
imports resolved); (b) dynamically: importing a package loads none of the packages above it; (c) the graph of
module imports (function-level ones included) has no cycle; (d) statically and dynamically: the library
(models, inference, evals and zoo outside zoo/experiments) never imports the experiments, except zoo/cli.py,
which runs them, and the tests outside tests/experiments import none.
"""

import ast
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("base", "models", "inference", "evals", "zoo")  # each may import only itself and those before it
ALLOWED = {pkg: set(LAYERS[: i + 1]) for i, pkg in enumerate(LAYERS)}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _statements(path: Path):
    """(line, module, names) for every import statement in the file (function-level ones included): names is
    None for ``import module``, the imported names for ``from module import names`` (relative ones resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            module = node.module
            if node.level:
                base = package.split(".")
                module = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            yield node.lineno, module, [alias.name for alias in node.names]


def _imported_modules(path: Path):
    """(line, absolute module name) for every import in the file, relative imports resolved."""
    for line, module, _ in _statements(path):
        yield line, module


def back_arrows() -> list:
    """['file:line imports X', ...] for every import of a package above the file's own."""
    found = []
    for pkg in LAYERS:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for line, module in _imported_modules(path):
                top = module.split(".")[0]
                if top in LAYERS and top not in ALLOWED[pkg]:
                    found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return found


def test_no_module_imports_a_package_above_its_own():
    arrows = back_arrows()
    assert not arrows, "imports against base <- models <- inference <- evals <- zoo:\n" + "\n".join(arrows)


def test_the_walk_sees_function_level_and_relative_imports(tmp_path, monkeypatch):
    fake = tmp_path / "evals" / "sub"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "mod.py").write_text("def f():\n    import zoo.cli\n    from ...zoo import get\n    from .. import metrics\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert list(_imported_modules(fake / "mod.py")) == [(2, "zoo.cli"), (3, "zoo"), (4, "evals")]


@pytest.mark.parametrize("package", LAYERS[:-1])
def test_importing_a_package_loads_no_package_above_it(package):
    above = LAYERS[LAYERS.index(package) + 1:]
    code = (f"import sys, {package}\n"
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(above)!r}))")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"import {package} loaded {done.stdout.strip()}"


# ----- (c) no import cycles -------------------------------------------------------------------------------------
def _modules() -> dict:
    """{module name: path} of every module of the four packages (a package by its ``__init__.py``)."""
    return {_module_name(path): path for pkg in LAYERS for path in sorted((ROOT / pkg).rglob("*.py"))}


def import_graph(modules: dict) -> dict:
    """{module: {imported module: "file:line" of the import}} among `modules` ({name: path}).

    ``from a.b import c`` imports the module a.b.c when there is one, else a.b; ``import a.b`` imports a.b.
    Importing a.b.c also runs each package on its path (a, a.b) that is not the importer's own package or
    one above it: those are already loading when the importer runs, the others are run now.
    """
    graph = {}
    for name, path in modules.items():
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        if path.name == "__init__.py":
            ancestors.add(name)
        edges = {}
        for line, module, names in _statements(path):
            targets = [module] if names is None else [f"{module}.{n}" if f"{module}.{n}" in modules else module
                                                      for n in names]
            for target in targets:
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    step = ".".join(parts[:i])
                    if step in modules and step not in ancestors and step != name:
                        edges.setdefault(step, f"{path.relative_to(ROOT)}:{line}")
        graph[name] = edges
    return graph


def import_cycles(graph: dict) -> list:
    """Every strongly connected set of two or more modules (Tarjan), each as one cycle found by walking its
    edges, followed by the set's other members if the cycle misses some:
    ['a -> b (a.py:12) -> a (b.py:3)', ...]."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                members.add(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(members)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_describe_cycle(graph, members) for members in found]


def _describe_cycle(graph: dict, members: set) -> str:
    """One cycle inside the strongly connected `members`, from its first module (sorted) back to it, each edge
    with the importing file and line."""
    start = min(members)
    path, seen = [start], {start}
    while True:  # walk to an unvisited member while one is reachable, then close the loop
        here = path[-1]
        nxt = sorted(w for w in graph[here] if w in members)
        fresh = [w for w in nxt if w not in seen]
        if start in nxt and not fresh:
            path.append(start)
            break
        step = fresh[0] if fresh else nxt[0]
        if step in seen:  # a loop not through start: report it from where it closes
            path = path[path.index(step):] + [step]
            break
        path.append(step)
        seen.add(step)
    cycle = " -> ".join([path[0]] + [f"{b} ({graph[a][b]})" for a, b in itertools.pairwise(path)])
    others = sorted(members - set(path))
    return cycle + (f"; also in the same import loop: {', '.join(others)}" if others else "")


def test_no_import_cycles_function_level_imports_included():
    cycles = import_cycles(import_graph(_modules()))
    assert not cycles, "import cycles (module -> imported module (importing file:line)):\n" + "\n".join(cycles)


def test_the_cycle_check_sees_function_level_imports_and_packages(tmp_path, monkeypatch):
    """A cycle closed only by a function-level import, and one through a package's __init__ (b imports
    pkg.sub.c, which runs pkg/sub/__init__, which imports b), are both found; a sibling import through
    the importer's own package is not a cycle."""
    for rel, text in {"pkg/__init__.py": "from pkg import a\n",
                      "pkg/a.py": "from pkg import b\n",
                      "pkg/b.py": "def f():\n    from .a import g\n",
                      "pkg/sub/__init__.py": "from pkg import d\n",
                      "pkg/sub/c.py": "x = 1\n",
                      "pkg/d.py": "import pkg.sub.c\n"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    modules = {_module_name(p): p for p in sorted(tmp_path.rglob("*.py"))}
    graph = import_graph(modules)
    assert graph["pkg.d"] == {"pkg.sub": "pkg/d.py:1", "pkg.sub.c": "pkg/d.py:1"}
    assert sorted(import_cycles(graph)) == ["pkg.a -> pkg.b (pkg/a.py:1) -> pkg.a (pkg/b.py:2)",
                                            "pkg.d -> pkg.sub (pkg/d.py:1) -> pkg.d (pkg/sub/__init__.py:1)"]


# ----- (d) the experiments apart from the library ----------------------------------------------------------------
EXPERIMENTS = "zoo.experiments"
RUNS_EXPERIMENTS = {"zoo/cli.py"}  # the command line: `zoo run`, `zoo reproduce`, `zoo benchmark`


def _names_experiments(module: str, names) -> bool:
    return module == EXPERIMENTS or module.startswith(EXPERIMENTS + ".") or \
        (module == "zoo" and names is not None and "experiments" in names)


def imports_of_experiments(paths) -> list:
    """['file:line imports X', ...] for every import of `zoo.experiments` (or a module in it) in `paths`: import
    statements (function-level ones included) and calls of ``__import__`` / ``importlib.import_module`` with a
    literal module name."""
    found = []
    for path in paths:
        for line, module, names in _statements(path):
            if _names_experiments(module, names):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
                    getattr(node.func, "id", getattr(node.func, "attr", None)) in ("__import__", "import_module") \
                    and _names_experiments(str(node.args[0].value), None):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {node.args[0].value}")
    return found


def _library_files() -> list:
    experiments = ROOT / "zoo" / "experiments"
    return [path for pkg in LAYERS for path in sorted((ROOT / pkg).rglob("*.py"))
            if experiments not in path.parents and path.relative_to(ROOT).as_posix() not in RUNS_EXPERIMENTS]


def test_the_library_imports_no_experiment_but_the_command_line_runs_them():
    assert any(name.startswith(EXPERIMENTS + ".") for name in _modules())  # the cycle check (c) covers them too
    found = imports_of_experiments(_library_files())
    assert not found, "the library imports the experiments (only zoo/cli.py may):\n" + "\n".join(found)
    assert imports_of_experiments([ROOT / "zoo" / "cli.py"])  # the one exception is real: it runs them


def test_the_library_tests_import_no_experiment():
    tests = ROOT / "tests"
    paths = [p for p in sorted(tests.rglob("*.py")) if tests / "experiments" not in p.parents]
    found = imports_of_experiments(paths)
    assert not found, "tests outside tests/experiments import the experiments:\n" + "\n".join(found)


def test_the_experiment_check_sees_every_way_of_importing_them(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text("import zoo.cli\nfrom zoo import experiments\ndef f():\n"
                                   "    from zoo.experiments.run import main_job\n"
                                   "    __import__('zoo.experiments.run')\n"
                                   "    importlib.import_module('zoo.experiments')\n"
                                   "    from zoo import get\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert imports_of_experiments([tmp_path / "m.py"]) == [
        "m.py:2 imports zoo", "m.py:4 imports zoo.experiments.run", "m.py:5 imports zoo.experiments.run",
        "m.py:6 imports zoo.experiments"]


def test_importing_the_library_and_the_command_line_loads_no_experiment_and_sets_no_jax_option(tmp_path):
    """... and changes no global JAX setting: the persistent compilation cache stays off although
    BNN_ZOO_COMPILATION_CACHE names a folder (the CLI or ``zoo.enable_compilation_cache()`` turn it on)."""
    code = ("import sys, jax\n"
            "import models, inference, evals, zoo, zoo.cli\n"
            "assert jax.config.jax_compilation_cache_dir is None, jax.config.jax_compilation_cache_dir\n"
            f"print(sorted(m for m in sys.modules if m.startswith({EXPERIMENTS!r})))")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "BNN_ZOO_COMPILATION_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"importing the library loaded {done.stdout.strip()}"
    assert not (tmp_path / "cache").exists()
