"""`zoo run`'s digits table: every registered guide is in it (a tuned row, or one derived from the guide's
registration: no edit of zoo/experiments/run.py for a new guide), and each row's parameter count is its formula; the parts
fitted apart give one part's numbers; what it writes (results.md, the figures) reads like a report."""
import jax
import numpy as np
import optax
import pandas as pd
import pytest

import inference
import zoo
from inference.guide_params import guide_params
from base.errors import ZooError
from zoo.experiments.run import (CONVERGED, DIGITS_GROUPS, DIGITS_GUIDES, TUNED_DIGITS_GUIDES, FitSettings, RunSizes,
                                  digits_part, fit_with_settings)


def test_the_table_covers_every_registered_guide_with_unique_labels():
    assert {row.guide for row in DIGITS_GUIDES} == set(inference.GUIDES)
    labels = [row.label for row in DIGITS_GUIDES]
    assert len(set(labels)) == len(labels)


def test_a_guide_without_a_tuned_row_gets_one_from_its_registration(registries_restored):
    """Every built-in guide has a tuned row (binary_dropout's rate chosen on validation data), so no derived row
    is there today. A guide registered later gets a row from its example options (MLP 64-64, CONVERGED) and a part
    at once; one whose required option has no example gets none."""
    assert [r.label for r in DIGITS_GUIDES] == [r.label for r in TUNED_DIGITS_GUIDES]
    (row,) = [r for r in DIGITS_GUIDES if r.guide == "binary_dropout"]
    assert dict(row.guide_kwargs)["rate"] == 0.05 and "*/w" not in dict(row.guide_kwargs)["dropout_sites"]

    def needs_sites(model, *, sites: list, prefix: str = "auto"):
        return inference.mean_field(model, prefix=prefix)

    inference.register_guide("needs_sites", needs_sites)
    assert "needs_sites" not in {r.guide for r in DIGITS_GUIDES}
    inference.register_guide("needs_sites", needs_sites, example={"sites": ["*/w"]})
    (row,) = [r for r in DIGITS_GUIDES if r.guide == "needs_sites"]
    assert (row.label, dict(row.entry_kwargs), dict(row.guide_kwargs), row.settings) == \
        ("needs_sites", {"hidden": (64, 64)}, {"sites": ["*/w"]}, CONVERGED)
    assert [r.label for r in DIGITS_GUIDES][-1] == "needs_sites" and ("needs_sites",) in DIGITS_GROUPS



def test_a_guide_registered_from_a_users_module_gets_a_row_that_builds(extension_example):
    """tests/zoo/test_extension.py's plugin guide, registered from one module outside the package: a row from its
    registered example options and a part of its own, with no edit of zoo/experiments/run.py; the row's guide
    builds on the digits MLP 64-64 (a Laplace loc and scale per weight)."""
    (row,) = [r for r in DIGITS_GUIDES if r.guide == "plugin_laplace"]
    assert (row.label, row.entry, dict(row.guide_kwargs)) == ("plugin_laplace", "mlp", {"laplace_sites": ["*/w"]})
    assert ("plugin_laplace",) in DIGITS_GROUPS
    digits = zoo.get(row.entry, data="digits", **row.entry_kwargs)
    on_digits = inference.make_guide(row.guide, digits.model, **row.guide_kwargs)
    assert on_digits.setup(digits.train.x[:2]).num_params_formula() == 2 * digits.num_weights()

def test_each_row_builds_and_counts_its_free_parameters_by_the_papers_formula():
    seen = {}
    for row in DIGITS_GUIDES:
        entry = zoo.get(row.entry, data="digits", **row.entry_kwargs)
        guide = inference.make_guide(row.guide, entry.model, **row.guide_kwargs)
        x, y = entry.train.x[:2], entry.train.y[:2]
        guide.setup(x)
        # the unconstrained parameters fit optimises, from an abstract trace of the initialiser (shapes only,
        # nothing compiled: the 16 guides' jitted initialisers were this test's cost)
        params_u = jax.eval_shape(lambda key: guide_params(guide, key, x, y, len(entry.train))[0],
                                  jax.random.PRNGKey(0))
        free = sum(int(np.prod(v.shape)) for v in params_u.values())  # a Cholesky factor is stored by its free entries
        assert free == guide.num_params_formula(), row.label
        start = row.settings.warm_start
        if start is not None:  # started from an earlier row's mean field of the same network
            assert seen[start] == (row.entry, row.entry_kwargs), row.label
        seen[row.label] = (row.entry, row.entry_kwargs)


