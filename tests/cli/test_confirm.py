"""``iobo confirm`` and ``iobo minimize`` on a study tuned elsewhere: they run where the study's trials ran (real
VPIC-IO runs, 2 ranks, tmpfs), refuse a --workdir on another type of file system, create nothing when nothing
runs, and confirm what they are asked to."""

import pytest

from iobo.cli import main
from iobo.minimize import MINIMAL_ATTR, Minimal
from iobo.stack import filesystem_type
from iobo.trials import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, ROLE_SEARCH

from support.studies import add, defaults, vpic_tuner

WHOLE = {"files": "per_process", "meta_block_size": 32768}


def tuned_on_tmpfs(storage, scratch):
    """A study whose trials ran in ``scratch`` (tmpfs): default runs and a faster search trial changing WHOLE."""
    study = vpic_tuner(storage, scratch).open_study()
    defaults(study, workdir=str(scratch))
    add(study, 150.0, ROLE_SEARCH, 4, WHOLE, workdir=str(scratch))
    return study


def confirm_runs(study, role):
    return [t for t in study.get_trials() if t.user_attrs.get("role") == role]


def test_confirm_without_workdir_runs_where_the_study_s_trials_ran(storage, scratch, tmp_path, monkeypatch, capsys):
    """As the README writes it (no --workdir), from a directory on ext4: the runs go to the study's tmpfs workdir,
    not to ./iobo-work."""
    study = tuned_on_tmpfs(storage, scratch)
    monkeypatch.chdir(tmp_path)
    assert filesystem_type(tmp_path) != filesystem_type(scratch)  # e.g. ext4 here, tmpfs there
    assert main(["confirm", "--storage", storage, "--runner", "local", "--no-minimize", "--repeats", "1"]) == 0
    capsys.readouterr()
    runs = confirm_runs(study, ROLE_CONFIRM_DEFAULT) + confirm_runs(study, ROLE_CONFIRM_BEST)
    assert len(runs) == 2 and {t.user_attrs["workdir"] for t in runs} == {str(scratch.resolve())}
    assert not (tmp_path / "iobo-work").exists()


@pytest.mark.parametrize("command", [["confirm", "--no-minimize", "--repeats", "1"], ["minimize", "--pairs", "2"]])
def test_a_workdir_on_another_file_system_is_refused_before_anything_runs(storage, scratch, tmp_path, capsys,
                                                                          command):
    study = tuned_on_tmpfs(storage, scratch)
    before = len(study.get_trials())
    elsewhere = tmp_path / "elsewhere"
    code = main([*command, "--storage", storage, "--runner", "local", "--workdir", str(elsewhere)])
    err = capsys.readouterr().err
    assert code == 2 and len(study.get_trials()) == before and not elsewhere.exists()
    assert err == (f"iobo: error: --workdir {elsewhere} is on {filesystem_type(tmp_path)}, but the trials of study 's' "
                   f"ran in {scratch}, on tmpfs: runs on another file system do not compare with them; leave "
                   f"--workdir out (the study's own is used) or give a directory on tmpfs\n")


@pytest.mark.parametrize("command", [["confirm"], ["minimize"]])
def test_nothing_to_run_creates_nothing(storage, scratch, tmp_path, monkeypatch, capsys, command):
    """A study that keeps the default and records no workdir: nothing runs, and no ./iobo-work is left behind."""
    study = vpic_tuner(storage, scratch).open_study()
    defaults(study)
    add(study, 80.0, ROLE_SEARCH, 4, WHOLE)  # slower than the default: the incumbent is a default run
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    before = len(study.get_trials())
    assert main([*command, "--storage", storage, "--runner", "local"]) == 0
    capsys.readouterr()
    assert len(study.get_trials()) == before
    assert list(here.iterdir()) == []


def test_confirm_no_minimize_confirms_the_whole_configuration_once_a_minimal_one_is_stored(storage, scratch,
                                                                                           capsys):
    study = tuned_on_tmpfs(storage, scratch)
    study.set_user_attr(MINIMAL_ATTR, Minimal(3, {"files": "per_process"}).to_attr())
    assert main(["confirm", "--storage", storage, "--runner", "local", "--no-minimize", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    [run] = confirm_runs(study, ROLE_CONFIRM_BEST)
    assert {k: run.user_attrs["config"][k] for k in WHOLE} == WHOLE  # the best trial's, not the minimal one
    assert "trial 3's whole configuration, not its minimal one" in out  # and the report says which it confirmed
