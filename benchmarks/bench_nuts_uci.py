"""Why NUTS saturates its tree depth on nearly noiseless UCI sets, and what fixes it: one split, several settings.

On split `--split` (0: the rule is chosen on the first split of each set only) of each set in `--datasets`, the
benchmark's model (``zoo.experiments.benchmarks.uci.entry_for``, the FULL settings' prior and noise prior) is
fitted by mean field and by `--chains` point estimates (seeds 0, 1, ...), then NUTS runs once per setting in
`--configs`, each a '+'-joined list of words:

  diag | dense        the mass matrix (NumPyro's ``dense_mass``)
  mf | ens            chain c starts at its own draw of the mean-field posterior, or at point estimate c
  wN                  N warm-up iterations (default `--warmup`)
  cN                  N chains (default `--chains`)
  dN                  max tree depth N (default 10)
  igN                 the noise prior: sigma^2 ~ InverseGamma(1, N / 100) (a Gamma(1, N / 100) prior on the precision
                      1 / sigma^2) instead of the benchmark's HalfNormal(1) on sigma, for every fit of the setting
                      (mean field and point estimates too: the same model)

Per setting it prints (and appends as one JSON line to `--log`) the function-space R-hat and bulk ESS of f at
the test inputs (the benchmark's convergence rule), the mean leapfrog steps per kept draw and the fraction at the
depth cap, divergences, seconds, the test LL in original units, each chain's median noise sd (standardised) and
each chain's test LL (modes: chains whose test LL or predictive means differ beyond their own spread).

    python benchmarks/bench_nuts_uci.py --datasets yacht,energy --configs diag+mf,dense+mf,dense+ens
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
import warnings


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default="yacht,energy")
    p.add_argument("--split", type=int, default=0)
    p.add_argument("--configs", default="diag+mf,dense+mf,dense+ens")
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", default="bench_nuts_uci.jsonl")
    return p.parse_args(argv)


def parse_config(text: str, args) -> dict:
    """'dense+ens+w1000' -> {dense, start, warmup, chains, depth}."""
    conf = {"dense": False, "start": "mf", "warmup": args.warmup, "chains": args.chains, "depth": 10,
            "noise_ig": None}
    for word in text.split("+"):
        if word in ("diag", "dense"):
            conf["dense"] = word == "dense"
        elif word in ("mf", "ens"):
            conf["start"] = word
        elif word.startswith("ig") and word[2:].isdigit():
            conf["noise_ig"] = int(word[2:]) / 100
        elif word[0] in "wcd" and word[1:].isdigit():
            conf[{"w": "warmup", "c": "chains", "d": "depth"}[word[0]]] = int(word[1:])
        else:
            raise SystemExit(f"--configs: unknown word {word!r} in {text!r}")
    return conf


def with_noise_prior(entry, scale):
    """`entry` (model, train, test) with the noise prior sigma^2 ~ InverseGamma(1, scale) (None: unchanged)."""
    from types import SimpleNamespace

    import jax.numpy as jnp
    import numpyro.distributions as dist
    from numpyro.distributions.transforms import PowerTransform

    import models
    from models.likelihoods import Normal

    if scale is None:
        return entry

    class NoiseSd(dist.TransformedDistribution):
        """sigma with sigma^2 ~ InverseGamma(1, scale): P(sigma^2 <= v) = exp(-scale / v)."""

        def icdf(self, q):
            return jnp.sqrt(-scale / jnp.log(q))

    class InverseGammaNoise(Normal):
        def latent_sites(self):
            return {"likelihood/noise": ((), NoiseSd(dist.InverseGamma(1.0, scale), PowerTransform(0.5)))}

    model = models.bnn(entry.model.network_fn, entry.model.prior, InverseGammaNoise(None), name=f"ig{scale}",
                       feature_shape=entry.model.feature_shape)
    return SimpleNamespace(model=model, train=entry.train, test=entry.test)


def start_values(model, site_priors, feature_shape, conf, fits, seed):
    """Unconstrained start values {site: (C, *shape)}: C draws of mean field, or the point estimates 0..C-1."""
    import numpy as np

    from models.bridge import unconstrain

    C = conf["chains"]
    if conf["start"] == "mf":
        start = fits["mean_field"].draws(C, seed=seed + 1)
    else:
        points = [fits["map"][c].draws(1, seed=0) for c in range(C)]
        start = {k: np.concatenate([np.asarray(p[k]) for p in points]) for k in site_priors}
    return unconstrain(site_priors, {k: np.asarray(start[k]) for k in site_priors})


def run_nuts(entry, conf, fits, seed):
    """(MCMCPosterior, stats, warm-up leapfrog steps, seconds) of one setting."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    nuts_module = importlib.import_module("inference.nuts")  # the module (``inference.nuts`` is the function)
    from inference.fit import labelled_arrays
    from inference.posterior import MCMCPosterior

    model = entry.model
    x, y = labelled_arrays(model, entry.train, "NUTS")
    feature_shape = tuple(x.shape[1:])
    site_priors = model.site_priors(feature_shape)
    C, W, D = conf["chains"], conf["warmup"], fits["draws"]
    sampler = nuts_module.compiled_sampler(model, site_priors, x, y, None, num_chains=C, chain_method="sequential",
                                           num_warmup=W, target_accept_prob=0.8, max_tree_depth=conf["depth"],
                                           chunk_len=min(nuts_module.CHUNK_LEN, W + D), dense_mass=conf["dense"])
    init_u = start_values(model, site_priors, feature_shape, conf, fits, seed)
    t0 = time.perf_counter()
    samples, stats, warm = nuts_module.run_sampler(sampler, jax.random.PRNGKey(seed), init_u, jnp.asarray(x),
                                                   jnp.asarray(y), None, D, progress=False)
    seconds = time.perf_counter() - t0
    post = MCMCPosterior(model=model, samples=samples, sample_stats=stats, feature_shape=feature_shape, state=None,
                         config={}, info=None, training_data=None)
    return post, stats, np.asarray(warm), seconds


