"""The catalogue's entries (registered on import of `zoo`)."""

from __future__ import annotations

from models import likelihoods, priors
from models.bridge import bnn
from models.networks.budget_mlp import widest_mlp_under_budget
from models.networks.layers import on_flat_images
from models.networks.lenet5 import lenet5
from models.networks.lenet_cnn import lenet_cnn
from models.networks.lstm import lstm_classifier
from models.networks.mlp import deep_linear, mlp
from models.networks.resnet import resnet18
from models.networks.vgg import vgg
from models.networks.wide_resnet import wide_resnet
from models.rank1 import rank1_likelihood, rank1_mlp, rank1_prior
from zoo.registry import register


def _likelihood(train, noise=0.1):
    return likelihoods.categorical() if train.num_classes is not None else likelihoods.normal(noise)


def _num_outputs(train):
    """Output width of a network on `train`: its classes, or the width of its regression targets."""
    return train.num_classes if train.num_classes is not None else (1 if train.y.ndim == 1 else train.y.shape[1])


@register("mlp", default_data="digits", description="multilayer perceptron (widths, activation as arguments)",
          guides=("mean_field", "point_estimate", "k_tied", "zero_mean", "variance_layers"))
def build_mlp(train, hidden=(64, 64), activation="relu", prior_scale=1.0, prior="normal", noise=0.1,
              log_uniform_sites=()):
    """An MLP BNN: ``hidden`` widths, ``activation``, Normal(0, prior_scale) (or "he_normal"/"cauchy") priors;
    sites matching a pattern of `log_uniform_sites` get the improper log-uniform prior of variance networks."""
    base = _prior(prior, prior_scale)
    if log_uniform_sites:
        base = priors.by_pattern({p: priors.log_uniform() for p in log_uniform_sites}, default=base)
    return bnn(mlp(tuple(hidden), _num_outputs(train), activation), base, _likelihood(train, noise), name="mlp")


@register("deep_linear", default_data="digits", guides=("mean_field", "point_estimate"),
          description="deep linear network x W1...WL, product matrix exposed (Liberty or Depth)")
def build_deep_linear(train, depth=3, width=32, prior_scale=1.0, prior="normal", noise=0.1):
    """A deep linear BNN of `depth` bias-free linear layers of `width` units."""
    return bnn(deep_linear(depth, width, _num_outputs(train)), _prior(prior, prior_scale),
               _likelihood(train, noise), name="deep_linear")


def _prior(kind, scale):
    if kind == "normal":
        return priors.normal(scale)
    if kind == "he_normal":
        return priors.he_normal()
    if kind == "fan_in":
        return priors.fan_in_normal(scale)
    if kind == "cauchy":
        return priors.cauchy(scale)
    raise ValueError(f"prior: expected 'normal', 'fan_in', 'he_normal' or 'cauchy', got {kind!r}")


@register("moons_mlp", default_data="two_moons", guides=("mean_field", "point_estimate"),
          description="ReLU MLP of a given depth, widest under a weight budget (Liberty or Depth, app. B)")
def build_moons_mlp(train, depth=2, budget=1000, activation="relu", prior_scale=1.0, prior="normal"):
    """Depth `depth` hidden layers of the largest equal width keeping all parameters under `budget`."""
    (in_dim,), num_outputs = train.feature_shape, _num_outputs(train)
    width = widest_mlp_under_budget(depth, in_dim=in_dim, num_outputs=num_outputs, budget=budget)
    return bnn(mlp((width,) * depth, num_outputs, activation), _prior(prior, prior_scale), _likelihood(train, None),
               name="moons_mlp")


def _image_network(factory, train, **kwargs):
    """An image network on `train`: flat rows with an image_shape (digits) are reshaped first, and
    small images (< 16 px) use SAME padding."""
    if train.image_shape is not None and len(train.feature_shape) == 1:
        return on_flat_images(factory(**kwargs), train.image_shape)
    return factory(**kwargs)


def _image_bnn(factory, name, train, prior, prior_scale, kwargs):
    """A BNN of the image network `factory(num_outputs=..., **kwargs)` on `train` with a plain prior."""
    net = _image_network(factory, train, num_outputs=_num_outputs(train), **kwargs)
    return bnn(net, _prior(prior, prior_scale), _likelihood(train, None), name=name)


def _small_image_kwargs(train, kwargs):
    side = (train.image_shape or train.feature_shape)[0]
    return {"padding": "SAME", **kwargs} if side < 16 else kwargs


@register("lenet5", default_data="mnist", guides=("mean_field", "point_estimate", "zero_mean", "variance_layers"),
          description="Caffe LeNet-5 (variance networks, MNIST); digits use SAME padding")
