"""The `zoo` command line: list, fit, nuts, score, corruptions, reproduce, run, benchmark (``zoo --version``; every
option's default is in ``zoo <cmd> --help``).

Errors: a bad argument or a failure the package recognises (`base.errors.ZooError`) prints ONE line
``zoo <cmd>: error: ...`` on stderr, no traceback (``--debug`` adds it), and exits with the error class's
``exit_status`` (the type decides, never the file that raised it; see `exit_status`): `EXIT_USAGE` (2: a bad
argument or input, `InputError`), `EXIT_FAILURE` (1: a run that could not complete, e.g. a damaged checkpoint or
an unprepared data set), `EXIT_NON_FINITE` (3: a NaN loss); anything else is a bug: its traceback is printed and
the exit status is `EXIT_BUG` (70, sysexits' EX_SOFTWARE).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import threading
import types
import traceback

from base.defaults import DEFAULT_STEPS
from base.errors import InputError, ZooError
from zoo import guide_options, startup

EXIT_OK, EXIT_NON_FINITE, EXIT_BUG, EXIT_INTERRUPTED = 0, 3, 70, 130
EXIT_FAILURE, EXIT_USAGE = ZooError.exit_status, InputError.exit_status  # 1, 2: the errors' own


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's help ends with "(default: ...)", except where the help already says what the default
    is, and for flags (default off) and options whose default None means "not given"."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS \
                or "default" in text:
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line: ``zoo fit: error: argument --lr: ...`` and exit status 2, and
    the defaults in --help. `lazy_arguments(parser)`, if given, adds the arguments when the parser is first
    used (so ``zoo corruptions`` imports `evals` only when it runs)."""

    commands: dict[str, _Parser]  # the top-level parser's {command: its parser} (`build_parser`)

    def __init__(self, *args, lazy_arguments=None, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        self._lazy_arguments = lazy_arguments

    def _add_lazy_arguments(self):
        if self._lazy_arguments is not None:
            add, self._lazy_arguments = self._lazy_arguments, None
            add(self)

    def parse_known_args(self, args=None, namespace=None):
        self._add_lazy_arguments()
        return super().parse_known_args(args, namespace)

    def format_usage(self):
        self._add_lazy_arguments()
        return super().format_usage()

    def format_help(self):
        self._add_lazy_arguments()
        return super().format_help()

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _number(kind, low, inclusive, what):
    """An argparse type: `kind` (int or float) parsed from text, finite, >= low (inclusive) or > low."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value) or (value < low if inclusive else value <= low):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


def _seed(text):
    """--seed: an integer in [0, 2**32 - 1] (argparse type; `base.validation.check_seed`)."""
    from base.validation import MAX_SEED

    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected an integer seed in [0, {MAX_SEED}], got {text!r}")
    return value


_seed.__name__ = "an integer seed"
_positive_int = _number(int, 1, True, "a positive integer")
_non_negative_int = _number(int, 0, True, "a non-negative integer")
_positive_float = _number(float, 0.0, False, "a finite number > 0")
_learning_rate = _number(float, 0.0, False, "a learning rate > 0 (finite; a negative one would be gradient ascent)")


def _int_list(low: int, example: str, what: str, high: int | None = None):
    """An argparse type: comma-separated integers in [`low`, `high`] such as `example` -> a tuple of ints."""

    def parse(text):
        try:
            values = tuple(int(t) for t in text.split(",") if t.strip())
        except ValueError:
            values = ()
        if not values or min(values) < low or (high is not None and max(values) > high):
            bound = "" if high is None else f" <= {high}"
            raise argparse.ArgumentTypeError(f"expected comma-separated {what} integers{bound} such as {example}, "
                                             f"got {text!r}")
        return values

    parse.__name__ = f"comma-separated {what} integers"
    return parse


def _prior_scale(text):
    """--prior-scale: a number > 0, or PATTERN=SCALE pairs separated by commas -> {pattern: scale}."""
    if "=" not in text:
        return _positive_float(text)
    pairs = [item.rpartition("=") for item in text.split(",") if item.strip()]
    if not all(p.strip() for p, _, _ in pairs):
        raise argparse.ArgumentTypeError(f"expected PATTERN=SCALE,... such as '*/b=1,*=2', got {text!r}")
    return {p.strip(): _positive_float(v) for p, _, v in pairs}


_prior_scale.__name__ = "a finite number > 0 or PATTERN=SCALE,..."
_ints = _int_list(1, "64,64", "positive")  # hidden widths, depths


def _names(text):
    """An argparse type: comma-separated names -> a tuple of non-empty strings."""
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names such as yacht,concrete, got {text!r}")
    return names


_names.__name__ = "comma-separated names"


def _layer_counts(text):
    """--hidden-layers: 1, 2 or 1,2 -> a sorted tuple of distinct counts."""
    try:
        values = tuple(sorted({int(t) for t in text.split(",") if t.strip()}))
    except ValueError:
        values = ()
    if not values or not set(values) <= {1, 2}:
        raise argparse.ArgumentTypeError(f"expected 1, 2 or 1,2, got {text!r}")
    return values


_layer_counts.__name__ = "hidden layer counts"

_seeds = _int_list(0, "0,1,2", "non-negative", 2**32 - 1)


def _positive_floats(text):
    """An argparse type: comma-separated finite numbers > 0 -> a tuple of floats (--learning-rates)."""
    values = tuple(_positive_float(t.strip()) for t in text.split(",") if t.strip())
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers > 0 such as 1e-3,1e-2, got {text!r}")
    return values


_positive_floats.__name__ = "comma-separated numbers > 0"


def _user_file_args(parser):
    """--target and --task: how `zoo.data.user_file.load_user_data` reads a --data file."""
    parser.add_argument("--target", default=None, metavar="COLUMN",
                        help="with --data FILE.csv: the column of labels / targets, every other column a feature "
                             "(default: none; a CSV needs it)")
    parser.add_argument("--task", choices=("classification", "regression"), default=None,
                        help="with --data FILE: how to read the labels (default: integer labels mean classification, "
                             "float targets regression)")


def _user_data(args):
    """The `zoo.data.user_file.UserData` of ``--data FILE`` (its split printed), or None for a data set name;
    --target / --task without a file are refused."""
    from zoo.data.user_file import is_data_file, load_user_data

    if args.data is None or not is_data_file(args.data):
        for option, value in (("--target", args.target), ("--task", args.task)):
            if value is not None:
                raise InputError(option, value, "no " + option + " unless --data names an .npz or .csv file",
                                 f"--data is {args.data!r}")
        return None
    user = load_user_data(args.data, args.target, task=args.task)
    print(f"data: {args.data}: {user.split}")
    return user


def _corruption_grid_arguments(parser):
    from evals.corruption_grid import DESCRIPTION, add_arguments

    parser.description = DESCRIPTION
    add_arguments(parser)


def build_parser() -> _Parser:
    """The `zoo` argument parser; ``parser.commands`` maps each command's name to its parser."""
    from zoo.version import package_version

    p = _Parser(prog="zoo", description="bnn-zoo: Bayesian neural networks as NumPyro models")
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}",
                   help="print the package version and exit")
    p.add_argument("--debug", action="store_true",
                   help="print the full traceback of an error (otherwise one line on stderr)")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--compilation-cache", metavar="DIR", default=None,
                       help="folder of JAX's persistent compilation cache (default: $BNN_ZOO_COMPILATION_CACHE, "
                            "else ~/.cache/bnn-zoo/jax)")
    cache.add_argument("--no-compilation-cache", action="store_true",
                       help="compile everything afresh and keep nothing on disk")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="the catalogue: entries, default data, weight counts, guides")

    def entry_args(sp):
        sp.add_argument("entry", help="catalogue entry, e.g. mlp (zoo list shows them)")
        sp.add_argument("--data", default=None,
                        help="data set name (digits, two_moons, regression_1d, ...), or your own file: an .npz of "
                             "x / y (or x_train / y_train / x_test / y_test) or a .csv with --target (default: the "
                             "entry's own data set)")
        _user_file_args(sp)
        sp.add_argument("--hidden", type=_ints, default=None, help="hidden widths, e.g. 64,64 (default: the entry's)")
        sp.add_argument("--depth", type=_positive_int, default=None, help="depth (deep_linear; default: the entry's)")
        sp.add_argument("--prior", default=None, help="kind of the weight prior: normal, fan_in, he_normal or "
                        "cauchy (default: the entry's)")
        sp.add_argument("--prior-scale", type=_prior_scale, default=None,
                        help="scale of the weight prior, or one per site pattern, e.g. '*/b=1,*=2' (first match "
                             "wins; default: the entry's)")
        sp.add_argument("--n", type=_positive_int, default=None,
                        help="number of points (two_moons, regression_1d; default: the data set's)")
        sp.add_argument("--seed", type=_seed, default=0, help="random seed")
        sp.add_argument("--out", required=True, help="folder to save the posterior in")
        sp.add_argument("--overwrite", action="store_true",
                        help="replace the posterior saved earlier in --out (without it such a folder is refused "
                             "before any work)")
        sp.add_argument("--quiet", action="store_true", help="no progress bar")

    f = sub.add_parser("fit", help="SVI with a guide; saves the posterior and prints its scores")
    entry_args(f)
    f.add_argument("--guide", default="mean_field",
                   help="a guide of inference.GUIDES (zoo list shows them), or laplace: the point estimate, then "
                        "inference.laplace on it (options: structure, predictive, prior_precision, "
                        "prior_structure, e.g. --guide-option structure=kfac)")
    f.add_argument("--guide-option", type=guide_options.parse_option, action="append", default=None,
                   metavar="KEY=VALUE", dest="guide_option_pairs",
                   help="an option of the guide, repeatable, e.g. k=2, granularity=neuron, "
                        "variance_sites=mlp/~/linear_0/w; the value is read as JSON where it parses, else as text "
                        "(default: the guide's own defaults)")
    f.add_argument("--guide-options", type=guide_options.parse_options_object, default=None, metavar="JSON",
                   help="the guide's options as one JSON object, e.g. '{\"k\": 2}' (default: none)")
    f.add_argument("--steps", type=_positive_int, default=None,
                   help=f"SVI steps (default: fit's own, {DEFAULT_STEPS:,}: base.defaults.DEFAULT_STEPS)")
    f.add_argument("--batch-size", type=_positive_int, default=128, help="minibatch size")
    f.add_argument("--lr", type=_learning_rate, default=None,
                   help="a constant Adam learning rate (> 0); not given: fit's default, Adam with its rate "
                        "cosine-decayed from 1e-2 to 1e-4 over --steps (inference.fit.default_optimizer)")
    f.add_argument("--kl-warmup", type=_non_negative_int, default=0,
                   help="steps over which the KL weight rises linearly from 0 to 1")
    f.add_argument("--temperature", type=_positive_float, default=1.0, metavar="T",
                   help="likelihood temperature (> 0): fit p(y|x,w)^(1/T) p(w); 1 is the Bayesian posterior")
    f.add_argument("--particles", type=_positive_int, default=1, help="ELBO particles per step")
    f.add_argument("--checkpoint-every", type=_positive_int, default=None, metavar="N",
                   help="save the resumable fit state every N steps (at chunk ends; default: only on Ctrl-C / "
                        "SIGTERM, where it is saved in any case)")
    f.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                   help="folder of the resumable fit state (default: OUT.fit-state beside --out; apart from "
                        "--out, neither inside the other; removed once the posterior is saved)")
    f.add_argument("--resume", action="store_true",
                   help="continue the fit saved in the fit-state folder (same settings), or start one")

    n = sub.add_parser("nuts", help="NUTS on the same model; --init starts the chains from an SVI posterior")
    entry_args(n)
    n.add_argument("--init", default=None,
                   help="folder of a saved SVI posterior (zoo fit --out) to start the chains from (default: "
                        "NUTS's own initialisation)")
    n.add_argument("--chains", type=_positive_int, default=2, help="number of chains")
    n.add_argument("--warmup", type=_non_negative_int, default=500, help="warm-up steps per chain")
    n.add_argument("--draws-per-chain", type=_positive_int, default=500, help="kept draws per chain (after the warm-up)")

    s = sub.add_parser("score", help="score a saved posterior on its entry's test set")
    s.add_argument("path", help="folder of a saved posterior (zoo fit / zoo nuts --out)")
    s.add_argument("--data", default=None, metavar="PATH",
                   help="the .npz / .csv file the posterior was fitted on (zoo fit --data PATH); needed for such a "
                        "posterior, which does not store the file (default: the entry's data set, rebuilt)")
    _user_file_args(s)
    s.add_argument("--samples", type=_positive_int, default=100, help="posterior draws in total")

    sub.add_parser("corruptions", help="draw every corruption type x severity for one image (a PNG grid)",
                   lazy_arguments=_corruption_grid_arguments)

    rp = sub.add_parser("reproduce", help="reproduce a paper's experiments (quick setting by default)")
    rp.add_argument("paper", choices=sorted(REPRODUCE), help="which paper")
    rp.add_argument("--full", action="store_true", help="the paper's settings (hours on 2 CPU cores)")
    rp.add_argument("--out", default=None, help="output folder (default: zoo-results/<paper>)")
    rp.add_argument("--seeds", type=_seeds, default=None, help="seeds, e.g. 0,1,2 (default: the chosen setting's)")
    rp.add_argument("--depths", type=_ints, default=None,
                    help="liberty-or-depth: depths, e.g. 1,2,3,4 (default: the chosen setting's)")
    rp.add_argument("--data-dir", default=None,
                    help="TFDS data directory holding the prepared real data sets that --full uses where present "
                         "(default: TFDS_DATA_DIR or TFDS's own)")
    rp.add_argument("--data", dest="data_path", default=None,
                    help="k-tied, variance-networks: an .npz of images 'imgs' (N, H, W) and labels 'labs' (N,), e.g. "
                         "USPS or MNIST, resized to 28x28 and split 80/20 by a seeded permutation (default: the "
                         "setting's data)")
    rp.add_argument("--epochs", type=_positive_int, default=None,
                    help="variance-networks: epochs of every training (default: the setting's, full 200)")
    rp.add_argument("--learning-rates", type=_positive_floats, default=None,
                    help="variance-networks: candidate Adam rates, each arm's chosen on the validation split, e.g. "
                         "1e-3,1e-2 (default: the setting's)")
    rp.add_argument("--resume", action="store_true",
                    help="liberty-or-depth, k-tied, variance-networks: go on with the run in --out, keeping the runs "
                         "it finished (a run cut short resumes where it stopped; default: a new run)")
    rp.add_argument("--workers", type=_positive_int, default=None,
                    help="rank1: processes for the job's independent parts (default: BNN_ZOO_WORKERS, else the CPU "
                         "cores; 1: one after the other, the same results)")

    r = sub.add_parser("run", help="the main job on embedded data (no download)")
    r.add_argument("--out", default="zoo-results", help="output folder")
    size = r.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a smoke-test sized run")
    size.add_argument("--full", action="store_true",
                      help="every row at its documented settings, trained to convergence (about 15-30 min on 2 cores)")
    r.add_argument("--seed", type=_seed, default=0, help="random seed")
    r.add_argument("--workers", type=_positive_int, default=None,
                   help="processes that run the job's parts side by side (default: BNN_ZOO_WORKERS or the CPU "
                        "cores; 1: one after the other, with progress bars)")
    b = sub.add_parser("benchmark", help="a benchmark against published numbers: uci (every guide against NUTS), "
                                          "images (every posterior beside MAP, temperature, ensembles, dropout)")
    b.add_argument("suite", choices=("uci", "images"), help="which benchmark")
    b.add_argument("--data-dir", default=None, metavar="DIR",
                   help="folder of UCI data set folders in the standard layout (default: the four shipped sets)")
    b.add_argument("--datasets", type=_names, default=None, metavar="A,B",
                   help="data set folder names, e.g. yacht,wine-quality-red (default: every set of the folder)")
    b.add_argument("--splits", type=_positive_int, default=None, metavar="K",
                   help="run the first K splits (default: all; with --quick 3)")
    b.add_argument("--methods", type=_names, default=None, metavar="M1,M2",
                   help="methods among map, mean_field, full_covariance, low_rank, k_tied, mc_dropout, ensemble, "
                        "nuts (default: all)")
    b.add_argument("--hidden-layers", type=_layer_counts, default=(1,), metavar="1|2|1,2",
                   help="hidden layers of 50 units: 1, 2 or 1,2 (both, with the depth verdict)")
    b.add_argument("--out", default=None,
                   help="output folder (default: zoo-results/uci): new, empty, or an earlier run's with --resume")
    b.add_argument("--resume", action="store_true",
                   help="keep the finished rows of the earlier run in --out (same settings and methods: uci's splits, "
                        "images' network / seed / method rows) and fit only the missing ones")
    b.add_argument("--quick", action="store_true",
                   help="3 splits, fewer SVI steps and NUTS draws (zoo.experiments.benchmarks.uci.QUICK)")
    b.add_argument("--data", default=None, metavar="PATH.npz",
                   help="images: an .npz of 'imgs' (N, H, W) and 'labs' (N,), resized to 28x28 (default: the "
                        "embedded 8x8 digits)")
    b.add_argument("--networks", type=_names, default=None, metavar="mlp,lenet5",
                   help="images: networks among mlp, lenet5 (default: both)")
    b.add_argument("--seeds", type=_seeds, default=None, metavar="0,1,2", help="images: seeds (default: 0,1,2)")
    rep = sub.add_parser("report", help="one self-contained HTML page (images inlined, no server) of a saved "
                                        "posterior, a zoo run or a zoo benchmark folder")
    rep.add_argument("path", help="a saved posterior folder (zoo fit / zoo nuts --out), or a zoo run / zoo benchmark "
                                  "results folder")
    rep.add_argument("--out", default=None, metavar="FILE.html",
                     help="the page to write (default: PATH/report.html for a results folder, PATH.report.html beside "
                          "a saved posterior)")
    rep.add_argument("--samples", type=_positive_int, default=100,
                     help="posterior draws for the scores and the OOD detection (a posterior's page)")
    rep.add_argument("--corruption-draws", type=_positive_int, default=10,
                     help="posterior draws on each corrupted test set (a posterior's page)")
    rep.add_argument("--seed", type=_seed, default=0, help="seed of the draws")
    rep.add_argument("--data", default=None, metavar="PATH",
                     help="the .npz / .csv file a saved posterior was fitted on (zoo fit --data PATH); needed for such "
                          "a posterior, which does not store the file (default: the entry's data set, rebuilt)")
    _user_file_args(rep)
    for command in sub.choices.values():  # --debug is accepted after the command too
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.commands = sub.choices  # {name: the command's parser}
    return p


