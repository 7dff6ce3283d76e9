"""The catalogue's entries (registered on import of `zoo`).

Every entry takes ``prior`` (a kind of `models.priors.KINDS`: "normal", "fan_in", "he_normal", "cauchy", or
{site pattern: kind}) and ``prior_scale`` (a positive number, or {site pattern: number}; what it means per
kind: `models.priors`), built by one function, `_model`. A site no pattern matches takes `DEFAULT_PRIOR` /
`DEFAULT_PRIOR_SCALE`, the defaults of every entry: changing them here changes every entry. Entries with
priors of their own on some sites (rank-1 factors ``*/alpha``, ``*/gamma``; the mlp's `log_uniform_sites`)
apply ``prior`` and ``prior_scale`` to the other sites; a pattern that picks no site is refused.
"""

from __future__ import annotations

import fnmatch

from models import likelihoods, priors
from models.bridge import bnn
from models.networks.budget_mlp import widest_mlp_under_budget
from models.networks.layers import on_flat_images
from models.networks.lenet5 import lenet5
from models.networks.lenet_cnn import lenet_cnn
from models.networks.lstm import lstm_classifier
from models.networks.mlp import activation_fn, deep_linear, mlp
from models.networks.resnet import resnet18
from models.networks.vgg import vgg
from models.networks.wide_resnet import wide_resnet
from base.errors import ArgumentTypeError, InputError
from models.rank1 import rank1_likelihood, rank1_mlp, rank1_prior
from zoo.registry import register

DEFAULT_PRIOR = "normal"
"""The prior kind of every entry unless ``prior`` says otherwise (see `models.priors.KINDS`)."""
DEFAULT_PRIOR_SCALE = 1.0
"""The prior scale of every entry unless ``prior_scale`` says otherwise (its meaning: `models.priors`)."""


def _likelihood(train, noise=0.1, noise_prior_scale=1.0):
    """Categorical for classification; for regression Normal(output, noise), the noise learned (a latent site
    with a HalfNormal(noise_prior_scale) prior, `models.likelihoods.Normal`) when `noise` is None."""
    if train.num_classes is not None:
        return likelihoods.categorical()
    return likelihoods.normal(noise, noise_prior_scale)


def _num_outputs(train):
    """Output width of a network on `train`: its classes, or the width of its regression targets."""
    return train.num_classes if train.num_classes is not None else (1 if train.y.ndim == 1 else train.y.shape[1])


def _model(net, train, name, prior, prior_scale, likelihood=None, special=None):
    """The BNN of the Haiku network function `net` on `train` with the entry's prior.

    prior, prior_scale: the entry's arguments (`models.priors.per_site`; sites no pattern matches take
    `DEFAULT_PRIOR` / `DEFAULT_PRIOR_SCALE`). special: None, or ``base prior -> prior`` for an entry with
    priors of its own on some sites (rank-1 factors, log-uniform sites), routing the other sites to the base
    (a `models.priors.by_pattern` with the base as default). likelihood: default categorical for
    classification, Normal(0.1) for regression. A `prior` / `prior_scale` pattern that is the first match of
    no site the base prior sets is refused (InputError), which needs the site names: one shape trace
    (`jax.eval_shape`, no compile), only when a dict is given.
    """
    base = priors.per_site(prior, prior_scale, default_kind=DEFAULT_PRIOR, default_scale=DEFAULT_PRIOR_SCALE)
    full = special(base) if special is not None else base
    model = bnn(net, full, _likelihood(train, None) if likelihood is None else likelihood, name=name)
    if hasattr(base, "unmatched"):
        latent = model.likelihood.latent_sites()
        priors.check_patterns(base, [n for n in model.site_shapes(train.feature_shape)
                                     if n not in latent and priors.reaches(full, base, n)])
    return model


@register("mlp", default_data="digits", description="multilayer perceptron (widths, activation as arguments)")
def build_mlp(train, hidden=(64, 64), activation="relu", prior_scale=DEFAULT_PRIOR_SCALE, prior=DEFAULT_PRIOR,
              noise=0.1, log_uniform_sites=(), noise_prior_scale=1.0):
    """An MLP BNN: ``hidden`` widths, ``activation``, the `prior` of kind ``prior`` at ``prior_scale``;
    sites matching a pattern of `log_uniform_sites` get the improper log-uniform prior of variance networks
    (`prior` and `prior_scale` then set the other sites). Regression: Normal noise ``noise``, or with
    ``noise=None`` a learned noise sd (site ``likelihood/noise``) under a HalfNormal(``noise_prior_scale``)
    prior."""
    model = _model(mlp(tuple(hidden), _num_outputs(train), activation), train, "mlp", prior, prior_scale,
                   _likelihood(train, noise, noise_prior_scale), _log_uniform_on(log_uniform_sites))
    return _check_site_patterns(model, train, "log_uniform_sites", log_uniform_sites)


