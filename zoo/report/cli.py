"""`zoo report PATH`'s run (its arguments are parsed in zoo/cli.py)."""

from __future__ import annotations


def run(args, data=None) -> int:
    """Write the page (`zoo.report.write_report`) and print its path; `data`: the arrays of ``--data FILE``
    (`zoo.data.user_file.load_user_data`), for a posterior fitted on them."""
    from zoo.report import ReportSettings, write_report

    settings = ReportSettings(num_samples=args.samples, corruption_draws=args.corruption_draws, seed=args.seed)
    path = write_report(args.path, args.out, settings=settings, data=data)
    print(f"wrote {path} (one self-contained page: open it in a browser)")
    return 0
