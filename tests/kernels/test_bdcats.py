"""BD-CATS-IO kernel on real MPI (2 ranks, MPICH) and parallel HDF5: reads of VPIC-IO files, small sizes on tmpfs."""

from __future__ import annotations

import math

import h5py
import pytest
from kernel_runs import assert_ok, assert_rejected, module_dir, run_kernel_cli  # noqa: F401  (fixture)

from iobo.kernels import bdcats, vpic

MODULE = "iobo.kernels.bdcats"
RANKS, STEPS, PARTICLES, STRIDE = 2, 2, 3000, 4
HANG_LIMIT_S = 30
"""A bad input must fail well within this; a hang would be killed here and fail the test."""


def read_bytes(per_rank: int) -> int:
    """Bytes read over all ranks and steps when each rank reads ``per_rank`` particles of each variable."""
    return RANKS * per_rank * len(vpic.VARIABLES) * vpic.ITEMSIZE * STEPS


@pytest.fixture(scope="module")
def vpic_file(module_dir):
    """A shared-file VPIC-IO output, kept."""
    out = module_dir / "vpic"
    assert_ok(run_kernel_cli("iobo.kernels.vpic", out, "--particles", str(PARTICLES), "--steps", str(STEPS), "--keep"))
    return out / "vpic.h5"


@pytest.mark.parametrize("pattern, per_rank", [("full", PARTICLES), ("strided", math.ceil(PARTICLES / STRIDE)),
                                               ("subset", PARTICLES // STRIDE)])
def test_reads_its_own_input_and_checks_every_value(scratch, pattern, per_rank):
    out = scratch / pattern
    run = run_kernel_cli(MODULE, out, "--particles", str(PARTICLES), "--steps", str(STEPS), "--pattern", pattern,
                         "--stride", str(STRIDE))
    assert_ok(run)
    result = run.result
    assert (result["bytes_read"], result["bytes_written"]) == (read_bytes(per_rank), 0)
    assert result["objective"] == "read" and result["mb_per_s"] == result["read"]["mb_per_s"]
    assert result["verified"] is True and result["input_written"] is True
    assert [(line["phase"], line["step"]) for line in run.steps] == [("read", 0), ("read", 1)]


def test_reads_a_given_vpic_file_whose_layout_is_fixed(vpic_file, scratch):
    out = scratch / "given"
    config = {"layout": "chunked", "chunk_size": 64 * 1024, "transfer_mode": "collective", "romio_cb_read": "enable"}
    run = run_kernel_cli(MODULE, out, "--input", str(vpic_file), "--steps", str(STEPS), config=config)
    assert_ok(run)
    result = run.result
    assert result["bytes_read"] == read_bytes(PARTICLES) and result["verified"] is True
    assert set(result["not_applied"]) == {"layout", "chunk_size"}
    assert result["effective"]["layout"] == "contiguous" and result["effective"]["actual_io_mode"] == "contiguous_collective"
    assert result["hints"]["romio_cb_read"] == "enable"
    assert vpic_file.exists()


def test_a_wrong_value_in_the_input_fails_the_run(vpic_file, scratch):
    corrupted = scratch / "corrupted.h5"
    corrupted.write_bytes(vpic_file.read_bytes())
    with h5py.File(corrupted, "r+") as file:
        file["Timestep_1/py"][PARTICLES + 5] = -1.0  # rank 1's sixth particle
    run = run_kernel_cli(MODULE, scratch / "out", "--input", str(corrupted), "--steps", str(STEPS))
    assert run.returncode == 1
    assert run.result["verified"] is False
    assert f"1 of {2 * PARTICLES * 8 * STEPS} values read differ" in run.stderr
    assert f"Timestep_1/py[{PARTICLES}]+[5]: expected" in run.stderr and "read -1.0" in run.stderr


def test_missing_input_fails_at_once_with_a_clear_message(scratch):
    missing = scratch / "missing.h5"
    out = scratch / "out"
    run = run_kernel_cli(MODULE, out, "--input", str(missing), timeout=HANG_LIMIT_S)
    assert_rejected(run, out, [f"--input={missing}", "no such file"])


def test_truncated_input_fails_at_once_with_a_clear_message(vpic_file, scratch):
    truncated = scratch / "truncated.h5"
    truncated.write_bytes(vpic_file.read_bytes()[: vpic_file.stat().st_size // 2])
    out = scratch / "out"
    run = run_kernel_cli(MODULE, out, "--input", str(truncated), timeout=HANG_LIMIT_S)
    assert_rejected(run, out, [f"--input={truncated}", "not a complete HDF5 file", "truncated file"])


def test_input_with_too_few_steps_is_rejected(vpic_file, scratch):
    out = scratch / "out"
    run = run_kernel_cli(MODULE, out, "--input", str(vpic_file), "--steps", str(STEPS + 1), timeout=HANG_LIMIT_S)
    assert_rejected(run, out, [f"Timestep_{STEPS}/x", f"--steps={STEPS + 1}"])


@pytest.mark.parametrize(
    "flags, fragments",
    [(["--stride", "0"], ["--stride=0", ">= 1"]),
     (["--pattern", "random"], ["--pattern='random'", "full, strided, subset"])],
    ids=["zero-stride", "unknown-pattern"],
)
def test_bad_options_exit_2_before_any_io(scratch, flags, fragments):
    out = scratch / "bad"
    assert_rejected(run_kernel_cli(MODULE, out, *flags), out, fragments)


def test_space_has_read_hints_and_no_write_hints():
    names = bdcats.space().names
    assert {"romio_cb_read", "romio_ds_read", "layout", "transfer_mode"} <= set(names)
    assert not {"romio_cb_write", "romio_ds_write"} & set(names)
