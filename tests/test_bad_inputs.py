"""Bad inputs at every public door (issue 12): each input either works and gives the right numbers, or raises
the package's own error (`base.errors.ZooError`, mostly `InputError`) naming the argument, never a foreign
exception (NumPy, JAX, Haiku, ZeroDivisionError) and never a silently wrong result.

Two kinds of tests: `BAD_INPUTS`, one explicit regression test per bad input the issue lists (and a few
more), and hypothesis properties over the cheap entry points (Dataset, metrics, label inference, argument
checks, predict / log_likelihood / score of one tiny shared posterior, whose shapes are fixed so that only
the first example compiles). `test_counts` prints how many distinct bad inputs the file tries.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import evals
import inference
import zoo
from evals import metrics
from base.data import Dataset
from inference.nuts import DivergenceWarning
from base.validation import (PROBABILITY_ATOL, check_learning_rate, check_non_negative_ints,
                                  check_positive_ints, infer_num_classes)
from base.errors import ArgumentTypeError, InputError, ZooError

HYPOTHESIS = settings(max_examples=60, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def tiny(moons_tiny):
    return moons_tiny


@pytest.fixture(scope="module")
def post(moons_tiny_svi):
    return moons_tiny_svi


SEEN = {"bad": set(), "good": set()}  # distinct hypothesis examples, by property and repr, for test_counts


def record(prop: str, valid: bool, *inputs) -> None:
    """Note one hypothesis example (it passed its assertions: a bad one raised the package's error)."""
    SEEN["good" if valid else "bad"].add((prop, repr(inputs)))


def outcome(call):
    """("ok", value) or ("error", the ZooError); any other exception fails the test (it propagates)."""
    try:
        return "ok", call()
    except ZooError as err:
        return "error", err


# ----- explicit regression tests: one per bad input of the issue --------------------------------
RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 3)).astype(np.float32)
Y = RNG.integers(0, 3, 40)
P2 = np.array([[0.1, 0.9], [0.2, 0.8]])


def _stray(label):
    y = Y.copy()
    y[5] = label
    return y


def _user(y_train, y_test=None, **kwargs):
    y_test = Y[30:] if y_test is None else y_test
    return zoo.get("mlp", data=(X[:30], y_train, X[30:], y_test), hidden=(4,), **kwargs)


