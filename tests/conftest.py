"""Shared, session-scoped fixtures: JAX compiles are the cost of this suite, so models and fits are
built once and shared (tiny networks, few steps and draws)."""

import os
from pathlib import Path

# JAX's persistent compilation cache (turned on below, `zoo.enable_compilation_cache`): the suite's own folder, shared
# by the xdist workers
os.environ.setdefault("BNN_ZOO_COMPILATION_CACHE",
                      str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "jax-compilation-cache"))

# XLA's CPU backend with its cheapest compile: optimisation level 0 and LLVM's expensive passes off (what
# ``jax_disable_most_optimizations`` sets). This suite's programs are mostly compiled, not run: measured in CPU
# seconds of whole processes (persistent cache off, the machine shared), a tiny ResNet-18's mean-field fit, prediction
# and NUTS draws (tests/zoo/test_architectures_nuts.py's case) took 37.2 s this way, 43.8 s at level 1 with the
# expensive passes off and 50.1 s at level 1 (the setting before); tests/inference/test_fit.py with
# test_nuts_driver.py (long fits and NUTS runs) 73.7 s, 82.7 s and 93.1 s. The compiled code runs slower than at the
# default level (2-8x at level 0 alone: benchmarks/bench_xla_opt_level.py), which these tests' short runs repay
# many times over. Results differ from the default level by float rounding only (no fast-math); set XLA_FLAGS
# yourself to run the suite at another level.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
                               " --xla_llvm_disable_expensive_passes=true").strip()

import numpyro  # noqa: E402

numpyro.set_host_device_count(2)  # before JAX starts: lets NUTS run its 2 chains in parallel

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import optax  # noqa: E402
import pytest  # noqa: E402

import inference  # noqa: E402
import zoo  # noqa: E402

zoo.enable_compilation_cache()  # $BNN_ZOO_COMPILATION_CACHE (set above, or by the caller); `import zoo` sets nothing


REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"  # the project's shared data beside the repository: CI has it, a fresh clone does not


