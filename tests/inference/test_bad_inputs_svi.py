"""Bad inputs to the SVI core (issue 45): `inference.svi.init` / `step` refuse them by name, at trace time (shapes,
dtypes, the state's structure) or on the host (Python scalars, concrete labels), and a guide never keeps a tracer.

One compiled step of the smallest entry (`moons_tiny`, tests/conftest.py) serves every case; a refused input
raises before anything is compiled.
"""

from __future__ import annotations

import jax
import numpy as np
import optax
import pytest

import inference
from inference import svi


@pytest.fixture(scope="module")
def tiny(moons_tiny):
    return moons_tiny


def test_jitting_init_three_times_leaves_no_tracer_in_the_guide_and_fit_gives_the_same_numbers(tiny, moons_tiny_svi):
    """docs/svi.md's pattern, ``jax.jit(algorithm.init)``, used to cache a tracer in ``guide.sites`` (made by the
    network's initialiser inside the trace): the second jit of init and any later fit raised UnexpectedTracerError."""
    guide = inference.mean_field(tiny.model)
    x, y = tiny.train.x[:16], tiny.train.y[:16]
    algorithm = svi.build(tiny.model, guide, optax.adam(1e-2), n_data=len(tiny.train.x))
    states = [jax.jit(algorithm.init)(jax.random.PRNGKey(0), (x, y)) for _ in range(3)]
    leaves = jax.tree.leaves([tuple(site) for site in guide.sites.values()])
    assert leaves and not any(isinstance(leaf, jax.core.Tracer) for leaf in leaves)
    for state in states[1:]:
        jax.tree.map(np.testing.assert_array_equal, state.params, states[0].params)
    # the same fit as the session's 20-step fixture, with the guide jitted above: the very same numbers
    post = inference.fit(tiny.model, guide, tiny.train, steps=20, batch_size=16, optimizer=optax.adam(1e-2),
                         progress=False)
    assert set(post.params) == set(moons_tiny_svi.params)
    for name, value in moons_tiny_svi.params.items():
        np.testing.assert_array_equal(post.params[name], value)
    np.testing.assert_array_equal(post.losses, moons_tiny_svi.losses)
