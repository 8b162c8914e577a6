"""Checkpoint/restart kernel on real MPI (2 ranks, MPICH) and parallel HDF5, small sizes on tmpfs."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from kernel_runs import assert_ok, assert_rejected, module_dir, run_kernel_cli  # noqa: F401  (fixture)

from iobo.kernels import checkpoint
from iobo.measure import mixed_objective

MODULE = "iobo.kernels.checkpoint"
RANKS, VARIABLES, VARIABLE_BYTES, CHECKPOINTS = 2, 5, 4096, 2
COUNT = VARIABLE_BYTES // 8
FLAGS = ["--variables", str(VARIABLES), "--variable-bytes", str(VARIABLE_BYTES), "--checkpoints", str(CHECKPOINTS)]
CHECKPOINT_BYTES = RANKS * VARIABLES * VARIABLE_BYTES


@pytest.fixture(scope="module")
def shared_run(module_dir):
    out = module_dir / "shared"
    run = run_kernel_cli(MODULE, out, *FLAGS, "--keep")
    assert_ok(run)
    return out, run


def expected_variable(checkpoint_number: int, variable: int) -> np.ndarray:
    """A whole shared-file variable: both ranks' slices."""
    plans = [checkpoint.checkpoint_plans(rank, RANKS, True, VARIABLES, COUNT, checkpoint_number)[variable]
             for rank in range(RANKS)]
    return np.concatenate([plan.slabs[0].values for plan in plans])


def test_shared_checkpoints_hold_every_variable(shared_run):
    out, _ = shared_run
    assert sorted(p.name for p in out.iterdir()) == [f"chk_{i}.h5" for i in range(CHECKPOINTS)]
    for number in range(CHECKPOINTS):
        with h5py.File(out / f"chk_{number}.h5", "r") as file:
            assert sorted(file) == [f"var{v:02d}" for v in range(VARIABLES)]
            for variable in range(VARIABLES):
                assert file[f"var{variable:02d}"].dtype == np.float64
                np.testing.assert_array_equal(file[f"var{variable:02d}"][...], expected_variable(number, variable))


def test_write_and_restart_are_scored_by_the_mixed_objective(shared_run):
    _, run = shared_run
    result = run.result
    assert (result["bytes_written"], result["bytes_read"]) == (CHECKPOINTS * CHECKPOINT_BYTES, CHECKPOINT_BYTES)
    assert result["objective"] == "mixed" and result["verified"] is True
    write, read = result["write"]["mb_per_s"], result["read"]["mb_per_s"]
    assert result["mb_per_s"] == pytest.approx(mixed_objective(read, write, CHECKPOINT_BYTES,
                                                               CHECKPOINTS * CHECKPOINT_BYTES))
    assert min(read, write) < result["mb_per_s"] < max(read, write)
    assert [(line["phase"], line["step"], line["bytes"]) for line in run.steps] == [
        ("write", 0, CHECKPOINT_BYTES), ("write", 1, CHECKPOINT_BYTES), ("read", 2, CHECKPOINT_BYTES)]


def test_file_per_process_checkpoints(scratch):
    out = scratch / "per_process"
    config = {"files": "per_process", "cb_buffer_size": 4 * 2**20}
    run = run_kernel_cli(MODULE, out, *FLAGS, "--keep", config=config)
    assert_ok(run)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"chk_{i}.{rank}.h5" for i in range(CHECKPOINTS) for rank in range(RANKS))
    with h5py.File(out / "chk_1.1.h5", "r") as file:
        np.testing.assert_array_equal(file["var03"][...], expected_variable(1, 3)[COUNT:])
    result = run.result
    assert result["effective"]["driver"] == "sec2" and set(result["not_applied"]) == {"cb_buffer_size"}
    assert result["verified"] is True


@pytest.mark.parametrize("phases, written, read", [("write", CHECKPOINTS * CHECKPOINT_BYTES, 0),
                                                   ("read", 0, CHECKPOINT_BYTES)])
def test_one_phase_alone(scratch, phases, written, read):
    out = scratch / phases
    run = run_kernel_cli(MODULE, out, *FLAGS, "--phases", phases, "--verify")
    assert_ok(run)
    result = run.result
    assert (result["bytes_written"], result["bytes_read"], result["objective"]) == (written, read, phases)
    assert result["mb_per_s"] == result[phases]["mb_per_s"] and result["verified"] is True
    assert {line["phase"] for line in run.steps} == {phases}


@pytest.mark.parametrize(
    "flags, fragments",
    [(["--variable-bytes", "12"], ["--variable-bytes=12", "multiples of 8"]),
     (["--variables", "0"], ["--variables=0", ">= 1"]),
     (["--phases", "restart"], ["--phases='restart'", "write, read, write+read"])],
    ids=["partial-value", "zero-variables", "unknown-phases"],
)
def test_bad_options_exit_2_before_any_io(scratch, flags, fragments):
    out = scratch / "bad"
    assert_rejected(run_kernel_cli(MODULE, out, *flags), out, fragments)