def shared_path(*parts: str) -> Path:
    """The file ``../shared/<parts>`` beside the repository, or skip the calling test with the reason when it is
    absent (a newcomer's fresh clone has nothing beside it). The one way a test reaches outside the repository
    (tests/test_paths_inside_repo.py checks that no test names another)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{'/'.join(('../shared',) + parts)} is absent (a fresh clone has no ../shared beside it; CI "
                    "has it)")
    return path


def _hand_posterior(draws: int = 1):
    """A posterior built by hand (no training): 2 chains of `draws` draws, all zeros, of a 2-input MLP (2, 2)."""
    import models
    from models.networks.mlp import mlp

    model = models.bnn(mlp((2,), 2))
    samples = {k: np.zeros((2, draws) + s, np.float32) for k, s in model.site_shapes((2,)).items()}
    return inference.MCMCPosterior(model=model, samples=samples, feature_shape=(2,))


@pytest.fixture(scope="session")
def hand_posterior():
    """`_hand_posterior`: hand_posterior(draws=1) -> an MCMCPosterior of 2 chains of `draws` zeros (no training)."""
    return _hand_posterior


@pytest.fixture
def every_kind_of_folder(tmp_path):
    """{kind: path} under tmp_path of every kind of place a command may be pointed at (issue 45): "user" (the
    user's summary.md and uci.csv), "posterior" (a saved posterior, `_hand_posterior`), "state" (a fit state),
    "other job" (zoo run's results folder), "file", "forged" (a bnn-zoo-run.json that is not bnn-zoo's),
    "empty" and "missing"."""
    from base.run_folder import RUN_MARKER, claim_run_folder

    user = tmp_path / "user"
    user.mkdir()
    (user / "summary.md").write_text("my notes")
    (user / "uci.csv").write_text("a,b\n1,2\n")
    state, forged, empty = tmp_path / "state", tmp_path / "forged", tmp_path / "empty"
    for folder in (state, forged, empty):
        folder.mkdir()
    (state / "fit_state.json").write_text('{"step": 7}')
    (forged / RUN_MARKER).write_text("{not json")
    (tmp_path / "afile").write_text("x")
    return {"user": user, "posterior": Path(inference.save(_hand_posterior(), tmp_path / "posterior")), "state": state,
            "other job": Path(claim_run_folder(tmp_path / "runs", "zoo run")), "file": tmp_path / "afile",
            "forged": forged, "empty": empty, "missing": tmp_path / "missing"}


@pytest.fixture
def files_under():
    """files_under(folder) -> {relative path: bytes} of every file below `folder` (to assert nothing changed)."""
    def snapshot(folder) -> dict:
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}

    return snapshot


@pytest.fixture(scope="session")
def shared_data():
    """`shared_path`: shared_data("data", "usps5k.npz") -> the Path, or the test is skipped when it is absent."""
    return shared_path


RSS_LIMIT = 3 * 2**30  # bytes: a worker's resident memory above which compiled programs are dropped


def _resident_bytes() -> int:
    """This process's resident set size (Linux /proc; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@pytest.fixture(scope="module", autouse=True)
def _bounded_compile_caches():
    """After each test file, drop JAX's in-memory compiled programs when this worker holds more than
    `RSS_LIMIT`: the library keys compiled code by value (jit's own caches, which JAX bounds only by count), and
    a worker that runs hundreds of distinct tiny models would otherwise keep every one. A later test that needs
    a dropped program compiles it again (or loads it from the persistent cache)."""
    yield
    if _resident_bytes() > RSS_LIMIT:
        import jax

        jax.clear_caches()


@pytest.fixture(scope="session")
def digits_entry():
    return zoo.get("mlp", data="digits", hidden=(64, 64))


@pytest.fixture(scope="session")
def digits_mean_field(digits_entry):
    """The spine's acceptance fit: mean-field SVI, digits MLP 64-64 (about 10 s on 2 cores)."""
    e = digits_entry
    # init_scale 1e-3 with Adam 1e-3: the settings this acceptance fit was measured at (not the defaults)
    return inference.fit(e.model, inference.mean_field(e.model, init_scale=1e-3), e.train, steps=3000, batch_size=128,
                         kl_warmup=600, optimizer=optax.adam(1e-3), progress=False, seed=0,
                         config={"entry": e.config})


@pytest.fixture(scope="session")
def moons_entry():
    return zoo.get("mlp", data="two_moons", hidden=(16, 16), data_kwargs={"n": 600, "noise": 0.1})


@pytest.fixture(scope="session")
def moons_svi(moons_entry):
    e = moons_entry
    return inference.fit(e.model, inference.mean_field(e.model), e.train, steps=1500, batch_size=64,
                         kl_warmup=300, optimizer=optax.adam(3e-3), progress=False, seed=0,
                         config={"entry": e.config})


@pytest.fixture(scope="session")
def moons_nuts(moons_entry, moons_svi):
    return inference.nuts(moons_entry.model, moons_entry.train, init=moons_svi, num_chains=2,
                          num_warmup=200, draws_per_chain=200, seed=0, progress=False,
                          config={"entry": moons_entry.config})


@pytest.fixture(scope="session")
def moons_tiny():
    """The smallest entry: a two-moons MLP 2-4-2 on 100 points (80 training), for the tests of bad inputs."""
    return zoo.get("mlp", data="two_moons", hidden=(4,), data_kwargs={"n": 100})


@pytest.fixture(scope="session")
def moons_tiny_svi(moons_tiny):
    """A 20-step mean-field fit of `moons_tiny` (one small compile), with its entry in the config so that a saved
    copy loads back (``zoo.load``)."""
    return inference.fit(moons_tiny.model, inference.mean_field(moons_tiny.model), moons_tiny.train, steps=20,
                         batch_size=16, optimizer=optax.adam(1e-2), progress=False,
                         config={"entry": moons_tiny.config})


@pytest.fixture
def registries_restored():
    """Tests that register guides, families, priors, corruptions, entries or data sets (the walkthroughs, a user's
    extension) keep them for the test only, so that tests run later in the same process see the package's own
    registrations: every registry of `base.registry` is restored."""
    import base.registry

    registries = [r for r in vars(base.registry).values() if isinstance(r, base.registry.Registry)]
    saved = [r.snapshot() for r in registries]
    yield
    for registry, snapshot in zip(registries, saved):
        registry.restore(snapshot)


@pytest.fixture
def extension_example(registries_restored):
    """tests/zoo/extension_example.py imported (a guide, its family, a network and a data set registered from
    one module outside the package, the way a user would), its registrations undone after the test."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("extension_example",
                                                  Path(__file__).parent / "zoo" / "extension_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def figures_in_a_fresh_process(tmp_path):
    """run(script) -> the sorted names of the files `script` wrote: `script` (Python source) runs in a fresh
    process with MPLBACKEND=svg and the output folder as sys.argv[1], and must print matplotlib's backend and
    whether pyplot was imported, which are asserted to be "svg False" (drawing leaves the user's backend alone
    and never imports pyplot)."""
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parent.parent)

    def run(script: str) -> list:
        env = {**os.environ, "MPLBACKEND": "svg", "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["svg", "False"]  # the backend set by the user; pyplot never imported
        return sorted(p.name for p in tmp_path.iterdir())

    return run


@pytest.fixture(scope="session")
def assert_same_draws():
    """An assertion that `base.prng.normal_draws` (one hash for many draws) gave ``jax.random.normal``'s numbers:
    bit for bit under XLA's default optimisation level (JAX 0.10 and 0.12) and with JAX 0.10 at this suite's lowered
    level too; at a lowered level (this suite's 0, or 1) JAX 0.12's XLA compiles the two programs' float arithmetic
    differently and they agree to 3 units in the last place (measured at level 1 on tests/models/test_prng.py's
    draws; 0 at the default level)."""
    import jax
    import numpy as np

    lowered = "xla_backend_optimization_level" in os.environ.get("XLA_FLAGS", "")
    max_ulp = 3 if lowered and tuple(int(p) for p in jax.__version__.split(".")[:2]) >= (0, 11) else 0

    def check(got, expected):
        if max_ulp:
            np.testing.assert_array_max_ulp(np.asarray(got), np.asarray(expected), maxulp=max_ulp)
        else:
            np.testing.assert_array_equal(got, expected)

    return check


def run_markdown_examples(path, tmp_path, monkeypatch) -> None:
    """Run the ```python blocks of the Markdown file `path` in order, in one namespace, in the fresh working
    directory `tmp_path` (so that paths like runs/mlp stay inside it): tests/test_docs.py and
    tests/test_docs_walkthroughs.py."""
    import re

    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_{path.stem}"}
    blocks = re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)
    for i, block in enumerate(blocks):
        exec(compile(block, f"{path.name}[block {i}]", "exec"), namespace)  # noqa: S102


@pytest.fixture
def markdown_examples():
    """`run_markdown_examples` as a fixture (test files do not import each other)."""
    return run_markdown_examples