BAD_INPUTS = {  # id: (call, argument named, what the message says); `tiny` / `post` are passed when asked for
    # labels
    "float labels 0.5/1.7/2.9": (lambda: Dataset(X[:3], [0.5, 1.7, 2.9], 3), "y", "integer class labels"),
    "float labels in zoo.get": (lambda: _user(Y[:30], Y[30:] + 0.5), "y_test", "integer class labels"),
    "uint8 label 255": (lambda: Dataset(X[:2], np.array([0, 255], np.uint8), 3), "y", r"labels in \[0, 3\)"),
    "uint8 255 infers 256 classes": (lambda: _user(np.r_[Y[:29], 255].astype(np.uint8)), "y_train", "256 classes"),
    "label -1": (lambda: Dataset(X[:2], [0, -1], 3), "y", "labels >= 0"),
    "label NaN": (lambda: Dataset(X[:2], [0.0, np.nan], 3), "y", "integer class labels"),
    "labels 2-D": (lambda: Dataset(X[:2], [[0], [1]], 3), "y", r"shape \(N,\)"),
    "labels as strings": (lambda: Dataset(X[:2], ["a", "b"], 3), "y", "integer class labels"),
    "label length mismatch": (lambda: Dataset(X[:3], [0, 1], 3), "y", "3 labels"),
    "one class": (lambda: Dataset(X[:3], [0, 0, 0], 1), "num_classes", ">= 2"),
    "num_classes 2.5": (lambda: Dataset(X[:3], [0, 0, 1], 2.5), "num_classes", ">= 2"),
    "stray label 999": (lambda: _user(_stray(999)[:30]), "y_train", "1000 classes"),
    "stray label 9 of 3 classes": (lambda: _user(_stray(9)[:30]), "y_train", r"classes 3, 4, 5, 6, 7 and 1 more never occur"),
    "a single class in zoo.get": (lambda: _user(np.zeros(30, int), np.zeros(10, int)), "y_train", "at least 2 classes"),
    "num_classes 1 in data_kwargs": (lambda: _user(Y[:30], data_kwargs={"num_classes": 1}),
                                     r"data_kwargs\['num_classes'\]", ">= 2"),
    "unknown data_kwargs for arrays": (lambda: _user(Y[:30], data_kwargs={"classes": 3}), "classes", "num_classes"),
    # inputs
    "x NaN": (lambda: Dataset(np.array([[np.nan, 1.0]]), [0], 2), "x", "finite"),
    "x strings": (lambda: Dataset(np.array([["a", "b"]]), [0], 2), "x", "real numeric array"),
    "x complex": (lambda: Dataset(np.ones((2, 2), complex), [0, 1], 2), "x", "real numeric array"),
    "x 1-D": (lambda: Dataset(np.ones(3), [0, 1, 0], 2), "x", r"shape \(N, features"),
    "x ragged": (lambda: Dataset([[1.0, 2.0], [1.0]], [0, 1], 2), "x", "array"),
    "empty user arrays": (lambda: zoo.get("mlp", data=(X[:0], Y[:0], X, Y), hidden=(4,)), "x_train", "at least one row"),
    "x_test other features": (lambda: zoo.get("mlp", data=(X[:30], Y[:30], X[30:, :2], Y[30:])), "x_test", "features"),
    "regression targets inf": (lambda: Dataset(X[:2], [0.0, np.inf], None), "y", "finite"),
    # zoo.get arguments
    "hidden=64": (lambda: zoo.get("mlp", data="two_moons", hidden=64), "hidden", r"hidden=\(64,\)"),
    "hidden=(64, 0)": (lambda: zoo.get("mlp", data="two_moons", hidden=(64, 0)), "hidden", "positive integers"),
    "depth=2.5": (lambda: zoo.get("deep_linear", depth=2.5), "depth", "an integer"),
    "prior_scale='big'": (lambda: zoo.get("mlp", prior_scale="big"), "prior_scale", "real number"),
    "unknown entry argument": (lambda: zoo.get("mlp", hiden=(4,)), "hiden", "arguments"),
    "unknown data set argument": (lambda: zoo.get("mlp", data="two_moons", data_kwargs={"m": 3}), "m", "arguments"),
    "two_moons n=5": (lambda: zoo.get("mlp", data="two_moons", data_kwargs={"n": 5}), "n", ">= 10"),
    "test_fraction 1.5": (lambda: zoo.get("mlp", data="two_moons", data_kwargs={"test_fraction": 1.5}),
                          "test_fraction", r"\(0.0, 1.0\)"),
    "data_kwargs a list": (lambda: zoo.get("mlp", data_kwargs=[1]), "data_kwargs", "dict"),
    "data a 3-tuple": (lambda: zoo.get("mlp", data=(X, Y, X)), "data", "tuple"),
    "unknown entry": (lambda: zoo.get("nope"), "name", "one of"),
    "unknown data set": (lambda: zoo.get("mlp", data="mnist2"), "data", "one of"),
    # fit
    "fit: other feature count": (lambda t: inference.fit(t.model, inference.mean_field(t.model), (X, Y % 2),
                                                         steps=2, progress=False), "data.x", r"feature shape \(2,\)"),
    "fit: empty data": (lambda t: inference.fit(t.model, inference.mean_field(t.model), (X[:0, :2], Y[:0]),
                                                steps=2, progress=False), "data.x", "at least one row"),
    "fit: labels missing": (lambda t: inference.fit(t.model, inference.mean_field(t.model), (t.train.x, None),
                                                    steps=2, progress=False), "data", "labels y for training"),
    "fit: label 2 of 2 classes": (lambda t: inference.fit(t.model, inference.mean_field(t.model),
                                                          (t.train.x, t.train.y + 1), steps=2, progress=False),
                                  "data.y", r"labels in \[0, 2\)"),
    "fit: steps 0": (lambda t: inference.fit(t.model, inference.mean_field(t.model), t.train, steps=0), "steps", ""),
    "fit: batch_size -1": (lambda t: inference.fit(t.model, inference.mean_field(t.model), t.train, batch_size=-1),
                           "batch_size", ""),
    "fit: chunk_size 2.5": (lambda t: inference.fit(t.model, inference.mean_field(t.model), t.train, chunk_size=2.5),
                            "chunk_size", ""),
    "fit: kl_warmup -1": (lambda t: inference.fit(t.model, inference.mean_field(t.model), t.train, kl_warmup=-1),
                          "kl_warmup", ""),
    "fit: data a dict": (lambda t: inference.fit(t.model, inference.mean_field(t.model), {"x": X}), "data", "tuple"),
    # NUTS settings and data
    "nuts: target_accept_prob 1": (lambda t: inference.nuts(t.model, t.train, target_accept_prob=1.0),
                                   "target_accept_prob", r"\(0.0, 1.0\)"),
    "nuts: target_accept_prob 0": (lambda t: inference.nuts(t.model, t.train, target_accept_prob=0.0),
                                   "target_accept_prob", ""),
    "nuts: target_accept_prob NaN": (lambda t: inference.nuts(t.model, t.train, target_accept_prob=math.nan),
                                     "target_accept_prob", ""),
    "nuts: max_tree_depth 0": (lambda t: inference.nuts(t.model, t.train, max_tree_depth=0), "max_tree_depth", ">= 1"),
    "nuts: num_chains 0": (lambda t: inference.nuts(t.model, t.train, num_chains=0), "num_chains", ""),
    "nuts: num_warmup -1": (lambda t: inference.nuts(t.model, t.train, num_warmup=-1), "num_warmup", ""),
    "nuts: draws_per_chain 0": (lambda t: inference.nuts(t.model, t.train, draws_per_chain=0), "draws_per_chain", ""),
    "nuts: divergence_threshold 2": (lambda t: inference.nuts(t.model, t.train, divergence_threshold=2),
                                     "divergence_threshold", ""),
    "nuts: seed 1.5": (lambda t: inference.nuts(t.model, t.train, seed=1.5), "seed", "integer"),
    "nuts: other feature count": (lambda t: inference.nuts(t.model, (X, Y % 2), num_warmup=1, draws_per_chain=1),
                                  "data.x", r"feature shape \(2,\)"),
    "nuts: chain_method 'threads'": (lambda t: inference.nuts(t.model, t.train, chain_method="threads"),
                                     "chain_method", "one of"),
    # predict, log_likelihood, score
    "predict: num_samples 0": (lambda p: p.predict(X[:2, :2], num_samples=0), "num_samples", ""),
    "predict: num_samples -3": (lambda p: p.predict(X[:2, :2], num_samples=-3), "num_samples", ""),
    "predict: chunk_size 0": (lambda p: p.predict(X[:2, :2], chunk_size=0), "chunk_size", ""),
    "predict: other feature count": (lambda p: p.predict(X), "x", r"feature shape \(2,\)"),
    "predict: empty x": (lambda p: p.predict(X[:0, :2]), "x", "at least one row"),
    "predict: reduce 'sum'": (lambda p: p.predict(X[:2, :2], reduce="sum"), "reduce", "one of"),
    "log_likelihood: label 5": (lambda p: p.log_likelihood(X[:2, :2], [0, 5]), "y", r"labels in \[0, 2\)"),
    "log_likelihood: label 0.5": (lambda p: p.log_likelihood(X[:2, :2], [0, 0.5]), "y", "integer"),
    "score: other feature count": (lambda p: evals.score(p, (X, Y % 2), verbose=False), "x", "feature shape"),
    "score: length-1 labels": (lambda p: evals.score(p, (X[:4, :2], Y[:1] % 2), num_samples=2, verbose=False),
                               "y", "4 labels"),
    "score: label -1": (lambda p: evals.score(p, (X[:2, :2], [0, -1]), num_samples=2, verbose=False), "y", ">= 0"),
    "score: no labels": (lambda p: evals.score(p, (X[:2, :2], None), verbose=False), "data", "labels"),
    "score: num_samples 0": (lambda p: evals.score(p, (X[:2, :2], [0, 1]), num_samples=0), "num_samples", ""),
    # metrics
    "nll of unnormalised probabilities": (lambda: metrics.nll(np.array([[[0.9, 0.9], [0.2, 0.8]]]), [0, 1]),
                                          "member_probs", r"row \(0, 0\), sums to 1.8"),
    "ece of NaN probabilities": (lambda: metrics.ece(np.array([[np.nan, 1.0], [0.2, 0.8]]), [0, 1]), "probs", "finite"),
    "brier of negative probabilities": (lambda: metrics.brier(np.array([[-0.2, 1.2], [0.2, 0.8]]), [0, 1]),
                                        "probs", "non-negative"),
    "accuracy broadcasts a length-1 label vector": (lambda: metrics.accuracy(P2, [1]), "y", "2 labels"),
    "nll of label -1": (lambda: metrics.nll(P2[None], [1, -1]), "y", ">= 0"),
    "brier of label 2 of 2 classes": (lambda: metrics.brier(P2, [1, 2]), "y", r"labels in \[0, 2\)"),
    "ece of no rows": (lambda: metrics.ece(np.zeros((0, 2)), []), "probs", "N, S >= 1"),
    "ece num_bins 0": (lambda: metrics.ece(P2, [0, 1], num_bins=0), "num_bins", ""),
    "entropy of logits": (lambda: metrics.predictive_entropy(np.array([[2.0, 1.0]])), "probs", "summing to 1"),
    "mutual information of (N, C)": (lambda: metrics.mutual_information(P2), "member_probs", r"\(S, N, C\)"),
    "average of strings": (lambda: metrics.average(np.array([[["a", "b"]]])), "member_probs", "real"),
    # optimiser settings
    "learning rate -0.1": (lambda: check_learning_rate(-0.1, "--lr"), "--lr", "> 0|0.0, inf"),
    "learning rate NaN": (lambda: check_learning_rate(math.nan), "learning_rate", "finite"),
    "learning rate 0": (lambda: check_learning_rate(0), "learning_rate", ""),
    # an optimiser record checks its numbers when it is built (a user's own optax object is never run to check it:
    # a rate that climbs the loss stops the fit with NonFiniteLossError, the last finite parameters kept)
    "fit: adam(-0.1) (gradient ascent)": (lambda t: inference.fit(
        t.model, inference.mean_field(t.model), t.train, optimizer=inference.optimizers.adam(learning_rate=-0.1)),
        "learning_rate", "climbs the loss"),
    "fit: sgd(nan)": (lambda t: inference.fit(t.model, inference.mean_field(t.model), t.train,
                                              optimizer=inference.optimizers.sgd(math.nan)), "learning_rate",
                      "finite"),
    "fit: optimizer 'adam'": (lambda t: inference.fit(t.model, inference.mean_field(t.model), t.train,
                                                      optimizer="adam"), "optimizer", "GradientTransformation"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_raises_the_packages_error_naming_the_argument(case, request):
    call, argument, says = BAD_INPUTS[case]
    needs = call.__code__.co_varnames[:call.__code__.co_argcount]
    args = [request.getfixturevalue({"t": "tiny", "p": "post"}[name]) for name in needs]
    with pytest.raises(ZooError) as err:
        call(*args)
    message = str(err.value)
    assert isinstance(err.value, ValueError)  # `except ValueError` keeps working
    assert re.match(argument + ": expected", message), message
    assert re.search(says, message), message


def test_inferred_classes_are_logged_and_explicit_classes_accepted(caplog):
    with caplog.at_level("INFO", logger="zoo"):
        entry = _user(Y[:30])
    assert entry.train.num_classes == 3
    assert "3 classes inferred from the labels (largest 2); every class 0..2 occurs in the 30 training labels" \
        in caplog.text
    y = np.where(Y == 2, 9, Y)  # classes 0, 1, 9: stray-looking, but the user says there are 10
    entry = _user(y[:30], y[30:], data_kwargs={"num_classes": 10})
    assert entry.train.num_classes == 10 and entry.model.output_width((3,)) == 10
    np.testing.assert_array_equal(entry.train.y, y[:30])


def test_float_labels_that_are_integers_are_kept_exactly():
    d = Dataset(X[:3], np.array([0.0, 1.0, 2.0]), 3)
    assert d.y.dtype == np.int32 and d.y.tolist() == [0, 1, 2]
    d = Dataset(X[:2], np.array([1, 0], np.uint8), 2)
    assert d.y.tolist() == [1, 0]


def test_zoo_get_records_the_feature_shape(tiny):
    assert tiny.model.feature_shape == (2,)


def test_divergences_warn_with_count_and_fraction_and_are_kept(tiny):
    # no warm-up: NUTS keeps its initial step size 1.0, far too large here, so most transitions diverge
    kwargs = dict(num_chains=1, num_warmup=0, draws_per_chain=30, max_tree_depth=3, seed=0, progress=False)
    with pytest.warns(DivergenceWarning) as record:
        mcmc = inference.nuts(tiny.model, tiny.train, divergence_threshold=0.0, **kwargs)
    count = int(mcmc.sample_stats["diverging"].sum())
    assert count > 0 and mcmc.info.divergences == count
    warning = record[0].message
    assert (warning.count, warning.total) == (count, 30) and warning.fraction == pytest.approx(count / 30)
    assert f"{count} of 30 draws after warm-up diverged ({count / 30:.1%})" in str(warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DivergenceWarning)  # the threshold 1 never warns
        again = inference.nuts(tiny.model, tiny.train, divergence_threshold=1.0, **kwargs)
    np.testing.assert_array_equal(again.sample_stats["diverging"], mcmc.sample_stats["diverging"])


# ----- hypothesis properties ----------------------------------------------------------------------
ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True),
                      st.text(max_size=3), st.just(np.int64(3)), st.just(np.float32(2.0)), st.just((1, 2)))
