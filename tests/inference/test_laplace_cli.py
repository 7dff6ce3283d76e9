"""``zoo fit --guide laplace``: the point estimate, then `inference.laplace` with the --guide-option settings, saved
as a Laplace posterior that ``zoo score`` and ``zoo.load`` read back; a setting inference.laplace does not take is
refused before any work."""

import numpy as np

import zoo
from zoo.cli import main
from inference.laplace_posterior import LaplacePosterior


def test_zoo_fit_guide_laplace_saves_a_laplace_posterior_that_zoo_score_reads(tmp_path, capsys):
    out = tmp_path / "lap"
    assert main(["fit", "mlp", "--data", "two_moons", "--n", "100", "--hidden", "4", "--steps", "20",
                 "--batch-size", "16", "--quiet", "--guide", "laplace", "--guide-option", "structure=kfac",
                 "--guide-option", "prior_structure=scalar", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Laplace: kfac curvature over 22 weights, glm predictive" in printed
    post = zoo.load(out)
    assert isinstance(post, LaplacePosterior) and post.structure == "kfac"
    assert len(set(post.prior_precision)) == 1 and post.config["laplace"]["prior_structure"] == "scalar"
    assert np.isfinite(post.config["laplace"]["log_evidence"])
    assert main(["score", str(out), "--samples", "10"]) == 0
    assert "nll" in capsys.readouterr().out
    assert main(["fit", "mlp", "--data", "two_moons", "--n", "100", "--guide", "laplace", "--guide-option",
                 "structur=kfac", "--out", str(tmp_path / "x")]) == 2
    assert "an option of guide 'laplace'" in capsys.readouterr().err
