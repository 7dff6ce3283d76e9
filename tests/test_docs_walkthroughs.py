"""The walkthroughs' examples (docs/add-a-network.md, add-a-guide.md, your-own-data.md) run, as
tests/test_docs.py runs every other Markdown file's: a file of their own so that the two workers of
`pytest -n 2 --dist loadfile` share the docs' examples."""
import pathlib

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize("name", ["add-a-network.md", "add-a-guide.md", "your-own-data.md"])
def test_walkthrough_examples_run(name, tmp_path, monkeypatch, registries_restored, markdown_examples):
    markdown_examples(DOCS / name, tmp_path, monkeypatch)
