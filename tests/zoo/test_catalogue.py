import sys

import numpy as np
import pytest

import zoo
from base.defaults import DEFAULT_STEPS
from zoo.cli import main
from zoo.data import digits, regression_1d, two_moons


def test_digits_are_scikit_learns_read_without_importing_it():
    """The digits come from the file scikit-learn installs, parsed as ``load_digits`` parses it: the same arrays."""
    from sklearn.datasets import load_digits

    from zoo.data.embedded import digits_arrays

    for ours, theirs in zip(digits_arrays(), load_digits(return_X_y=True)):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)


def test_embedded_data_shapes_and_seeded_split():
    tr, te = digits()
    assert tr.x.shape == (1348, 64) and te.x.shape == (449, 64) and tr.x.dtype == np.float32
    assert tr.y.dtype == np.int32 and set(np.unique(tr.y)) == set(range(10))
    assert abs(tr.x.mean()) < 1e-4 and abs(tr.x.std() - 1) < 1e-4
    raw, _ = digits(standardise=False)
    assert raw.x.min() == 0.0 and raw.x.max() == 1.0
    tr2, _ = digits()
    np.testing.assert_array_equal(tr.x, tr2.x)
    m_tr, m_te = two_moons(n=1000, noise=0.1)
    assert m_tr.x.shape == (800, 2) and m_te.x.shape == (200, 2) and m_tr.num_classes == 2
    r_tr, _ = regression_1d(n=100)
    assert r_tr.num_classes is None and r_tr.y.dtype == np.float32 and np.all(np.abs(r_tr.x) > 0.5)
    with pytest.raises(ValueError, match="noise"):
        two_moons(noise=-1)


def test_catalogue_lists_entries_with_weight_counts():
    rows = {r["name"]: r for r in zoo.list()}
    assert rows["mlp"]["weights"] == 64 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10
    assert rows["deep_linear"]["weights"] == 64 * 32 + 32 * 32 + 32 * 10
    # an entry's guides, derived from the guides' registered `suits` (no list beside the entry): a plain network
    # gets every plain guide, the dense covariances only under their size limit (16,384 latent values), a rank-1
    # network the rank-1 guide
    plain = ["by_site", "point_estimate", "mean_field", "zero_mean", "variance_layers", "binary_dropout", "k_tied"]
    assert rows["mlp"]["guides"].split(", ") == plain + ["full_covariance", "low_rank", "block_diagonal"]  # 8,970
    assert rows["resnet18"]["guides"].split(", ") == plain + ["low_rank"]  # 11.2 M weights: no dense covariance
    assert rows["rank1_mlp"]["guides"] == "rank1_mixture"


def test_entry_config_rebuilds_the_entry():
    e = zoo.get("mlp", data="two_moons", hidden=(8, 4), data_kwargs={"n": 100})
    again = zoo.get(**e.config)
    assert dict(again.model.site_shapes((2,))) == dict(e.model.site_shapes((2,)))
    np.testing.assert_array_equal(again.train.x, e.train.x)


def test_regression_entry_uses_a_normal_likelihood():
    e = zoo.get("mlp", data="regression_1d", hidden=(8,))
    assert not e.model.likelihood.classification


@pytest.mark.smoke
def test_cli_list_fit_score(tmp_path, capsys, monkeypatch):
    assert main(["list"]) == 0
    assert "deep_linear" in capsys.readouterr().out
    out = tmp_path / "fit"
    # without --steps, `zoo fit` trains `fit`'s own default (`inference.fit.default_steps`, which returns
    # base.defaults.DEFAULT_STEPS, 1,000): made 40 here, the saved posterior has 40 losses
    fit_module = sys.modules["inference.fit"]
    assert fit_module.default_steps(200, 32) == DEFAULT_STEPS == 1000
    monkeypatch.setattr(fit_module, "DEFAULT_STEPS", 40)
    assert main(["fit", "mlp", "--data", "two_moons", "--n", "200", "--hidden", "8",
                 "--batch-size", "32", "--quiet", "--out", str(out)]) == 0
    assert "accuracy" in capsys.readouterr().out and len(zoo.load(out).losses) == 40
    assert main(["score", str(out), "--samples", "10"]) == 0
    assert "nll" in capsys.readouterr().out
    assert main(["fit", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "zoo fit: error: name: expected one of" in capsys.readouterr().err
