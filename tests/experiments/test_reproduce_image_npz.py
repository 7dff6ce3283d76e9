"""`zoo reproduce k-tied | variance-networks --data PATH`: an .npz of images and labels (the USPS layout) resized to
28 x 28 with the fixed seeded 80 / 20 split; bad files are refused naming --data."""
import numpy as np
import pytest

from base.errors import InputError
from zoo.experiments.reproduce.image_npz import load_image_npz


def _npz(path, n=50, shape=(16, 16), **extra):
    rng = np.random.default_rng(0)
    arrays = {"imgs": rng.integers(0, 256, (n, *shape), dtype=np.uint8), "labs": np.arange(n) % 10, **extra}
    np.savez(path, **arrays)
    return path, arrays


def test_images_are_resized_split_80_20_by_a_seeded_permutation_and_standardised(tmp_path):
    path, raw = _npz(tmp_path / "d.npz")
    xtr, ytr, xte, yte = load_image_npz(path)
    assert xtr.shape == (40, 28, 28, 1) and xte.shape == (10, 28, 28, 1) and xtr.dtype == np.float32
    order = np.random.default_rng(0).permutation(50)
    np.testing.assert_array_equal(ytr, raw["labs"][order[:40]])
    np.testing.assert_array_equal(yte, raw["labs"][order[40:]])
    assert abs(float(xtr.mean())) < 1e-5 and float(xtr.std()) == pytest.approx(1.0, rel=1e-4)
    # corners are kept by the linear resize: pixel (0, 0) of the first test image is the raw one, standardised by
    # the resized training pixels' mean and sd
    from zoo.data.embedded import upsample

    resized = upsample(raw["imgs"][order[:40]].astype(np.float32) / 255, 28)
    first = raw["imgs"][order[40]].astype(np.float32) / 255
    assert xte[0, 0, 0, 0] == pytest.approx((first[0, 0] - resized.mean()) / resized.std(), abs=1e-4)
    again = load_image_npz(path)
    np.testing.assert_array_equal(again[0], xtr)  # the split is fixed
    wide = load_image_npz(_npz(tmp_path / "w.npz", shape=(20, 10))[0])[0]
    assert wide.shape == (40, 28, 28, 1)


def test_bad_files_are_refused_naming_data(tmp_path):
    with pytest.raises(InputError, match="--data"):
        load_image_npz(tmp_path / "missing.npz")
    np.savez(tmp_path / "k.npz", x=np.zeros((3, 4, 4)), labs=np.zeros(3, int))
    with pytest.raises(InputError, match="imgs"):
        load_image_npz(tmp_path / "k.npz")
    np.savez(tmp_path / "s.npz", imgs=np.zeros((3, 16)), labs=np.zeros(3, int))
    with pytest.raises(InputError, match="--data"):
        load_image_npz(tmp_path / "s.npz")


def test_usps_loads_as_4000_training_and_1000_test_images(shared_data):
    xtr, ytr, xte, yte = load_image_npz(shared_data("data", "usps5k.npz"))
    assert xtr.shape == (4000, 28, 28, 1) and xte.shape == (1000, 28, 28, 1)
    assert set(np.unique(ytr)) == set(range(10)) and set(np.unique(yte)) == set(range(10))


def test_data_is_an_option_of_k_tied_and_variance_networks_only(monkeypatch, tmp_path, capsys):
    import zoo.experiments.reproduce.variance_networks as job
    from zoo.cli import main

    calls = []
    monkeypatch.setattr(job, "reproduce_variance_networks", lambda *a, **k: calls.append((a, k)))
    assert main(["reproduce", "variance-networks", "--out", str(tmp_path), "--data", "u.npz"]) == 0
    assert calls == [((str(tmp_path), "quick"), {"data_path": "u.npz"})]
    assert main(["reproduce", "rank1", "--data", "u.npz", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--data" in err and "u.npz" in err and "--seeds, --data-dir, --workers" in err


def test_variance_networks_lenet5_takes_the_28x28_images(tmp_path):
    """`--data` gives the variance-networks job's LeNet-5 the paper's input size: VALID 5x5 convolutions and 2x2
    pools take 28 -> 24 -> 12 -> 8 -> 4, so dense1 has 4 * 4 * 16 inputs (the digits' SAME padding: 2 * 2 * 16)."""
    from dataclasses import replace

    from zoo.experiments.reproduce.variance_networks import QUICK
    from zoo.experiments.reproduce.variance_networks_train import TABLE1, entry

    path, _ = _npz(tmp_path / "d.npz")
    e = entry(replace(QUICK, data_path=str(path)), TABLE1[4])
    assert e.train.feature_shape == (28, 28, 1) and len(e.train.y) == 40 and len(e.test.y) == 10
    assert e.model.site_shapes(e.train.feature_shape)["lenet5/dense1/w"] == (4 * 4 * 16, 128)
