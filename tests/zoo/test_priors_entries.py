"""Every catalogue entry takes `prior` and `prior_scale` (a number or one per site pattern), one default in
zoo.entries, checkpoints refusing another prior scale, the CLI's --prior / --prior-scale (issue 13).
Building entries traces shapes only (jax.eval_shape); one tiny fit is the only compile."""

from __future__ import annotations

import inspect
import math

import pytest

import zoo
from inference.model_identity import first_difference, model_identity
from models import priors
from base.errors import InputError
from zoo import entries, registry

MOONS = {"data": "two_moons", "hidden": (4,), "data_kwargs": {"n": 100}}
# the shipped data each entry builds on without TFDS: placeholders of its default data set's shape
BUILDS = [(n, {}) for n in registry.names()] + [("wide_resnet", {"num_components": 2, "depth": 10}),
                                                ("lstm", {"num_components": 2, "vocab_size": 50})]
SMALL = {"resnet18": {"width_multiplier": 0.125}, "vgg": {"width_multiplier": 0.125},
         "wide_resnet": {"depth": 10}, "lstm": {"vocab_size": 50}}


def _sd(d):
    return float(d.base_dist.scale if hasattr(d, "base_dist") else d.scale)


@pytest.mark.parametrize("name, extra", BUILDS, ids=[f"{n}{'-rank1' if e else ''}" for n, e in BUILDS])
def test_every_entry_builds_with_the_fan_in_prior(name, extra):
    train = registry.placeholder_data(registry.spec(name).default_data)
    model = registry.spec(name).build(train, prior="fan_in", prior_scale=2.0, **{**SMALL.get(name, {}), **extra})
    rank1 = name == "rank1_mlp" or "num_components" in extra
    checked = 0
    for site, shape in model.site_shapes(train.feature_shape).items():
        d = model.prior(site, shape)
        if rank1 and site.rsplit("/", 1)[1] in ("alpha", "gamma"):  # the rank-1 factor prior, kept
            assert float(d.base_dist.loc) == 1.0 and _sd(d) == pytest.approx(0.1)
            continue
        assert _sd(d) == pytest.approx(2.0 / math.sqrt(priors.fan_in(site, shape))), site
        checked += 1
    assert checked >= 2


def test_every_entry_defaults_to_the_module_constants():
    assert (entries.DEFAULT_PRIOR, entries.DEFAULT_PRIOR_SCALE) == ("normal", 1.0)
    for name in registry.names():
        params = inspect.signature(registry.spec(name).build).parameters
        assert params["prior"].default == entries.DEFAULT_PRIOR, name
        assert params["prior_scale"].default == entries.DEFAULT_PRIOR_SCALE, name
    rows = {r["name"]: r for r in zoo.list()}
    assert rows["mlp"]["prior"] == "normal, scale 1.0"
    assert rows["rank1_mlp"]["prior"] == "*/alpha, */gamma: normal, scale 0.1, loc 1.0; else normal, scale 1.0"


def test_dict_scales_per_pattern_on_an_entry():
    model = zoo.get("mlp", prior="fan_in", prior_scale={"*/b": 0.5, "*": 2.0}, **MOONS).model
    shapes = model.site_shapes((2,))
    assert _sd(model.prior("mlp/~/linear_0/w", shapes["mlp/~/linear_0/w"])) == pytest.approx(2.0 / math.sqrt(2))
    assert _sd(model.prior("mlp/~/linear_1/w", shapes["mlp/~/linear_1/w"])) == pytest.approx(2.0 / 2)
    assert _sd(model.prior("mlp/~/linear_1/b", shapes["mlp/~/linear_1/b"])) == 0.5
    # no "*": sites no pattern matches take DEFAULT_PRIOR_SCALE
    other = zoo.get("mlp", prior="fan_in", prior_scale={"*/linear_1/w": 3.0}, **MOONS).model
    assert _sd(other.prior("mlp/~/linear_0/w", (2, 4))) == pytest.approx(entries.DEFAULT_PRIOR_SCALE / math.sqrt(2))
    kinds = zoo.get("mlp", prior={"*/b": "cauchy", "*": "he_normal"}, **MOONS).model
    assert type(kinds.prior("mlp/~/linear_0/b", (4,)).base_dist).__name__ == "Cauchy"
    assert _sd(kinds.prior("mlp/~/linear_0/w", (2, 4))) == pytest.approx(1.0)  # sqrt(2 / fan_in 2)


