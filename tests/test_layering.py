"""The package DAG models <- inference <- evals <- zoo: no module imports a package above its own.

(a) statically: every Import / ImportFrom node of every module (function-level imports included, relative
imports resolved); (b) dynamically: importing a package loads none of the packages above it.
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("models", "inference", "evals", "zoo")  # each may import only itself and those before it
ALLOWED = {pkg: set(LAYERS[: i + 1]) for i, pkg in enumerate(LAYERS)}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path):
    """(line, absolute module name) for every import in the file, relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                yield node.lineno, ".".join(base + ([node.module] if node.module else []))
            else:
                yield node.lineno, node.module


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
    assert not arrows, "imports against models <- inference <- evals <- zoo:\n" + "\n".join(arrows)


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