DTYPES = st.sampled_from([np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_, np.float16])
NUM_CLASSES = st.sampled_from([None, -1, 0, 1, 2, 3, 1000, 2.5, True])


def is_count(value, low):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and value >= low


@HYPOTHESIS
@given(value=ANY_VALUE)
def test_property_counts(value):
    kind, _ = outcome(lambda: check_positive_ints(num_samples=value))
    assert (kind == "ok") == is_count(value, 1)
    record("positive", is_count(value, 1), value)
    kind, _ = outcome(lambda: check_non_negative_ints(num_warmup=value))
    assert (kind == "ok") == is_count(value, 0)
    record("non-negative", is_count(value, 0), value)
    kind, rate = outcome(lambda: check_learning_rate(value))
    good = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool) and \
        math.isfinite(float(value)) and float(value) > 0
    assert (kind == "ok") == good and (not good or rate == float(value))
    record("learning rate", good, value)


@HYPOTHESIS
@given(x=hnp.arrays(DTYPES, st.tuples(st.integers(0, 4), st.integers(1, 3))),
       y=hnp.arrays(st.sampled_from([np.int64, np.uint8, np.float64, np.int8, np.bool_]), st.integers(0, 5)),
       num_classes=NUM_CLASSES)
def test_property_dataset(x, y, num_classes):
    kind, d = outcome(lambda: Dataset(x, y, num_classes))
    k_ok = num_classes is None or is_count(num_classes, 2)
    with np.errstate(over="ignore"):
        x_ok = np.isfinite(x.astype(np.float32)).all()  # finite, and within float32's range
        y32 = y.astype(np.float32)
    if num_classes is None:
        y_ok = len(y) == len(x) and np.isfinite(y32).all()
    else:
        yf = y.astype(np.float64)
        y_ok = len(y) == len(x) and bool(np.all(yf == np.round(yf))) and (
            y.size == 0 or (yf.min() >= 0 and yf.max() < num_classes))
    assert (kind == "ok") == (k_ok and x_ok and y_ok), (kind, d)
    record("Dataset", k_ok and x_ok and y_ok, x, y, num_classes)
    if kind == "ok":  # the right numbers: nothing rounded, wrapped or clipped
        np.testing.assert_array_equal(d.x, x.astype(np.float32))
        if num_classes is None:
            np.testing.assert_array_equal(d.y, y32)
        else:
            np.testing.assert_array_equal(d.y.astype(np.float64), y.astype(np.float64))
        assert d.y.dtype == (np.float32 if num_classes is None else np.int32)