def test_rank1_entry_with_fixed_weights_samples_only_the_factors_and_rebuilds_from_its_config():
    """zoo run's NUTS row: W and biases held at given values, r and s the only sites; the entry's
    config (with the fixed arrays) is JSON and rebuilds the same network."""
    import json

    kwargs = {"hidden": (8,), "num_components": 2}
    entry = zoo.get("rank1_mlp", data="digits", **kwargs)
    values = entry.model.init_values(jax.random.PRNGKey(0), (64,))
    fixed = zoo.get("rank1_mlp", data="digits", **kwargs, fixed=values)
    factors = {k: v for k, v in values.items() if k.endswith(("alpha", "gamma"))}
    assert set(fixed.model.site_shapes((64,))) == set(factors)
    rebuilt = zoo.get(**json.loads(json.dumps(fixed.config)))
    x = entry.test.x[:5]
    np.testing.assert_allclose(rebuilt.model.apply(factors, x), entry.model.apply(values, x), rtol=1e-5, atol=1e-6)


def test_fit_with_settings_refuses_an_optimizer_that_ascends_the_loss(moons_tiny):
    """A FitSettings whose optimizer has a negative learning rate: the package's error naming the optimizer."""
    settings = FitSettings(steps=5, optimizer=lambda steps: optax.adam(-0.1), kl_warmup_fraction=0.0)
    with pytest.raises(ZooError, match=r"optimizer.*descends the loss") as err:
        fit_with_settings(moons_tiny, inference.mean_field(moons_tiny.model), settings)
    assert isinstance(err.value, ValueError)


def test_fit_with_settings_names_the_settings_type_it_expects():
    with pytest.raises(TypeError, match="settings: expected a zoo.experiments.run.FitSettings, got dict"):
        fit_with_settings(None, None, {"steps": 10, "lr": 1e-3, "schedule": "constant", "kl_warmup_fraction": 0.0})


def test_the_parallel_groups_cover_every_row_once_and_keep_warm_starts_with_their_start():
    from zoo.experiments.run import DIGITS_GROUPS

    grouped = [label for group in DIGITS_GROUPS for label in group]
    assert sorted(grouped) == sorted(row.label for row in DIGITS_GUIDES) and len(set(grouped)) == len(grouped)
    for row in DIGITS_GUIDES:
        if row.settings.warm_start is not None:
            assert any(row.label in g and row.settings.warm_start in g for g in DIGITS_GROUPS), row.label


SIZES = RunSizes(moons_steps=1, warmup=1, draws_per_chain=1, draws=2, ood_draws=1, rank1_warmup=1,
                 rank1_draws_per_chain=1, digits_steps=3)
LABELS = ("point_estimate", "mean_field_16-16")


@pytest.fixture(scope="module")
def one_part(tmp_path_factory):
    """`digits_part` of two rows at 3 steps each (shared by the tests below): (DigitsPart, its output folder)."""
    out = tmp_path_factory.mktemp("one_part")
    with pytest.warns(inference.ConvergenceWarning):
        return digits_part(LABELS, SIZES, out=str(out), seed=0, progress=False), out


def test_parts_fitted_apart_give_the_rows_and_digits_c_scores_of_one_part(one_part):
    """`zoo run` fits its digits rows in groups in worker processes: a row and its digits-C scores do not depend
    on which rows share its group, so merging the parts gives one part's numbers."""
    from evals import ood
    from zoo.experiments.run import _merge_digits

    sizes, labels, kw = SIZES, LABELS, {"seed": 0, "progress": False}
    one, out = one_part
    with pytest.warns(inference.ConvergenceWarning):
        parts = [digits_part((label,), sizes, **kw) for label in labels[::-1]]
    assert (out / "posteriors" / "digits_point_estimate").exists()
    merged = _merge_digits(parts)
    pd.testing.assert_frame_equal(merged.table.drop(columns="seconds"),
                                  _merge_digits([one]).table.drop(columns="seconds"))
    assert list(merged.means) == list(labels)  # the table's order, whatever the parts' order
    np.testing.assert_array_equal(merged.means["mean_field_16-16"], one.means["mean_field_16-16"])
    together = ood.merge([p.ood for p in parts])
    for label in labels:
        pd.testing.assert_frame_equal(together.table[together.table.method == label].reset_index(drop=True),
                                      one.ood.table[one.ood.table.method == label].reset_index(drop=True))
    with pytest.raises(ValueError, match=r"labels: \['nope'\] are not DIGITS_GUIDES rows"):
        digits_part(("nope",), sizes, **kw)


