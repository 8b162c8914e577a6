"""VORPAL-IO kernel on real MPI (2 ranks, MPICH) and parallel HDF5, small sizes on tmpfs."""

from __future__ import annotations

import math
import shutil

import h5py
import numpy as np
import pytest
from kernel_runs import assert_ok, assert_rejected, module_dir, run_kernel_cli  # noqa: F401  (fixture)

from iobo import stack
from iobo.kernels import vorpal
from iobo.kernels.steps import StepFile, reread

MODULE = "iobo.kernels.vorpal"
RANKS, STEPS = 2, 2
BLOCK, COMPONENTS, BLOCKS = (8, 6, 4), 3, (2, 2, 1)  # 4 blocks: 2 per rank
SHAPE = (16, 12, 4, 3)
FLAGS = ["--block", "8x6x4", "--components", "3", "--blocks", "2x2x1", "--steps", str(STEPS)]


@pytest.fixture(scope="module")
def default_run(module_dir):
    out = module_dir / "default"
    run = run_kernel_cli(MODULE, out, *FLAGS, "--keep", "--verify")
    assert_ok(run)
    return out, run


def test_dataset_holds_every_block_of_every_step(default_run):
    out, run = default_run
    with h5py.File(out / "vorpal.h5", "r") as file:
        for step in range(STEPS):
            dataset = file[f"Timestep_{step}/E"]
            assert dataset.shape == SHAPE and dataset.dtype == np.float32
            np.testing.assert_array_equal(dataset[...], vorpal.block_values(SHAPE, (0,) * 4, SHAPE, step))
    assert run.result["verified"] is True


def test_blocks_are_shared_round_robin_and_not_contiguous():
    assert vorpal.my_blocks(0, 2, BLOCKS) == [(0, 0, 0), (1, 0, 0)]
    assert vorpal.my_blocks(1, 2, BLOCKS) == [(0, 1, 0), (1, 1, 0)]
    plan = vorpal.step_plans(1, 2, BLOCKS, BLOCK, COMPONENTS, 1)[0][0]
    assert [slab.start for slab in plan.slabs] == [(0, 6, 0, 0), (8, 6, 0, 0)]
    assert plan.slabs[0].values.shape == (*BLOCK, COMPONENTS)


def test_step_and_result_lines(default_run):
    _, run = default_run
    step_bytes = math.prod(SHAPE) * 4
    assert [(line["step"], line["bytes"]) for line in run.steps] == [(0, step_bytes), (1, step_bytes)]
    result = run.result
    assert (result["kernel"], result["bytes_written"], result["bytes_read"]) == ("vorpal", STEPS * step_bytes, 0)
    assert result["objective"] == "write" and result["mb_per_s"] == result["write"]["mb_per_s"]
    assert result["mb_per_s"] == pytest.approx(result["bytes"] / result["seconds"] / 1e6)
    assert result["blocks"] == list(BLOCKS) and result["effective"]["driver"] == "mpio"


def test_chunked_collective_write_takes_effect(scratch):
    config = {"layout": "chunked", "chunk_size": 64 * 1024, "transfer_mode": "collective"}
    out = scratch / "chunked"
    run = run_kernel_cli(MODULE, out, "--block", "32x16x8", "--blocks", "2x2x1", "--steps", "1", "--keep", "--verify",
                         config=config)
    assert_ok(run)
    chunks = (21, 32, 8, 3)  # 64 KiB by the row-major rule: whole trailing axes, then 21 of 64 x-planes
    assert stack.chunk_shape(64 * 1024, 4, (64, 32, 8, 3)) == chunks
    effective = run.result["effective"]
    assert effective["layout"] == "chunked" and effective["chunk_shape"] == list(chunks)
    assert effective["actual_io_mode"] == "chunk_collective"
    assert run.result["not_applied"] == {} and run.result["verified"] is True
    with h5py.File(out / "vorpal.h5", "r") as file:
        assert file["Timestep_0/E"].chunks == chunks


def test_reread_counts_a_corrupted_value(default_run, scratch):
    out, _ = default_run
    copy = scratch / "vorpal.h5"
    shutil.copy(out / "vorpal.h5", copy)
    with h5py.File(copy, "r+") as file:
        file["Timestep_1/E"][9, 7, 2, 1] = -1.0  # in rank 1's second block (x 8.., y 6..)
    plans = vorpal.step_plans(1, RANKS, BLOCKS, BLOCK, COMPONENTS, STEPS)
    step_file = StepFile(copy, False, plans, None, None, write=False)
    found = reread(step_file, stack.file_access_plist(None, {}))
    assert found.count == 1
    assert "Timestep_1/E[8, 6, 0, 0]+[1, 1, 2, 1]" in found.first and "read -1.0" in found.first


@pytest.mark.parametrize(
    "flags, config, fragments",
    [
        (["--block", "8x0x4"], None, ["--block='8x0x4'", "integers >= 1"]),
        (["--blocks", "1x1x1"], None, ["--blocks=1x1x1", "1 block(s) for 2 ranks", "multiple of 2"]),
        (["--blocks", "3x1x1"], None, ["--blocks=3x1x1", "3 block(s) for 2 ranks"]),
        (FLAGS, {"layout": "chunked", "chunk_size": 64 * 1024}, ["chunk_size=64 KiB", "chunk_size <= 9216 bytes"]),
    ],
    ids=["zero-cells", "more-ranks-than-blocks", "uneven-blocks", "chunk-above-dataset"],
)
def test_bad_input_exits_2_before_any_io(scratch, flags, config, fragments):
    out = scratch / "bad"
    assert_rejected(run_kernel_cli(MODULE, out, *flags, config=config), out, fragments)
