"""The production path of a tuned program: ``iobo export --format env`` + ``source`` + ``LD_PRELOAD``, and ``iobo
run``. Each checks the effect on the compiled program (what HDF5 and MPI_File_get_info tell it, h5dump on its
file), not the text of the export; a run without the shim is the control."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from optuna.trial import TrialState

from iobo import adapters
from iobo.cli import main
from iobo.kernels.command import CommandSpec, Knob
from iobo.measure import format_mb_per_s
from iobo.runners.local import LocalRunner
from iobo.space import KiB, MiB
from iobo.tuner import Tuner

from support.programs import h5dump_layouts

RANKS = 2
TUNED = {"alignment_threshold": 64 * KiB, "alignment_interval": MiB, "cb_buffer_size": 4 * MiB,
         "romio_cb_write": "enable", "layout": "chunked", "chunk_size": 256 * KiB, "suffix": "tagged", "APP_MODE": "b"}
OWN = {"alignment": [1, 4096], "cb_buffer_size": "1048576"}  # what hdf5_18.c asks for itself
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in adapters.SHIM_VARIABLES + ("LD_PRELOAD", "ROMIO_HINTS")}


@pytest.fixture
def tuned_study(library, programs, storage, scratch):
    """A study of hdf5_18 whose best (only) trial ran TUNED: the configuration production must reproduce."""
    spec = CommandSpec(f"{programs['hdf5_18']} {{workdir}}/a{{suffix}}.h5",
                       knobs=(Knob("suffix", (("plain", ""), ("tagged", "-tagged"))),
                              Knob("APP_MODE", (("a", "a"), ("b", "b")), env="APP_MODE")),
                       params=("alignment_threshold", "alignment_interval", "cb_buffer_size", "romio_cb_write",
                               "layout", "chunk_size"))
    tuner = Tuner(kernel=spec, ranks=RANKS, storage=storage, study="app", workdir=str(scratch / "trials"),
                  runner=LocalRunner(), warmup=False, echo=None)
    [trial] = tuner.measure(tuner.open_study(), [({**spec.space().default(), **TUNED}, {"role": "search"})])
    assert trial.state == TrialState.COMPLETE and trial.user_attrs["not_applied"] == {}
    return spec


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def program_line(stdout: str) -> dict:
    [line] = [line for line in stdout.splitlines() if line.startswith("{")]
    return json.loads(line)


def assert_tuned(seen: dict, path: Path) -> None:
    """The program saw TUNED's settings over its own, and its file is laid out as TUNED asks."""
    assert seen["alignment"] == [64 * KiB, MiB]
    assert (seen["hints"]["cb_buffer_size"], seen["hints"]["romio_cb_write"]) == ("4194304", "enable")
    layouts = h5dump_layouts(path)
    assert sorted(layouts) == ["d0", "d1", "d2"] and all(dims == (65536,) for _, dims in layouts.values())


