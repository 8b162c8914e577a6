"""``iobo tune --command`` under Open MPI when the user's environment chooses OMPIO (``OMPI_MCA_io=ompio``): the
ROMIO-only hints are frozen at their defaults before the search with the reason (OMPIO ignores them while
``MPI_File_get_info`` echoes them, so the shim would read them back "in effect"), as striping is frozen off Lustre;
``cb_buffer_size``, which OMPIO honours, is searched. Real Open MPI ranks, a real shim built against Open MPI."""

import json
import subprocess
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from iobo import shim
from iobo.cli import main
from iobo.stack import romio_only
from iobo.space import io_stack_space
from iobo.trials import stored_space

ROOT = Path(__file__).resolve().parents[2]
RANKS = 2
ROMIO_ONLY = ("romio_cb_write", "cb_nodes", "cb_config_list")


@pytest.mark.parametrize("value, romio", [
    ("romio321", True), ("romio341", True), ("^ompio", True), ("ompio", False), ("ompio,romio321", False),
    ("^romio321", False), ("", False),
])
def test_which_ompi_mca_io_values_leave_romio(value, romio):
    assert shim.selects_romio(value) is romio


def test_romio_only_hints_are_those_ompio_ignores():
    space = io_stack_space()
    assert set(romio_only(space, "ompio", "ompio")) == set(ROMIO_ONLY) | {"romio_ds_write"}
    assert romio_only(space, "romio", "") == {} and romio_only(space, None) == {}


