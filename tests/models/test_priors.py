"""models.priors: fan_in, the scale of each kind, per-pattern kinds and scales, specs and bad input (issue 13).
Nothing here compiles: priors are distributions built from site names and shapes."""

from __future__ import annotations

import json
import math

import pytest

from models import priors
from base.errors import InputError


def _sd(prior, name, shape):
    d = prior(name, shape)
    assert tuple(d.batch_shape) == tuple(shape)
    return float(d.base_dist.scale if hasattr(d, "base_dist") else d.scale)


@pytest.mark.parametrize("name, shape, fan_in", [
    ("mlp/~/linear_0/w", (784, 400), 784),
    ("lenet5/conv2/w", (5, 5, 6, 16), 150),  # Haiku's kernel layout (kh, kw, c_in, c_out)
    ("mlp/~/linear_0/b", (400,), 1),
    ("rank1_mlp/rank1_dense_0/b", (4, 64), 1),  # rank-1 per-component biases (K, out)
    ("lstm_classifier/embedding/embeddings", (20000, 128), 1),  # each unit reads one entry of one row
    ("lstm_classifier/lstm/recurrent_kernel/w", (128, 512), 128),
    ("vgg/bn1_1/scale", (1, 1, 1, 64), 1),
])
def test_fan_in_counts_the_inputs_of_one_output_unit(name, shape, fan_in):
    assert priors.fan_in(name, shape) == fan_in
    assert _sd(priors.fan_in_normal(2.0), name, shape) == pytest.approx(2.0 / math.sqrt(fan_in))


def test_fan_in_sd_on_a_dense_784_400_site_and_a_5x5x6x16_conv_kernel():
    for scale in (1.0, 3.0):
        p = priors.per_site("fan_in", scale)
        assert _sd(p, "mlp/~/linear_0/w", (784, 400)) == pytest.approx(scale / 28)
        assert _sd(p, "lenet5/conv2/w", (5, 5, 6, 16)) == pytest.approx(scale / math.sqrt(150))


def test_what_the_scale_means_for_each_kind():
    w, shape = "mlp/~/linear_0/w", (50, 10)
    assert _sd(priors.scaled("normal", 0.5), w, shape) == 0.5
    assert _sd(priors.scaled("fan_in", 0.5), w, shape) == pytest.approx(0.5 / math.sqrt(50))
    assert _sd(priors.scaled("he_normal", 1.0), w, shape) == pytest.approx(math.sqrt(2 / 50))  # He et al.
    assert _sd(priors.scaled("he_normal", 3.0), w, shape) == pytest.approx(3 * math.sqrt(2 / 50))
    assert priors.scaled("he_normal", 1.0).spec == priors.he_normal().spec == {"kind": "he_normal", "gain": 2.0}
    c = priors.scaled("cauchy", 0.5)(w, shape)
    assert type(c.base_dist).__name__ == "Cauchy" and float(c.base_dist.scale) == 0.5
    # single values keep the specs checkpoints already hold
    assert priors.per_site("normal", 1.0).spec == {"kind": "normal", "scale": 1.0, "loc": 0.0}


def test_dict_scales_and_kinds_pick_per_pattern_first_match_wins():
    p = priors.per_site("fan_in", {"*/b": 1.0, "*": 2.0})
    assert _sd(p, "mlp/~/linear_0/w", (16, 4)) == pytest.approx(2.0 / 4)
    assert _sd(p, "mlp/~/linear_0/b", (4,)) == 1.0
    # a site no pattern matches takes the default scale
    q = priors.per_site("fan_in", {"*/linear_1/*": 5.0}, default_scale=0.5)
    assert _sd(q, "mlp/~/linear_1/w", (16, 4)) == pytest.approx(5.0 / 4)
    assert _sd(q, "mlp/~/linear_0/w", (16, 4)) == pytest.approx(0.5 / 4)
    # kinds per pattern, each with its own meaning of the scale
    k = priors.per_site({"*/b": "normal", "*/w": "he_normal"}, {"*/b": 0.1, "*/linear_0/*": 2.0},
                        default_kind="cauchy")
    assert _sd(k, "mlp/~/linear_0/b", (4,)) == pytest.approx(0.1)
    assert _sd(k, "mlp/~/linear_0/w", (8, 4)) == pytest.approx(2.0 * math.sqrt(2 / 8))
    assert _sd(k, "mlp/~/linear_1/w", (8, 4)) == pytest.approx(1.0 * math.sqrt(2 / 8))


def test_per_site_specs_are_json_rebuild_and_keep_the_order():
    p = priors.per_site({"*/b": "normal", "*": "fan_in"}, {"*/b": 1.0, "*": 2.0})
    spec = json.loads(json.dumps(p.spec))
    assert spec == p.spec and spec["prior_scale"] == [["*/b", 1.0], ["*", 2.0]]
    back = priors.from_spec(spec)
    assert back.spec == p.spec
    for name, shape in (("a/w", (9, 3)), ("a/b", (3,))):
        assert _sd(back, name, shape) == _sd(p, name, shape)
    swapped = priors.per_site({"*/b": "normal", "*": "fan_in"}, {"*": 2.0, "*/b": 1.0})
    assert swapped.spec != p.spec  # the first match wins: another order is another prior
    assert priors.from_spec(priors.fan_in_normal(2.0).spec).spec == {"kind": "fan_in_normal", "scale": 2.0}


def test_unmatched_and_shadowed_patterns_are_refused_by_check_patterns():
    names = ["mlp/~/linear_0/w", "mlp/~/linear_0/b"]
    priors.check_patterns(priors.per_site("fan_in", {"*/b": 1.0, "*": 2.0}), names)
    with pytest.raises(InputError, match=r"prior_scale: .*\['\*/bias'\]"):
        priors.check_patterns(priors.per_site("fan_in", {"*/bias": 1.0}), names)
    with pytest.raises(InputError, match=r"prior_scale: .*\['\*/b'\]"):  # shadowed by "*"
        priors.check_patterns(priors.per_site("fan_in", {"*": 2.0, "*/b": 1.0}), names)
    with pytest.raises(InputError, match=r"prior: .*\['conv\*'\]"):
        priors.check_patterns(priors.per_site({"conv*": "cauchy"}, 1.0), names)


@pytest.mark.parametrize("kind, scale, argument, says", [
    ("laplace", 1.0, "prior", "one of ['normal', 'fan_in', 'he_normal', 'cauchy']"),
    (None, 1.0, "prior", "a dict {site pattern: kind}"),
    ({"*/b": "laplace"}, 1.0, "prior", "pattern '*/b' has 'laplace'"),
    ({}, 1.0, "prior", "the dict is empty"),
    ("normal", 0.0, "prior_scale", "a positive real number"),
    ("normal", -1.0, "prior_scale", "a positive real number"),
    ("normal", float("nan"), "prior_scale", "a positive real number"),
    ("normal", True, "prior_scale", "a positive real number"),
    ("normal", "big", "prior_scale", "a positive real number"),
    ("normal", {"*/b": 0.0}, "prior_scale", "pattern '*/b' has 0.0"),
    ("normal", {"*/b": "1"}, "prior_scale", "pattern '*/b' has '1'"),
    ("normal", {1: 1.0}, "prior_scale", "key 1 is not a site pattern"),
    ("normal", [("*", 1.0)], "prior_scale", "a dict {site pattern"),
])
def test_bad_kinds_and_scales_name_the_argument(kind, scale, argument, says):
    with pytest.raises(InputError, match=f"^{argument}: ") as err:
        priors.per_site(kind, scale)
    assert err.value.argument == argument and says in str(err.value)
