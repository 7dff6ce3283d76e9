"""Is mean field's collapse on the 784-400-400 net the ELBO's optimum or an optimisation failure? (issue 13)

One fit (`inference.fit`'s defaults: Adam, rate cosine-decayed 1e-2 -> 1e-4 over the steps; sigma init 0.01;
KL warm-up over the first 20 %) on the 80/20 split of `prior_grid.split`, and every `--every` steps (a
multiple of the fit's 500-step chunks, read through `fit`'s ``on_chunk``) the state so far is scored:

- the full-data ELBO at beta = 1, T = 1 (whatever the warm-up's beta was at that step), as its two terms:
  E_q[log p(D_train | w)] (a `--elbo-draws`-draw Monte Carlo mean over all training images; the SE over
  draws beside it) and KL(q || p) (closed form for the Normal guide and prior), with
  ELBO = E_q[log p(D | w)] - KL (`inference.elbo.elbo_terms`, the terms the training loss estimates);
- validation accuracy / NLL / ECE (`evals.score`, `--draws` draws; never the test set);
- the training loss averaged over the last `--every` steps, the learning rate of the schedule, the KL weight
  beta, and the median sigma and |mean| of each weight site.

A collapsed state with a *higher* ELBO than the best earlier state says the prior-like posterior is the
optimum (the wide mean-field theory's prediction: Coker et al. 2022, "Wide mean-field Bayesian neural
networks ignore the data"); a *lower* one says the optimiser lost it.

    python benchmarks/elbo_trace.py --prior fan_in:8 --steps 16000
    python benchmarks/elbo_trace.py --prior normal:1 --steps 8000

Writes ``<out>/trace_<guide>_<prior>_<steps>_T<temperature>_seed<seed>_split<split>.csv`` and prints one
row per checkpoint.
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings

import numpy as np
import pandas as pd

from prior_grid import NETWORKS, label, make_guide, parse_setting, site_sigmas, split


def elbo_terms_fn(model, guide, x, y, num_draws: int, seed: int = 0):
    """A function params -> (log_lik (num_draws,), kl (num_draws,)): the full-data expected log-likelihood
    (x (N, ...), y (N,) all at once, so no minibatch scaling) and the KL of constrained guide `params`,
    one value per draw, compiled once; the same draws (keys fold_in(PRNGKey(seed), s)) at every call."""
    import jax

    from inference.elbo import elbo_terms
    from base.prng import flat_key

    n = int(x.shape[0])
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(seed), s))(np.arange(num_draws))

    @jax.jit
    def terms(params):
        def one(key):
            log_lik, kl, _ = elbo_terms(flat_key(key), params, model, guide, x, y, n)
            return log_lik, kl

        return jax.lax.map(one, keys)

    return lambda params: tuple(np.asarray(v, np.float64) for v in terms(params))


def learning_rate(step: int, steps: int, lr0: float = 1e-2, lr1: float = 1e-4) -> float:
    """The default schedule's rate at `step` (optax's cosine decay from lr0 to lr1 over `steps`)."""
    t = min(step, steps) / steps
    return lr1 + (lr0 - lr1) * 0.5 * (1 + math.cos(math.pi * t))


def trace(network, prior, scale, guide_name, *, steps, seed, split_seed, every, draws, elbo_draws, out_csv,
          temperature=1.0):
    """Fit one cell on the training part of split `split_seed` with `seed`, scoring it every `every` steps
    (module docstring). temperature: the fit's likelihood temperature (a diagnostic; the ELBO reported is
    still the T = 1 one). Returns the DataFrame of checkpoints (also written to `out_csv` as it grows)."""
    import jax.numpy as jnp

    import evals
    import inference
    from inference.fit import ChunkHook
    import zoo

    data_name, hidden = NETWORKS[network]
    entry = zoo.get("mlp", data=data_name, hidden=hidden, prior=prior, prior_scale=scale)
    train, val = split(entry.train, seed=split_seed)
    guide = make_guide(guide_name, entry.model)
    x, y = jnp.asarray(train[0]), jnp.asarray(train[1])
    terms, rows, t0 = None, [], time.perf_counter()
    warmup = int(0.2 * steps)

    def on_chunk(step, post):
        nonlocal terms
        if step % every and step != steps:
            return
        if terms is None:
            terms = elbo_terms_fn(entry.model, guide, x, y, elbo_draws, seed)
        t1 = time.perf_counter()
        log_lik, kl = terms(post.params)
        score = evals.score(post, val, num_samples=draws, seed=seed, verbose=False).iloc[0]
        row = {"step": step, "elbo": float(np.mean(log_lik - kl)), "log_lik": float(np.mean(log_lik)),
               "log_lik_se": float(np.std(log_lik, ddof=1) / np.sqrt(len(log_lik))), "kl": float(np.mean(kl)),
               "val_accuracy": float(score["accuracy"]), "val_nll": float(score["nll"]),
               "val_ece": float(score["ece"]),
               "train_loss": float(np.mean(post.losses[-every:])), "lr": learning_rate(step, steps),
               "beta": min(1.0, step / warmup) if warmup else 1.0,
               "fit_s": round(t1 - t0, 1), "score_s": round(time.perf_counter() - t1, 1)}
        for site in site_sigmas(post).itertuples(index=False):
            short = site.site.rsplit("/", 2)[-2] + "/" + site.site.rsplit("/", 1)[-1]
            row[f"sigma {short}"] = site.median_sigma
            row[f"|mean| {short}"] = site.median_abs_mean
        rows.append(row)
        table = pd.DataFrame(rows)
        table.to_csv(out_csv, index=False)
        print(table.iloc[[-1], :13].to_string(index=False, header=len(rows) == 1,
                                               float_format=lambda v: f"{v:.5g}"), flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = inference.fit(entry.model, guide, train, steps=steps, kl_warmup=warmup, seed=seed, progress=False,
                             callbacks=[ChunkHook(on_chunk)], temperature=temperature)
    print(f"converged: {post.info.converged} {post.info.convergence.get('rel_change')}", flush=True)
    return pd.DataFrame(rows)


def main(argv=None):
    """Parse the arguments and run `trace`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", choices=list(NETWORKS), default="784-400-400")
    parser.add_argument("--prior", default="fan_in:8", help="KIND:SCALE (as prior_grid.py --priors)")
    parser.add_argument("--guide", default="mean_field", choices=("mean_field", "2-tied"))
    parser.add_argument("--steps", type=int, default=16000)
    parser.add_argument("--every", type=int, default=1000, help="steps between checkpoints (a multiple of 500)")
    parser.add_argument("--seed", type=int, default=0, help="the fit's seed")
    parser.add_argument("--split-seed", type=int, default=0, help="the 80/20 split's seed")
    parser.add_argument("--draws", type=int, default=30, help="posterior draws for the validation metrics")
    parser.add_argument("--elbo-draws", type=int, default=8, help="draws for E_q[log p(D | w)]")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="the fit's likelihood temperature (a diagnostic; the trace's ELBO is at T = 1)")
    parser.add_argument("--out", default=os.path.join("benchmarks", "results", "elbo_trace"))
    args = parser.parse_args(argv)
    prior, scale = parse_setting(args.prior)
    os.makedirs(args.out, exist_ok=True)
    name = f"trace_{args.guide}_{prior}{label(scale)}_{args.steps}_T{args.temperature:g}_seed{args.seed}"
    name += f"_split{args.split_seed}.csv"
    return trace(args.network, prior, scale, args.guide, steps=args.steps, seed=args.seed,
                 split_seed=args.split_seed, every=args.every, draws=args.draws, elbo_draws=args.elbo_draws,
                 out_csv=os.path.join(args.out, name), temperature=args.temperature)


if __name__ == "__main__":
    main()
