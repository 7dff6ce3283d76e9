"""LeNet-5 (Caffe; SAME padding on 8x8 digits) under mean-field SVI on digits: test accuracy and time.

Run: python benchmarks/bench_lenet5_digits.py [steps]
"""

import sys
import time

import optax

import evals
import inference
import zoo


def main(steps: int = 600):
    t0 = time.perf_counter()
    entry = zoo.get("lenet5", data="digits")
    post = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, steps=steps, batch_size=128,
                         kl_warmup=steps // 5, optimizer=optax.adam(1e-3), progress=False)
    table = evals.score(post, entry.test, num_samples=20, verbose=False)
    print(f"LeNet-5, digits, mean field, {steps} steps: weights {entry.num_weights()}, "
          f"test accuracy {table.accuracy.iloc[0]:.4f}, NLL {table.nll.iloc[0]:.4f}, ECE {table.ece.iloc[0]:.4f}, "
          f"fit {post.info.fit_s:.0f} s, total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 600)
