"""GCRM-IO kernel on real MPI (2 ranks, MPICH) and parallel HDF5, small sizes on tmpfs."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from kernel_runs import assert_ok, assert_rejected, run_kernel_cli

from iobo.kernels import gcrm

MODULE = "iobo.kernels.gcrm"
RANKS, STEPS, CELLS, LEVELS = 2, 2, 1024, 10
FLAGS = ["--cells", str(CELLS), "--levels", str(LEVELS), "--steps", str(STEPS), "--keep", "--verify"]


def rows(name: str) -> int:
    """Rows of a variable's dataset over both ranks."""
    return RANKS * CELLS * dict(gcrm.VARIABLES)[name]


def test_contiguous_run_writes_every_variable_and_reports_bytes(scratch):
    out = scratch / "default"
    run = run_kernel_cli(MODULE, out, *FLAGS)
    assert_ok(run)
    with h5py.File(out / "gcrm.h5", "r") as file:
        for step in range(STEPS):
            for variable, (name, _) in enumerate(gcrm.VARIABLES):
                shape = (rows(name), LEVELS)
                dataset = file[f"Timestep_{step}/{name}"]
                assert dataset.shape == shape and dataset.chunks is None
                np.testing.assert_array_equal(dataset[...], gcrm.variable_values(shape, 0, shape[0], step, variable))
    step_bytes = RANKS * CELLS * 7 * LEVELS * 4
    assert [(line["step"], line["bytes"]) for line in run.steps] == [(0, step_bytes), (1, step_bytes)]
    result = run.result
    assert (result["bytes_written"], result["bytes_read"], result["verified"]) == (STEPS * step_bytes, 0, True)
    assert result["mb_per_s"] == pytest.approx(result["bytes"] / result["seconds"] / 1e6)


def test_chunk_shape_is_tuned_by_size_and_levels(scratch):
    config = {"layout": "chunked", "chunk_size": 64 * 1024, "chunk_levels": 5, "transfer_mode": "collective"}
    out = scratch / "chunked"
    run = run_kernel_cli(MODULE, out, *FLAGS, config=config)
    assert_ok(run)
    # 64 KiB / (4 bytes x 5 levels) = 3276 rows, cut to the dataset's rows
    expected = {"pressure": (2048, 5), "temperature": (2048, 5), "wind": (3276, 5), "vorticity": (3276, 5)}
    with h5py.File(out / "gcrm.h5", "r") as file:
        assert {name: file[f"Timestep_1/{name}"].chunks for name in expected} == expected
    effective = run.result["effective"]
    assert effective["chunk_levels"] == 5 and effective["chunk_shape"] == [3276, 5]
    assert effective["actual_io_mode"] == "chunk_collective"
    assert run.result["not_applied"] == {} and run.result["verified"] is True


def test_chunk_levels_are_cut_to_the_levels():
    assert gcrm.chunks({"layout": "chunked", "chunk_size": 1024, "chunk_levels": 25}, (100, 10)) == (25, 10)
    assert gcrm.chunks({"layout": "chunked", "chunk_size": 2**20, "chunk_levels": 1}, (100, 10)) == (100, 1)
    assert gcrm.chunks({"layout": "contiguous"}, (100, 10)) is None


@pytest.mark.parametrize(
    "flags, config, fragments",
    [
        (["--levels", "0"], None, ["--levels=0", ">= 1"]),
        (["--cells", "16", "--levels", "5"], {"layout": "chunked", "chunk_size": 64 * 1024},
         ["chunk_size=64 KiB", "chunk_size <= 1920 bytes"]),
        ([], {"chunk_levels": 5}, ["chunk_levels", "layout='chunked'"]),
    ],
    ids=["zero-levels", "chunk-above-dataset", "chunk-levels-without-chunking"],
)
def test_bad_input_exits_2_before_any_io(scratch, flags, config, fragments):
    out = scratch / "bad"
    assert_rejected(run_kernel_cli(MODULE, out, *flags, config=config), out, fragments)