def test_export_env_source_and_preload_reproduce_the_tuned_setting(tuned_study, programs, hdf5_tools, capsys,
                                                                 storage, scratch):
    env_file = scratch / "tuned.env"
    code, _, err = cli(capsys, "export", "--storage", storage, "--format", "env", "-o", env_file,
                       "--hints-path", scratch / "romio-hints")
    assert code == 0, err
    text = env_file.read_text()
    assert "export APP_MODE=b" in text and "{suffix}" in text and "IOBO_SUFFIX" not in text

    def run(preload: bool, out: Path) -> dict:
        prefix = f"LD_PRELOAD={adapters.preload_library()} " if preload else ""
        script = f"source {env_file} && {prefix}mpiexec.mpich -n {RANKS} {programs['hdf5_18']} {out}"
        done = subprocess.run(["bash", "-c", script], env=CLEAN_ENV, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return program_line(done.stdout)

    with_shim = run(True, scratch / "production.h5")
    assert_tuned(with_shim, scratch / "production.h5")
    without = run(False, scratch / "control.h5")  # the exported variables alone change nothing the program set
    assert without["alignment"] == OWN["alignment"] and without["hints"]["cb_buffer_size"] == OWN["cb_buffer_size"]
    assert set(h5dump_layouts(scratch / "control.h5").values()) == {("contiguous", None)}


def test_iobo_run_applies_the_recommended_configuration_in_one_step(tuned_study, programs, hdf5_tools, capsys,
                                                                   storage, scratch, monkeypatch):
    monkeypatch.setenv("IOBO_LAYOUT", '"contiguous"')  # left over from an earlier `source`: not to leak in
    # a program of your own command line: the study's settings, its environment knob; the placed knob is named
    out = scratch / "run.h5"
    argv = ["run", "--storage", storage, "--ranks", RANKS, "--report", scratch / "report" / "io", "--",
            programs["hdf5_18"], out]
    result = subprocess.run([sys.executable, "-m", "iobo.cli", *map(str, argv)], capture_output=True, text=True,
                            timeout=120)  # another process: only the study tells it what to apply
    assert result.returncode == 0, result.stderr
    assert_tuned(program_line(result.stdout), out)
    assert "iobo run: not applied: knob suffix=tagged ('-tagged' goes where the tuned command has {suffix}" \
        in result.stderr
    report = adapters.read_report(scratch / "report" / "io")  # what the shim measured, said on stderr
    assert report["bytes_written"] == program_line(result.stdout)["bytes_written"]
    moved, seconds = adapters.run_measure(report)
    assert f"iobo run: {format_mb_per_s(moved / seconds / 1e6)} MB/s ({moved:,} bytes of hdf5 I/O; the slowest " \
           f"rank spent {seconds:.4g} s in I/O calls)" in result.stderr

    # the environment knob reaches the program
    seen = scratch / "seen.txt"
    code, _, err = cli(capsys, "run", "--storage", storage, "--", "sh", "-c", f'echo "mode=$APP_MODE" > {seen}')
    assert code == 0, err
    assert seen.read_text() == "mode=b\n"

    # without a program: the tuned command itself, its knob placed, on the study's ranks, {workdir} as given
    workdir = scratch / "production"
    workdir.mkdir()
    code, _, err = cli(capsys, "run", "--storage", storage, "--workdir", workdir)
    assert code == 0, err
    assert f"mpiexec.mpich -n {RANKS} {programs['hdf5_18']} {workdir}/a-tagged.h5" in err
    assert [p.name for p in workdir.iterdir()] == ["a-tagged.h5"]
    assert all(layout == "chunked" for layout, _ in h5dump_layouts(workdir / "a-tagged.h5").values())


def test_iobo_run_passes_the_programs_exit_code_and_refuses_bad_input(tuned_study, capsys, storage, scratch):
    assert cli(capsys, "run", "--storage", storage, "--", "sh", "-c", "exit 7")[0] == 7
    code, _, err = cli(capsys, "run", "--storage", storage, "--", str(scratch / "nothing-here"))
    assert code == 2 and "cannot start" in err and "Traceback" not in err


def test_iobo_run_runs_the_default_once_the_confirmation_showed_no_gain(storage, scratch, capfd):
    """The proposal (files=per_process, 4 MiB collective buffers) re-measured at ~0.95x [0.9-1.1]: the program
    gets the system default, and is told why."""
    from iobo.trials import ROLE_SEARCH

    from support.studies import add, confirmed, defaults, vpic_tuner

    changes = {"files": "per_process", "cb_buffer_size": 4 * MiB}
    study = vpic_tuner(storage, scratch).open_study()
    defaults(study)
    add(study, 150.0, ROLE_SEARCH, 4, changes)
    confirmed(study, [(100.0, 93.0), (96.0, 101.0), (104.0, 88.0), (101.0, 97.0), (99.0, 104.0)], changes)
    assert main(["run", "--storage", storage, "--", "env"]) == 0
    out, err = capfd.readouterr()
    assert "IOBO_FILES" not in out and "IOBO_CB_BUFFER_SIZE" not in out and "ROMIO_HINTS" not in out
    assert ("iobo run: study 's', keep the system default: the confirmation of cb_buffer_size=4 MiB, "
            "files=per_process measured 0.9") in err
    assert err.count(": the system default\n") == 1