@HYPOTHESIS
@given(probs=hnp.arrays(np.float64, st.tuples(st.integers(0, 4), st.integers(1, 4)),
                        elements=st.one_of(st.floats(0, 1), st.floats(-1, 2), st.just(np.nan), st.just(np.inf))),
       normalise=st.booleans(),
       y=st.lists(st.integers(-2, 5), max_size=5))
def test_property_metrics(probs, normalise, y):
    if normalise and probs.size and np.isfinite(probs).all() and (probs >= 0).all() and (probs.sum(-1) > 0).all():
        probs = probs / probs.sum(-1, keepdims=True)
    y = np.array(y, np.int64)
    valid = (probs.ndim == 2 and probs.shape[0] >= 1 and probs.shape[1] >= 2 and np.isfinite(probs).all()
             and (probs >= 0).all() and np.all(np.abs(probs.sum(-1) - 1) <= PROBABILITY_ATOL)
             and len(y) == len(probs) and (y.size == 0 or (y.min() >= 0 and y.max() < probs.shape[1])))
    results = {name: outcome(lambda f=f: f(probs, y)) for name, f in
               [("accuracy", metrics.accuracy), ("ece", metrics.ece), ("brier", metrics.brier),
                ("nll", lambda p, t: metrics.nll(p[None], t))]}
    for name, (kind, value) in results.items():
        assert (kind == "ok") == valid, (name, kind, value)
    record("metrics", valid, probs, y)
    if valid:  # hand-computed reference values
        p_true = probs[np.arange(len(y)), y]
        assert results["accuracy"][1] == pytest.approx(np.mean(probs.argmax(-1) == y))
        assert results["brier"][1] == pytest.approx(np.mean(((probs - np.eye(probs.shape[1])[y]) ** 2).sum(-1)))
        with np.errstate(divide="ignore"):  # no floor: a label of probability 0 gives +inf
            assert results["nll"][1] == pytest.approx(np.mean(-np.log(p_true)))
        assert 0 <= results["ece"][1] <= 1