@pytest.mark.parametrize("kwargs, argument, says", [
    ({"prior": "laplace"}, "prior", "one of ['normal', 'fan_in', 'he_normal', 'cauchy']"),
    ({"prior_scale": 0}, "prior_scale", "a positive real number"),
    ({"prior_scale": {"*/b": -1.0}}, "prior_scale", "pattern '*/b' has -1.0"),
    ({"prior_scale": {("*",): 1.0}}, "prior_scale", "is not a site pattern"),
    ({"prior_scale": {"*/kernel": 2.0}}, "prior_scale", "no site takes its prior scale from ['*/kernel']"),
    ({"prior": {"*": "fan_in", "*/b": "normal"}}, "prior", "no site takes its prior from ['*/b']"),
])
def test_bad_prior_arguments_are_refused_naming_them(kwargs, argument, says):
    with pytest.raises(InputError) as err:
        zoo.get("mlp", **MOONS, **kwargs)
    assert err.value.argument == argument and says in str(err.value)


def test_a_pattern_only_the_special_sites_match_is_refused():
    """Rank-1 factors and log-uniform sites keep their own priors: a scale only they match would do nothing."""
    with pytest.raises(InputError, match=r"prior_scale: .*\['\*/alpha'\]"):
        zoo.get("rank1_mlp", data="two_moons", hidden=(4,), num_components=2, data_kwargs={"n": 100},
                prior_scale={"*/alpha": 2.0, "*": 1.0})
    with pytest.raises(InputError, match=r"prior_scale: .*\['\*/linear_0/\*'\]"):
        zoo.get("mlp", log_uniform_sites=("*/linear_0/*",), prior_scale={"*/linear_0/*": 2.0, "*": 1.0}, **MOONS)
    model = zoo.get("mlp", log_uniform_sites=("*/linear_0/w",), prior="fan_in", prior_scale=2.0, **MOONS).model
    assert model.prior("mlp/~/linear_0/w", (2, 4)).__class__.__name__ != "Normal"
    assert model.prior.route("mlp/~/linear_0/w").spec == {"kind": "log_uniform"}
    assert _sd(model.prior("mlp/~/linear_1/w", (4, 2))) == pytest.approx(1.0)


def _difference(saved_kwargs, kwargs):
    """What `inference.load` says when a checkpoint of the first model is loaded into the second (None: same)."""
    saved = model_identity(zoo.get("mlp", **MOONS, **saved_kwargs).model)
    return first_difference(saved, model_identity(zoo.get("mlp", **MOONS, **kwargs).model))


def test_the_identity_refuses_another_prior_scale_dict():
    """`inference.load` compares these identities (`first_difference`) and refuses a model that differs."""
    fan_in = {"prior": "fan_in", "prior_scale": {"*/b": 1.0, "*": 2.0}}
    assert _difference(fan_in, dict(fan_in)) is None
    assert _difference(fan_in, {**fan_in, "prior_scale": {"*/b": 1.0, "*": 3.0}}) == "prior_scale.*: saved 2.0, model 3.0"
    assert _difference(fan_in, {**fan_in, "prior_scale": {"*": 2.0}}).startswith("prior_scale.*/b: saved 1.0")
    assert _difference(fan_in, {**fan_in, "prior_scale": 2.0}).startswith("prior_scale: saved {")
    assert _difference(fan_in, {**fan_in, "prior": "normal"}) == "prior: saved fan_in, model normal"
    # the same rules in another order are another prior (the first match wins): the prior's spec keeps the order
    kinds = {"prior": {"*/b": "normal", "*/w": "fan_in"}}
    assert _difference(kinds, {"prior": {"*/w": "fan_in", "*/b": "normal"}}).startswith("prior.prior: saved [[")
    # a default, passed or not, is the same model; the identity records it
    assert _difference({}, {"prior": entries.DEFAULT_PRIOR, "prior_scale": entries.DEFAULT_PRIOR_SCALE}) is None


def test_cli_prior_and_per_pattern_prior_scale():
    from zoo.cli import _entry, build_parser

    args = build_parser().parse_args(["fit", "mlp", "--data", "two_moons", "--hidden", "4", "--n", "100",
                                      "--prior", "fan_in", "--prior-scale", "*/b=1,*=2.5", "--out", "x"])
    assert args.prior == "fan_in" and args.prior_scale == {"*/b": 1.0, "*": 2.5}
    model = _entry(args).model
    assert model.arguments["prior"] == "fan_in" and model.arguments["prior_scale"] == {"*/b": 1.0, "*": 2.5}
    assert build_parser().parse_args(["fit", "mlp", "--prior-scale", "2", "--out", "x"]).prior_scale == 2.0
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fit", "mlp", "--prior-scale", "*/b=-1", "--out", "x"])
