"""The shim's raw trace (IOBO_PRELOAD_TRACE) on real compiled programs: each rank's outermost I/O calls, in order,
with what a replay needs, set against what the program did (its source, its printed figures, the shim's counters).

The calls a library makes inside another wrapped call are not listed (an H5Dwrite's MPI-IO and POSIX calls are what
the H5Dwrite does); the program's own POSIX calls beside HDF5 are (the checkpoint program syncs its file).
"""

import json
import os
import subprocess

from iobo import adapters
from iobo.config import IOConfig
from iobo.kernels import ior
from iobo.space import MiB

RANKS = 2


def traced(binary, args, scratch, values=None):
    """Run ``binary args`` on RANKS ranks under the shim with a trace prefix: ({rank: [lines]}, the shim's report)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOBO_") and k not in ("LD_PRELOAD", "ROMIO_HINTS")}
    env.update(adapters.preload_env(IOConfig.from_values(values or {}, space=ior.space()),
                                    report_prefix=scratch / "report"))
    env["IOBO_PRELOAD_TRACE"] = str(scratch / "trace")
    done = subprocess.run(["mpiexec.mpich", "-n", str(RANKS), str(binary), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {}
    for rank in range(RANKS):
        text = (scratch / f"trace.{rank}.trace.jsonl").read_text()
        lines[rank] = [json.loads(line) for line in text.splitlines()]
    assert sorted(p.name for p in scratch.glob("trace.*")) == [f"trace.{r}.trace.jsonl" for r in range(RANKS)]
    return lines, adapters.read_report(scratch / "report")


def test_an_hdf5_program_is_traced_call_by_call_at_its_own_level(library, programs, scratch):
    checkpoints, mib, slabs = 3, 1, 4
    lines, report = traced(programs["checkpoint"], [scratch / "ck", checkpoints, mib, slabs, 1, "collective"], scratch,
                           {"layout": "chunked", "chunk_size": 64 * 1024})  # a tuned run: the program's own dcpl
    rows = mib * MiB // (1024 * 8) // slabs
    for rank, trace in lines.items():
        header, *events, end = trace
        assert header["format"] == "iobo-trace" and header["rank"] == rank and header["ranks"] == RANKS
        assert header["argv"][1:] == [str(scratch / "ck"), "3", "1", "4", "1", "collective"]
        assert header["hdf5_linked"] == "dynamic"
        assert end["op"] == "end" and end["events"] == len(events) and end["dropped"] == 0
        ops = [e["op"] for e in events]
        one = ["H5Fcreate", "H5Dcreate"] + ["H5Dwrite"] * slabs + ["H5Dclose", "H5Fclose", "open", "fsync", "close"]
        assert ops == one * checkpoints  # no MPI_File_* or pwrite: those are inside the HDF5 calls
        assert all(e["ok"] and e["t1"] >= e["t0"] for e in events)
        assert all(a["t0"] >= b["t1"] for a, b in zip(events[1:], events))  # outermost calls do not overlap
        create = events[0]
        assert create["path"] == str(scratch / "ck.0.h5") and create["mpio"] and create["procs"] == RANKS
        dataset = events[1]
        assert dataset["name"] == "/temperature" and dataset["type"] == {"class": "float", "size": 8}
        assert dataset["dims"] == dataset["maxdims"] == [RANKS * mib * MiB // 8192, 1024]
        assert dataset["layout"] == "contiguous" and dataset["chunk"] is None  # what the program asked, not the shim
        writes = [e for e in events[:len(one)] if e["op"] == "H5Dwrite"]
        assert [w["sel"] for w in writes] == [{"kind": "hyperslab", "start": [rank * rows * slabs + s * rows, 0],
                                               "stride": [1, 1], "count": [rows, 1024], "block": [1, 1]}
                                              for s in range(slabs)]
        assert {w["xfer"] for w in writes} == {"collective"} and {w["bytes"] for w in writes} == {rows * 1024 * 8}
        assert events[len(one) - 3]["path"] == str(scratch / "ck.0.h5")  # the sync's open
    traced_bytes = sum(e["bytes"] for trace in lines.values() for e in trace if e.get("op") == "H5Dwrite")
    assert traced_bytes == report["bytes_written"] == RANKS * checkpoints * mib * MiB


def test_an_mpiio_and_a_posix_program_are_traced_with_offsets_and_the_programs_hints(library, programs, scratch):
    lines, report = traced(programs["mpiio"], [scratch / "m"], scratch)
    for rank, (header, *events, end) in lines.items():
        ops = [e["op"] for e in events]
        assert ops == (["MPI_File_open"] + ["MPI_File_write_at_all"] * 4 + ["MPI_File_write_at", "MPI_File_iwrite_at"]
                       + ["MPI_File_read_at_all"] * 4 + ["MPI_File_close"])
        opened = events[0]
        assert opened["procs"] == RANKS and opened["path"] == str(scratch / "m")
        assert opened["hints"] == {"cb_buffer_size": "1048576", "romio_cb_read": "disable", "romio_ds_read": "enable"}
        collective = [e for e in events if e["op"] == "MPI_File_write_at_all"]
        assert [e["offset"] for e in collective] == [(k * RANKS + rank) * MiB for k in range(4)]
        assert {e["bytes"] for e in collective} == {MiB} and all(e["collective"] for e in collective)
        assert events[5]["bytes"] == 4096 and not events[5]["collective"]
        assert len({e["fh"] for e in events}) == 1
    assert sum(e.get("bytes", 0) for t in lines.values() for e in t if "write" in e.get("op", "")) \
        == report["bytes_written"]

    scratch_posix = scratch / "p"
    scratch_posix.mkdir()
    lines, report = traced(programs["posix"], [scratch_posix / "f"], scratch_posix)
    for rank, (header, *events, end) in lines.items():
        mine = [e for e in events if e.get("path", "").startswith(str(scratch_posix)) or "fd" in e and e["op"] != "open"]
        ops = [e["op"] for e in mine]
        assert ops == ["open"] + ["write"] * 8 + ["pwrite", "close", "open"] + ["read"] * 8 + ["pread", "close"]
        assert [e["offset"] for e in mine if e["op"] == "write"] == [k * 65536 for k in range(8)]  # the file position
        assert mine[9]["offset"] == 8 * 65536 and mine[9]["bytes"] == 4096
        assert mine[0]["flags"] & os.O_WRONLY and not mine[11]["flags"] & (os.O_WRONLY | os.O_RDWR)
