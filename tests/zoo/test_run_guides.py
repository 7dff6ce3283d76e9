"""`zoo run`'s digits table: every registered guide is in it (a tuned row, or one derived from the guide's
registration: no edit of zoo/run.py for a new guide), and each row's parameter count is its formula."""
import jax
import numpy as np
import pytest

import inference
import zoo
from inference.fit import guide_params
from zoo.run import CONVERGED, DIGITS_GROUPS, DIGITS_GUIDES, TUNED_DIGITS_GUIDES, fit_with_settings


def test_the_table_covers_every_registered_guide_with_unique_labels():
    assert {row.guide for row in DIGITS_GUIDES} == set(inference.GUIDES)
    labels = [row.label for row in DIGITS_GUIDES]
    assert len(set(labels)) == len(labels)


def test_a_guide_without_a_tuned_row_gets_one_from_its_registration(registries_restored):
    """binary_dropout has no tuned row: its row is the MLP 64-64 with its registered example options. A guide
    registered later gets a row and a part at once; one whose required option has no example gets none."""
    assert "binary_dropout" not in {row.guide for row in TUNED_DIGITS_GUIDES}
    (row,) = [r for r in DIGITS_GUIDES if r.guide == "binary_dropout"]
    assert (row.label, dict(row.entry_kwargs), dict(row.guide_kwargs), row.settings) == \
        ("binary_dropout", {"hidden": (64, 64)}, {"dropout_sites": ["*/w"]}, CONVERGED)

    def needs_sites(model, *, sites: list, prefix: str = "auto"):
        return inference.mean_field(model, prefix=prefix)

    inference.register_guide("needs_sites", needs_sites)
    assert "needs_sites" not in {r.guide for r in DIGITS_GUIDES}
    inference.register_guide("needs_sites", needs_sites, example={"sites": ["*/w"]})
    assert [r.label for r in DIGITS_GUIDES][-1] == "needs_sites" and ("needs_sites",) in DIGITS_GROUPS


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


def test_fit_with_settings_names_the_settings_type_it_expects():
    with pytest.raises(TypeError, match="settings: expected a zoo.run.FitSettings, got dict"):
        fit_with_settings(None, None, {"steps": 10, "lr": 1e-3, "schedule": "constant", "kl_warmup_fraction": 0.0})


def test_the_parallel_groups_cover_every_row_once_and_keep_warm_starts_with_their_start():
    from zoo.run import DIGITS_GROUPS

    grouped = [label for group in DIGITS_GROUPS for label in group]
    assert sorted(grouped) == sorted(row.label for row in DIGITS_GUIDES) and len(set(grouped)) == len(grouped)
    for row in DIGITS_GUIDES:
        if row.settings.warm_start is not None:
            assert any(row.label in g and row.settings.warm_start in g for g in DIGITS_GROUPS), row.label


def test_parts_fitted_apart_give_the_rows_and_digits_c_scores_of_one_part(tmp_path):
    """`zoo run` fits its digits rows in groups in worker processes: a row and its digits-C scores do not depend
    on which rows share its group, so merging the parts gives one part's numbers."""
    import pandas as pd

    from evals import ood
    from zoo.run import RunSizes, _merge_digits, digits_part

    sizes = RunSizes(moons_steps=1, warmup=1, draws_per_chain=1, draws=2, ood_draws=1, rank1_warmup=1,
                     rank1_draws_per_chain=1, digits_steps=3)
    labels = ("point_estimate", "mean_field_16-16")
    kw = dict(seed=0, progress=False)
    with pytest.warns(inference.ConvergenceWarning):
        one = digits_part(labels, sizes, out=str(tmp_path), **kw)
        parts = [digits_part((label,), sizes, **kw) for label in labels[::-1]]
    assert (tmp_path / "posteriors" / "digits_point_estimate").exists()
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
