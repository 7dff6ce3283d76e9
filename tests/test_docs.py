"""Every Python example in README.md and docs/*.md runs: the blocks of one file in order, in one namespace,
in a fresh working directory (so that paths like runs/mlp stay inside it). The three walkthroughs run in
tests/test_docs_walkthroughs.py, a file of their own, so that the two workers of `pytest -n 2 --dist loadfile`
share the docs' examples."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WALKTHROUGHS = ("add-a-network.md", "add-a-guide.md", "your-own-data.md")


def python_blocks(path: pathlib.Path) -> list:
    """The ```python fenced blocks of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def test_the_walkthroughs_exist_and_hold_code():
    names = {p.name for p in FILES}
    assert set(WALKTHROUGHS) <= names
    for name in WALKTHROUGHS:
        assert python_blocks(ROOT / "docs" / name), name


@pytest.mark.parametrize("path", [p for p in FILES if python_blocks(p) and p.name not in WALKTHROUGHS],
                         ids=lambda p: p.name)
def test_examples_run(path, tmp_path, monkeypatch, registries_restored, markdown_examples):
    markdown_examples(path, tmp_path, monkeypatch)
