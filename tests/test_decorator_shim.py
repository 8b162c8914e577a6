"""``@iobo.tune`` on a ``@bash_app`` picks the shim built for the MPI and HDF5 of the program its command line runs,
and refuses a program linked to other libraries than every shim there (real Parsl workers, real MPICH and Open MPI
programs, a real shim cache). The program is found past ``mpiexec``/``srun`` and their options
(:func:`iobo.shim.command_program`, shared with ``iobo tune --command``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import optuna
import parsl
import pytest
from optuna.trial import TrialState
from parsl import bash_app

import iobo
from iobo import ConfigError, shim
from iobo.runners.parsl import local_config
from iobo.space import MiB, io_stack_space

ROOT = Path(__file__).resolve().parents[1]
SPACE = io_stack_space().select(["cb_buffer_size", "romio_cb_write"])
ASKED = {"cb_buffer_size": 4 * MiB, "romio_cb_write": "enable"}
OPEN_MPI_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}  # root here, not a user


@bash_app
def run_launched(launcher, program, target, io_config=None, stdout=None):
    """Start a compiled MPI program on 2 ranks with ``launcher`` and its options; nothing of iobo's in the line."""
    return f"echo starting && {launcher} -n 2 {program} {target}"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """An empty shim cache (XDG_CACHE_HOME) for this module's driver and workers: the clone's MPICH shim is the
    only one until a test builds another."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(scope="module")
def dfk(tmp_path_factory, cache, library):
    """Parsl with 1 worker that can import this module, started with the empty cache, Open MPI allowed as root,
    the user's choice of OMPIO (OMPI_MCA_io=ompio), IOBO_PRELOAD_LIBRARY unset (the shim is chosen per program)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", f"{Path(__file__).parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        patch.setenv("XDG_CACHE_HOME", str(cache))
        for name, value in OPEN_MPI_ROOT.items():
            patch.setenv(name, value)
        patch.setenv("OMPI_MCA_io", "ompio")
        patch.delenv("IOBO_PRELOAD_LIBRARY", raising=False)
        dfk = parsl.load(local_config(1, str(tmp_path_factory.mktemp("runinfo"))))
        yield dfk
        dfk.cleanup()
        parsl.clear()


