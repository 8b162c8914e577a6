"""The command line end to end on a real short study."""

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from iobo.cli import main

from support.sizes import SMALL_VPIC

SMALL_OPTIONS = ["--option", f"particles={SMALL_VPIC['particles']}", "--option", f"steps={SMALL_VPIC['steps']}"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_kernels_and_space(capsys):
    code, out, _ = run(capsys, "kernels")
    assert code == 0 and {"vpic", "vorpal", "gcrm", "bdcats", "checkpoint", "ior", "tile"} <= {line.split()[0] for line in out.splitlines()}
    code, out, _ = run(capsys, "space", "vpic")
    assert code == 0 and "striping_factor" in out and "files" in out


@pytest.mark.all_storages
def test_tune_then_best_export_report(capsys, storage, scratch, tmp_path):
    code, out, err = run(capsys, "tune", "vpic", "--ranks", 2, "--trials", 5, "--storage", storage,
                         "--study", "c", "--workdir", scratch, "--sampler", "tpe",
                         "--option", f"particles={SMALL_VPIC['particles']}", "--option", "steps=2", "--confirm", "0")
    assert code == 0, err
    assert out.count("[default]") == 3 and "speedup:" in out and "RoTI" in out
    code, out, _ = run(capsys, "best", "--storage", storage)  # the only study: no --study needed
    assert code == 0 and "best single run:" in out and "hdf5:" in out
    listed = out.splitlines()[0].removeprefix("recommended: ").split(" (", 1)[0]
    code, out, _ = run(capsys, "export", "--storage", storage, "--study", "c", "--format", "json")
    assert code == 0 and set(json.loads(out)) >= {"cb_buffer_size", "files"}
    assert listed == "keep the system default" or \
        {item.split("=")[0] for item in listed.split(", ")} <= set(json.loads(out))
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
    from iobo.storage import open_storage

    open_storage(storage)  # an existing storage without the study asked for
    code, _, err = run(capsys, *argv, "--storage", storage, *(["--workdir", scratch] if argv[0] == "tune" else []))
    assert code == 2
    assert message in err
    assert not list(scratch.glob("trial-*"))


def _one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("iobo: error: "), err
    return lines[0]


def _bad_storages(tmp_path):
    corrupt_db = tmp_path / "corrupt.db"
    corrupt_db.write_bytes(b"this is not an SQLite file" * 100)
    corrupt_log = tmp_path / "corrupt.log"  # a bad line followed by a good one: not a torn last write
    corrupt_log.write_text('garbage\n{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}\n')
    return {
        "bogus scheme": ("bogus://x", "unknown storage scheme 'bogus'"),
        "sqlite in a missing dir": (f"sqlite:///{tmp_path / 'missing' / 's.db'}", f"directory {tmp_path}/missing does not exist"),
        "corrupt sqlite": (f"sqlite:///{corrupt_db}", "not a usable SQLite study database"),
        "journal in a missing dir": (f"journal://{tmp_path}/missing/s.log", f"directory {tmp_path}/missing does not exist"),
        "corrupt journal": (f"journal://{corrupt_log}", "not a readable Optuna journal file"),
    }


@pytest.mark.parametrize("case", ["bogus scheme", "sqlite in a missing dir", "corrupt sqlite",
                                  "journal in a missing dir", "corrupt journal"])
@pytest.mark.parametrize("command", ["tune", "best"])
def test_a_storage_that_cannot_be_used_is_one_line_before_any_trial(capsys, scratch, tmp_path, case, command):
    url, message = _bad_storages(tmp_path)[case]
    argv = ["tune", "vpic", "--workdir", scratch, "--trials", 4, *SMALL_OPTIONS] if command == "tune" else ["best"]
    code, _, err = run(capsys, *argv, "--storage", url)
    assert code == 2
    line = _one_line_error(err)
    assert message in line and url in line
    assert not list(scratch.glob("trial-*")) and not (tmp_path / "missing").exists()


def test_best_on_a_missing_sqlite_file_does_not_create_it(capsys, tmp_path):
    missing = tmp_path / "typo.db"
    code, _, err = run(capsys, "best", "--storage", f"sqlite:///{missing}")
    assert code == 2
    assert f"no such file {missing}" in _one_line_error(err)
    assert not missing.exists()


def test_a_workdir_that_cannot_be_used_is_one_line_before_any_trial(capsys, storage, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for workdir, message in [(tmp_path / "missing" / "work", "its parent directory"),
                             (a_file / "work", "which is a file"), (a_file, "is a file")]:
        code, _, err = run(capsys, "tune", "vpic", "--storage", storage, "--workdir", workdir, *SMALL_OPTIONS)
        assert code == 2
        assert message in _one_line_error(err) and str(workdir) in err
    assert not (tmp_path / "missing").exists()


def test_a_workdir_without_permission_is_one_line(storage, tmp_path):
    """As root every directory is writable: the command runs without the capability to override permissions."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    drop = "-dac_override,-dac_read_search"
    done = subprocess.run(["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}",
                           sys.executable, "-m", "iobo.cli", "tune", "vpic", "--storage", storage,
                           "--workdir", str(locked / "work"), *SMALL_OPTIONS],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "is not writable (Permission denied)" in _one_line_error(done.stderr)


def test_a_negative_confirm_is_refused_while_parsing(capsys, storage, scratch, tmp_path):
    with pytest.raises(SystemExit) as stop:
        main(["tune", "vpic", "--storage", storage, "--workdir", str(scratch), "--confirm", "-1"])
    assert stop.value.code == 2
    assert "--confirm: must be >= 0, got -1" in capsys.readouterr().err
    assert not (tmp_path / "study.db").exists()  # nothing ran: not even the study was made


def test_disk_full_fails_every_trial_with_enospc_and_exits_1(capsys, storage, small_tmpfs):
    code, _, err = run(capsys, "tune", "vpic", "--storage", storage, "--study", "full", "--workdir", small_tmpfs,
                       "--trials", 4, "--runner", "local", "--sampler", "tpe", *SMALL_OPTIONS)
    assert code == 1, err
    assert "every trial failed (3 FAIL)" in err  # the 3 default runs: without a baseline the search stops
    import optuna

    trials = optuna.load_study(study_name="full", storage=storage).get_trials()
    assert len(trials) == 3
    for trial in trials:
        assert f"no space left on device at {small_tmpfs} (ENOSPC)" in trial.user_attrs["fail_reason"]
    assert not list(small_tmpfs.glob("trial-*"))


PROGRAM = """
import atexit, sys
from iobo import cli

class Loud:
    def __del__(self):
        print("torn down", flush=True)

kept = Loud()  # freed only by the interpreter's teardown
cli.main = lambda: (atexit.register(print, "exit handler ran"), print("done", end=""), int(sys.argv[1]))[-1]
cli.console()
"""


@pytest.mark.parametrize("exit_code", [0, 1, 2, 143])
def test_the_program_keeps_exit_code_output_and_exit_handlers_but_skips_the_teardown(exit_code):
    """``iobo`` (:func:`iobo.cli.console`) ends without the interpreter's teardown (0.3-1 s once torch is loaded):
    the command's exit code, its unflushed output and the exit handlers it registered all survive."""
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(exit_code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == exit_code
    assert done.stdout == "doneexit handler ran\n"  # no "torn down": the teardown was skipped


@pytest.mark.parametrize("argv, exit_code, output", [(["--help"], 0, "usage: iobo"), (["nosuch"], 2, "invalid choice"),
                                                     (["best", "--storage", "sqlite:////nonexistent/x.db"], 2,
                                                      "iobo: error: storage")])
def test_the_program_exits_with_argparse_and_iobo_error_codes(exit_code, argv, output):
    done = subprocess.run([sys.executable, "-m", "iobo.cli", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == exit_code
    assert output in done.stdout + done.stderr