# what each command imports before its work begins (`zoo.startup`: Ctrl-C during these imports exits quietly)
LAPLACE = "laplace"
"""``zoo fit --guide laplace``: fit the point estimate, then `inference.laplace` on it (the saved posterior)."""
STARTUP_IMPORTS = {"fit": ("optax", "inference", "evals"), "nuts": ("inference", "evals"), "score": ("evals",),
                   "corruptions": ("evals.corruption_grid",), "run": ("zoo.experiments.run",),
                   "reproduce": ("inference", "evals")}


def main(argv=None) -> int:
    """Run the `zoo` command line on `argv` (default: sys.argv[1:]) and return the exit status (see the module).

    Until the command's work begins (parsing, the compilation cache, the command's imports:
    `STARTUP_IMPORTS`) Ctrl-C exits at once with `EXIT_INTERRUPTED` and one line (`zoo.startup`); during the
    work it raises KeyboardInterrupt as usual (the command reports it, `zoo fit` saves its state first)."""
    previous = startup.quiet_interrupts()
    try:
        return _main(argv, previous)
    finally:
        startup.restore(previous)


def _main(argv, previous) -> int:
    import importlib

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # reported by the command's own parser: "zoo fit: error: unrecognized arguments: ..."
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    from zoo import compilation_cache

    def configure_cache():  # before anything compiles
        if args.no_compilation_cache:
            compilation_cache.configure(False)
        elif args.compilation_cache is not None:
            compilation_cache.configure(args.compilation_cache)
        else:  # the command's default (``import zoo`` sets nothing): $BNN_ZOO_COMPILATION_CACHE or the user's folder
            compilation_cache.configure_default()
        return EXIT_OK

    status = _run(None, configure_cache, args.debug)
    if status != EXIT_OK:
        return status
    import numpyro

    numpyro.set_host_device_count(max(2, os.cpu_count() or 1))  # before JAX starts: parallel NUTS chains
    for module in STARTUP_IMPORTS.get(args.command, ()):
        importlib.import_module(module)
    # the work: Python's own handler (KeyboardInterrupt), or the caller's when main() was called in-process
    startup.restore(signal.default_int_handler if startup.is_quiet(previous) else previous)
    return _run(args.command, lambda: COMMANDS[args.command](args), args.debug)