@HYPOTHESIS
@given(train=st.lists(st.integers(-1, 12), max_size=12), test=st.lists(st.integers(0, 12), max_size=4),
       dtype=st.sampled_from([np.int64, np.uint8, np.float64]))
def test_property_label_inference(train, test, dtype):
    train_arr, test_arr = np.array(train).astype(dtype), np.array(test).astype(dtype)
    kind, result = outcome(lambda: infer_num_classes(train_arr, test_arr))
    original = np.array(train)  # before any cast: -1 as uint8 would read 255
    record("label inference", kind == "ok", train, test, dtype)
    if kind == "ok":
        k, note = result
        assert original.min() >= 0 and k == max(train + test) + 1 and k >= 2 and k <= len(train)
        assert set(range(k)) <= set(train) and f"{k} classes inferred" in note
    else:
        assert isinstance(result, InputError)
        everything = train + test
        assert (not train or original.min() < 0 or max(everything) + 1 < 2 or max(everything) + 1 > len(train)
                or not set(range(max(everything) + 1)) <= set(train) or dtype is np.uint8)


@HYPOTHESIS
@given(features=st.sampled_from([2, 2, 2, 3]), rows=st.sampled_from([3, 3, 0]),
       fill=st.sampled_from([0.5, -2.0, np.nan, np.inf]), dtype=st.sampled_from([np.float32, np.float64, np.int64]),
       num_samples=st.sampled_from([3, 3, 1, 0, -1, 1.5, None, True]), chunk_size=st.sampled_from([2, 2, 0, 2.0]),
       labels=st.sampled_from([[0, 1, 1], [0, 1, 2], [0, -1, 1], [0, 1], [0.0, 1.0, 1.0], [0, 0.5, 1]]))