@pytest.fixture(scope="module")
def tiny_nuts(moons_tiny, moons_tiny_svi):
    """NUTS on the smallest entry (two-moons MLP 2-4-2) from its 20-step fit: 2 chains x (10 + 15), tree depth 3
    (30 draws: ArviZ 1.x's PSIS refuses fewer than 25, its Pareto tail then holding under 5 draws)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.DivergenceWarning)  # 10 warm-up steps: what the test reads is counted
        return inference.nuts(moons_tiny.model, moons_tiny.train, init=moons_tiny_svi, num_chains=2, num_warmup=10,
                              draws_per_chain=15, max_tree_depth=3, seed=0, progress=False)


def _sections(text: str) -> dict:
    """{'## ' heading: (the lines between the heading and its table, [table rows as lists of cells])}."""
    sections = {}
    for block in text.split("\n## ")[1:]:
        heading, *lines = block.strip("\n").split("\n")
        intro = [line for line in lines if line and not line.startswith("|")]
        table = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("|")]
        sections[heading] = (intro, table)
    return sections


@pytest.mark.smoke
def test_results_md_has_one_table_per_question_with_integers_and_no_nan(one_part, moons_tiny, moons_tiny_svi, tiny_nuts):
    """results.md: a sentence (a question) and one table per '## ' heading, counts as integers, no 'nan' cell, no
    tuple index; the cells are the table's numbers (R-hat the one `diagnostics.max_rhat` gives)."""
    from evals import ood
    from inference import arviz_compat, diagnostics
    from zoo.experiments.run import _nuts_row, _row, _write_results
    from zoo.experiments.run_report import results_markdown

    one, out = one_part
    moons_rows = [_row("two_moons", "mean_field", moons_tiny_svi, moons_tiny, 2, 0),
                  _nuts_row("two_moons", "nuts", tiny_nuts, moons_tiny, SIZES, 0, 10, 15)]
    table = pd.concat([one.table, pd.DataFrame(moons_rows).set_index(["data", "posterior"])])
    posteriors = {"mean_field": moons_tiny_svi, "nuts": tiny_nuts}
    comparison = arviz_compat.compare({"mean_field": inference.to_arviz(moons_tiny_svi, moons_tiny.train,
                                                                        num_samples=30),
                                       "nuts": inference.to_arviz(tiny_nuts, moons_tiny.train)})
    test_lpd = inference.predictive_density_table(posteriors, moons_tiny.test, num_samples=30)
    text = results_markdown(table, one.ood.table, ood.summary_table(one.ood), comparison, test_lpd,
                            title="zoo run: test", draws=2, ood_draws=1)
    _write_results(table, text, str(out), SIZES, 1.0)
    assert (out / "results.md").read_text() == text
    pd.testing.assert_frame_equal(pd.read_csv(out / "results.csv", index_col=[0, 1]), table, check_dtype=False)

    sections = _sections(text)
    assert list(sections) == ["Digits: clean test set", "Digits: the SVI fits", "Digits-C: corrupted test sets",
                              "Digits-C: accuracy by severity", "Digits-C: NLL by severity",
                              "Digits-C: uncertainty under shift", "Two moons: mean-field SVI and NUTS",
                              "Two moons: predictive density of new data", "NUTS diagnostics"]
    counts = {"weights", "steps", "guide params", "paper formula", "#params", "divergences", "of draws",
              "min bulk ESS"}
    tables = {}
    for heading, (intro, rows) in sections.items():
        assert len(intro) == 1 and "?" in intro[0], heading  # one sentence asking the table's question
        header, rule, *body = rows
        assert set("".join(rule)) <= set("-:") and body, heading  # exactly one table, with rows
        assert sum(r == rule for r in rows) == 1, heading
        tables[heading] = [dict(zip(header, r)) for r in body]
        for row in tables[heading]:
            assert all(len(r) == len(header) for r in body)
            assert not any(v.lower() in ("nan", "none", "<na>") or v.startswith("(") for v in row.values()), row
            for col in counts & set(header):
                assert row[col] == "" or row[col].replace(",", "").isdigit(), (heading, col, row[col])
    assert "('" not in text and "nan" not in text.lower().split()

    clean = {r["posterior"]: r for r in tables["Digits: clean test set"]}
    assert list(clean) == list(LABELS)
    assert clean["point_estimate"]["accuracy"] == f"{table.loc[('digits', 'point_estimate'), 'accuracy']:.4f}"
    fits = {r["posterior"]: r for r in tables["Digits: the SVI fits"]}
    assert fits["point_estimate"]["steps"] == "3" and fits["point_estimate"]["weights"] == "8,970"
    assert fits["mean_field_16-16"]["guide params"] == fits["mean_field_16-16"]["paper formula"] == "2,964"
    moons = {r["posterior"]: r for r in tables["Two moons: mean-field SVI and NUTS"]}
    assert moons["nuts"]["guide params"] == "" and moons["mean_field"]["guide params"] == "44"  # SVI only: 2 x 22
    assert moons["nuts"]["weights"] == "22"
    nuts = tables["NUTS diagnostics"]
    assert [r["run"] for r in nuts] == ["two_moons, nuts"]
    assert nuts[0]["chains x (warm-up + draws)"] == "2 x (10 + 15)" and nuts[0]["of draws"] == "30"
    assert nuts[0]["divergences"] == str(tiny_nuts.info.divergences)
    assert nuts[0]["max R-hat"] == f"{diagnostics.max_rhat(tiny_nuts, moons_tiny.test.x[:20]):.3f}"
    by_severity = tables["Digits-C: accuracy by severity"]
    assert list(by_severity[0]) == ["posterior", "clean"] + [f"severity {s}" for s in range(1, 6)]


