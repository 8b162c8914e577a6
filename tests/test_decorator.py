"""``@iobo.tune`` on real Parsl apps (a local HighThroughputExecutor), real h5py files, real SQLite."""

from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import optuna
import parsl
import pytest
from optuna.trial import TrialState
from parsl import bash_app, python_app
from parsl.app.errors import BashExitFailure
from parsl.data_provider.files import File

import iobo
from iobo import ConfigError, IOConfig, KernelError
from iobo.decorator import MODE_ENV, measure
from iobo.runners.parsl import local_config
from iobo.space import KiB, MiB, Workload, io_stack_space
from iobo.stack import requested_chunks
from iobo.trials import ROLE_DEFAULT, ROLE_SEARCH

from support.programs import h5dump_layouts

ROWS, COLS = 256, 256  # a 256 KiB float32 grid
SPACE = io_stack_space().select(["alignment_threshold", "alignment_interval", "layout", "chunk_size"])
WORKLOAD = Workload(dataset_bytes=ROWS * COLS * 4)
FAVOURED = {"alignment_threshold": 4 * KiB, "alignment_interval": 64 * KiB, "layout": "chunked",
            "chunk_size": 64 * KiB}
OTHER = {"alignment_threshold": 1, "alignment_interval": 1, "layout": "chunked", "chunk_size": 256 * KiB}


@python_app
def write_grid(path, favoured=None, io_config=None):
    """Write a ROWS x COLS grid with the configuration; report bytes and seconds.

    With ``favoured``, the reported seconds are synthetic (1 ms for that
    configuration, 4 ms for any other) so that the test knows the best.
    """
    import time

    import numpy as np

    import iobo.hdf5

    data = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    start = time.perf_counter()
    with iobo.hdf5.File(path, "w", io_config) as f:
        f.create_dataset("grid", data=data, **iobo.hdf5.dataset_options(io_config, data.shape, data.dtype))
    seconds = time.perf_counter() - start
    if favoured is not None:
        seconds = 0.001 if all(io_config.values.get(k) == v for k, v in favoured.items()) else 0.004
    return {"bytes": data.nbytes, "seconds": seconds}


@bash_app
def dump_settings(fail=False, io_config=None, outputs=()):
    """A bash app: its configuration reaches the shell as ROMIO_HINTS and IOBO_* variables."""
    import iobo.hdf5

    out = outputs[0].filepath
    exports = iobo.hdf5.shell_exports(io_config, out + ".hints")
    return exports + ("exit 3" if fail else f"env | grep -e ^IOBO_ -e ^ROMIO_HINTS > {out}")


@bash_app
def wait_then_write(seconds=0, io_config=None, outputs=()):
    """A bash app that sleeps ``seconds``, then writes its output file."""
    return f"sleep {seconds} && echo written > {outputs[0].filepath}"


KILLED_DRIVER = """
import sys

import parsl
from parsl.data_provider.files import File

import iobo
from iobo.runners.parsl import local_config
from test_decorator import wait_then_write

storage, runinfo, out = sys.argv[1:4]
parsl.load(local_config(1, runinfo))
iobo.tune(study="killed", storage=storage, default_repeats=1, echo=None)(wait_then_write)(
    seconds=3600, outputs=[File(out)]).result()
"""


@python_app
def unrelated(x):
    return x * 2


@bash_app
def run_program(program, target, io_config=None, stdout=None):
    """A bash app that starts a compiled MPI program (tests/adapters/programs/hdf5_18.c) and nothing else of iobo's."""
    return f"mpiexec.mpich -n 2 {program} {target}"


