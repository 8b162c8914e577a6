"""IOR-like kernel on real MPI (2 ranks, MPICH): POSIX, MPI-IO and HDF5 APIs, small sizes on tmpfs."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from kernel_runs import assert_ok, assert_rejected, run_kernel_cli

from iobo.kernels import ior
from iobo.measure import mixed_objective

MODULE = "iobo.kernels.ior"
RANKS, BLOCK, TRANSFER, SEGMENTS = 2, 16384, 4096, 3
FLAGS = ["--block-size", str(BLOCK), "--transfer-size", str(TRANSFER), "--segments", str(SEGMENTS)]
TOTAL = RANKS * BLOCK * SEGMENTS
"""Bytes written (and read) per phase over all ranks."""


def file_words(path, api: str) -> np.ndarray:
    """Every uint64 word of a file the kernel wrote."""
    if api == "hdf5":
        with h5py.File(path, "r") as file:
            return file[ior.DATASET][...]
    return np.fromfile(path, dtype=np.uint64)


@pytest.mark.parametrize("api", ior.APIS)
def test_shared_file_random_write_and_read(scratch, api):
    out = scratch / api
    run = run_kernel_cli(MODULE, out, *FLAGS, "--api", api, "--random", "--keep")
    assert_ok(run)
    # words are numbered by their place in the shared layout: the file is 0, 1, 2, ...
    np.testing.assert_array_equal(file_words(ior.file_path(out, api, True, 0), api),
                                  np.arange(TOTAL // 8, dtype=np.uint64))
    result = run.result
    assert (result["bytes_written"], result["bytes_read"], result["verified"]) == (TOTAL, TOTAL, True)
    write, read = result["write"]["mb_per_s"], result["read"]["mb_per_s"]
    assert result["objective"] == "mixed"
    assert result["mb_per_s"] == pytest.approx(mixed_objective(read, write, TOTAL, TOTAL))
    assert [(line["phase"], line["step"]) for line in run.steps] == [
        ("write", 0), ("write", 1), ("write", 2), ("read", 3), ("read", 4), ("read", 5)]
    assert result["effective"]["api"] == api and result["random"] is True


def test_random_order_shuffles_transfers_within_segments():
    layout = ior.Layout(1, RANKS, True, BLOCK * 4, TRANSFER, SEGMENTS, random=True)
    order = layout.order(1)
    assert sorted(order) == list(range(16)) and order != list(range(16))
    assert layout.offset(1, 3) == (1 * RANKS + 1) * BLOCK * 4 + 3 * TRANSFER


def test_file_per_process_mpiio_collective_with_hints(scratch):
    out = scratch / "fpp"
    config = {"files": "per_process", "transfer_mode": "collective", "cb_buffer_size": 4 * 2**20,
              "romio_cb_read": "enable"}
    run = run_kernel_cli(MODULE, out, *FLAGS, "--api", "mpiio", "--keep", config=config)
    assert_ok(run)
    for rank in range(RANKS):
        layout = ior.Layout(rank, RANKS, False, BLOCK, TRANSFER, SEGMENTS, random=False)
        expected = [layout.words(s, t) for s in range(SEGMENTS) for t in range(layout.transfers)]
        np.testing.assert_array_equal(np.fromfile(out / f"ior.dat.{rank}", dtype=np.uint64), np.concatenate(expected))
    result = run.result
    assert result["effective"]["transfer_mode"] == "collective" and result["not_applied"] == {}
    assert result["hints"]["cb_buffer_size"] == str(4 * 2**20) and result["hints"]["romio_cb_read"] == "enable"


def test_posix_reports_every_stack_setting_not_applied(scratch):
    config = {"transfer_mode": "collective", "cb_buffer_size": 4 * 2**20, "alignment_interval": 65536}
    run = run_kernel_cli(MODULE, scratch / "posix", *FLAGS, "--api", "posix", "--phases", "write", "--verify",
                         config=config)
    assert_ok(run)
    result = run.result
    assert set(result["not_applied"]) == set(config) and result["requested_hints"] == {}
    assert (result["bytes_written"], result["bytes_read"], result["objective"]) == (TOTAL, 0, "write")
    assert result["verified"] is True and {line["phase"] for line in run.steps} == {"write"}


def test_mismatches_name_the_offset_of_a_wrong_word():
    layout = ior.Layout(0, RANKS, True, BLOCK, TRANSFER, SEGMENTS, random=False)
    phase = ior.IorPhase(ior.PosixFile(ior.file_path(Path("/x"), "posix", True, 0), None, {}, {}, None, layout),
                         layout, write=False)
    words = layout.words(2, 1).copy()
    words[7] = 0
    phase.got = [(0, 0, layout.words(0, 0)), (2, 1, words)]
    found = phase.mismatches()
    assert found.count == 1 and found.first.startswith(f"ior.dat@{layout.offset(2, 1)}+word[7]: expected")


@pytest.mark.parametrize(
    "flags, fragments",
    [(["--transfer-size", "12"], ["--transfer-size=12", "multiples of 8"]),
     (["--block-size", "6144", "--transfer-size", "4096"], ["--block-size=6144", "multiples of 4096"]),
     (["--block-size", "0"], ["--block-size=0", ">= 1048576"]),
     (["--api", "nfs"], ["--api='nfs'", "posix, mpiio, hdf5"])],
    ids=["partial-word", "partial-transfer", "zero-block", "unknown-api"],
)
def test_bad_options_exit_2_before_any_io(scratch, flags, fragments):
    out = scratch / "bad"
    assert_rejected(run_kernel_cli(MODULE, out, *flags), out, fragments)
