"""Fixtures of the evals tests: one tiny mean-field fit shared by the k-tied analyses' tests."""

import warnings

import pytest

import inference
import zoo


@pytest.fixture(scope="session")
def tiny_mean_field():
    """(entry, posterior): two moons (100 points), MLP 2-6-5-2, mean field after 20 steps (sigma ~ its init)."""
    e = zoo.get("mlp", data="two_moons", hidden=(6, 5), data_kwargs={"n": 100})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.ConvergenceWarning)  # 20 steps: too few to judge
        post = inference.fit(e.model, inference.mean_field(e.model), e.train, steps=20, batch_size=50,
                             progress=False)
    return e, post
