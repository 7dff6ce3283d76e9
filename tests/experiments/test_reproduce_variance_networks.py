"""zoo reproduce variance-networks: one tiny run of the whole job writes its files and every finding.

The smoke run trains three structures (point estimate, binary dropout, dense1 layer-wise: what the curves, sparse
ensembles and attacks need), not nine, with one candidate learning rate: compiles are its cost. The Table 2 finding
then says "not run". The learning-rate choice and batch norm are tested on one structure it shares.
"""
from dataclasses import replace

import numpy as np
import pytest

from base.errors import InputError
from zoo.experiments.reproduce.variance_networks import FULL, QUICK, reproduce_variance_networks

TINY = replace(QUICK, channels=(2, 4), hidden=8, epochs=3, curve_every=1, ensemble_draws=3, attack_draws=2,
               deep_ensemble_size=1, fgsm_iterations=2, fgsm_examples=40, seeds=(0,),
               kappa_thresholds=(-float("inf"), 1.5, 9.0), methods=(), init_log_alpha=-4.0, learning_rates=(1e-2,),
               kappa_activation="relu")  # the kappa run then reuses the layer-wise row's compiled update


@pytest.mark.filterwarnings("ignore::inference.ConvergenceWarning")
def test_tiny_job_writes_every_table_figure_and_finding(tmp_path):
    out = reproduce_variance_networks(tmp_path, "quick", log=None, settings=TINY)
    for name in ("tuning.csv", "fits.csv", "table1.csv", "table2.csv", "transition.csv", "fig5_sparse_ensemble.csv",
                 "fig2_attack.csv", "fig1_fig4_transition.png", "fig3_kappa_histograms.png",
                 "fig5_sparse_ensemble.png", "fig2_attack.png", "report.md"):
        assert (tmp_path / name).exists(), name
    assert out["table1"].method.tolist() == ["point estimate", "binary dropout (dense layers)",
                                             "variance, dense1 (layer-wise alpha)"]
    assert list(out["table2"].parameterisation) == ["layer"]
    assert out["tuning"].learning_rate.tolist() == [1e-2] * 3 and out["tuning"].chosen.all()
    assert out["transition"].epoch.tolist() == [1, 2, 3]  # one fit, recorded after every epoch (on_chunk)
    assert out["transition"].log_alpha.iloc[-1] > TINY.init_log_alpha  # log alpha moved at its own rate
    assert out["table1"].set_index("method").loc["point estimate", "ensemble_acc_mean"] > 0.1
    assert out["sparse"].iloc[0].acc_zero == out["sparse"].iloc[0].acc_full  # threshold 0 edits nothing
    assert out["sparse"].iloc[-1].fraction_below == 1.0
    assert set(out["attack"].iteration) == {0, 1, 2} and out["attack"].model.nunique() == 5
    text = (tmp_path / "report.md").read_text()
    for claim in ("deterministic procedure is at chance", "phase transition happens", "highest ELBO",
                  "kappa crosses", "zeroed without losing", "resist iterative FGSM"):
        assert claim in text
    assert sum(text.count(f"| {v} |") + text.count(f"| {v} (") for v in
               ("consistent", "inconclusive", "contradicts", "not run")) == 6
    assert text.count("| not run |") == 2  # Table 1's all-4-layer row and Table 2's parameterisations: not trained
    # 3 epochs: dense1's log alpha is far from the paper's 6.3, so Fig. 1 and Fig. 5 cannot be judged
    assert text.count("| inconclusive (precondition not met: past the phase transition") == 2
    assert "NO: past the phase transition: dense1 log alpha >= 6.3" in text
    # kappa_0 scaled to the training part (1,348 digits less the 270 of the validation part):
    # 1.5 + log10(1,078 / 60,000) = -0.25, one of Fig. 5's thresholds
    assert "log10 kappa_0 = 1.5 + log10(1078 / 60,000) = -0.25" in text
    assert np.isclose(out["sparse"].log10_threshold, 1.5 + np.log10(1078 / 60_000)).sum() == 1
    assert "Tuned point estimate: test accuracy" in text