def test_property_predict_and_score(post, features, rows, fill, dtype, num_samples, chunk_size, labels):
    x = np.full((rows, features), fill if dtype is not np.int64 else 1).astype(dtype)
    x_ok = features == 2 and rows == 3 and np.isfinite(x.astype(np.float64)).all()
    args_ok = is_count(num_samples, 1) and is_count(chunk_size, 1)
    kind, probs = outcome(lambda: post.predict(x, num_samples=num_samples, chunk_size=chunk_size, seed=1))
    assert (kind == "ok") == (x_ok and args_ok), (kind, probs)
    record("predict", x_ok and args_ok, x, num_samples, chunk_size)
    if kind == "ok":
        reference = post.predict(x.astype(np.float32), num_samples=num_samples, chunk_size=2, seed=1)
        np.testing.assert_array_equal(probs, reference)
        assert probs.shape == (num_samples, 3, 2)
        np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    y = np.array(labels)
    y_ok = len(y) == rows and bool(np.all(y == np.round(y))) and y.min() >= 0 and y.max() < 2
    kind, ll = outcome(lambda: post.log_likelihood(x, y, num_samples=num_samples, chunk_size=chunk_size, seed=1))
    assert (kind == "ok") == (x_ok and args_ok and y_ok), (kind, ll)
    record("log_likelihood", x_ok and args_ok and y_ok, x, y, num_samples, chunk_size)
    if kind == "ok":
        p = post.predict(x.astype(np.float32), num_samples=num_samples, chunk_size=2, seed=1)
        np.testing.assert_allclose(ll, np.log(p[:, np.arange(3), y.astype(int)]), rtol=1e-5, atol=1e-6)
    kind, table = outcome(lambda: evals.score(post, (x, y), num_samples=num_samples, seed=1, verbose=False))
    assert (kind == "ok") == (x_ok and is_count(num_samples, 1) and y_ok), (kind, table)
    record("score", x_ok and is_count(num_samples, 1) and y_ok, x, y, num_samples)
    if kind == "ok":
        assert table["draws"].iloc[0] == num_samples and 0 <= table["accuracy"].iloc[0] <= 1


