"""No test reaches outside the repository except through `conftest.shared_path` (which skips, with the reason,
when ``../shared`` is absent): the README's test command must pass on a fresh clone with nothing beside it.

A static check of every test source (cheap, and the same on every machine), not a runtime audit hook: a hook on
"open" sees every file the process opens (site-packages, matplotlib's and JAX's caches, /proc), so its allowlist
would depend on where the machine keeps them, and it would slow every open of the whole suite. What the check reads
in each ``tests/**/*.py`` but tests/conftest.py and this file, in string constants (without whitespace) and the expressions built on ``__file__``:

1. a ``shared`` path component ("../shared/data/x.npz", ``ROOT / "shared"``): the sibling data folder;
2. a relative path that starts by going up ("../x"): outside the repository when run from its root;
3. an absolute or home path that names an existing place on this machine outside the repository (the system's
   /proc, /dev and temporary folder aside): a value a test could read; paths that exist nowhere ("/nowhere") pass;
4. an expression built on ``__file__`` that goes up more folders than the test file lies below the repository's
   root (``parents[k]``, ``.parent``, ``os.path.dirname`` and ``".."`` counted).
"""
import ast
import os
import re
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
SHARED_PART = re.compile(r"(^|[/\\])shared([/\\]|$)")
SYSTEM = tuple(str(Path(p).resolve()) for p in ("/proc", "/dev", tempfile.gettempdir()))


def _constant_problem(text: str) -> str | None:
    if re.search(r"\s", text):  # prose (a docstring, a message), not a path
        return None
    if SHARED_PART.search(text):
        return "names ../shared"
    if re.match(r"^\.\.[/\\]", text):
        return "goes up from the working folder"
    if text.startswith(("/", "~")) and len(text) > 1:
        place = Path(os.path.expanduser(text))
        if place.exists():
            resolved = str(place.resolve())
            inside = resolved == str(REPO) or resolved.startswith(str(REPO) + os.sep)
            if not inside and not resolved.startswith(SYSTEM):
                return "names an existing place outside the repository"
    return None


def _levels_up(node: ast.AST) -> int:
    """How many folders above the test file's own folder a path expression built on __file__ reaches."""
    ups, parents, dirnames = 0, 0, 0
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Attribute) and sub.value.attr == "parents" \
                and isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, int):
            ups += sub.slice.value
        elif isinstance(sub, ast.Attribute) and sub.attr == "parent":
            parents += 1
        elif isinstance(sub, ast.Call) and getattr(sub.func, "attr", getattr(sub.func, "id", None)) == "dirname":
            dirnames += 1
        elif isinstance(sub, ast.Constant) and sub.value == "..":
            ups += 1
    return ups + max(parents - 1, 0) + max(dirnames - 1, 0)  # the first .parent / dirname is the file's folder


def _uses_file(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "__file__" for n in ast.walk(node))


def problems_in(path: Path, source: str | None = None) -> list[str]:
    """'file:line: what' for each way the test source at `path` (or `source`, as if it were that file) reaches
    outside the repository (module docstring)."""
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    depth = len(path.parent.relative_to(REPO).parts)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            problem = _constant_problem(node.value)
            if problem:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r} {problem}")
        elif isinstance(node, (ast.Assign, ast.Expr, ast.Return, ast.AnnAssign)) and node.value is not None \
                and _uses_file(node.value) and _levels_up(node.value) > depth:
            found.append(f"{path.relative_to(REPO)}:{node.lineno}: a path built on __file__ goes "
                         f"{_levels_up(node.value)} folders up from a folder {depth} below the repository's root")
    return found


def test_no_test_names_a_path_outside_the_repository():
    here = Path(__file__).resolve()  # this file's cases below name every way out on purpose
    sources = [p for p in sorted(TESTS.rglob("*.py")) if p != here and (p.name != "conftest.py" or p.parent != TESTS)]
    assert len(sources) > 50
    assert [problem for p in sources for problem in problems_in(p)] == []


def test_the_check_catches_each_way_out():
    """The four rules, each on a source of its own (the check above cannot pass by finding nothing)."""
    cases = {'USPS = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "usps5k.npz"\n': 2,
             'path = "../shared/data/usps5k.npz"\n': 1,
             'path = "../elsewhere/x.csv"\n': 1,
             f'path = {os.path.dirname(os.__file__)!r}\n': 1,  # the standard library's folder
             'HERE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "x")\n': 1,
             'ROOT = Path(__file__).resolve().parents[2]\nBAD = "/nowhere/at/all"\n': 0,
             'README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")\n': 0}
    where = TESTS / "zoo" / "test_x.py"  # depth 2: parents[2], or two ".." after dirname(__file__), is the root
    for source, expected in cases.items():
        assert len(problems_in(where, source)) == expected, (source, problems_in(where, source))
