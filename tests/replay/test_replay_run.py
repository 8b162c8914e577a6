"""The replay kernel (python -m iobo.replay.run) on 2 real MPI ranks under the preload shim.

Each hand-made trace (tests/support/traces.py) is replayed with mpiexec.mpich
as tests/adapters/test_programs.py runs the C programs: the shim preloaded
with a report prefix. The shim's report of the replay (not the replay's own
account) must show the trace's bytes per level, call counts, transfer modes
and hints, and h5dump the trace's datasets, layouts and filters.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iobo import adapters
from iobo.config import IOConfig
from iobo.kernels import ior
from iobo.replay import read_raw

from support.programs import h5dump_layouts
from support.traces import checkpoint_steps, write_raw

RANKS = 2
ROWS, COLS, SLABS, ITEM = 16, 1024, 8, 8
SLAB_BYTES = ROWS // SLABS * COLS * ITEM


def replay(per_rank, scratch: Path, *options: str) -> tuple[dict, dict, Path]:
    """Write the raw traces, read them into a trace, replay it under the shim; (printed line, report, workdir)."""
    write_raw(scratch / "raw", per_rank, scratch / "program")
    trace = scratch / "trace.json"
    read_raw(scratch / "raw").save(trace)
    prefix, workdir = scratch / "report", scratch / "replay"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOBO_") and k not in ("LD_PRELOAD", "ROMIO_HINTS")}
    env.update(adapters.preload_env(IOConfig.from_values({}, space=ior.space()), report_prefix=prefix))
    done = subprocess.run(["mpiexec.mpich", "-n", str(RANKS), sys.executable, "-m", "iobo.replay.run", str(trace),
                           "--workdir", str(workdir), *options], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, done.stdout
    return json.loads(lines[0]), adapters.read_report(prefix), workdir


def mpiio_events(rank: int) -> list[dict]:
    return [{"op": "MPI_File_open", "fh": 0, "name": "{workdir}/m.dat", "path": "{workdir}/m.dat", "amode": 1 | 4,
             "procs": RANKS, "hints": {"cb_buffer_size": "1048576", "romio_cb_write": "enable"}, "ok": True},
            {"op": "MPI_File_set_view", "fh": 0, "disp": 0, "etype_size": 1, "filetype_size": 1,
             "filetype_extent": 1, "contiguous": True, "ok": True}]\
        + [{"op": "MPI_File_write_at_all", "fh": 0, "offset": (step * RANKS + rank) * 65536, "bytes": 65536,
            "collective": True, "ok": True} for step in range(3)]\
        + [{"op": "MPI_File_write_at", "fh": 0, "offset": (3 * RANKS + rank) * 65536, "bytes": 4096,
            "collective": False, "ok": True},
           {"op": "MPI_File_sync", "fh": 0, "ok": True},
           {"op": "MPI_File_close", "fh": 0, "ok": True}]


def posix_events(rank: int) -> list[dict]:
    return [{"op": "open", "fd": 0, "name": f"{{workdir}}/p.{rank}", "path": f"{{workdir}}/p.{rank}",
             "flags": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "ok": True}]\
        + [{"op": "pwrite", "fd": 0, "offset": 8192 * i, "bytes": 8192, "ok": True} for i in range(4)]\
        + [{"op": "write", "fd": 0, "offset": 32768, "bytes": 100, "ok": True},
           {"op": "fsync", "fd": 0, "ok": True},
           {"op": "close", "fd": 0, "ok": True}]


def test_hdf5_replay_has_the_traced_bytes_calls_layouts_filters_and_transfers(library, hdf5_tools, scratch):
    """Two chunked+deflate checkpoints with collective writes, one contiguous with independent ones."""
    per_rank = [checkpoint_steps(r, RANKS, 2, chunked=True) + checkpoint_steps(r, RANKS, 1, collective=False, first=2)
                for r in range(RANKS)]
    printed, report, workdir = replay(per_rank, scratch)

    assert report["level"] == "hdf5"
    hdf5 = report["levels"]["hdf5"]["write"]
    assert hdf5["calls"] == 3 * SLABS * RANKS and report["bytes_written"] == 3 * SLABS * RANKS * SLAB_BYTES
    assert hdf5["histogram"] == {SLAB_BYTES: 3 * SLABS * RANKS}
    assert report["effective"]["transfer"]["write"]["modes"] == {"chunk_collective": 2 * SLABS * RANKS,
                                                                 "no_collective": SLABS * RANKS}
    assert report["hdf5_calls"] == 3 * (4 + SLABS) * RANKS  # create, dcreate, writes, dclose, fclose: all seen
    for name, layout in (("ck.0.h5", ("chunked", (ROWS // SLABS, COLS))), ("ck.1.h5", ("chunked", (2, COLS))),
                         ("ck.2.h5", ("contiguous", None))):
        assert h5dump_layouts(workdir / name) == {"temperature": layout}
    header = subprocess.run(["h5dump", "-p", "-H", str(workdir / "ck.0.h5")], capture_output=True, text=True).stdout
    assert "COMPRESSION DEFLATE { LEVEL 4 }" in header and 'GROUP "fields"' in header
    assert "H5T_IEEE_F64LE" in header and f"( {RANKS * ROWS}, {COLS} )" in header
    assert printed["bytes"]["hdf5"]["write"] == report["bytes_written"] and printed["not_replayed"] == {}


def test_mpiio_replay_has_the_traced_hints_calls_and_collective_share(library, scratch):
    printed, report, workdir = replay([mpiio_events(r) for r in range(RANKS)], scratch)

    assert report["level"] == "mpiio"
    write = report["levels"]["mpiio"]["write"]
    assert (write["calls"], write["collective_calls"], write["independent_calls"]) == (4 * RANKS, 3 * RANKS, RANKS)
    assert report["bytes_written"] == RANKS * (3 * 65536 + 4096)
    assert write["histogram"] == {65536: 3 * RANKS, 4096: RANKS}
    hints = report["effective"]["files"]["mpiio"][str(workdir / "m.dat")]["hints"]
    assert (hints["cb_buffer_size"], hints["romio_cb_write"]) == ("1048576", "enable")
    assert (workdir / "m.dat").stat().st_size == (3 * RANKS + 1) * 65536 + 4096


def test_posix_replay_has_the_traced_writes(library, scratch):
    printed, report, workdir = replay([posix_events(r) for r in range(RANKS)], scratch)

    assert report["level"] == "posix"
    write = report["levels"]["posix"]["write"]
    assert (write["calls"], write["bytes"]) == (5 * RANKS, RANKS * (4 * 8192 + 100))
    assert [(workdir / f"p.{r}").stat().st_size for r in range(RANKS)] == [4 * 8192 + 100] * RANKS
    # the interpreter's and iobo's modules are under IOBO_PRELOAD_EXCLUDE: the replay reads nothing the program did not
    assert report["levels"]["posix"]["read"]["calls"] == 0


def test_steps_replays_one_tenth_and_prints_the_scale(library, scratch):
    """--steps 1 of a 10-step trace: a tenth of the bytes and files, scale 10."""
    per_rank = [checkpoint_steps(r, RANKS, 10) for r in range(RANKS)]
    printed, report, workdir = replay(per_rank, scratch, "--steps", "1", "--compute", "recorded")

    assert report["bytes_written"] == RANKS * SLABS * SLAB_BYTES  # one step of ten
    assert printed["scale"] == pytest.approx(10.0)
    assert printed["steps"] == {"replayed": 1, "of": [10]}
    assert sorted(p.name for p in workdir.iterdir()) == ["ck.0.h5"]
    # one step's computation: the mean over the ten (the first holds the 0.5 s before it), then the tail
    assert printed["compute_s"] == pytest.approx((0.5 + 10 * 0.05) / 10 + 0.25, rel=0.01)


def test_a_file_another_rank_creates_is_awaited_before_it_is_opened(library, scratch):
    """Rank 0 computes 0.5 s, then creates log.txt; rank 1 opens it without O_CREAT (the program ordered them
    with a barrier the trace does not hold, as MACSio does with its log). Replayed with the recorded computation,
    rank 1 waits for the file instead of failing with ENOENT."""
    log = {"name": "{workdir}/log.txt", "path": "{workdir}/log.txt"}
    creator = [{"op": "open", "fd": 0, **log, "flags": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "ok": True,
                "gap_s": 0.5},
               {"op": "write", "fd": 0, "offset": 0, "bytes": 128, "ok": True},
               {"op": "close", "fd": 0, "ok": True}]
    opener = [{"op": "open", "fd": 0, **log, "flags": os.O_WRONLY, "ok": True},
              {"op": "pwrite", "fd": 0, "offset": 128, "bytes": 128, "ok": True},
              {"op": "close", "fd": 0, "ok": True}]
    printed, report, workdir = replay([creator, opener], scratch, "--compute", "recorded")

    assert report["levels"]["posix"]["write"]["calls"] == 2 and report["bytes_written"] == 256
    assert (workdir / "log.txt").stat().st_size == 256


def test_large_count_mpiio_calls_are_replayed(library, scratch):
    """MPI-4's large-count twins (MPI_File_write_at_c, as mpi4py 4 calls them) replay as their operation."""
    per_rank = [[{**e, "op": f"{e['op']}_c"} if e["op"].startswith("MPI_File_write") else e for e in mpiio_events(r)]
                for r in range(RANKS)]
    printed, report, workdir = replay(per_rank, scratch)

    assert report["levels"]["mpiio"]["write"]["calls"] == 4 * RANKS
    assert report["bytes_written"] == RANKS * (3 * 65536 + 4096) and printed["not_replayed"] == {}


