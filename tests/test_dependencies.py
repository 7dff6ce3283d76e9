"""Every third-party module the code imports is declared in pyproject.toml: the packages' in ``dependencies``
(or, imported under ``try: ... except ImportError``, in an optional extra), the tests' also in the ``test``
extra, the benchmarks' also in ``bench``; and every declared dependency is imported (jaxlib, jax's backend,
and h5netcdf / h5py, ArviZ's netCDF engine, excepted). Parses the source and pyproject only: imports nothing of the packages."""
from __future__ import annotations

import ast
import functools
import importlib.metadata
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("base", "models", "inference", "evals", "zoo")
FIRST_PARTY = {*PACKAGES, "tests", "__future__"}
CATCH_IMPORT_ERROR = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
# jaxlib: jax's compiled backend, declared to pin it with jax; h5netcdf and h5py: ArviZ's netCDF engine
# (to_netcdf / from_netcdf) and its HDF5 backend, which ArviZ imports itself: none is imported by name
UNIMPORTED = {"jaxlib", "h5netcdf", "h5py"}


def distribution(requirement: str) -> str:
    """The normalised distribution name of a requirement such as 'dm-haiku>=0.0.17' -> 'dm-haiku' (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def declared() -> tuple[set, dict]:
    """(the distributions of ``dependencies``, {extra: its distributions})."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return ({distribution(r) for r in project["dependencies"]},
            {extra: {distribution(r) for r in reqs} for extra, reqs in project["optional-dependencies"].items()})


def _catches_import_error(node: ast.Try) -> bool:
    """Whether a handler of the ``try`` catches ImportError (by name, a base of it or a bare ``except``)."""
    for handler in node.handlers:
        caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(c is None or ast.unparse(c) in CATCH_IMPORT_ERROR for c in caught):
            return True
    return False


def imports(folder: pathlib.Path) -> list[tuple[str, str, bool]]:
    """(top-level module, "folder/file:line", guarded) for every absolute import under `folder` of a
    module that is neither the standard library's, the project's own nor a file under `folder` (pytest puts a
    test file's folder on the path, so a test imports its siblings); guarded: inside the body of a ``try`` whose
    handlers catch ImportError."""
    local = {p.stem for p in folder.rglob("*.py")}
    found = []

    def visit(node, guarded, path):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top not in FIRST_PARTY and top not in local:
                found.append((top, f"{path.relative_to(folder.parent)}:{node.lineno}", guarded))
        if isinstance(node, ast.Try) and _catches_import_error(node):
            for child in node.body:
                visit(child, True, path)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, guarded, path)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guarded, path)

    for path in sorted(folder.rglob("*.py")):
        visit(ast.parse(path.read_text()), False, path)
    return found


@functools.cache
def _installed() -> dict:
    return importlib.metadata.packages_distributions()  # a scan of every installed distribution: once


def provider(module: str) -> str:
    """The distribution that installs top-level `module` (e.g. 'haiku' -> 'dm-haiku'); an uninstalled one by its
    own name."""
    dists = _installed().get(module, [module])
    return distribution(dists[0])


def undeclared(folder: pathlib.Path, allowed: set, optional: set) -> list[str]:
    """The imports under `folder` that `allowed` (always usable) and, when guarded, `optional` do not cover."""
    return [f"{where}: {module} ({provider(module)})" for module, where, guarded in imports(folder)
            if provider(module) not in allowed | (optional if guarded else set())]


def test_the_packages_declare_every_module_they_import():
    core, extras = declared()
    missing = [m for package in PACKAGES for m in undeclared(ROOT / package, core, set().union(*extras.values()))]
    assert missing == []
    imported = {provider(module) for package in PACKAGES for module, _, _ in imports(ROOT / package)}
    assert core - imported == UNIMPORTED
    assert {"pandas", "numpy"} <= core and "pandas" in imported  # pandas was imported without being declared


def test_the_tests_and_benchmarks_declare_every_module_they_import():
    core, extras = declared()
    assert undeclared(ROOT / "tests", core | extras["test"], set()) == []
    assert undeclared(ROOT / "benchmarks", core | extras["bench"] | extras["test"], set()) == []


def test_an_undeclared_or_unguarded_optional_import_is_found(tmp_path):
    """The check itself: an undeclared module is reported, an optional one only outside ``try/except
    ImportError``, the standard library and the project's own modules never."""
    (tmp_path / "m.py").write_text("import os\nimport zoo\nimport some_undeclared_module\nimport tabulate\n"
                                   "try:\n    import tabulate\nexcept (OSError, ImportError):\n    pass\n")
    where = f"{tmp_path.name}/m.py:"
    assert imports(tmp_path) == [("some_undeclared_module", where + "3", False), ("tabulate", where + "4", False),
                                 ("tabulate", where + "6", True)]
    assert undeclared(tmp_path, set(), {"tabulate"}) == \
        [where + "3: some_undeclared_module (some-undeclared-module)", where + "4: tabulate (tabulate)"]
    assert undeclared(tmp_path, {"tabulate", "some-undeclared-module"}, set()) == []