@pytest.fixture(scope="module")
def dfk(tmp_path_factory):
    """Parsl with 2 workers that can import this module (its apps are pickled by reference)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", f"{Path(__file__).parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        dfk = parsl.load(local_config(2, str(tmp_path_factory.mktemp("runinfo"))))
        yield dfk
        dfk.cleanup()
        parsl.clear()


def _study(storage, name):
    return optuna.load_study(study_name=name, storage=storage)


def test_tune_then_production_applies_the_best_configuration(dfk, storage, scratch):
    optuna.create_study(storage=storage, study_name="grid", direction="maximize")
    for values in (FAVOURED, OTHER):
        _study(storage, "grid").enqueue_trial(values)
    lines = []
    tuned = iobo.tune(study="grid", storage=storage, space=SPACE, workload=WORKLOAD, mode="tune",
                      sampler=optuna.samplers.RandomSampler(seed=1), echo=lines.append)(write_grid)
    futures = [tuned(str(scratch / f"tune-{i}.h5"), favoured=FAVOURED) for i in range(4)]  # 4 in flight
    assert all(f.result(timeout=120)["bytes"] == ROWS * COLS * 4 for f in futures)
    trials = _study(storage, "grid").get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    assert [t.user_attrs["role"] for t in trials] == [ROLE_SEARCH, ROLE_SEARCH, ROLE_DEFAULT, ROLE_SEARCH]
    assert trials[2].params == SPACE.default()
    assert trials[0].value == pytest.approx(ROWS * COLS * 4 / 0.001 / 1e6)
    assert all(t.user_attrs["timed_by"] == "task" for t in trials)
    assert sorted(f.trial_number for f in futures) == [0, 1, 2, 3]
    assert len(lines) == 4 and "MB/s" in lines[0]

    production = iobo.tune(study="grid", storage=storage, space=SPACE, workload=WORKLOAD, mode="production",
                           echo=lines.append)(write_grid)
    out = scratch / "production.h5"
    assert production(str(out)).result(timeout=60)["bytes"] == ROWS * COLS * 4
    assert "applying trial 0" in lines[-1]
    assert len(_study(storage, "grid").get_trials()) == 4  # production records nothing
    with h5py.File(out) as f:
        grid = f["grid"]
        assert grid.chunks == requested_chunks(FAVOURED, 4, (ROWS, COLS)) == (64, 256)
        offsets = [grid.id.get_chunk_info(i).byte_offset for i in range(grid.id.get_num_chunks())]
        assert len(offsets) == 4 and all(offset % (64 * KiB) == 0 for offset in offsets)


def test_a_failing_task_is_a_fail_trial_and_other_tasks_go_on(dfk, storage, scratch):
    study = optuna.create_study(storage=storage, study_name="bash", direction="maximize")
    study.enqueue_trial({**io_stack_space().default(), "cb_buffer_size": 4 * 1024 * 1024})
    tuned = iobo.tune(study="bash", storage=storage, default_repeats=1, echo=None)(dump_settings)
    working = tuned(outputs=[File(str(scratch / "working.txt"))])  # the enqueued configuration
    failing = tuned(fail=True, outputs=[File(str(scratch / "failing.txt"))])  # the system default
    other = unrelated(21)
    with pytest.raises(BashExitFailure):
        failing.result(timeout=60)
    assert other.result(timeout=60) == 42
    assert working.result(timeout=60) == 0  # the bash app's own result: its exit code
    trials = _study(storage, "bash").get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL]
    assert "BashExitFailure" in trials[1].user_attrs["fail_reason"]
    assert "exit code 3" in trials[1].user_attrs["fail_reason"]
    written = (scratch / "working.txt").read_text()
    assert trials[0].user_attrs["bytes"] == len(written) and trials[0].user_attrs["timed_by"] == "parsl"
    assert f"IOBO_CB_BUFFER_SIZE={4 * 1024 * 1024}" in written
    assert f"ROMIO_HINTS={scratch / 'working.txt.hints'}" in written
    assert (scratch / "working.txt.hints").read_text() == f"cb_buffer_size {4 * 1024 * 1024}\n"


def test_a_bash_app_runs_its_program_under_the_shim_and_the_shim_times_it(dfk, library, programs, hdf5_tools,
                                                                        storage, scratch, capsys):
    space = io_stack_space().select(["cb_buffer_size", "layout", "chunk_size"])
    tuned_values = {"cb_buffer_size": 4 * MiB, "layout": "chunked", "chunk_size": 256 * KiB}
    optuna.create_study(storage=storage, study_name="app", direction="maximize").enqueue_trial(tuned_values)
    tuned = iobo.tune(study="app", storage=storage, space=space, default_repeats=1, echo=None,
                      workdir=str(scratch / "iobo"))(run_program)
    runs = {}
    for name in ("tuned", "default"):  # the enqueued configuration, then the system default
        runs[name] = tuned(str(programs["hdf5_18"]), str(scratch / f"{name}.h5"), stdout=str(scratch / f"{name}.out"))
    assert [f.result(timeout=120) for f in runs.values()] == [0, 0]
    trials = {t.user_attrs["role"]: t for t in _study(storage, "app").get_trials()}
    seen = {name: json.loads((scratch / f"{name}.out").read_text()) for name in runs}

    # the setting reached the program: MPI_File_get_info gave it iobo's hint over its own, the file is chunked
    assert seen["tuned"]["hints"]["cb_buffer_size"] == "4194304"
    assert h5dump_layouts(scratch / "tuned.h5") == {name: ("chunked", (65536,)) for name in ("d0", "d1", "d2")}
    assert seen["default"]["hints"]["cb_buffer_size"] == "1048576"  # the program's own: nothing applied
    assert set(h5dump_layouts(scratch / "default.h5").values()) == {("contiguous", None)}
    # the trials' values are the shim's accounting of the program's I/O, not Parsl's task time
    for name, role in (("tuned", ROLE_SEARCH), ("default", ROLE_DEFAULT)):
        attrs = trials[role].user_attrs
        assert attrs["timed_by"] == "shim" and attrs["not_applied"] == {}
        assert attrs["bytes"] == seen[name]["bytes_written"] + seen[name]["bytes_read"]
        assert trials[role].value == pytest.approx(attrs["bytes"] / attrs["seconds"] / 1e6)
        assert attrs["io"]["level"] == "hdf5" and attrs["io"]["ranks"] == 2
    assert trials[ROLE_SEARCH].user_attrs["effective"]["dataset /d0"] == "chunked [65536]"
    assert not (scratch / "iobo").exists() or not list((scratch / "iobo").iterdir())  # per-call files removed

    # the CLI reads the study of a decorated task; confirm says in one line why it cannot re-run it
    from iobo.cli import main

    assert main(["best", "--storage", storage, "--study", "app"]) == 0
    out = capsys.readouterr().out
    assert "mpiio: cb_buffer_size=" in out and out.startswith("recommended: ")
    assert main(["export", "--storage", storage, "--study", "app", "--format", "env"]) == 0
    assert all(line.startswith("export ") for line in capsys.readouterr().out.splitlines())
    assert main(["report", "--storage", storage, "--study", "app"]) == 0
    assert "kernel:                  task run_program (@iobo.tune)" in capsys.readouterr().out
    assert main(["confirm", "--storage", storage, "--study", "app", "--runner", "local"]) == 2
    err = capsys.readouterr().err
    assert err == ("iobo: error: study 'app' was tuned by @iobo.tune on task 'run_program': only your pipeline can "
                   "run it again (mode='production' applies the best configuration)\n")


def test_a_call_of_a_killed_driver_is_failed_as_stale_by_the_next_driver(dfk, storage, scratch, tmp_path):
    """The workflow's driver is killed (SIGKILL, with its Parsl workers) while a tuned call runs: its trial is left
    RUNNING. The next driver's first call tells it FAIL as stale, says so, and tunes on."""
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "PYTHONPATH": f"{Path(__file__).parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    driver = subprocess.Popen([sys.executable, "-c", KILLED_DRIVER, storage, str(tmp_path / "runinfo"),
                               str(scratch / "never.txt")], env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while True:
        assert driver.poll() is None, driver.stderr.read()
        assert time.monotonic() < deadline, "the killed driver's call never started"
        try:
            if [t.state for t in _study(storage, "killed").get_trials()] == [TrialState.RUNNING]:
                break
        except KeyError:  # no study yet
            pass
        time.sleep(0.5)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()

    said = []
    tuned = iobo.tune(study="killed", storage=storage, default_repeats=1, echo=said.append)(wait_then_write)
    tuned(outputs=[File(str(scratch / "written.txt"))]).result(timeout=60)
    trials = _study(storage, "killed").get_trials()
    assert trials[0].state == TrialState.FAIL and trials[0].user_attrs["fail_reason"].startswith("stale:")
    assert [t.state for t in trials[1:]] == [TrialState.COMPLETE]
    assert any("trial 0 was left RUNNING by a dead driver" in line for line in said), said


