"""MPI-Tile-IO-like kernel on real MPI (2 ranks, MPICH): non-contiguous tiles through MPI-IO views, on tmpfs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kernel_runs import assert_ok, assert_rejected, run_kernel_cli

from iobo.kernels import tile
from iobo.measure import mixed_objective

MODULE = "iobo.kernels.tile"
RANKS, STEPS, ELEMENT = 2, 2, 64
FLAGS = ["--tile", "16x8", "--element-size", str(ELEMENT), "--tiles", "2x2", "--steps", str(STEPS)]
FRAME = 4 * 16 * 8 * ELEMENT
"""Bytes of one frame: 2x2 tiles of 16x8 elements."""


@pytest.mark.parametrize("transfer_mode", ["independent", "collective"])
def test_tiles_land_in_place_and_read_back(scratch, transfer_mode):
    out = scratch / transfer_mode
    config = {"transfer_mode": transfer_mode, "romio_cb_write": "enable"}
    run = run_kernel_cli(MODULE, out, *FLAGS, "--keep", config=config)
    assert_ok(run)
    # every word holds its own index in the file: the tiles went where their views put them
    np.testing.assert_array_equal(np.fromfile(out / "tile.dat", dtype=np.uint64),
                                  np.arange(STEPS * FRAME // 8, dtype=np.uint64))
    result = run.result
    assert (result["bytes_written"], result["bytes_read"], result["verified"]) == (STEPS * FRAME, STEPS * FRAME, True)
    write, read = result["write"]["mb_per_s"], result["read"]["mb_per_s"]
    assert result["mb_per_s"] == pytest.approx(mixed_objective(read, write, STEPS * FRAME, STEPS * FRAME))
    assert result["effective"]["transfer_mode"] == transfer_mode and result["hints"]["romio_cb_write"] == "enable"
    assert [(line["phase"], line["step"], line["bytes"]) for line in run.steps] == [
        ("write", 0, FRAME), ("write", 1, FRAME), ("read", 2, FRAME), ("read", 3, FRAME)]


def test_each_rank_owns_tiles_round_robin():
    array = tile.Array((2, 2), (16, 8), ELEMENT // 8)
    assert array.shape == (16, 32, 8)
    assert array.my_tiles(0, RANKS) == [(0, 0), (8, 0)] and array.my_tiles(1, RANKS) == [(0, 16), (8, 16)]
    words = array.words_of((8, 16), 1)
    assert words.shape == (8, 16, 8) and words[0, 0, 0] == FRAME // 8 + (8 * 32 + 16) * 8


def test_mismatches_name_the_tile_of_a_wrong_word():
    array = tile.Array((2, 2), (16, 8), ELEMENT // 8)
    phase = tile.TilePhase(None, Path("tile.dat"), array, array.my_tiles(1, RANKS), {}, False, write=False)
    words = array.words_of((8, 16), 0).copy()
    words[1, 2, 3] += 1
    phase.got = [((0, 16), 0, array.words_of((0, 16), 0)), ((8, 16), 0, words)]
    found = phase.mismatches()
    assert found.count == 1 and found.first.startswith("tile.dat:frame 0 tile at [8, 16]+[1, 2, 3]: expected")


@pytest.mark.parametrize(
    "flags, fragments",
    [(["--tiles", "1x1"], ["--tiles=1x1", "1 block(s) for 2 ranks"]),
     (["--tile", "0x8"], ["--tile='0x8'", "integers >= 1"]),
     (["--element-size", "12"], ["--element-size=12", "multiples of 8"])],
    ids=["more-ranks-than-tiles", "zero-tile", "partial-word"],
)
def test_bad_options_exit_2_before_any_io(scratch, flags, fragments):
    out = scratch / "bad"
    assert_rejected(run_kernel_cli(MODULE, out, *flags), out, fragments)