def _run(command: str | None, call, debug: bool) -> int:
    """call() -> exit status, with the package's errors printed as one line ``zoo <command>: error: ...``
    (`exit_status` gives the status) and the traceback only when `debug`; other exceptions are bugs: their
    traceback, then `EXIT_BUG`."""
    prog = "zoo" if command is None else f"zoo {command}"
    try:
        return call()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # noqa: BLE001 - every exception gets an exit status and a message
        status = exit_status(err)
        if status == EXIT_BUG or debug:
            traceback.print_exc()
        if status == EXIT_BUG:
            print(f"{prog}: internal error (a bug, please report it with the traceback above): "
                  f"{type(err).__name__}: {one_line(err)}", file=sys.stderr)
        else:
            print(f"{prog}: error: {one_line(err)}", file=sys.stderr)
        return status


def exit_status(err: BaseException) -> int:
    """The exit status for `err`, by its type alone: a `base.errors.ZooError`'s class attribute
    ``exit_status`` (`EXIT_USAGE` for an `InputError`: a bad argument or input; `EXIT_NON_FINITE` for
    `inference.NonFiniteLossError`; `EXIT_FAILURE` for any other: a damaged checkpoint, an unprepared data set),
    `EXIT_BUG` for anything else (every deliberate refusal of the package is a ZooError; another exception is a
    bug)."""
    return type(err).exit_status if isinstance(err, ZooError) else EXIT_BUG