ALLOCATOR_PROBE = r'''
import ctypes, json, os, sys
from pathlib import Path
from mpi4py import MPI
from iobo.replay.run import Replayer

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size, work = int(sys.argv[1]), Path(sys.argv[2])
replayer = Replayer(MPI.COMM_WORLD, work, None)
fd = os.open(work / "data", os.O_CREAT | os.O_RDWR, 0o644)
replayer.objects["fd"][3] = fd
before = libc.mallinfo2()
replayer.replay({"op": "pwrite", "fd": 3, "bytes": size, "offset": 0})
replayer.replay({"op": "pread", "fd": 3, "bytes": size, "offset": 0})
replayer.replay({"op": "read", "fd": 3, "bytes": size, "offset": 0})
after = libc.mallinfo2()
probe = libc.malloc(size // 2)
probed = libc.mallinfo2()
libc.free(probe)
print(json.dumps({"held": after.arena + after.hblkhd - before.arena - before.hblkhd,
                  "probe_mapped": probed.hblkhd - after.hblkhd >= size // 2,
                  "read_back": os.path.getsize(work / "data"), "calls": dict(replayer.calls)}))
'''


def test_the_replay_keeps_its_data_off_the_heap_and_leaves_the_allocator_as_a_program_would(scratch):
    """The data a replay writes and reads lives outside the C allocator (as a program's large arrays do), and no
    read allocates its bytes: glibc raises its mmap threshold to the size of any mapped block freed (mallopt(3)),
    and a replay that did so would serve HDF5's and MPI-IO's buffers from a heap the program does not have."""
    size = 16 << 20
    done = subprocess.run(["mpiexec.mpich", "-n", "1", sys.executable, "-c", ALLOCATOR_PROBE, str(size),
                           str(scratch)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["calls"] == {"pwrite": 1, "pread": 1, "read": 1}
    assert seen["read_back"] == size
    assert seen["held"] < size // 4, f"the replay's buffers took {seen['held']} bytes from the C allocator"
    assert seen["probe_mapped"], "a read moved the allocator's mmap threshold: a block of 8 MiB came from the heap"