def test_production_without_a_completed_trial_runs_the_default_and_says_so_once(dfk, storage, scratch):
    lines = []
    production = iobo.tune(study="empty", storage=storage, space=SPACE, mode="production",
                           echo=lines.append)(write_grid)
    for i in range(2):
        production(str(scratch / f"p{i}.h5")).result(timeout=60)
    assert len(lines) == 1 and "no completed trial yet" in lines[0] and "system default" in lines[0]
    with h5py.File(scratch / "p1.h5") as f:
        assert f["grid"].chunks is None  # contiguous: the default layout
    assert optuna.study.get_all_study_names(storage) == []  # nothing was created


def test_the_mode_comes_from_the_environment(dfk, storage, scratch, monkeypatch):
    tuned = iobo.tune(study="env", storage=storage, space=SPACE, echo=None)(write_grid)
    monkeypatch.setenv(MODE_ENV, "production")
    tuned(str(scratch / "a.h5")).result(timeout=60)
    assert optuna.study.get_all_study_names(storage) == []
    monkeypatch.setenv(MODE_ENV, "tune")
    tuned(str(scratch / "b.h5")).result(timeout=60)
    assert len(_study(storage, "env").get_trials()) == 1
    monkeypatch.setenv(MODE_ENV, "tuning")
    with pytest.raises(ConfigError, match="IOBO_MODE='tuning' is not a mode; allowed: tune, production"):
        tuned(str(scratch / "c.h5"))
    assert not (scratch / "c.h5").exists()