def one_line(err: BaseException) -> str:
    """The error's message on one line (lines joined with spaces)."""
    text = str(err) or type(err).__name__
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _entry(args):
    import zoo

    kwargs = {}
    if args.hidden is not None:
        kwargs["hidden"] = args.hidden
    if args.depth is not None:
        kwargs["depth"] = args.depth
    for key in ("prior", "prior_scale"):
        if getattr(args, key) is not None:
            kwargs[key] = getattr(args, key)
    data_kwargs = {"n": args.n} if args.n is not None else None
    user = _user_data(args)
    if user is None:
        from zoo.data import DATASETS

        if args.data is not None and args.data not in DATASETS:
            raise InputError("--data", args.data, f"one of {list(DATASETS)} or a path to an .npz or .csv file",
                             "no data set of that name, and no file (a file's name ends in .npz or .csv)")
        return zoo.get(args.entry, data=args.data, data_kwargs=data_kwargs, **kwargs)
    if args.n is not None:
        raise InputError("--n", args.n, "no --n with --data FILE (every row of the file is used)")
    return zoo.get(args.entry, data=user.arrays(), data_kwargs=user.data_kwargs(), **kwargs)


def check_data_file(path: str, data: str | None, command: str) -> None:
    """Refuse a ``--data`` that does not fit the saved posterior at `path` (`command` reads it): a value that names
    no .npz / .csv file, no file for a posterior fitted on the user's arrays (which it does not store), or a file
    for one of a named data set (rebuilt from its name). InputError naming --data, exit status 2."""
    from zoo.checkpoints import check_posterior_folder, entry_spec

    if data is not None and not _is_file(data):
        raise InputError("--data", data, "a path to an .npz or .csv file (the one the posterior was fitted on)")
    check_posterior_folder(path, "path")
    spec = entry_spec(path)
    if _is_file(data) and "data" in spec:
        raise InputError("--data", data, f"no --data: the posterior is of the data set {spec['data']!r}, which "
                                         f"{command} rebuilds itself")
    if data is None and "data" not in spec:
        raise InputError("--data", data, "the .npz / .csv file the posterior was fitted on",
                         f"the posterior at {path!r} was fitted on the user's own arrays, which it does not store: "
                         "give the same file (and --target) as to zoo fit")


