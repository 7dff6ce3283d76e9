"""TFDS loaders under `tfds.testing.mock_data` (nothing downloads): shapes, dtypes, ranges, splits."""

import numpy as np
import pytest

tfds = pytest.importorskip("tensorflow_datasets")

from zoo.data.tfds_loaders import (  # noqa: E402
    CIFAR10_CORRUPTIONS, DatasetNotPreparedError, default_num_validation, imdb_vocabulary,
    load_tfds, num_classes, tfds_names)

N = 12  # mock examples per TFDS split
IMAGES = {  # name -> (image shape, classes, lowest value of the preprocessing range)
    "mnist": ((28, 28, 1), 10, -1.0),
    "fashion_mnist": ((28, 28, 1), 10, -1.0),
    "cifar10": ((32, 32, 3), 10, 0.0),
    "cifar100": ((32, 32, 3), 100, 0.0),
}


@pytest.fixture
def mock():
    with tfds.testing.mock_data(num_examples=N):
        yield


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_image_loaders(name, mock):
    shape, classes, low = IMAGES[name]
    sizes = {"train": N - 5, "validation": 5, "train+validation": N, "test": N}
    for split, size in sizes.items():
        data = load_tfds(name, split, num_validation=5)
        assert data.x.shape == (size,) + shape and data.x.dtype == np.float32
        assert data.y.shape == (size,) and data.y.dtype == np.int32
        assert data.num_classes == classes == num_classes(name)
        assert 0 <= data.y.min() and data.y.max() < classes
        # uint8 pixels mapped onto [low, 1]: the mock's random pixels reach both ends
        assert low <= data.x.min() < low + 0.1 and 0.9 < data.x.max() <= 1.0
        pixels = (data.x - low) * 255 / (1 - low)  # back to 0..255: whole numbers
        assert np.abs(pixels - np.round(pixels)).max() < 1e-3


def test_validation_rows_are_the_end_of_train(mock):
    full = load_tfds("mnist", "train+validation", num_validation=5)
    train = load_tfds("mnist", "train", num_validation=5)
    val = load_tfds("mnist", "validation", num_validation=5)
    np.testing.assert_array_equal(np.concatenate([train.x, val.x]), full.x)
    np.testing.assert_array_equal(np.concatenate([train.y, val.y]), full.y)


@pytest.mark.parametrize("config", ["gaussian_noise_1", "frosted_glass_blur_5", "saturate_3"])
def test_cifar10_corrupted(config, mock):
    data = load_tfds(f"cifar10_corrupted/{config}", "test")
    assert data.x.shape == (N, 32, 32, 3) and data.x.dtype == np.float32
    assert 0.0 <= data.x.min() and data.x.max() <= 1.0 and data.y.max() < 10
    with pytest.raises(ValueError, match="only a 'test' split"):
        load_tfds(f"cifar10_corrupted/{config}", "train")


def test_cifar10_corrupted_names():
    corrupted = [n for n in tfds_names() if n.startswith("cifar10_corrupted/")]
    assert len(CIFAR10_CORRUPTIONS) == 19 and len(corrupted) == 19 * 5
    assert "cifar10_corrupted/jpeg_compression_5" in corrupted
    for bad in ["cifar10_corrupted/fog_6", "cifar10_corrupted/glass_blur_1", "cifar10_corrupted",
                "svhn"]:
        with pytest.raises(ValueError, match="name"):
            load_tfds(bad, "test")


def test_imdb_tokens(mock):
    vocab = imdb_vocabulary(vocab_size=50, num_validation=4)
    assert sorted(vocab.values()) == list(range(3, 3 + len(vocab))) and len(vocab) <= 47
    for split, size in {"train": N - 4, "validation": 4, "test": N}.items():
        data = load_tfds("imdb_reviews", split, num_validation=4, vocab_size=50, maxlen=6,
                         vocabulary=vocab)
        assert data.x.shape == (size, 6) and data.y.shape == (size,) and data.num_classes == 2
        assert np.all(data.x == np.round(data.x)) and 0 <= data.x.min() and data.x.max() < 50
        assert set(np.unique(data.y)) <= {0, 1}
    # building the vocabulary inside gives the same tokens
    again = load_tfds("imdb_reviews", "test", num_validation=4, vocab_size=50, maxlen=6)
    np.testing.assert_array_equal(again.x, data.x)


def test_imdb_paper_validation_size():
    assert [default_num_validation(n) for n in ("mnist", "cifar100", "imdb_reviews", "cifar10")] \
        == [10_000, 10_000, 5_000, 0]
    with tfds.testing.mock_data(num_examples=5_003):
        val = load_tfds("imdb_reviews", "validation", vocab_size=100, maxlen=3)
    assert len(val) == 5_000 and val.x.shape == (5_000, 3)


def test_bad_split_arguments(mock):
    with pytest.raises(ValueError, match="split"):
        load_tfds("mnist", "valid")
    with pytest.raises(ValueError, match="num_validation"):
        load_tfds("mnist", "train", num_validation=N)
    with pytest.raises(ValueError, match="no validation split"):
        load_tfds("cifar10", "validation")


@pytest.mark.parametrize("name", ["mnist", "imdb_reviews", "cifar10_corrupted/fog_2"])
def test_unprepared_data_set_says_how_to_prepare(name, tmp_path):
    split = "test" if "corrupted" in name else "train"
    with pytest.raises(DatasetNotPreparedError) as err:
        load_tfds(name, split, data_dir=str(tmp_path))
    message = str(err.value)
    assert f"'{name}'" in message and str(tmp_path) in message
    assert f"tfds build {name} --file_format=array_record" in message and "data_dir" in message
    assert isinstance(err.value, FileNotFoundError)


def test_without_tensorflow_datasets_the_error_names_the_extra(monkeypatch):
    """No tensorflow-datasets installed: a `MissingDependencyError` (a ZooError and an ImportError) that says
    which extra installs it, not a bare ImportError."""
    import sys

    from base.errors import MissingDependencyError, ZooError
    from zoo.data import tfds_loaders

    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # `import tensorflow_datasets` now fails
    with pytest.raises(MissingDependencyError, match=r"pip install 'bnn-zoo\[tfds\]'") as info:
        tfds_loaders._source("mnist", "train", None)
    assert isinstance(info.value, ImportError) and isinstance(info.value, ZooError)
    assert info.value.exit_status == 1