def _log_uniform_on(log_uniform_sites):
    """None, or the `special` of `_model` giving the sites matching `log_uniform_sites` the log-uniform prior.
    Refuses (ArgumentTypeError) anything but a list or tuple of non-empty strings (a single string would be
    read letter by letter)."""
    if isinstance(log_uniform_sites, str) or not isinstance(log_uniform_sites, (list, tuple)) or \
            not all(isinstance(p, str) and p for p in log_uniform_sites):
        raise ArgumentTypeError("log_uniform_sites", log_uniform_sites,
                                "a list of site name patterns, e.g. ['mlp/~/linear_0/w']")
    if not log_uniform_sites:
        return None
    return lambda base: priors.by_pattern({p: priors.log_uniform() for p in log_uniform_sites}, default=base)


def _check_site_patterns(model, train, argument: str, patterns):
    """`model`, once every shell-style pattern of `patterns` matches one of its latent sites at least; raises
    InputError naming `argument`, the patterns that match nothing and the sites there are."""
    names = list(model.site_shapes(train.feature_shape)) if patterns else []
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if unmatched:
        raise InputError(argument, unmatched, "site name patterns each matching a latent site",
                         f"the sites are {names[:8]}{' ...' if len(names) > 8 else ''}")
    return model


@register("deep_linear", default_data="digits",
          description="deep linear network x W1...WL, product matrix exposed (Liberty or Depth)")
def build_deep_linear(train, depth=3, width=32, prior_scale=DEFAULT_PRIOR_SCALE, prior=DEFAULT_PRIOR, noise=0.1):
    """A deep linear BNN of `depth` bias-free linear layers of `width` units."""
    return _model(deep_linear(depth, width, _num_outputs(train)), train, "deep_linear", prior, prior_scale,
                  _likelihood(train, noise))


@register("moons_mlp", default_data="two_moons",
          description="ReLU MLP of a given depth, widest under a weight budget (Liberty or Depth, app. B)")
def build_moons_mlp(train, depth=2, budget=1000, activation="relu", prior_scale=DEFAULT_PRIOR_SCALE,
                    prior=DEFAULT_PRIOR):
    """Depth `depth` hidden layers of the largest equal width keeping all parameters under `budget`."""
    (in_dim,), num_outputs = train.feature_shape, _num_outputs(train)
    width = widest_mlp_under_budget(depth, in_dim=in_dim, num_outputs=num_outputs, budget=budget)
    return _model(mlp((width,) * depth, num_outputs, activation), train, "moons_mlp", prior, prior_scale)


def _image_network(factory, train, **kwargs):
    """An image network on `train`: flat rows with an image_shape (digits) are reshaped first, and
    small images (< 16 px) use SAME padding."""
    if train.image_shape is not None and len(train.feature_shape) == 1:
        return on_flat_images(factory(**kwargs), train.image_shape)
    return factory(**kwargs)


def _image_bnn(factory, name, train, prior, prior_scale, kwargs):
    """A BNN of the image network `factory(num_outputs=..., **kwargs)` on `train`."""
    net = _image_network(factory, train, num_outputs=_num_outputs(train), **kwargs)
    return _model(net, train, name, prior, prior_scale)


def _small_image_kwargs(train, kwargs):
    side = (train.image_shape or train.feature_shape)[0]
    return {"padding": "SAME", **kwargs} if side < 16 else kwargs


@register("lenet5", default_data="mnist",
          description="Caffe LeNet-5 (variance networks, MNIST); digits use SAME padding")
def build_lenet5(train, prior_scale=DEFAULT_PRIOR_SCALE, prior=DEFAULT_PRIOR, activation="relu", log_uniform_sites=(),
                 **kwargs):
    """LeNet-5: conv 20 5x5, pool, conv 50 5x5, pool, dense 500, dense classes; ``activation`` by name
    (`models.networks.mlp.ACTIVATIONS`), `log_uniform_sites` as for the mlp."""
    net = _image_network(lenet5, train, num_outputs=_num_outputs(train), activation=activation_fn(activation),
                         **_small_image_kwargs(train, kwargs))
    model = _model(net, train, "lenet5", prior, prior_scale, special=_log_uniform_on(log_uniform_sites))
    return _check_site_patterns(model, train, "log_uniform_sites", log_uniform_sites)


@register("lenet_cnn", default_data="cifar100",
          description="k-tied paper's LeNet CNN: conv 32, conv 64 (3x3), dense 512, dense classes")
