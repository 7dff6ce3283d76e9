"""`zoo run` and every `zoo reproduce` job write only into a folder of their own (issue 45, item 2;
`base.run_folder`): pointed at the user's files or a saved posterior, each is refused before any work, from the
command line and from Python, and nothing there changes. tests/zoo/test_bad_inputs_files.py covers the rule."""
import importlib

import pytest

from base.errors import FolderNotOwnedError
from zoo.cli import REPRODUCE, main


def test_zoo_run_and_every_reproduce_job_refuse_the_users_folder_before_any_work(tmp_path, capsys, monkeypatch,
                                                                               every_kind_of_folder, files_under):
    from zoo.experiments import run

    def refuse(*a, **k):
        raise AssertionError("the job started before its folder was checked")

    real_main_job = run.main_job
    monkeypatch.setattr(run, "main_job", refuse)
    places = every_kind_of_folder
    before = files_under(tmp_path)
    for argv in (["run", "--out", str(places["user"])],
                 *(["reproduce", paper, "--out", str(places["posterior"])] for paper in sorted(REPRODUCE))):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"zoo {argv[0]}: error: --out: expected a new or empty folder") and err.count("\n") == 1
    # the jobs themselves, called from Python with the settings that take hours: refused before any work
    with pytest.raises(FolderNotOwnedError, match="^out: .*one holding the results of zoo run, got .*; it holds a fit "
                                                  "state saved by bnn-zoo"):
        real_main_job(str(places["state"]), size="full", workers=1, progress=False)
    for paper, (module, function, _) in sorted(REPRODUCE.items()):
        job = getattr(importlib.import_module(module), function)
        with pytest.raises(FolderNotOwnedError, match=f"^out_dir: .*one holding the results of zoo reproduce {paper}"):
            job(places["user"], "full", log=None)
    assert files_under(tmp_path) == before
