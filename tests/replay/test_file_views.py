"""A program that writes and reads through non-contiguous MPI-IO file views (subarray filetypes: iobo's own
MPI-Tile-IO-like kernel, `python -m iobo.kernels.tile`, run as a program on 2 real MPI ranks) is recorded with
its views' constructors and replayed through the same views: ROMIO's data sieving then makes the program's POSIX
calls (read-modify-write of each tile's rows), which a replay writing contiguous blocks did not (iobo check:
POSIX writes 64 vs 4, reads 74 vs 4)."""

import json
import sys

import pytest

from iobo.cli import main
from iobo.replay import Trace
from iobo.replay.check import failures

RANKS = 2


@pytest.fixture
def trace(library, scratch, monkeypatch, capsys):
    (scratch / "out").mkdir()
    monkeypatch.chdir(scratch)
    code = main(["record", "--ranks", str(RANKS), "--out", "tile.trace.json", "--", sys.executable, "-m",
                 "iobo.kernels.tile", "--out", str(scratch / "out"), "--tile", "64x256", "--tiles", "2x2"])
    assert code == 0, capsys.readouterr().err
    return scratch / "tile.trace.json"


def test_a_views_subarray_filetype_is_recorded(trace):
    views = [e for e in Trace.load(trace).expand(1) if e["op"] == "MPI_File_set_view"]
    assert views, "no view recorded"
    filetype = views[0]["filetype"]
    assert filetype["combiner"] == "subarray" and filetype["order"] == "c", filetype
    assert len(filetype["sizes"]) == len(filetype["subsizes"]) == len(filetype["starts"]) == 2, filetype
    assert filetype["starts"] != [0, 0] and filetype["old"]["combiner"] == "named", filetype  # rank 1's tile


def test_the_replay_writes_and_reads_through_the_same_views(trace, capsys):
    code = main(["check", "--trace", str(trace), "--configs", "1", "--repeats", "1"])
    out = capsys.readouterr().out
    stored = json.loads((trace.parent / "tile.trace.json.check.json").read_text())
    rows = {row["what"]: row for row in stored["signature"]}
    assert rows["posix write calls"]["program"] == rows["posix write calls"]["kernel"], out
    assert failures(stored["signature"]) == [] and code == 0, out