def build_lenet_cnn(train, prior_scale=DEFAULT_PRIOR_SCALE, prior=DEFAULT_PRIOR, **kwargs):
    """The k-tied paper's CNN (k-tied on its dense layers)."""
    return _image_bnn(lenet_cnn, "lenet_cnn", train, prior, prior_scale, kwargs)


@register("vgg", default_data="cifar10",
          description="VGG-like CIFAR network (variance networks); width_multiplier shrinks it")
def build_vgg(train, prior_scale=DEFAULT_PRIOR_SCALE, prior=DEFAULT_PRIOR, **kwargs):
    """VGG-like network with batch norm (state, not random variables; its scale / offset sites have fan_in 1)."""
    return _image_bnn(vgg, "vgg", train, prior, prior_scale, kwargs)


@register("resnet18", default_data="cifar10",
          description="ResNet-18 with a CIFAR stem; width_multiplier shrinks it")
def build_resnet18(train, prior_scale=DEFAULT_PRIOR_SCALE, prior=DEFAULT_PRIOR, **kwargs):
    """ResNet-18 (batch norm as state)."""
    return _image_bnn(resnet18, "resnet18", train, prior, prior_scale, kwargs)


@register("wide_resnet", default_data="cifar10",
          description="Wide ResNet depth-k (rank-1 paper: WRN-28-10; default 28-2); num_components=K: rank-1")
def build_wide_resnet(train, prior_scale=DEFAULT_PRIOR_SCALE, prior=DEFAULT_PRIOR, num_components=None,
                      factor="normal", **kwargs):
    """Wide ResNet (batch norm as state); with `num_components` K its convolutions are rank-1 layers
    (factor prior on ``*/alpha``, ``*/gamma``; `prior` on the rest)."""
    net = _image_network(wide_resnet, train, num_outputs=_num_outputs(train), num_components=num_components, **kwargs)
    return _maybe_rank1(net, train, "wide_resnet", prior, prior_scale, num_components, factor)


@register("lstm", default_data="imdb_reviews",
          description="IMDB LSTM classifier: embedding 128, LSTM 128, dense (k-tied paper); num_components=K: rank-1")
def build_lstm(train, vocab_size=20_000, prior_scale=DEFAULT_PRIOR_SCALE, prior=DEFAULT_PRIOR, num_components=None,
               factor="normal", **kwargs):
    """The k-tied paper's LSTM with a categorical output over the classes (2 logits for IMDB); with
    `num_components` K its kernel and recurrent kernel are rank-1 (the rank-1 paper's LSTM). Under "fan_in"
    the embedding table (vocab, 128) has fan_in 1 (each unit reads one entry of one row), the kernel (128, 4H)
    fan_in 128, the recurrent kernel (H, 4H) fan_in H (`models.priors.fan_in`)."""
    net = lstm_classifier(vocab_size=vocab_size, num_outputs=_num_outputs(train), num_components=num_components,
                          **kwargs)
    return _maybe_rank1(net, train, "lstm", prior, prior_scale, num_components, factor)


def _maybe_rank1(net, train, name, prior, prior_scale, num_components, factor):
    """`_model` of `net`: plain, or for K = `num_components` components with the rank-1 factor prior and the
    per-component likelihood (`prior` / `prior_scale` set the sites other than the factors)."""
    if num_components is None:
        return _model(net, train, name, prior, prior_scale)
    return _model(net, train, name, prior, prior_scale, rank1_likelihood(_likelihood(train, None), num_components),
                  lambda base: rank1_prior(factor, weight_prior=base))


@register("rank1_mlp", default_data="digits",
          description="rank-1 MLP: shared W with K per-component factors r, s (rank-1 BNN paper)")
def build_rank1_mlp(train, hidden=(64, 64), num_components=4, activation="relu", factor="normal",
                    objective="average", sign_init=0.5, fixed=None, prior_scale=DEFAULT_PRIOR_SCALE,
                    prior=DEFAULT_PRIOR):
    """((x o s_k) W) o r_k per layer, K components; Normal/Cauchy(1, 0.1) factor priors, the `prior` of kind
    ``prior`` at ``prior_scale`` on W and the biases (default Normal(0, 1), i.e. L2); `objective` "average"
    (per-component likelihood, the paper's default) or "mixture".
    `fixed`: {site: array} holding W and biases constant (e.g. an SVI posterior's ``median()``), so that
    only the factors r, s are random: NUTS on the rank-1 model (rank-1 paper, future work)."""
    net = rank1_mlp(tuple(hidden), _num_outputs(train), num_components, activation, sign_init, fixed=fixed)
    return _model(net, train, "rank1_mlp", prior, prior_scale,
                  rank1_likelihood(_likelihood(train, None), num_components, objective),
                  lambda base: rank1_prior(factor, weight_prior=base))