def test_argument_type_errors_are_type_errors_too():
    with pytest.raises(TypeError):
        zoo.get("mlp", hidden=64)
    with pytest.raises(ArgumentTypeError):
        Dataset(np.array([["a"]]), [0], 2)


ISSUE_45_FILES = ("test_bad_inputs_svi.py", "test_bad_inputs_modules.py")
"""Issue 45's cases (the SVI core, Flax NNX / Equinox modules, the collapse check): one test each, in
tests/inference/ and tests/models/."""


def test_counts(capsys, request):
    """How many distinct bad inputs this file tried and how many were handled (raised the package's error
    naming the argument), for the issue's note, and how many of issue 45's tests (`ISSUE_45_FILES`) this session
    collected. Runs last: the hypothesis tests above fill `SEEN`."""
    bad, good = len(SEEN["bad"]), len(SEEN["good"])
    issue45 = [item for item in request.session.items if item.path.name in ISSUE_45_FILES]
    with capsys.disabled():
        print(f"\nbad inputs tried: {len(BAD_INPUTS)} explicit + {bad} distinct hypothesis examples, all handled "
              f"(each test above asserts it); valid hypothesis examples checked for the right numbers: {good}; "
              f"issue 45 (SVI core, modules, collapse check): {len(issue45)} tests collected in {ISSUE_45_FILES}")
    assert len(BAD_INPUTS) >= 80


def test_counts_of_the_files_folders_and_signals_cases(capsys):
    """The cases of tests/zoo/test_bad_inputs_files.py (issue 45: files, folders, signals, the command line),
    counted from its `CASES` dict without importing it (each is asserted there)."""
    import ast
    from pathlib import Path

    source = Path(__file__).resolve().parent / "zoo" / "test_bad_inputs_files.py"
    (cases,) = [node.value for node in ast.parse(source.read_text()).body if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["CASES"]]
    with capsys.disabled():
        print(f"\nfiles, folders, signals and command-line cases: {len(cases.keys)} "
              "(tests/zoo/test_bad_inputs_files.py)")
    assert len(cases.keys) >= 18