def _is_file(data) -> bool:
    """Whether a --data value names the user's file (`zoo.data.user_file.is_data_file`)."""
    from zoo.data.user_file import is_data_file

    return data is not None and is_data_file(data)


def cmd_list(args):
    import zoo

    rows = zoo.list()
    width = max(len(r["name"]) for r in rows)
    print(f"{'entry':<{width}}  {'data':<10} {'weights':>8}  guides / description")
    for r in rows:
        print(f"{r['name']:<{width}}  {r['data']:<10} {r['weights']:>8}  {r['guides']} / {r['description']}"
              f" / prior {r['prior']}")
    return 0


def cmd_fit(args):
    import evals
    import inference
    from base.atomic_dir import remove_folder
    from inference.fit import default_steps
    from inference.fit_state import saved_step

    check_out(args.out, args.overwrite)  # before any work: nothing is trained that cannot be saved
    state_dir = args.out.rstrip("/\\") + ".fit-state" if args.checkpoint_dir is None else args.checkpoint_dir
    check_fit_state_dir(state_dir, args.resume)
    check_apart(args.out, state_dir)
    options = _guide_options(args)  # before any work: an unknown option or a value of the wrong kind
    entry = _entry(args)
    if args.steps is None:  # the one default of `fit` and `zoo fit`
        args.steps = default_steps(len(entry.train), args.batch_size)
    fitted = "point_estimate" if args.guide == LAPLACE else args.guide  # laplace: its options are inference.laplace's
    guide_options.check_required_options(args.guide, _guide_factory(args.guide), options,
                                         sites=list(entry.model.site_shapes(entry.train.feature_shape)))
    guide = inference.make_guide(fitted, entry.model, **({} if args.guide == LAPLACE else options))
    try:
        with signals_stop_the_fit() as interrupt:
            post = inference.fit(entry.model, guide, entry.train, steps=args.steps, batch_size=args.batch_size,
                                 optimizer=(None if args.lr is None
                                            else inference.optimizers.adam(learning_rate=args.lr)),
                                 kl_warmup=args.kl_warmup,
                                 temperature=args.temperature,
                                 num_particles=args.particles, seed=args.seed, progress=not args.quiet,
                                 config={"entry": entry.config}, checkpoint_dir=state_dir,
                                 checkpoint_every=args.checkpoint_every, resume=args.resume,
                                 callbacks=[StopAtChunkEnd(interrupt)])
    except inference.NonFiniteLossError as err:
        where = nan_stopped_path(args.out)
        inference.save(err.posterior, where)
        kept = "" if where == args.out else f" ({args.out} keeps the posterior that was there)"
        print(f"zoo fit: error: {err} The last finite posterior is saved to {where}{kept}.", file=sys.stderr)
        return EXIT_NON_FINITE
    except KeyboardInterrupt:
        signum = interrupt.signum or signal.SIGINT
        step = saved_step(state_dir)
        saved = (f"the fit state after step {step} of {args.steps} is saved in {state_dir}; run the same command "
                 "with --resume to continue" if step else "no step had finished, nothing to save")
        print(f"zoo fit: interrupted by {signal.Signals(signum).name}: {saved}", file=sys.stderr)
        return 128 + signum
    if args.guide == LAPLACE:
        post = inference.laplace(entry.model, post, entry.train, **options)
    try:
        inference.save(post, args.out)
    except (ZooError, OSError) as err:
        if saved_step(state_dir) == args.steps:
            kept = (f"the fit state after step {args.steps} of {args.steps} is kept in {state_dir}: make room (or free "
                    "the folder), then run the same command with --resume to save the posterior without training")
        else:
            kept = _save_elsewhere(post, args.out)
        print(f"zoo fit: error: the fit finished but its posterior could not be saved: {one_line(err)}; {kept}",
              file=sys.stderr)
        return EXIT_FAILURE
    remove_folder(state_dir, "fit state")  # the posterior holds what it was for (only a fit state is removed)
    if interrupt.signum is not None:  # it arrived after the last chunk: the posterior is saved, the scores skipped
        print(f"zoo fit: interrupted by {signal.Signals(interrupt.signum).name} after the last step: the posterior "
              f"is saved to {args.out} (not scored)", file=sys.stderr)
        return 128 + interrupt.signum
    evals.score(post, entry.test)
    if args.guide == LAPLACE:
        record = post.config["laplace"]
        print(f"Laplace: {record['structure']} curvature over {record['num_covered']} weights, "
              f"{record['predictive']} predictive, prior precision {_precisions(record['prior_precision'])} "
              f"({record['prior_precision_source']}), {record['seconds']:.1f} s after the point estimate")
    print(f"ELBO: {post.info.summary()}")
    print(f"saved to {args.out} (first step after {_seconds(post.info.first_step_s)}, "
          f"fit {post.info.fit_s:.1f} s)")
    return 0


