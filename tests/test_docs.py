"""Every Python example in README.md and docs/*.md runs: the blocks of one file in order, in one namespace,
in a fresh working directory (so that paths like runs/mlp stay inside it)."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def python_blocks(path: pathlib.Path) -> list:
    """The ```python fenced blocks of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def test_the_walkthroughs_exist_and_hold_code():
    names = {p.name for p in FILES}
    assert {"add-a-network.md", "add-a-guide.md", "your-own-data.md"} <= names
    for name in ("add-a-network.md", "add-a-guide.md", "your-own-data.md"):
        assert python_blocks(ROOT / "docs" / name), name


@pytest.mark.parametrize("path", [p for p in FILES if python_blocks(p)], ids=lambda p: p.name)
def test_examples_run(path, tmp_path, monkeypatch, registries_restored):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_{path.stem}"}
    for i, block in enumerate(python_blocks(path)):
        exec(compile(block, f"{path.name}[block {i}]", "exec"), namespace)  # noqa: S102