def build_lenet5(train, prior_scale=1.0, prior="normal", **kwargs):
    """LeNet-5: conv 20 5x5, pool, conv 50 5x5, pool, dense 500, dense classes."""
    return _image_bnn(lenet5, "lenet5", train, prior, prior_scale, _small_image_kwargs(train, kwargs))


@register("lenet_cnn", default_data="cifar100", guides=("mean_field", "point_estimate", "k_tied"),
          description="k-tied paper's LeNet CNN: conv 32, conv 64 (3x3), dense 512, dense classes")
def build_lenet_cnn(train, prior_scale=1.0, prior="normal", **kwargs):
    """The k-tied paper's CNN (k-tied on its dense layers)."""
    return _image_bnn(lenet_cnn, "lenet_cnn", train, prior, prior_scale, kwargs)


@register("vgg", default_data="cifar10", guides=("mean_field", "point_estimate", "zero_mean", "variance_layers"),
          description="VGG-like CIFAR network (variance networks); width_multiplier shrinks it")
def build_vgg(train, prior_scale=1.0, prior="normal", **kwargs):
    """VGG-like network with batch norm (state, not random variables)."""
    return _image_bnn(vgg, "vgg", train, prior, prior_scale, kwargs)


@register("resnet18", default_data="cifar10", guides=("mean_field", "point_estimate", "k_tied"),
          description="ResNet-18 with a CIFAR stem; width_multiplier shrinks it")
def build_resnet18(train, prior_scale=1.0, prior="normal", **kwargs):
    """ResNet-18 (batch norm as state)."""
    return _image_bnn(resnet18, "resnet18", train, prior, prior_scale, kwargs)


@register("wide_resnet", default_data="cifar10", guides=("mean_field", "point_estimate", "rank1_mixture"),
          description="Wide ResNet depth-k (rank-1 paper: WRN-28-10; default 28-2); num_components=K: rank-1")
def build_wide_resnet(train, prior_scale=1.0, prior="normal", num_components=None, factor="normal", **kwargs):
    """Wide ResNet (batch norm as state); with `num_components` K its convolutions are rank-1 layers."""
    net = _image_network(wide_resnet, train, num_outputs=_num_outputs(train), num_components=num_components, **kwargs)
    return bnn(net, *_prior_and_likelihood(train, prior, prior_scale, num_components, factor), name="wide_resnet")


@register("lstm", default_data="imdb_reviews", guides=("mean_field", "point_estimate", "k_tied", "rank1_mixture"),
          description="IMDB LSTM classifier: embedding 128, LSTM 128, dense (k-tied paper); num_components=K: rank-1")
def build_lstm(train, vocab_size=20_000, prior_scale=1.0, prior="normal", num_components=None, factor="normal",
               **kwargs):
    """The k-tied paper's LSTM with a categorical output over the classes (2 logits for IMDB); with
    `num_components` K its kernel and recurrent kernel are rank-1 (the rank-1 paper's LSTM)."""
    net = lstm_classifier(vocab_size=vocab_size, num_outputs=_num_outputs(train), num_components=num_components,
                          **kwargs)
    return bnn(net, *_prior_and_likelihood(train, prior, prior_scale, num_components, factor), name="lstm")


def _prior_and_likelihood(train, prior, prior_scale, num_components, factor):
    """(prior, likelihood): plain, or the rank-1 ones (factor prior, per-component likelihood) for K components."""
    if num_components is None:
        return _prior(prior, prior_scale), _likelihood(train, None)
    return rank1_prior(factor), rank1_likelihood(_likelihood(train, None), num_components)


@register("rank1_mlp", default_data="digits", guides=("rank1_mixture",),
          description="rank-1 MLP: shared W with K per-component factors r, s (rank-1 BNN paper)")
def build_rank1_mlp(train, hidden=(64, 64), num_components=4, activation="relu", factor="normal",
                    objective="average", sign_init=0.5, fixed=None):
    """((x o s_k) W) o r_k per layer, K components; Normal/Cauchy(1, 0.1) factor priors, Normal(0, 1) on W
    (L2); `objective` "average" (per-component likelihood, the paper's default) or "mixture".
    `fixed`: {site: array} holding W and biases constant (e.g. an SVI posterior's ``median()``), so that
    only the factors r, s are random: NUTS on the rank-1 model (rank-1 paper, future work)."""
    net = rank1_mlp(tuple(hidden), _num_outputs(train), num_components, activation, sign_init, fixed=fixed)
    return bnn(net, rank1_prior(factor), rank1_likelihood(_likelihood(train, None), num_components, objective),
               name="rank1_mlp")