def _precisions(values: list) -> str:
    """The prior precisions of a Laplace posterior in a few words: one value, or the range over blocks."""
    low, high = min(values), max(values)
    return f"{low:.3g}" if low == high else f"{low:.3g} to {high:.3g} over {len(values)} blocks"


def _save_elsewhere(post, out: str) -> str:
    """Save `post` in a new temporary folder named after `out` (the last resort when neither --out nor the fit
    state could be written); returns what happened, in words."""
    import tempfile

    import inference

    try:
        where = tempfile.mkdtemp(prefix=os.path.basename(os.path.abspath(out)) + ".", suffix=".posterior")
        inference.save(post, where)
    except (ZooError, OSError) as err:
        return f"nor could it be saved in a temporary folder ({one_line(err)})"
    return f"no finished fit state was saved either, so it is saved in {where} instead: move it where you want it"


def _guide_options(args) -> dict:
    """The options of ``--guide`` given by --guide-options / --guide-option, checked against the guide
    factory's signature (`zoo.guide_options`); an unknown guide raises ValueError listing the known ones."""
    import inference

    if args.guide not in inference.GUIDES and args.guide != LAPLACE:
        inference.make_guide(args.guide, None)  # raises the registry's error naming the known guides
    options = guide_options.merged_options(args.guide_options, args.guide_option_pairs)
    return guide_options.check_guide_options(args.guide, _guide_factory(args.guide), options)


def _guide_factory(name: str):
    """The function whose keyword options ``--guide NAME`` takes: the guide's factory, or `inference.laplace`."""
    import inference

    return inference.laplace if name == LAPLACE else inference.GUIDES[name]


def _seconds(value) -> str:
    return "- (no step left to run)" if value is None else f"{value:.1f} s"


def check_out(path: str, overwrite: bool = False) -> None:
    """Refuse an `--out` that could not take the saved posterior, before any work: an empty path, an existing
    file, a non-empty folder that holds no saved posterior (files bnn-zoo did not write, or a fit state), a saved
    posterior unless `overwrite` (``--overwrite``: an earlier result is never replaced by accident, as Hugging
    Face's Trainer refuses an existing output folder without ``overwrite_output_dir``), or a place where no folder
    can be written. Raises InputError naming --out (the CLI prints one line, exit status 2)."""
    from base.atomic_dir import check_writable, folder_kind
    from base.errors import FolderNotOwnedError, InputError

    if not path:
        raise InputError("--out", path, "a folder path (not empty)")
    kind = folder_kind(path)
    if kind == "file":
        raise FolderNotOwnedError("--out", path, "a folder to save the posterior in", hint="it is an existing file")
    if kind == "other":
        raise FolderNotOwnedError("--out", path, "a new or empty folder, or one holding a saved posterior",
                                  hint=f"it holds other files ({_some(os.listdir(path))}); choose another folder")
    if kind == "fit state":
        raise FolderNotOwnedError("--out", path, "a new or empty folder, or one holding a saved posterior",
                                  hint="it holds a resumable fit state, which the posterior would replace; use it "
                                       "with --checkpoint-dir and --resume, or choose another folder")
    if kind == "posterior" and not overwrite:
        raise InputError("--out", path, "a new or empty folder, or --overwrite",
                         hint="it holds a posterior saved earlier, which this run would replace: add --overwrite "
                              "to replace it, or choose another folder")
    check_writable(path, "--out")


def _some(names: list) -> str:
    names = sorted(names)
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def check_apart(out: str, state_dir: str) -> None:
    """Refuse a fit-state folder that is --out, or inside it, or holds it (each save would replace the other)."""
    from base.errors import InputError

    a, b = os.path.realpath(out), os.path.realpath(state_dir)
    if a == b or os.path.commonpath([a, b]) in (a, b):
        relation = "is --out" if a == b else "is inside --out" if os.path.commonpath([a, b]) == a else "holds --out"
        raise InputError("--checkpoint-dir", state_dir, "a folder apart from --out (neither inside the other)",
                         hint=f"it {relation} ({out!r}): saving the posterior would replace the fit state, or the "
                              "reverse; leave --checkpoint-dir out to use OUT.fit-state")