def _plain(path):
    return path


@python_app
def no_config_argument(path):
    return 1


@pytest.mark.parametrize(
    "app, kwargs, pattern",
    [
        (_plain, {}, "decorates a Parsl app; got function: stack it above @python_app"),
        (no_config_argument, {}, "takes no 'io_config' argument.*add `io_config=None`"),
        (write_grid, {"mode": "fast"}, "mode='fast' is not a mode"),
        (write_grid, {"default_repeats": 0}, "default_repeats must be an integer >= 1"),
        (write_grid, {"space": {"layout": "chunked"}}, "space must be an iobo.Space"),
        (write_grid, {"config_arg": "io-config"}, "config_arg must be a keyword name"),
    ],
)
def test_invalid_arguments_are_rejected_before_anything_runs(storage, app, kwargs, pattern):
    with pytest.raises(ConfigError, match=pattern):
        iobo.tune(storage=storage, **kwargs)(app)
    assert optuna.study.get_all_study_names(storage) == []


def test_the_configuration_argument_is_the_decorators(storage, scratch):
    tuned = iobo.tune(storage=storage, space=SPACE, echo=None)(write_grid)
    with pytest.raises(ConfigError, match="was given io_config=...; @iobo.tune passes it"):
        tuned(str(scratch / "x.h5"), io_config=IOConfig.default(SPACE))
    assert optuna.study.get_all_study_names(storage) == []


@python_app
def takes_kwargs(path, **kwargs):
    return 1


