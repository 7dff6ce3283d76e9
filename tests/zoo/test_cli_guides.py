"""`zoo fit` takes every guide of inference.GUIDES with its options (issue 14, must-hold 5): ``--guide-option
key=value`` (repeatable, JSON where it parses) and ``--guide-options JSON``, checked against the guide factory's
signature with a one-line error (exit status 2) before any training, and saved with the run so `zoo.load` /
`zoo score` rebuild the same guide."""

from __future__ import annotations

import json

import pytest

import evals
import inference
import zoo
from zoo.cli import EXIT_USAGE, main

TINY = ["--data", "two_moons", "--n", "100", "--hidden", "4", "--steps", "1", "--batch-size", "100", "--quiet"]

# guide -> (entry, its command-line options, what the saved guide config then holds)
GUIDE_RUNS = {
    "mean_field": ("mlp", ["--guide-option", "init_scale=0.01"], {"init_scale": 0.01}),
    "point_estimate": ("mlp", [], {}),
    "k_tied": ("mlp", ["--guide-option", "k=3", "--guide-option", "init_noise=0.2"], {"k": 3, "init_noise": 0.2}),
    "zero_mean": ("mlp", ["--guide-option", "variance_sites=mlp/~/linear_0/w"], {"variance_sites": ["mlp/~/linear_0/w"]}),
    "variance_layers": ("mlp", ["--guide-options", '{"variance_sites": ["*/linear_1/w"], "granularity": "neuron"}'],
                        {"variance_sites": ["*/linear_1/w"], "granularity": "neuron"}),
    "rank1_mixture": ("rank1_mlp", ["--guide-option", "family=normal", "--guide-option", "sign_init=0.75"],
                      {"family": "normal", "sign_init": 0.75}),
    "full_covariance": ("mlp", ["--guide-option", "init_scale=1"], {"init_scale": 1.0}),
    "low_rank": ("mlp", ["--guide-option", "rank=3"], {"rank": 3}),
    "block_diagonal": ("mlp", ["--guide-option", "blocks=site"], {"blocks": "site"}),
    "by_site": ("mlp", ["--guide-options", '{"families": {"*/w": ["mean_field", {"init_scale": 0.01}]}}',
                        "--guide-option", "default=point_estimate"],
                {"families": {"*/w": ["mean_field", {"init_scale": 0.01}]}, "default": ["point_estimate", {}]}),
}


@pytest.fixture
def no_scores(monkeypatch):
    """`zoo fit`'s closing score table, skipped (one more compile per guide; tests/zoo/test_catalogue.py runs
    `zoo fit` and `zoo score` with their tables)."""
    scored = []
    monkeypatch.setattr(evals, "score", lambda post, data, **kw: scored.append(post))
    return scored


def guide_run(guide: str) -> tuple:
    """(entry, options, saved) of `GUIDE_RUNS`, or for a guide without a row there, the mlp with the guide's
    registered example options (``inference.register_guide(..., example=...)``)."""
    if guide in GUIDE_RUNS:
        return GUIDE_RUNS[guide]
    example = inference.registry.example_options(guide)
    return "mlp", ["--guide-options", json.dumps(example)], example


@pytest.mark.parametrize("guide", sorted(inference.GUIDES))
@pytest.mark.smoke
def test_zoo_fit_runs_every_registered_guide_with_its_options(guide, tmp_path, no_scores, capsys):
    entry, options, saved = guide_run(guide)
    out = tmp_path / guide
    assert main(["fit", entry, *TINY, "--guide", guide, *options, "--out", str(out)]) == 0, capsys.readouterr().err
    assert len(no_scores) == 1 and len(no_scores[0].losses) == 1
    config = zoo.load(out).guide.config  # the options are stored with the run and rebuild the guide (zoo score)
    assert config["name"] == guide
    assert {k: config[k] for k in saved} == saved


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("zoo fit: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("options, says", [
    (["--guide", "k_tied", "--guide-option", "kk=3"],
     "--guide-option: expected an option of guide 'k_tied': one of k, init_scale, init_noise, scale_cap, bias_limit, prefix, rank, "
     "got 'kk=3'"),
    (["--guide", "k_tied", "--guide-option", "k=two"],
     "--guide-option k: expected an integer (guide 'k_tied' option k: int), got 'two'"),
    (["--guide", "k_tied", "--guide-option", "k=2.5"], "--guide-option k: expected an integer"),
    (["--guide", "k_tied", "--guide-option", "k=true"], "--guide-option k: expected an integer"),
    (["--guide", "low_rank", "--guide-options", '{"rank": "3"}'], "--guide-option rank: expected an integer"),
    (["--guide", "mean_field", "--guide-option", "init_scale=small"],
     "--guide-option init_scale: expected a number (guide 'mean_field' option init_scale: float), got 'small'"),
    (["--guide", "block_diagonal", "--guide-option", "blocks=3"], "--guide-option blocks: expected a string"),
    (["--guide", "k_tied", "--guide-options", "{k: 2}"],
     "argument --guide-options: expected a JSON object such as '{\"k\": 2}', got '{k: 2}' (invalid JSON"),
    (["--guide", "k_tied", "--guide-options", "[2]"], "argument --guide-options: expected a JSON object"),
    (["--guide", "k_tied", "--guide-option", "k"], "argument --guide-option: expected key=value such as k=2, got 'k'"),
    (["--guide", "k_tied", "--guide-option", "k=2", "--guide-options", '{"k": 3}'],
     "--guide-option: expected each option once, got 'k=2'; k is also given as k=3"),
    (["--guide", "zero_mean"],
     "--guide-option variance_sites: expected a value for option variance_sites of guide 'zero_mean' (required: it "
     "has no default), got <not given>; e.g. --guide-option variance_sites=mlp/~/linear_0/w"),
    (["--guide", "by_site"], "--guide-option families: expected a value for option families of guide 'by_site'"),
    (["--guide", "magic", "--guide-option", "k=2"], "guide: unknown name 'magic'"),
])
def test_a_bad_guide_option_is_one_line_with_status_2_before_any_training(options, says, tmp_path, capsys):
    try:
        status = main(["fit", "mlp", *TINY, *options, "--out", str(tmp_path / "out")])
    except SystemExit as exit_:  # argparse's own errors
        status = exit_.code
    assert status == EXIT_USAGE
    assert says in one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_a_missing_required_option_lists_the_models_sites(tmp_path, capsys):
    assert main(["fit", "mlp", *TINY, "--guide", "variance_layers", "--out", str(tmp_path / "out")]) == EXIT_USAGE
    line = one_error_line(capsys)
    assert "the model's sites: mlp/~/linear_0/b, mlp/~/linear_0/w, mlp/~/linear_1/b, mlp/~/linear_1/w" in line


def test_option_values_are_json_where_they_parse_else_text():
    from zoo.guide_options import parse_option

    assert parse_option("k=2") == ("k", 2)
    assert parse_option("rank=null") == ("rank", None)
    assert parse_option("init_scale=1e-2") == ("init_scale", 0.01)
    assert parse_option('variance_sites=["a/w", "b/w"]') == ("variance_sites", ["a/w", "b/w"])
    assert parse_option("variance_sites=mlp/~/linear_0/w") == ("variance_sites", "mlp/~/linear_0/w")
    assert parse_option("granularity=neuron") == ("granularity", "neuron")
    assert parse_option("expr=a=b") == ("expr", "a=b")  # the first '=' splits
    assert json.dumps(parse_option("s=")[1]) == '""'