def check_fit_state_dir(path: str, resume: bool) -> None:
    """Refuse a fit-state folder (--checkpoint-dir, default OUT.fit-state) that `zoo fit` could not use: an empty
    path, a file, a non-empty folder holding no fit state (the user's files, or a saved posterior), a saved fit
    without --resume (it would be started afresh), or a place where no folder can be written. Raises InputError
    (exit status 2)."""
    from base.atomic_dir import check_writable, folder_kind
    from inference.fit_state import saved_step
    from base.errors import FolderNotOwnedError, InputError

    if not path:
        raise InputError("--checkpoint-dir", path, "a folder path (not empty)")
    kind = folder_kind(path)
    if kind == "file":
        raise FolderNotOwnedError("--checkpoint-dir", path, "a folder for the fit state",
                                  hint="it is an existing file")
    if kind in ("other", "posterior"):
        what = "a saved posterior" if kind == "posterior" else "other files"
        raise FolderNotOwnedError("--checkpoint-dir", path, "a new or empty folder, or one holding a saved fit state",
                                  hint=f"it holds {what}; choose another folder with --checkpoint-dir")
    step = saved_step(path)
    if step is not None and not resume:
        raise InputError("--checkpoint-dir", path, "no saved fit state, or --resume",
                         hint=f"it holds a fit saved after {step} steps: add --resume to continue it, or remove "
                              "the folder to start afresh")
    check_writable(path, "--checkpoint-dir")


def nan_stopped_path(out: str) -> str:
    """Where `zoo fit` saves the posterior of a fit stopped by a NaN: `out` when it holds nothing yet, else beside
    it, ``OUT.nan-stopped`` (``OUT.nan-stopped-2``, ... when that holds something other than a posterior), so that
    a posterior saved earlier at `out` is never replaced by a NaN-stopped one."""
    from base.atomic_dir import folder_kind

    if folder_kind(out) is None:
        return out
    base = out.rstrip("/\\") + ".nan-stopped"
    candidate, n = base, 1
    while folder_kind(candidate) not in (None, "posterior"):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


@contextlib.contextmanager
def signals_stop_the_fit():
    """While the block runs, the first SIGINT or SIGTERM only records itself: yields an object whose ``signum``
    is the signal that arrived (None before one did), which `StopAtChunkEnd` reads between chunks. Raising from
    the handler itself would raise inside whatever Python code runs at that moment, e.g. a callback of JAX's
    garbage collector, which swallows it ("Exception ignored in: _xla_gc_callback") and the fit would run to
    its end. A second signal raises KeyboardInterrupt at once (a chunk that takes too long to end)."""
    interrupt = types.SimpleNamespace(signum=None)

    def handler(signum, frame):
        if interrupt.signum is not None:
            raise KeyboardInterrupt
        interrupt.signum = signum

    if threading.current_thread() is not threading.main_thread():  # handlers can be set in the main thread only
        yield interrupt
        return
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield interrupt
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class StopAtChunkEnd:
    """A callback of `inference.fit` (``on_chunk``): after the chunk in which a signal arrived
    (``interrupt.signum``, set by `signals_stop_the_fit`), raise KeyboardInterrupt there, in the fit's own loop,
    so that the fit saves the state of that chunk (its ``checkpoint_dir``) and stops."""

    def __init__(self, interrupt):
        self.interrupt = interrupt

    def on_chunk(self, run) -> None:
        """Raise KeyboardInterrupt when a signal has arrived."""
        if self.interrupt.signum is not None:
            raise KeyboardInterrupt


def cmd_nuts(args):
    import evals
    import inference

    check_out(args.out, args.overwrite)  # before any work
    if args.init:
        from zoo.checkpoints import check_posterior_folder

        check_posterior_folder(args.init, "--init")
    entry = _entry(args)
    init = _init_posterior(args.init, entry, args.data) if args.init else None
    post = inference.nuts(entry.model, entry.train, init=init, num_chains=args.chains, num_warmup=args.warmup,
                          draws_per_chain=args.draws_per_chain, seed=args.seed, progress=not args.quiet,
                          config={"entry": entry.config})
    inference.save(post, args.out)
    evals.score(post, entry.test)
    print(f"divergences: {post.info.divergences}, NUTS {post.info.nuts_s:.1f} s")
    if args.chains > 1:
        print(f"max R-hat of predictive probabilities (20 test points): {_rhat_verdict(post, entry.test.x[:20])}")
    print(f"saved to {args.out}")
    return 0


RHAT_MIN_DRAWS = 4  # split R-hat (ArviZ) halves each chain: below 4 draws per chain it is NaN


def _rhat_verdict(post, x) -> str:
    """The largest R-hat of `post`'s predictive probabilities at `x`, as text: the number, or why there is none
    (fewer than `RHAT_MIN_DRAWS` draws per chain, or a NaN), never a bare "nan" that reads as a result."""
    from inference import diagnostics

    per_chain = post.num_draws // post.num_chains
    if per_chain < RHAT_MIN_DRAWS:
        return (f"not computed: split R-hat needs at least {RHAT_MIN_DRAWS} draws per chain, got {per_chain}; "
                "whether the chains converged is unknown (raise --draws-per-chain)")
    value = diagnostics.max_rhat(post, x)
    if not math.isfinite(value):
        return f"undefined ({value}) for these draws: whether the chains converged is unknown"
    return f"{value:.4f}"


