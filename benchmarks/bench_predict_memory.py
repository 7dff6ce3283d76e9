"""Peak memory of `Posterior.predict` over 10,000 inputs, one fresh process per setting (peaks never mix).

Posterior: the digits MLP 64-64, mean-field SVI fitted for 50 steps. Input: the digits test images tiled to
10,000 rows. Settings: 250 / 1,000 / 2,000 draws, reduce=None ((S, N, C)) and reduce="mean" ((N, C)); chunk 50.

Each child builds the posterior and runs one chunk-sized predict (compiles). It then measures two calls, each
against the resident set size (RSS, /proc/self/statm) just before it: a one-chunk predict (S = chunk_size: the
work of one chunk, XLA's activations included) and the predict of S draws. A thread samples RSS every 0.5 ms;
the kernel's ru_maxrss is used instead when a call set a new lifetime peak (exact, no sampling gap). Children
run with MALLOC_MMAP_THRESHOLD_=1 MiB, so that freed large blocks go back to the system at once and one call's
freed memory is not silently reused by the next (glibc's adaptive threshold otherwise keeps some in the heap).

Printed per row: output MB (the returned array; S*N*C*4 bytes for reduce=None), chunk MB (one chunk of the
output, chunk*N*C*4), work MB (the peak increase of the one-chunk call), peak MB (the peak increase of the
S-draw call), ratio = peak / (output + chunk) and ratio_work = peak / (output + work).

Run: python benchmarks/bench_predict_memory.py [draws ...]      (default 250 1000 2000)

Measured (2 shared CPU cores, JAX 0.10): the output buffer costs 1.0x (ratio_work 0.97-1.02); what lifts
ratio above 1.2 is one chunk's work, about 310 MB at chunk_size 50 whatever S is: XLA's activations of 50
draws x 10,000 rows x 64 units (the compiled apply's memory_analysis: 244 MB temp, 19 MB output). The host
copy of a chunk is a zero-copy view of its CPU buffer and x goes to the device once. chunk_size=10 (1,000
draws, reduce=None): work 61 MB, peak 442 MB for a 381 MB output (1.15x output + chunk). The former
list-and-concatenate predict peaked at 764 MB (1,000 draws) and 1,528 MB (2,000 draws) in the same children.
"""

import gc
import json
import os
import resource
import subprocess
import sys
import threading
import time

ROWS, CHUNK, STEPS = 10_000, 50, 50
MB = 2 ** 20


def rss() -> int:
    """This process's resident set size in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_increase(call):
    """(result of call(), its peak RSS increase in bytes over the RSS just before it)."""
    gc.collect()
    base, before = rss(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak, done = [base], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.0005)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    out = call()
    done.set()
    watcher.join()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out, (after if after > before else max(peak[0], rss())) - base


def child(draws: int, reduce):
    """Build the posterior, compile, measure the one-chunk and the S-draw predict; print one JSON line."""
    import numpy as np

    import inference
    import zoo

    e = zoo.get("mlp", data="digits", hidden=(64, 64))
    post = inference.fit(e.model, inference.mean_field(e.model), e.train, steps=STEPS, batch_size=128, progress=False)
    x = np.resize(e.test.x, (ROWS,) + e.test.x.shape[1:]).astype(np.float32)  # the test images, tiled
    predict = lambda s: post.predict(x, s, chunk_size=CHUNK, reduce=reduce)  # noqa: E731
    predict(CHUNK)  # compile outside the measurements
    _, work = peak_increase(lambda: predict(CHUNK))
    t0 = time.perf_counter()
    out, peak = peak_increase(lambda: predict(draws))
    per_draw = out.nbytes // draws if reduce is None else out.nbytes  # N * C * 4 bytes
    print(json.dumps({"shape": list(out.shape), "out": out.nbytes, "chunk": CHUNK * per_draw, "work": work,
                      "peak": peak, "seconds": time.perf_counter() - t0}))


def measure(draws: int, reduce: str) -> dict:
    """One fresh process: {shape, out, chunk, work, peak (bytes), seconds}."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MB)}
    done = subprocess.run([sys.executable, __file__, "--child", str(draws), reduce], check=True, capture_output=True,
                          text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(draws=(250, 1000, 2000)):
    print(f"digits MLP 64-64, mean field ({STEPS} steps), {ROWS:,} inputs, chunk_size={CHUNK}; fresh process per row")
    print(f"{'draws':>6} {'reduce':>6} {'shape':>16} {'output MB':>10} {'chunk MB':>9} {'work MB':>8} {'peak MB':>8} "
          f"{'ratio':>6} {'ratio_work':>10} {'seconds':>8}")
    for s in draws:
        for reduce in ("none", "mean"):
            r = measure(s, reduce)
            print(f"{s:>6} {reduce:>6} {str(tuple(r['shape'])):>16} {r['out'] / MB:>10.1f} {r['chunk'] / MB:>9.1f} "
                  f"{r['work'] / MB:>8.1f} {r['peak'] / MB:>8.1f} {r['peak'] / (r['out'] + r['chunk']):>6.2f} "
                  f"{r['peak'] / (r['out'] + r['work']):>10.2f} {r['seconds']:>8.1f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]), None if sys.argv[3] == "none" else sys.argv[3])
    else:
        main(tuple(int(a) for a in sys.argv[1:]) or (250, 1000, 2000))