def test_the_severity_figure_is_a_grid_with_a_style_per_line(one_part, tmp_path):
    """ood_severity.png: 7 metric panels and the legend in a 2 x 4 grid (not a strip); up to 20 lines no two share
    a colour, and none shares colour, marker and line style."""
    from matplotlib.image import imread

    from evals import ood
    from evals.plots import line_styles

    one, _ = one_part
    path = ood.plot_severity(one.ood, str(tmp_path / "severity.png"))
    height, width = imread(path).shape[:2]
    assert (width, height) == (4 * 352, 2 * 286)
    styles = line_styles(20)
    assert len({s["color"] for s in styles}) == 20
    more = line_styles(45)
    assert len({(s["color"], s["marker"], s["linestyle"]) for s in more}) == 45


def test_ood_detection_of_every_posterior_against_every_shift(one_part, tmp_path):
    """`zoo run`'s OOD detection: every posterior x out set x score, out sets as large as the test set, the same
    AUROC as `evals.detection.detection_metrics` of the posterior's own scores, and results.md's section (a question
    and one table, a row per posterior) with ood_detection.csv / .png beside it."""
    from zoo.experiments.detection_tables import write_detection

    one, _ = one_part
    table = one.detection
    assert list(table.index.names) == ["posterior", "out_set", "score"]
    assert list(dict.fromkeys(table.index.get_level_values("posterior"))) == list(LABELS)
    assert list(dict.fromkeys(table.index.get_level_values("out_set"))) == [
        "rotated_90", "pixels_shuffled", "uniform_noise", "corrupted_severity_5"]
    assert (table["n_in"] == len(one.test.y)).all() and (table["n_out"] == len(one.test.y)).all()
    assert table[["auroc", "aupr_in", "aupr_out", "fpr_at_95_tpr"]].stack().between(0, 1).all()
    text = write_detection(table, str(tmp_path))
    intro, rows = _sections("\n" + text)["Out-of-distribution detection"]
    assert len(intro) == 1 and "?" in intro[0] and [r[0] for r in rows[2:]] == list(LABELS)
    assert rows[0][1:3] == ["rotated_90 AUROC", "FPR@95"]
    assert rows[2][1] == f"{table.loc[('point_estimate', 'rotated_90', 'entropy'), 'auroc']:.3f}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ood_detection.csv", "ood_detection.png"]