def _init_posterior(path, entry, data: str | None = None):
    """The SVI posterior saved at `path` (``zoo.load``; when `data`, the ``--data`` value, names a file: `entry`'s
    arrays, those of the file, which such a posterior was fitted on), refused unless its sites are those of
    `entry`'s model."""
    import zoo
    from zoo.checkpoints import entry_spec

    own = "data" not in entry_spec(path)  # fitted on a file's arrays: zoo.load needs them (those of --data FILE)
    arrays = (entry.train.x, entry.train.y, entry.test.x, entry.test.y)
    init = zoo.load(path, data=arrays if own and _is_file(data) else None)
    feature_shape = entry.train.feature_shape
    if dict(init.model.site_shapes(feature_shape)) != dict(entry.model.site_shapes(feature_shape)):
        raise InputError.worded("--init",
                                f"--init: the posterior at {path!r} is of entry {init.model.origin}, whose sites differ "
                                f"from those of {entry.config}")
    return init


def cmd_corruptions(args):
    from evals.corruption_grid import run

    from base.atomic_dir import check_output_file

    check_output_file(args.out, "--out")  # before any work
    run(args)
    return 0


def cmd_score(args):
    import evals
    from zoo.checkpoints import check_posterior_folder, load_entry

    check_posterior_folder(args.path, "path")  # the positional argument, as argparse names it
    check_data_file(args.path, args.data, "zoo score")
    user = _user_data(args)
    entry, post = load_entry(args.path, data=None if user is None else user.arrays())  # keeps the rebuilt entry
    evals.score(post, entry.test, num_samples=args.samples)
    return 0


# `zoo reproduce PAPER`: the job's module and function, and the options it takes besides --full and --out.
# Each job is ``function(out_dir, setting, log=print, **overrides)`` with setting "quick" or "full".
REPRODUCE = {
    "liberty-or-depth": ("zoo.experiments.reproduce.liberty_or_depth", "reproduce_liberty_or_depth",
                         ("seeds", "depths", "resume")),
    "k-tied": ("zoo.experiments.reproduce.k_tied", "reproduce_k_tied", ("seeds", "data_dir", "data_path", "resume")),
    "variance-networks": ("zoo.experiments.reproduce.variance_networks", "reproduce_variance_networks",
                          ("seeds", "data_dir", "data_path", "epochs", "learning_rates", "resume")),
    "rank1": ("zoo.experiments.reproduce.rank1", "reproduce_rank1", ("seeds", "data_dir", "workers")),
}
_REPRODUCE_OPTIONS = ("seeds", "depths", "data_dir", "data_path", "workers", "epochs", "learning_rates", "resume")


def _option_name(key: str) -> str:
    """The command-line spelling of a `zoo reproduce` option (``data_path`` is ``--data``)."""
    return "--data" if key == "data_path" else "--" + key.replace("_", "-")


def cmd_reproduce(args):
    import importlib

    module, function, accepted = REPRODUCE[args.paper]
    given = {k: getattr(args, k) for k in _REPRODUCE_OPTIONS if getattr(args, k) not in (None, False)}
    refused = [k for k in given if k not in accepted]
    if refused:
        option = _option_name(refused[0])
        takes = ", ".join(_option_name(k) for k in accepted) or "none"
        from base.errors import InputError

        raise InputError(option, given[refused[0]], f"an option of {args.paper} (it takes {takes})")
    out = args.out or os.path.join("zoo-results", args.paper)
    from base.run_folder import check_run_folder

    check_run_folder(out, f"zoo reproduce {args.paper}", "--out")  # before any work (the job claims the folder)
    job = getattr(importlib.import_module(module), function)
    job(out, "full" if args.full else "quick", **given)
    return 0


def cmd_run(args):
    from base.run_folder import check_run_folder
    from zoo.experiments.run import main_job

    check_run_folder(args.out, "zoo run", "--out")  # before any work: nothing of the user's is written into
    main_job(args.out, seed=args.seed, size="quick" if args.quick else "full" if args.full else "main",
             workers=args.workers)
    return 0


def cmd_benchmark(args):
    given = [o for o, v in (("--data-dir", args.data_dir), ("--datasets", args.datasets), ("--splits", args.splits),
                            ("--hidden-layers", args.hidden_layers != (1,)), ("--data", args.data),
                            ("--networks", args.networks), ("--seeds", args.seeds)) if v]
    other = [o for o in given if (o in ("--data", "--networks", "--seeds")) != (args.suite == "images")]
    if other:
        raise InputError(other[0], "given", f"the options of zoo benchmark {args.suite}", "another suite's option")
    if args.suite == "images":
        from zoo.experiments.benchmarks.images import main as images

        images(data=args.data, networks=args.networks, seeds=args.seeds, methods=args.methods,
               out=args.out or os.path.join("zoo-results", "images"), quick=args.quick, resume=args.resume)
        return 0
    from zoo.experiments.benchmarks.uci import main

    main(data_dir=args.data_dir, datasets=args.datasets, splits=args.splits, methods=args.methods,
         hidden_layers=args.hidden_layers, out=args.out or os.path.join("zoo-results", "uci"), quick=args.quick,
         resume=args.resume)
    return 0


def cmd_report(args):
    from base.atomic_dir import folder_kind
    from zoo.report.cli import run

    if folder_kind(args.path) == "posterior" or args.data is not None:
        check_data_file(args.path, args.data, "zoo report")
    user = _user_data(args)  # its split printed; --target / --task without a file refused
    return run(args, data=None if user is None else user.arrays())


COMMANDS = {"list": cmd_list, "report": cmd_report, "benchmark": cmd_benchmark, "fit": cmd_fit, "nuts": cmd_nuts, "score": cmd_score, "corruptions": cmd_corruptions,
            "run": cmd_run, "reproduce": cmd_reproduce}

if __name__ == "__main__":
    sys.exit(main())
