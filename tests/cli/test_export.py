"""``iobo export``: the recommendation (the system default once its confirmation showed no gain), never a setting
recorded as not applied, and a word on stderr when there is nothing to export. Studies of known trials in a real
SQLite storage."""

import json

import pytest

from iobo.cli import main
from iobo.trials import FROZEN_ATTR, ROLE_SEARCH

from support.studies import add, confirmed, defaults, vpic_space, vpic_tuner

NO_GAIN = [(100.0, 93.0), (96.0, 101.0), (104.0, 88.0), (101.0, 97.0), (99.0, 104.0)]


def export(capsys, storage, *argv):
    code = main(["export", "--storage", storage, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_export_gives_the_default_once_the_confirmation_showed_no_gain(storage, scratch, capsys):
    study = vpic_tuner(storage, scratch).open_study()
    defaults(study)
    add(study, 150.0, ROLE_SEARCH, 4, {"files": "per_process", "cb_buffer_size": 4 << 20})
    code, out, _ = export(capsys, storage, "--format", "json")
    assert code == 0 and json.loads(out)["files"] == "per_process"  # before: the proposal
    confirmed(study, NO_GAIN, {"files": "per_process", "cb_buffer_size": 4 << 20})
    code, out, err = export(capsys, storage, "--format", "json")
    assert code == 0 and json.loads(out) == vpic_space().default()
    assert "iobo export: nothing to export: the recommendation is the system default\n" in err
    code, out, err = export(capsys, storage, "--format", "env")
    assert code == 0 and out == "" and "nothing to export: the recommendation is the system default" in err


def test_full_leaves_out_the_settings_recorded_as_not_applied(storage, scratch, capsys):
    study = vpic_tuner(storage, scratch).open_study()
    defaults(study)
    study.set_user_attr(FROZEN_ATTR, {"striping_factor": "the output directory is on tmpfs, not Lustre"})
    add(study, 150.0, ROLE_SEARCH, 4, {"files": "per_process", "cb_nodes": 2, "striping_factor": 4},
        not_applied={"cb_nodes": "ROMIO read back cb_nodes=1"})
    for full in ([], ["--full"]):
        code, out, err = export(capsys, storage, "--format", "json", *full)
        exported = json.loads(out)
        assert code == 0 and exported["files"] == "per_process"
        assert exported["cb_nodes"] is None and exported["striping_factor"] is None, (full, exported)
        assert "not applied here, so left at their defaults: cb_nodes, striping_factor" in err


@pytest.mark.parametrize("fmt", ["lfs", "h5tuner-xml", "romio-hints"])
def test_an_export_that_carries_none_of_the_changes_says_so(storage, scratch, capsys, fmt):
    study = vpic_tuner(storage, scratch).open_study()
    defaults(study)
    add(study, 150.0, ROLE_SEARCH, 4, {"files": "per_process"})  # an application knob: only json and env carry it
    code, _, err = export(capsys, storage, "--format", fmt)
    assert code == 0
    assert (f"iobo export: nothing to export in --format {fmt}: it carries none of the recommended changes "
            f"(files); --format json or env does\n") in err
    code, out, err = export(capsys, storage, "--format", "env")
    assert code == 0 and out == 'export IOBO_FILES=\'"per_process"\'\n' and "nothing to export" not in err