@pytest.fixture()
def open_mpi(tmp_path, monkeypatch):
    """hdf5_18.c built with h5pcc.openmpi -shlib, and a shim built for it in a fresh XDG_CACHE_HOME; Open MPI
    allowed to run as root (as here) and the user's OMPI_MCA_io=ompio."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("IOBO_PRELOAD_LIBRARY", raising=False)
    for name in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("OMPI_MCA_io", "ompio")
    program = tmp_path / "hdf5_18_openmpi"
    build = subprocess.run(["h5pcc.openmpi", "-shlib", "-Wall", "-Werror", f"-I{ROOT / 'tests/adapters/programs'}",
                            "-o", str(program), str(ROOT / "tests/adapters/programs/hdf5_18.c")],
                           capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert build.returncode == 0, build.stderr
    library = shim.build(h5pcc="h5pcc.openmpi")["library"]
    assert shim.io_component(library) == "ompio" and shim.io_component(library, {}) == "romio"
    return program


def test_under_ompio_the_romio_hints_are_frozen_with_the_reason(open_mpi, capsys, storage, scratch):
    params = ",".join(("cb_buffer_size", *ROMIO_ONLY))
    code = main(["tune", "--command", f"{open_mpi} {{workdir}}/a.h5", "--params", params, "--ranks", str(RANKS),
                 "--mpiexec", "mpiexec.openmpi", "--trials", "5", "--runner", "local", "--sampler", "random",
                 "--seed", "4", "--confirm", "0", "--storage", storage, "--workdir", str(scratch)])
    out, err = capsys.readouterr()
    assert code == 0, err
    study = optuna.load_study(study_name=f"hdf5_18_openmpi-{RANKS}ranks", storage=storage)
    frozen = study.user_attrs["frozen"]
    assert set(frozen) == set(ROMIO_ONLY), frozen
    reason = frozen["cb_nodes"]
    assert "OMPIO component (OMPI_MCA_io=ompio)" in reason and "ignores ROMIO's hints" in reason
    (line,) = [line for line in out.splitlines() if line.startswith("frozen at their defaults: ")]
    assert set(line.split(" (")[0].split(": ")[1].split(", ")) == set(ROMIO_ONLY), line
    assert out.index(line) < out.index("[search]"), out

    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 5, [t.user_attrs.get("fail_reason") for t in trials]
    assert all(t.user_attrs["mpi_io"] == "ompio" for t in trials)
    space = stored_space(study)
    search = [t for t in trials if t.user_attrs["role"] == "search"]
    for trial in search:  # never proposed, at their defaults in what ran
        assert not set(trial.params) & set(ROMIO_ONLY), trial.params
        assert all(trial.user_attrs["config"][k] == space[k].default for k in ROMIO_ONLY)
    asked = [t for t in search if t.user_attrs["config"]["cb_buffer_size"] != space["cb_buffer_size"].default]
    assert asked  # cb_buffer_size, which OMPIO honours, is searched and reaches the program
    for trial in asked:
        seen = json.loads([line for line in trial.user_attrs["stdout_tail"].splitlines() if line.startswith("{")][-1])
        assert seen["hints"]["cb_buffer_size"] == str(trial.user_attrs["config"]["cb_buffer_size"])
        assert "cb_buffer_size" not in trial.user_attrs["not_applied"]


def test_a_romio_hint_requested_under_ompio_is_not_applied_with_the_reason(open_mpi, scratch):
    """One run of the command with romio_cb_write=enable: OMPIO echoes the hint (the program reads it back), yet
    the run records it as not applied, with the reason, instead of in effect."""
    from iobo.kernels.command import CommandSpec
    from iobo.launch import KernelJob, MpiexecLauncher, run_kernel

    spec = CommandSpec(f"{open_mpi} {{workdir}}/a.h5", params=("cb_buffer_size", "romio_cb_write"))
    job = KernelJob(spec, {"romio_cb_write": "enable", "cb_buffer_size": 4 * 1024 * 1024}, RANKS, str(scratch),
                    launcher=MpiexecLauncher("mpiexec.openmpi"))
    result = run_kernel(job)["result"]
    seen = json.loads([line for line in result["stdout_tail"].splitlines() if line.startswith("{")][-1])
    assert seen["hints"]["romio_cb_write"] == "enable"  # MPI_File_get_info echoes it
    assert result["mpi_io"] == "ompio"
    assert result["not_applied"].keys() == {"romio_cb_write"}, result["not_applied"]
    assert "OMPIO component (OMPI_MCA_io=ompio)" in result["not_applied"]["romio_cb_write"]


def test_iobo_run_says_which_romio_hints_ompio_will_not_apply(open_mpi, capfd, storage, scratch, monkeypatch):
    """A study tuned under ROMIO (OMPI_MCA_io unset: iobo selects it) recommends romio_cb_write=enable; run in
    production where the user chose OMPIO, iobo run says the hint is not applied and why, and applies the rest."""
    from iobo.kernels.command import CommandSpec
    from iobo.launch import MpiexecLauncher
    from iobo.runners.local import LocalRunner
    from iobo.tuner import Tuner

    monkeypatch.delenv("OMPI_MCA_io")
    spec = CommandSpec(f"{open_mpi} {{workdir}}/a.h5", params=("cb_buffer_size", "romio_cb_write"))
    tuner = Tuner(kernel=spec, ranks=RANKS, storage=storage, study="app", workdir=str(scratch / "trials"),
                  runner=LocalRunner(), warmup=False, echo=None, launcher=MpiexecLauncher("mpiexec.openmpi"))
    asked = {"cb_buffer_size": 4 * 1024 * 1024, "romio_cb_write": "enable"}
    [trial] = tuner.measure(tuner.open_study(), [({**spec.space().default(), **asked}, {"role": "search"})])
    assert trial.state == TrialState.COMPLETE and trial.user_attrs["not_applied"] == {}
    assert trial.user_attrs["mpi_io"] == "romio"

    monkeypatch.setenv("OMPI_MCA_io", "ompio")
    code = main(["run", "--storage", storage, "--study", "app", "--ranks", str(RANKS), "--mpiexec", "mpiexec.openmpi",
                 "--", str(open_mpi), str(scratch / "b.h5")])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert "iobo run: not applied: romio_cb_write=enable (Open MPI runs with its OMPIO component " \
           "(OMPI_MCA_io=ompio)" in err, err
    assert "iobo run: not applied: cb_buffer_size" not in err  # OMPIO honours it
    seen = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    assert seen["hints"]["cb_buffer_size"] == str(4 * 1024 * 1024)