@pytest.fixture(scope="module")
def open_mpi_program(tmp_path_factory):
    """tests/adapters/programs/hdf5_18.c built against Debian's Open MPI and its HDF5 (h5pcc.openmpi -shlib)."""
    out = tmp_path_factory.mktemp("openmpi")
    command = ["h5pcc.openmpi", "-shlib", "-Wall", "-Werror", f"-I{ROOT / 'tests/adapters/programs'}", "-o",
               str(out / "hdf5_18_openmpi"), str(ROOT / "tests/adapters/programs/hdf5_18.c")]
    build = subprocess.run(command, capture_output=True, text=True, cwd=out, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    program = out / "hdf5_18_openmpi"
    assert shim.linked_libraries(program)["mpi"].soname == "libmpi.so.40"
    return program


def test_the_program_of_a_command_line_is_found_past_launchers_and_their_options(programs, tmp_path):
    program = programs["hdf5_18"]
    for line in (f"mpiexec.mpich -n 2 {program} out.h5",
                 f"cd {tmp_path} && echo start; env A=1 mpiexec.openmpi --mca io romio321 -x A --oversubscribe "
                 f"-np 2 {program} x > log 2>&1",
                 f"mkdir -p out\nsrun --mpi=pmix -N 1 --ntasks=2 -c 1 {program} out/a.h5",
                 f"mpiexec -genv ROMIO_HINTS /tmp/h -ppn 1 \\\n  -n 2 {program}",
                 f"( HDF5_PARAPREFIX=/scratch {program} a.h5 )",
                 f"{program} a.h5 | tee log"):
        assert shim.command_program(line) == program, line
    assert shim.command_program(f"./{program.name} a.h5", cwd=program.parent) == program
    # nothing that links MPI or HDF5, or nothing found: no program (the shim is then chosen without one)
    for line in ("echo hi; ls -l", "mpiexec -n 2 ./missing a.h5", "python3 run.py", "echo 'unclosed"):
        assert shim.command_program(line) is None, line


def test_a_program_linked_to_open_mpi_is_refused_with_only_an_mpich_shim(dfk, library, open_mpi_program, storage,
                                                                         scratch):
    assert shim.built() == []  # the module's empty cache: the clone's MPICH shim is the only one
    assert shim.linked_libraries(library)["mpi"].soname == "libmpich.so.12"
    tuned = iobo.tune(study="refused", storage=storage, space=SPACE, echo=None, workdir=str(scratch / "iobo"))(
        run_launched)
    future = tuned("mpiexec.openmpi", str(open_mpi_program), str(scratch / "a.h5"), stdout=str(scratch / "a.out"))
    with pytest.raises(ConfigError) as raised:
        future.result(timeout=120)
    (trial,) = optuna.load_study(study_name="refused", storage=storage).get_trials()
    reason = trial.user_attrs["fail_reason"]
    assert trial.state == TrialState.FAIL
    for text in (reason, str(raised.value)):  # both libraries named, and the command that builds the other shim
        assert "libmpi.so.40" in text and "libmpich.so.12" in text and str(open_mpi_program) in text, text
        assert "iobo shim build --mpicc" in text
    out = scratch / "a.out"
    assert not (scratch / "a.h5").exists() and (not out.exists() or not out.read_text())  # the command never ran

    production = iobo.tune(study="refused", storage=storage, space=SPACE, mode="production", echo=None,
                           workdir=str(scratch / "iobo"))(run_launched)
    with pytest.raises(ConfigError, match="libmpi.so.40"):
        production("mpiexec.openmpi", str(open_mpi_program), str(scratch / "b.h5")).result(timeout=120)


def test_each_program_runs_under_the_shim_built_for_its_mpi(dfk, library, programs, open_mpi_program, cache,
                                                           storage, scratch):
    built = shim.build(h5pcc="h5pcc.openmpi")  # into the module's cache, which the worker reads too
    assert Path(built["library"]).is_relative_to(cache) and built["mpi"]["family"] == "openmpi"
    cases = {"openmpi": ("mpiexec.openmpi", open_mpi_program), "mpich": ("mpiexec.mpich", programs["hdf5_18"])}
    for name, (launcher, program) in cases.items():
        study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
        study.enqueue_trial(ASKED)
        tuned = iobo.tune(study=name, storage=storage, space=SPACE, echo=None, workdir=str(scratch / "iobo"))(
            run_launched)
        out = scratch / f"{name}.out"
        future = tuned(launcher, str(program), str(scratch / f"{name}.h5"), stdout=str(out))
        assert future.result(timeout=180) == 0
        trial = optuna.load_study(study_name=name, storage=storage).get_trials()[future.trial_number]
        assert trial.params == ASKED  # the enqueued configuration, asked first
        assert trial.state == TrialState.COMPLETE, trial.user_attrs.get("fail_reason")
        # the hints reached the program (what MPI_File_get_info told it), and the shim's report took its I/O
        seen = json.loads([line for line in out.read_text().splitlines() if line.startswith("{")][-1])
        assert seen["hints"]["cb_buffer_size"] == str(4 * MiB), (name, seen["hints"])
        assert seen["hints"]["romio_cb_write"] == "enable", (name, seen["hints"])
        assert trial.user_attrs["timed_by"] == "shim" and trial.user_attrs["io"]["ranks"] == 2
        not_applied = trial.user_attrs["not_applied"]
        if name == "mpich":  # ROMIO: both in effect
            assert not_applied == {} and trial.user_attrs["mpi_io"] is None
        else:  # the user chose OMPIO, which echoes romio_cb_write and ignores it: not applied, with the reason
            assert trial.user_attrs["mpi_io"] == "ompio" and set(not_applied) == {"romio_cb_write"}, not_applied
            assert "OMPIO component (OMPI_MCA_io=ompio)" in not_applied["romio_cb_write"]
