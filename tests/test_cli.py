"""The command line end to end on a real short study."""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from iobo.cli import main

from support.sizes import SMALL_VPIC


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_kernels_and_space(capsys):
    code, out, _ = run(capsys, "kernels")
    assert code == 0 and {"vpic", "vorpal", "gcrm", "bdcats", "checkpoint", "ior", "tile"} <= {line.split()[0] for line in out.splitlines()}
    code, out, _ = run(capsys, "space", "vpic")
    assert code == 0 and "striping_factor" in out and "files" in out


def test_tune_then_best_export_report(capsys, storage, scratch, tmp_path):
    code, out, err = run(capsys, "tune", "vpic", "--ranks", 2, "--trials", 5, "--storage", storage,
                         "--study", "c", "--workdir", scratch, "--sampler", "tpe",
                         "--option", f"particles={SMALL_VPIC['particles']}", "--option", "steps=2", "--confirm", "0")
    assert code == 0, err
    assert out.count("[default]") == 3 and "speedup:" in out and "RoTI" in out
    code, out, _ = run(capsys, "best", "--storage", storage)  # the only study: no --study needed
    assert code == 0 and "best:" in out and "hdf5:" in out
    code, out, _ = run(capsys, "export", "--storage", storage, "--study", "c", "--format", "json")
    assert code == 0 and set(json.loads(out)) >= {"cb_buffer_size", "files"}
    code, out, _ = run(capsys, "export", "--storage", storage, "--format", "h5tuner-xml")
    assert ET.fromstring(out).tag == "Parameters"
    hints = tmp_path / "hints"
    code, _, err = run(capsys, "export", "--storage", storage, "--format", "romio-hints", "-o", hints)
    assert code == 0 and hints.exists()
    code, out, _ = run(capsys, "report", "--storage", storage, "--study", "c")
    assert code == 0 and re.search(r"^trials: +5 complete$", out, re.M)


def test_characterize_a_real_darshan_log(capsys, tmp_path):
    import darshan

    log = Path(darshan.__file__).parent / "examples" / "example_logs" / "example.darshan"
    code, out, _ = run(capsys, "characterize", log)
    assert code == 0 and "2048 ranks" in out and "MPI-IO calls" in out
    code, out, _ = run(capsys, "characterize", log, "--json")
    assert json.loads(out)["nprocs"] == 2048
    junk = tmp_path / "junk.darshan"
    junk.write_text("not a log")
    code, _, err = run(capsys, "characterize", junk)
    assert code == 2 and str(junk) in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["tune", "nope"], "unknown kernel 'nope'"),
        (["tune", "vpic", "--ranks", "0"], "ranks must be a positive integer; got 0"),
        (["tune", "vpic", "--option", "particles=0"], "particles"),
        (["tune", "vpic", "--mpiexec", "mpiexec.nosuch"], "'mpiexec.nosuch' is not on PATH"),
        (["best"], "holds 0 studies"),
        (["report", "--study", "missing"], "study 'missing' is not in"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(capsys, storage, scratch, argv, message):
    code, _, err = run(capsys, *argv, "--storage", storage, *(["--workdir", scratch] if argv[0] == "tune" else []))
    assert code == 2
    assert message in err
    assert not list(scratch.glob("trial-*"))