def test_a_study_of_another_task_is_not_mixed(dfk, storage, scratch):
    iobo.tune(study="s", storage=storage, space=SPACE, echo=None)(write_grid)(str(scratch / "a.h5")).result(60)
    other = iobo.tune(study="s", storage=storage, space=SPACE, echo=None)(takes_kwargs)
    with pytest.raises(ConfigError, match="study 's' was made for {'task': 'write_grid'}; this run asks for {'task': 'takes_kwargs'}"):
        other(str(scratch / "b.h5"))


def test_measure_takes_the_tasks_report_or_its_declared_files(tmp_path):
    import datetime

    record = {"try_time_launched": datetime.datetime(2026, 1, 1, 0, 0, 0),
              "try_time_returned": datetime.datetime(2026, 1, 1, 0, 0, 2)}
    assert measure(1000, (), record) == (1000, 2.0, "parsl")
    assert measure({"bytes": 1000, "seconds": 0.5}, (), record) == (1000, 0.5, "task")
    path = tmp_path / "out.bin"
    path.write_bytes(b"x" * 300)
    assert measure(None, [File(str(path))], record) == (300, 2.0, "parsl")
    assert measure("done", [str(path)], record) == (300, 2.0, "parsl")
    with pytest.raises(KernelError, match="declared no outputs"):
        measure(None, (), record)
    with pytest.raises(KernelError, match="cannot be measured"):
        measure(None, [str(tmp_path / "missing")], record)
    with pytest.raises(KernelError, match="bytes written must be a positive integer; the task reported 0"):
        measure(0, (), record)
    with pytest.raises(KernelError, match="seconds must be a positive number"):
        measure({"bytes": 10, "seconds": 0}, (), record)


MPI_WRITER = """
import sys
import numpy as np
from mpi4py import MPI
import iobo.hdf5
from iobo import IOConfig
from iobo.stack import actual_io_mode, effective_hints
config = IOConfig.from_values({"cb_buffer_size": 4194304, "transfer_mode": "collective",
                               "alignment_threshold": 4096, "alignment_interval": 65536})
comm = MPI.COMM_WORLD
with iobo.hdf5.File(sys.argv[1], "w", config, comm=comm) as f:
    dataset = f.create_dataset("x", shape=(comm.size * 1000,), dtype="f4")
    with iobo.hdf5.transfer(dataset, config):
        dataset[comm.rank * 1000:(comm.rank + 1) * 1000] = np.full(1000, comm.rank, dtype="f4")
        mode = actual_io_mode(dataset._dxpl)  # h5py's transfer plist of this dataset, as the write used it
    if comm.rank == 0:
        print(effective_hints(f)["cb_buffer_size"], dataset.id.get_offset() % 65536, mode)
"""


def test_the_task_helpers_apply_hints_and_collective_transfer_on_two_ranks(scratch):
    import subprocess
    import sys

    import numpy as np

    path = scratch / "shared.h5"
    run = subprocess.run(["mpiexec.mpich", "-n", "2", sys.executable, "-c", MPI_WRITER, str(path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    # the MPI-IO hint in effect, the dataset aligned to 64 KiB, the write collective
    assert run.stdout.split() == ["4194304", "0", "contiguous_collective"]
    with iobo.hdf5.File(path, "r") as f:
        assert np.array_equal(f["x"][:], np.repeat(np.arange(2, dtype="f4"), 1000))


def test_the_file_modes(scratch):
    path = scratch / "m.h5"
    with iobo.hdf5.File(path, "a") as f:  # created
        f["x"] = 1
    with pytest.raises(FileExistsError):
        iobo.hdf5.File(path, "w-")
    with iobo.hdf5.File(path, "a") as f:  # opened, kept
        assert list(f) == ["x"]
    with pytest.raises(ConfigError, match="HDF5 open mode 'rw' is not allowed; allowed: r, r\\+, w, w-, x, a"):
        iobo.hdf5.File(path, "rw")