def main(argv=None):
    args = parse_args(argv)
    import numpy as np

    from inference.diagnostics import ess_rhat
    from zoo.experiments.benchmarks.uci import FULL, Fitted, entry_for, fit_svi, predictions, scores

    settings = FULL
    max_chains = max(parse_config(c, args)["chains"] for c in args.configs.split(","))
    for name in args.datasets.split(","):
        base = entry_for(name, args.split, None, settings)
        variants: dict = {}
        for text in args.configs.split(","):
            conf = parse_config(text, args)
            if conf["noise_ig"] not in variants:
                entry = with_noise_prior(base, conf["noise_ig"])
                t0 = time.perf_counter()
                fits = {"mean_field": fit_svi("mean_field", entry, settings).posterior,
                        "map": [fit_svi("map", entry, settings, seed=s).posterior for s in range(max_chains)],
                        "draws": args.draws}
                print(f"{name} split {args.split}, noise prior {conf['noise_ig']}: SVI fits "
                      f"{time.perf_counter() - t0:.0f} s; point estimates' noise sd "
                      f"{[round(float(np.asarray(p.draws(1)['likelihood/noise']).ravel()[0]), 4) for p in fits['map']]}",
                      flush=True)
                variants[conf["noise_ig"]] = (entry, fits)
            entry, fits = variants[conf["noise_ig"]]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                post, stats, warm, seconds = run_nuts(entry, conf, fits, args.seed)
            C, D = conf["chains"], args.draws
            f, ll, _ = predictions(post, entry.test, C * D)
            diag = ess_rhat(f.reshape(C, D, -1))
            row = scores(Fitted(f, ll, seconds), entry.test.y, entry.train.y_sd)
            per_chain = [scores(Fitted(f.reshape(C, D, -1)[c], ll.reshape(C, D, -1)[c], 0.0), entry.test.y,
                                entry.train.y_sd)["test_ll"] for c in range(C)]
            sigma = np.asarray(post.samples["likelihood/noise"]).reshape(C, D)
            steps = np.asarray(stats["num_steps"])
            result = {"dataset": name, "split": args.split, "config": text, **conf, "rhat_f": diag["rhat_max"],
                      "ess_f": diag["ess_bulk_min"], "mean_steps": float(steps.mean()),
                      "at_cap": float(np.mean(steps >= 2 ** conf["depth"] - 1)),
                      "warmup_steps": int(warm.sum()), "divergences": int(np.asarray(stats["diverging"]).sum()),
                      "seconds": seconds, "test_ll": row["test_ll"], "rmse": row["rmse"],
                      "chain_sigma": [float(np.median(s)) for s in sigma],
                      "chain_test_ll": [float(v) for v in per_chain]}
            print(json.dumps(result), flush=True)
            with open(args.log, "a") as fh:
                fh.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
