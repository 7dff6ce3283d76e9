"""`zoo --version`, `zoo corruptions` as an argparse subcommand, and every option's default in --help (issue 14,
must-hold 5). Nothing here compiles."""

from __future__ import annotations

import argparse

import pytest

from base.defaults import DEFAULT_STEPS
from zoo import cli
from zoo.cli import EXIT_USAGE, main
from zoo.version import package_version, source_tree_version


@pytest.mark.smoke
def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"zoo {package_version()}"
    assert package_version().count(".") >= 1


def test_the_version_falls_back_to_the_source_trees_pyproject(tmp_path, monkeypatch):
    import importlib.metadata

    from zoo import version

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    with open(version.Path(version.__file__).resolve().parent.parent / "pyproject.toml", "rb") as f:
        expected = version.tomllib.load(f)["project"]["version"]
    assert package_version() == expected
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "9.8.7"\n')
    assert source_tree_version(tmp_path / "pyproject.toml") == "9.8.7"
    assert source_tree_version(tmp_path / "missing.toml") == "unknown"


def test_corruptions_is_a_subcommand_with_its_own_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["corruptions", "--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("usage: zoo corruptions [-h] [--data DATA] [--index INDEX] [--out OUT] [--seed SEED]")
    assert "(default: digits)" in out and "(default: corruptions.png)" in out


@pytest.mark.parametrize("argv, says", [
    (["corruptions", "--bogus"], "zoo corruptions: error: unrecognized arguments: --bogus"),
    (["corruptions", "--index", "one"], "zoo corruptions: error: argument --index: expected an integer index >= 0, got 'one'"),
])
def test_corruptions_usage_errors_are_one_line_with_status_2(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == EXIT_USAGE
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(says)


def test_corruptions_runs_the_grid_with_its_options(tmp_path, monkeypatch, capsys):
    """The command's wiring (the grid itself is drawn in tests/evals: 19 x 6 panels take seconds)."""
    from evals import corruption_grid

    drawn = []
    monkeypatch.setattr(corruption_grid, "plot_corruption_grid", lambda image, path, seed: drawn.append((image, path, seed)))
    out = tmp_path / "grid.png"
    assert main(["corruptions", "--data", "digits", "--index", "3", "--seed", "5", "--out", str(out)]) == 0
    [(image, path, seed)] = drawn
    assert image.shape == (8, 8, 1) and 0 <= image.min() and image.max() <= 1
    assert (path, seed) == (str(out), 5)
    assert capsys.readouterr().out.strip() == f"wrote {out}"


def _options(parser):
    return [a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS
            and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]


@pytest.mark.parametrize("command", ["fit", "nuts", "score", "corruptions", "reproduce", "run", None])
def test_help_shows_every_options_default(command, capsys):
    parser = cli.build_parser()
    chosen = parser if command is None else parser.commands[command]
    with pytest.raises(SystemExit):
        main(([command] if command else []) + ["--help"])
    text = "".join(capsys.readouterr().out.split())  # without the spaces and line breaks of the wrapping
    for action in _options(chosen):
        if action.default is False or action.required:  # a flag (off unless given), or no default at all
            continue
        help_text = "".join(action.help.split())
        if "default" in help_text:  # says it in words, e.g. "(default: the entry's own)"
            assert help_text in text, action.option_strings
        else:
            assert action.default is not None, (action.option_strings, "its help should say what 'not given' does")
            assert f"{help_text}(default:{action.default})" in text, action.option_strings


def test_fit_help_shows_the_defaults_as_numbers(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in (f"SVI steps (default: fit's own, {DEFAULT_STEPS:,}: base.defaults.DEFAULT_STEPS)", "minibatch size (default: 128)", "not given: fit's default, Adam with its rate cosine-decayed from 1e-2 to 1e-4 over --steps",
                  "to 1 (default: 0)", "random seed (default: 0)", "(default: mean_field)"):
        assert shown in text

