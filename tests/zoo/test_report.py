"""`zoo report PATH` (zoo.report): the three kinds of page (a saved SVI posterior, a saved NUTS posterior inside a
`zoo run` folder, a `zoo benchmark images` folder) built once from a tiny digits posterior, checked for
self-containedness and content, then opened in headless Chromium (Debian's chromium on PATH, driven by
playwright; skipped with the reason where either is absent): no console error, every image decoded, the tables
there, a screenshot of each. Bad PATHs are refused with InputError naming ``path``."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest

from base.errors import InputError

CHROMIUM = shutil.which("chromium")  # Debian's package (.ci/run installs it); None: the browser test skips
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """{kind: (page path, posterior or None)} for "posterior", "run" and "benchmark", and the SVI posterior."""
    import inference
    import zoo
    from base.run_folder import claim_run_folder
    from evals import plots
    from inference.posterior import MCMCPosterior
    from zoo.report import ReportSettings, write_report

    root = tmp_path_factory.mktemp("report")
    entry = zoo.get("mlp", data="digits", hidden=(4,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", inference.ConvergenceWarning)
        post = inference.fit(entry.model, inference.mean_field(entry.model), entry.train, steps=30, batch_size=256,
                             progress=False, config={"entry": entry.config})
    inference.save(post, root / "post")
    settings = ReportSettings(num_samples=4, corruption_draws=4, corruption_types=("gaussian_noise", "contrast"),
                              severities=(5,), probe=3, traced_entries=2, spread_draws=4)
    made = {"posterior": write_report(root / "post", settings=settings)}

    run = root / "run"
    claim_run_folder(run, "zoo run")
    pd.DataFrame({"posterior": ["mean_field"], "accuracy": [0.5]}).to_csv(run / "results.csv", index=False)
    plots.loss_curve(post.losses, str(run / "loss_digits_mean_field.png"))
    (run / "results.json").write_text(json.dumps({"settings": {"draws": 4}, "seconds": 1.0}))
    rng = np.random.default_rng(0)  # 2 chains x 12 draws near the SVI means: a "NUTS" posterior to diagnose
    means = post.median()
    samples = {k: (np.asarray(v) + 0.01 * rng.normal(size=(2, 12) + np.shape(v))).astype(np.float32)
               for k, v in means.items()}
    mcmc = MCMCPosterior(model=entry.model, samples=samples, feature_shape=entry.train.feature_shape,
                         config={"entry": entry.config})
    inference.save(mcmc, run / "posteriors" / "digits_nuts")
    inference.save(post, run / "posteriors" / "digits_mean_field")
    made["run"] = write_report(run, settings=settings)

    bench = root / "bench"
    claim_run_folder(bench, "zoo benchmark images")
    (bench / "run.json").write_text(json.dumps({"command": "zoo benchmark images --quick", "settings": {"steps": 30}}))
    pd.DataFrame({"network": ["mlp"], "method": ["map"], "nll": [0.3]}).to_csv(bench / "images.csv", index=False)
    shutil.copy(run / "loss_digits_mean_field.png", bench / "images.png")
    (bench / "summary.md").write_text("| method | NLL |\n|---|---|\n| map | 0.3 |\n")
    made["benchmark"] = write_report(bench, settings=settings)
    return made, post


def _images(text: str) -> list:
    return re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)


@pytest.mark.smoke
def test_pages_are_self_contained_and_say_what_they_show(pages):
    made, post = pages
    assert made["posterior"].endswith("post.report.html") and made["run"].endswith(os.path.join("run", "report.html"))
    expected_images = {"posterior": 5, "run": 3, "benchmark": 1}  # loss, sd, reliability, severity, detection; ...
    for kind, path in made.items():
        text = open(path, encoding="utf-8").read()
        images = _images(text)
        assert len(images) >= expected_images[kind], kind
        assert all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
        # nothing fetched from elsewhere: no external script, style sheet, image or link
        assert not re.search(r'<(script|link)\b|src="(?!data:)|href=', text), kind
        assert text.count("<table") >= 1 and text.count("<figcaption>") == text.count("<img")
    text = open(made["posterior"], encoding="utf-8").read()
    assert post.info.summary().split(" (")[0] in text  # the fit's own convergence verdict
    for heading in ("The fit", "ArviZ diagnostics", "Scores", "Corrupted test sets", "Out-of-distribution detection"):
        assert f"<h2>{heading}</h2>" in text
    assert all(s in text for s in ("rotated_90", "pixels_shuffled", "uniform_noise", "corrupted_severity_5"))
    run = open(made["run"], encoding="utf-8").read()
    assert "<h2>NUTS: digits_nuts</h2>" in run and "Rank plots" in run and "Trace plots" in run
    assert run.count("digits_mean_field") >= 1 and "r_hat_max" in run  # the verdicts and the R-hat table


def test_bad_paths_are_refused_naming_path(tmp_path, capsys):
    from zoo.cli import EXIT_USAGE, main
    from zoo.report import write_report

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    (tmp_path / "file.txt").write_text("x")
    for path, says in ((tmp_path / "absent", "nothing is there"), (tmp_path / "file.txt", "it is a file"),
                       (tmp_path / "mine", "no saved posterior and no bnn-zoo results")):
        with pytest.raises(InputError, match=f"^path: .*{says}"):
            write_report(path)
    assert sorted(os.listdir(tmp_path / "mine")) == ["notes.txt"]  # nothing written into the user's folder
    assert main(["report", str(tmp_path / "mine")]) == EXIT_USAGE  # the command line: one line, exit status 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zoo report: error: path: expected a saved posterior")


def test_every_page_renders_in_headless_chromium(pages, tmp_path):
    if CHROMIUM is None:
        pytest.skip("chromium is not on PATH (Debian's chromium package: apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")
    made, _ = pages
    with sync_api.sync_playwright() as driver:
        # headless=True passes --headless; launch() (not a persistent context) starts from a fresh temporary profile,
        # the --user-data-dir playwright makes and removes
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS[1:], headless=True)
        try:
            for kind, path in made.items():
                context = browser.new_context(viewport={"width": 1100, "height": 900}, offline=True)
                page = context.new_page()
                errors = []
                page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
                page.on("pageerror", lambda error: errors.append(str(error)))
                page.on("requestfailed", lambda request: errors.append(f"request failed: {request.url}"))
                page.goto("file://" + os.path.abspath(path), wait_until="load")
                widths = page.evaluate("Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
                tables = page.locator("table").count()
                page.screenshot(path=str(tmp_path / f"{kind}.png"), full_page=True)
                context.close()
                assert errors == [], (kind, errors)
                assert widths and min(widths) > 0, (kind, widths)
                assert tables >= 1, kind
                assert (tmp_path / f"{kind}.png").stat().st_size > 10_000
        finally:
            browser.close()
