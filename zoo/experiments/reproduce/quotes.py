"""The four papers' numbers that the reproductions compare with, each quoted from the paper's text.

A `Quote` is a passage of a paper as printed (a table row or a phrase, whitespace collapsed) and the value taken
from it, with its table / figure and section. ``tests/experiments/test_quotes.py`` checks every quote against the
papers' texts (the project's shared ``papers/<paper>.txt``): the passage occurs in the text and the value occurs in
the passage, so a misquote (rank-1 Table 8's cNLL, a setting the paper never states) fails a test instead of
reaching a report. The texts carry no page breaks, so a quote names its table or figure and section, not a page.

The jobs build their "paper" column from `QUOTES` (`quoted`); a number derived from quotes (a difference, a ratio)
names the quotes it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from base.errors import InputError

__all__ = ["Quote", "QUOTES", "quoted", "normalised", "found"]


@dataclass(frozen=True)
class Quote:
    """paper: the text's name ("variance-networks", "rank1-bnn", "k-tied-normal", "liberty-or-depth_paper");
    source: table / figure and section ("Table 2 (section 4.1), CIFAR-10 WRN-28-10"); passage: the paper's words
    or table row as printed (whitespace collapsed); value: the number (or words) taken from the passage."""

    paper: str
    source: str
    passage: str
    value: str

    def text(self) -> str:
        """``"0.80 (Table 8, appendix C.2)"``: the value and where it is printed."""
        return f"{self.value} ({self.source})"


def normalised(text: str) -> str:
    """``text`` with every run of whitespace (tabs of the tables, line breaks) made one space."""
    return " ".join(text.split())


def found(quote: Quote, paper_text: str) -> bool:
    """Whether ``quote`` is in ``paper_text``: its passage occurs (whitespace collapsed) and its value occurs in
    the passage."""
    passage = normalised(quote.passage)
    return quote.value in passage and passage in normalised(paper_text)


_VN, _R1, _KT, _LOD = "variance-networks", "rank1-bnn", "k-tied-normal", "liberty-or-depth_paper"
_R1_T2 = "Table 2 (section 4.1), CIFAR-10 WRN-28-10, 10 seeds"
_R1_T8 = "Table 8 (appendix C.2), CIFAR-10 WRN-28-10, rank-1 Gaussian"
_KT_T2 = "Table 2 (section 2.3), MNIST MLP, post-training rank-k truncation"
_KT_F6 = "Fig. 6 left (section 3.2), MNIST MLP"

QUOTES: dict[str, Quote] = {
    # Variance networks (Neklyudov et al., 2018)
    "vn.table1.dropout_ens": Quote(_VN, "Table 1 (section 6.1), LeNet-5 on MNIST, dropout ensemble",
                                   "LeNet5 MNIST Dropout 99.1 99.4 99.4", "99.4"),
    "vn.table1.det": Quote(_VN, "Table 1 (section 6.1), LeNet-5 on MNIST, variance network (all 4 layers), "
                                "deterministic", "Variance 95.9 10.1 99.3", "10.1"),
    "vn.table1.ens": Quote(_VN, "Table 1 (section 6.1), LeNet-5 on MNIST, variance network, ensemble",
                           "Variance 95.9 10.1 99.3", "99.3"),
    "vn.table1.all_layers": Quote(_VN, "section 6.1", "In the variance LeNet-5 all 4 layers are variance layers",
                                  "all 4 layers"),
    "vn.table2.det": Quote(_VN, "Table 2 (section 6.2), dense1 variance layer: layer, neuron, weight, additive",
                           "Det. accuracy 11.3 11.3 81.3 96.3", "11.3 11.3 81.3 96.3"),
    "vn.table2.ens": Quote(_VN, "Table 2 (section 6.2)", "Ens. accuracy 99.2 99.2 99.2 99.2", "99.2"),
    "vn.table2.elbo": Quote(_VN, "Table 2 (section 6.2), ELBO: layer, neuron, weight, additive",
                            r"ELBO $-5.9 \cdot 10^2$ $-7.7 \cdot 10^2$ $-6.4 \cdot 10^4$ $-2.3 \cdot 10^4$",
                            r"$-5.9 \cdot 10^2$"),
    "vn.log_alpha": Quote(_VN, "section 6.1, dense1 of LeNet-5 after the transition",
                          r"For the first dense layer in LeNet-5 the value of $\log \alpha$ reached 6.3", "6.3"),
    "vn.fig5.zeroed": Quote(_VN, "Fig. 5 (section 6.4)", "we can zero out about 98% of the weights of the variance "
                            "layer with no accuracy degradation", "98%"),
    "vn.kappa_0": Quote(_VN, "Fig. 3 caption (section 6.4)", r"The threshold value $\log_{10} \kappa_0 = 1.5$",
                        "1.5"),
    "vn.fig2": Quote(_VN, "Fig. 2 caption (section 6.3), VGG-like on CIFAR-10",
                     "Deep ensemble of variance networks has a lower successful attacks rate while the entropy of "
                     "predictive distribution is significantly higher", "lower successful attacks rate"),
    # Rank-1 BNNs (Dusenberry et al., 2020)
    "r1.table2.det_nll": Quote(_R1, _R1_T2, "Deterministic 0.159 96.0 0.023 1.05 / 76.1 / 0.153", "0.159"),
    "r1.table2.det_cnll": Quote(_R1, _R1_T2, "Deterministic 0.159 96.0 0.023 1.05 / 76.1 / 0.153", "1.05"),
    "r1.table2.be_nll": Quote(_R1, _R1_T2, "BatchEnsemble 0.143 96.2 0.020 1.02 / 77.5 / 0.129", "0.143"),
    "r1.table2.be_cnll": Quote(_R1, _R1_T2, "BatchEnsemble 0.143 96.2 0.020 1.02 / 77.5 / 0.129", "1.02"),
    "r1.table2.gauss_nll": Quote(_R1, _R1_T2, "Rank-1 BNN Gaussian 0.128 96.3 0.008 0.84 / 76.7 / 0.080", "0.128"),
    "r1.table2.gauss_cnll": Quote(_R1, _R1_T2, "Rank-1 BNN Gaussian 0.128 96.3 0.008 0.84 / 76.7 / 0.080", "0.84"),
    "r1.table2.cauchy_nll": Quote(_R1, _R1_T2, "Cauchy 0.120 96.5 0.009 0.74 / 80.5 / 0.090", "0.120"),
    "r1.table2.cauchy_cnll": Quote(_R1, _R1_T2, "Cauchy 0.120 96.5 0.009 0.74 / 80.5 / 0.090", "0.74"),
    "r1.table8.cnll_1": Quote(_R1, _R1_T8 + ", 1 sample", "1 sample 0.128 96.3 0.008 0.84 / 76.7 / 0.080", "0.84"),
    "r1.table8.cnll_4": Quote(_R1, _R1_T8 + ", 4 samples", "4 samples 0.126 96.3 0.008 0.80 / 77.3 / 0.074", "0.80"),
    "r1.table8.cnll_25": Quote(_R1, _R1_T8 + ", 25 samples", "25 samples 0.125 96.3 0.007 0.77 / 77.8 / 0.070",
                               "0.77"),
    "r1.fig3": Quote(_R1, "Fig. 3 (section 3.3), CIFAR-10, five runs",
                     "from 1 to 8, the performance across all metrics increases. At $K = 16$, however, there is a "
                     "decline in performance", "from 1 to 8"),
    # k-tied Normal (Swiatkowski et al., 2020)
    "kt.table2.mf_nll": Quote(_KT, _KT_T2 + ", mean field", "Mean-field 0.431 ± 0.0057 0.100 ± 0.0034 97.6 ± 0.15",
                              "0.100"),
    "kt.table2.rank1_nll": Quote(_KT, _KT_T2 + ", rank 1", "1-tied 3.41 ± 0.019 0.677 ± 0.0040 93.6 ± 0.25",
                                 "0.677"),
    "kt.table2.rank2_nll": Quote(_KT, _KT_T2 + ", rank 2", "2-tied 0.456 ± 0.0059 0.107 ± 0.0033 97.6 ± 0.15",
                                 "0.107"),
    "kt.table2.cnn_mf_nll": Quote(_KT, "Table 2 (section 2.3), CIFAR-100 CNN, mean field",
                                  "97.6 ± 0.15 3.83 ± 0.020 2.23 ± 0.017 42.1 ± 0.49", "2.23"),
    "kt.table2.cnn_rank1_nll": Quote(_KT, "Table 2 (section 2.3), CIFAR-100 CNN, rank 1",
                                     "93.6 ± 0.25 4.33 ± 0.021 2.30 ± 0.016 41.7 ± 0.49", "2.30"),
    "kt.annealing": Quote(_KT, "appendix D.4", "we do not perform the annealing in the Signal-to-Noise ratio (SNR) "
                          "and negative ELBO convergence speed experiments", "do not perform the annealing"),
    "kt.colab": Quote(_KT, "Table 4 caption", "across a single training run in the Google Colab environment",
                      "Google Colab"),
    "kt.fig6.mf_acc": Quote(_KT, _KT_F6 + ", mean field",
                            "MNIST, MLP Mean-field 0.501 ± 0.0061 0.133 ± 0.0040 96.8 ± 0.18", "96.8"),
    "kt.fig6.2tied_acc": Quote(_KT, _KT_F6 + ", 2-tied", "MNIST, MLP 2-tied 0.520 ± 0.0063 0.129 ± 0.0039 96.8 ± 0.18",
                               "96.8"),
    "kt.fig6.3tied_acc": Quote(_KT, _KT_F6 + ", 3-tied", "MNIST, MLP 3-tied 0.497 ± 0.0060 0.120 ± 0.0038 96.9 ± 0.18",
                               "96.9"),
    "kt.fig6.snr_mf": Quote(_KT, "Fig. 6 top right (section 3.2), Dense 2 SNR at step 1000, mean field",
                            "Mean-field 4.13 ± 0.027 4.45 ± 0.091 3.21 ± 0.035", "4.13"),
    "kt.fig6.snr_2tied": Quote(_KT, "Fig. 6 top right (section 3.2), Dense 2 SNR at step 1000, 2-tied",
                               "2-tied 7500 ± 240 140 ± 11 4.3 ± 0.26", "7500"),
    "kt.fig6.snr_mean": Quote(_KT, "Fig. 6 caption", "Top right: mean gradient SNR in the log posterior standard "
                              "deviation parameters of the Dense 2 layer", "mean gradient SNR"),
    "kt.fig6.elbo_mf": Quote(_KT, "Fig. 6 bottom right (section 3.2), validation -ELBO at step 9000, mean field",
                             "Mean-field 42.16 ± 0.070 26.52 ± 0.016 15.39 ± 0.016", "15.39"),
    "kt.fig6.elbo_2tied": Quote(_KT, "Fig. 6 bottom right (section 3.2), validation -ELBO at step 9000, 2-tied",
                                "2-tied 42.74 ± 0.090 13.97 ± 0.023 1.82 ± 0.017", "1.82"),
    "kt.table4.mf": Quote(_KT, "Table 4 (section 3.2), ms per step", "Standard GMFVI 7.17 ± 0.014", "7.17"),
    "kt.table4.2tied": Quote(_KT, "Table 4 (section 3.2), ms per step", "2-tied Normal GMFVI 6.14 ± 0.018", "6.14"),
    "kt.converged": Quote(_KT, "section 2.1", r"the spectrum of matrices \mathbf{A} *post-training* (after "
                          "convergence)", "after convergence"),
    # Liberty or Depth (Farquhar et al., 2020)
    "lod.params": Quote(_LOD, "section 4", "widths set such that they all have approximately 1,000 parameters",
                        "1,000"),
    "lod.budget": Quote(_LOD, "appendix B", "the largest width that keeps the number of weights in the model under "
                        "1000", "under 1000"),
    "lod.draws": Quote(_LOD, "appendix B", "We allow 100 steps of burn-in and then draw 1000 samples", "1000"),
    "lod.seeds": Quote(_LOD, "Fig. 2 caption", "Shading reflects the standard error of the mean from 20 runs", "20"),
    "lod.falls": Quote(_LOD, "section 4", "The fact that the KL falls as the model gets deeper", "KL falls"),
}
"""Every number the jobs quote, by key (paper prefix "vn", "r1", "kt", "lod")."""


def quoted(*keys: str) -> str:
    """The quotes ``keys`` as the report's "paper" column shows them: ``"0.84 (Table 8 ..., 1 sample)"``, "; "-
    joined. An unknown key raises InputError."""
    unknown = [k for k in keys if k not in QUOTES]
    if unknown:
        raise InputError("keys", unknown, f"keys of QUOTES ({len(QUOTES)} quotes)")
    return "; ".join(QUOTES[k].text() for k in keys)