@pytest.mark.filterwarnings("ignore::inference.ConvergenceWarning", "ignore::inference.PosteriorCollapseWarning")
def test_learning_rate_is_chosen_on_validation_with_batch_norm_and_the_local_trick():
    """tune_method on the dense1 layer-wise network with batch norm after every hidden layer (ReLU) and the local
    reparameterisation trick: the rate 1e-2 beats 1e-6 (which leaves the network near its start) on the validation
    part; the batch-norm moving averages moved in training and the posterior predicts far above chance."""
    import jax

    from zoo.experiments.reproduce.variance_networks_train import TABLE2, per_example, tune_method

    settings = replace(TINY, learning_rates=(1e-6, 1e-2))
    assert settings.batch_norm and settings.activation == "relu" and per_example(settings, TABLE2["layer"]) == "local"
    choice, (e, post, row, _, _), rows = tune_method(settings, TABLE2["layer"], 0)
    assert choice.setting == {"learning_rate": 1e-2} and choice.table.learning_rate.tolist() == [1e-6, 1e-2]
    assert choice.table.validation.iloc[1] == row["val_ensemble_acc"] > choice.table.validation.iloc[0] + 0.1
    assert [r["chosen"] for r in rows] == [False, True] and len(e.train.y) == 1078  # the training part only
    steps = 3 * (1078 // 100)
    moved = {k: v for k, v in post.state.items() if k.startswith("lenet5/bn_dense1")}
    assert float(moved["lenet5/bn_dense1/~/mean_ema"]["counter"]) == steps  # one update per SVI step
    init = e.model.initial_state(e.train.x[:2])
    assert not np.allclose(np.asarray(moved["lenet5/bn_dense1/~/var_ema"]["average"]),
                           np.asarray(init["lenet5/bn_dense1/~/var_ema"]["average"]))
    assert jax.tree_util.tree_structure(post.state) == jax.tree_util.tree_structure(init)
    assert row["ensemble_acc"] > 0.3 and row["deterministic_acc"] > 0.3  # 10 classes: chance is 0.1


def test_variance_parameters_get_their_own_adam_rate():
    """optimizer_of: log alpha / sigma / scale move by the variance rate in Adam's first step (|update| = rate),
    everything else by the learning rate."""
    import jax.numpy as jnp

    from zoo.experiments.reproduce.variance_networks_train import optimizer_of, variance_param_labels

    params = {"lenet5/dense1/w_auto_log_alpha": jnp.zeros(()), "lenet5/dense1/w_auto_loc": jnp.zeros((2, 3)),
              "lenet5/dense1/w_auto_sigma": jnp.zeros((2, 3)), "lenet5/conv1/w_auto_scale": jnp.zeros(4)}
    assert variance_param_labels(params) == {"lenet5/dense1/w_auto_log_alpha": "variance",
                                             "lenet5/dense1/w_auto_loc": "other",
                                             "lenet5/dense1/w_auto_sigma": "variance",
                                             "lenet5/conv1/w_auto_scale": "variance"}
    opt = optimizer_of(replace(QUICK, learning_rate=0.01, variance_learning_rate=0.1))
    grads = {k: jnp.ones_like(v) for k, v in params.items()}
    updates, _ = opt.update(grads, opt.init(params), params)
    assert float(updates["lenet5/dense1/w_auto_log_alpha"]) == pytest.approx(-0.1, rel=1e-4)
    assert float(updates["lenet5/dense1/w_auto_sigma"][0, 0]) == pytest.approx(-0.1, rel=1e-4)
    assert float(updates["lenet5/dense1/w_auto_loc"][1, 2]) == pytest.approx(-0.01, rel=1e-4)


def test_noise_per_example_by_method():
    """The quick setting's estimator: the local trick on every stochastic row (the all-4-layer rows too: their
    dense layers), never on the point estimate; weight draws per example skip the all-4-layer rows."""
    from zoo.experiments.reproduce.variance_networks_train import TABLE1, TABLE2, per_example

    assert QUICK.estimator == "local"
    assert [per_example(QUICK, m) for m in TABLE1] == ["standard"] + ["local"] * 6
    assert per_example(QUICK, TABLE2["additive"]) == "local"
    weights = replace(QUICK, estimator="per_example", batch_norm=False)
    S, P = "standard", "per_example"
    assert [per_example(weights, m) for m in TABLE1] == [S, P, P, S, P, S, P]
    with pytest.raises(InputError, match="estimator"):  # the vmap over examples has no batch statistics
        per_example(replace(weights, batch_norm=True), TABLE1[4])


def test_kappa_0_scales_with_the_training_set_size():
    """kappa (eq. 16) sums the curvature over the N training examples: the threshold moves by log10(N / 60,000)."""
    from zoo.experiments.reproduce.variance_networks_train import log10_kappa_threshold

    assert log10_kappa_threshold(1.5, 60_000) == pytest.approx(1.5)
    assert log10_kappa_threshold(1.5, 6_000) == pytest.approx(0.5)
    assert log10_kappa_threshold(1.5, 1348) == pytest.approx(-0.1485, abs=1e-4)


def test_table1_tests_the_all_layer_row_only_past_the_transition_and_over_seeds(tmp_path):
    """Table 1's finding tests the paper's Table 1 row (all 4 layers variance layers; the dense1 row is Table 2's, the
    zero-mean row's deterministic net is at chance by construction) and only where its dense1 log alpha reached the
    paper's 6.3 over >= 2 seeds; else "inconclusive (precondition not met: ...)". One network: binomial intervals."""
    import pandas as pd

    from zoo.experiments.reproduce import variance_networks as vn
    from zoo.experiments.reproduce.report import Report

    labels = [m.label for m in vn.TABLE1]
    accs = {labels[0]: (0.98, 0.98), labels[1]: (0.97, 0.975), labels[4]: (0.95, 0.985), labels[5]: (0.11, 0.98),
            labels[6]: (0.10, 0.20)}  # dense1 row accurate, zero-mean ensemble poor: neither may decide anything
    t1 = pd.DataFrame([{"method": m, "seed": seed, "deterministic_acc": d + 0.002 * seed, "ensemble_acc": e,
                        "elbo": -1.0, "log_alpha": 7.0 + seed} for m, (d, e) in accs.items() for seed in (0, 1, 2)])
    i = vn._accuracy_interval(t1[t1.seed == 0], "method", labels[4], "deterministic_acc", 1000)
    assert i.hi == pytest.approx(0.95 + 1.959964 * np.sqrt(0.95 * 0.05 / 1000), abs=1e-6)  # one network: binomial

    def verdict(table):
        report = Report(tmp_path, "t", "quick", log=None)
        vn._table1_finding(report, table, 0.1, 1000)
        return report.findings[0]

    finding = verdict(t1)  # det 0.11-0.114 (<= 0.15), ens - dropout +0.005 in every seed: log alpha 7-9 >= 6.3
    assert finding.verdict == "consistent" and labels[5] in finding.ours and labels[4] not in finding.ours
    assert "zero-mean row" in finding.evidence and "yes: past the phase transition" in finding.precondition
    assert "10.1 (Table 1" in finding.paper
    accurate = t1.assign(deterministic_acc=t1.deterministic_acc.where(t1.method != labels[5], 0.9))
    assert verdict(accurate).verdict == "contradicts"  # past the transition, yet the mean weights still predict
    early = accurate.assign(log_alpha=5.27)  # the same numbers before the transition: not evidence against it
    assert verdict(early).verdict == ("inconclusive (precondition not met: past the phase transition: dense1 log "
                                      "alpha >= 6.3 (the paper's value after it, section 6.1, dense1 of LeNet-5 after "
                                      "the transition) (variance, all 4 layers (layer-wise alpha): dense1 log alpha "
                                      "5.27-5.27))")
    one = verdict(accurate[accurate.seed == 0])  # one seed: a binomial interval ignores seed-to-seed variation
    assert one.verdict.startswith("inconclusive (precondition not met: seed-to-seed variation")


def test_the_validation_part_of_a_users_image_set_is_the_fixed_permutations_slice(shared_data):
    """USPS (5,000 images): the permutation default_rng(0).permutation(5000) gives the test split perm[4000:], the
    validation part perm[3200:4000], the fits perm[:3200]; FULL runs LeNet-5 with batch norm, ReLU in Tables 1-2,
    softplus in the kappa run, at batch 100."""
    from zoo.experiments.reproduce.image_npz import load_image_npz
    from zoo.experiments.reproduce.variance_networks_train import split_validation

    path = shared_data("data", "usps5k.npz")
    with np.load(path) as f:
        labs = f["labs"]
    perm = np.random.default_rng(0).permutation(5000)
    x_train, y_train, x_test, y_test = load_image_npz(path)
    assert x_train.shape == (4000, 28, 28, 1) and np.array_equal(y_test, labs[perm[4000:]])
    from base.data import Dataset

    fit, val = split_validation(Dataset(x_train, y_train, 10), FULL.validation_fraction)
    assert np.array_equal(fit.y, labs[perm[:3200]]) and np.array_equal(val.y, labs[perm[3200:4000]])
    assert (FULL.batch_norm, FULL.activation, FULL.kappa_activation, FULL.batch_size) == (True, "relu", "softplus", 100)
    with pytest.raises(InputError, match="validation_fraction"):
        split_validation(fit, 0.0)


def test_the_command_line_takes_epochs_and_learning_rates_for_variance_networks_only():
    from zoo.cli import REPRODUCE, build_parser, cmd_reproduce

    args = build_parser().parse_args(["reproduce", "variance-networks", "--epochs", "30", "--learning-rates",
                                      "1e-3,1e-2"])
    assert (args.epochs, args.learning_rates) == (30, (1e-3, 1e-2))
    assert {"epochs", "learning_rates"} <= set(REPRODUCE["variance-networks"][2])
    with pytest.raises(InputError, match="--epochs"):
        cmd_reproduce(build_parser().parse_args(["reproduce", "liberty-or-depth", "--epochs", "3"]))
    with pytest.raises(InputError, match="epochs"):
        reproduce_variance_networks("unused", "quick", log=None, epochs=0)


def test_the_point_estimate_is_compared_with_the_best_known_accuracy(tmp_path):
    """MNIST: the paper's 99.4 %; other data: the best mean test accuracy of any arm (no published number)."""
    import pandas as pd

    from zoo.experiments.reproduce import variance_networks as vn
    from zoo.experiments.reproduce.report import Report

    labels = [m.label for m in vn.TABLE1]
    t1 = pd.DataFrame([{"method": labels[0], "seed": s, "stochastic_acc": a, "deterministic_acc": a,
                        "ensemble_acc": a} for s, a in ((0, 0.985), (1, 0.987))]
                      + [{"method": labels[1], "seed": s, "stochastic_acc": 0.95, "deterministic_acc": 0.99,
                          "ensemble_acc": e} for s, e in ((0, 0.996), (1, 0.998))])
    report = Report(tmp_path, "t", "full", log=None)
    vn._point_estimate_note(report, FULL, t1)  # 0.986 vs the paper's 0.994: within 1 point
    assert "0.9860 (mean over seeds) vs 0.9940" in report.notes[-1] and ": within 1 point" in report.notes[-1]
    vn._point_estimate_note(report, QUICK, t1)  # digits: vs dropout's ensemble 0.997: 1.1 points below
    assert "vs 0.9970" in report.notes[-1] and "NOT within" in report.notes[-1] and "ensemble" in report.notes[-1]


def test_a_resumed_job_reads_back_the_rows_an_earlier_run_of_the_same_settings_kept(tmp_path):
    """`resumed_row` on an earlier run's fits.csv / tuning.csv: a kept (chosen) row comes back for a method whose
    rate is chosen; the first seed of an untuned method comes back with every candidate and its choice; a seed the
    cut run never reached, or an untuned method's later seed, is fitted again. `settings_key` tells runs apart."""
    import pandas as pd

    from zoo.experiments.reproduce import variance_networks as vn

    key = vn.settings_key(TINY)
    fits = pd.DataFrame({"method": ["a", "a", "a", "b"], "seed": [0, 0, 1, 1], "learning_rate": [1e-3, 1e-2, 1e-2, 1e-2],
                         "chosen": [False, True, True, True], "deterministic_acc": [0.5, 0.9, 0.8, 0.7],
                         "settings_key": key})
    tuning = pd.DataFrame({"method": ["a", "a"], "learning_rate": [1e-3, 1e-2], "validation": [0.4, 0.8],
                           "chosen": [False, True], "settings_key": key})
    fits.to_csv(tmp_path / "fits.csv", index=False)
    tuning.to_csv(tmp_path / "tuning.csv", index=False)
    earlier_fits = vn._earlier(tmp_path, "fits.csv", key, True)
    earlier_tuning = vn._earlier(tmp_path, "tuning.csv", key, True)
    row, rows, tuned = vn.resumed_row(earlier_fits, earlier_tuning, "a", 0, 0, tuned=False)
    assert row["learning_rate"] == 1e-2 and len(rows) == 2 and list(tuned["validation"]) == [0.4, 0.8]
    row, rows, tuned = vn.resumed_row(earlier_fits, earlier_tuning, "a", 1, 0, tuned=True)
    assert row["deterministic_acc"] == 0.8 and len(rows) == 1 and tuned is None
    assert vn.resumed_row(earlier_fits, earlier_tuning, "a", 2, 0, tuned=True) is None  # never reached
    assert vn.resumed_row(earlier_fits, earlier_tuning, "b", 1, 0, tuned=False) is None  # b's rate not chosen yet
    assert vn._earlier(tmp_path, "fits.csv", vn.settings_key(replace(TINY, epochs=4)), True).empty
    assert vn._earlier(tmp_path, "fits.csv", key, False).empty  # no resume: nothing read
