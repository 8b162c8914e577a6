"""Signatures on real runs: the checkpoint C program recorded under the shim (IOBO_PRELOAD_TRACE), its trace
replayed (python -m iobo.replay.run) under the shim, both reports' signatures compared."""

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
from iobo.replay.signature import compare, render, signature

RANKS = 2
CHECKPOINTS, MIB, SLABS = 3, 1, 4


def shim_env(prefix: Path, trace: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOBO_") and k not in ("LD_PRELOAD", "ROMIO_HINTS")}
    env.update(adapters.preload_env(IOConfig.from_values({}, space=ior.space()), report_prefix=prefix))
    if trace is not None:
        env["IOBO_PRELOAD_TRACE"] = str(trace)
    return env


def run(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(["mpiexec.mpich", "-n", str(RANKS), *command], env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    return done.stdout


@pytest.fixture
def recorded(library, programs, scratch):
    """The checkpoint program run once under the shim with a trace: (its signature, the saved trace)."""
    (scratch / "out").mkdir()
    run([str(programs["checkpoint"]), str(scratch / "out" / "ck"), str(CHECKPOINTS), str(MIB), str(SLABS), "1",
         "collective"], shim_env(scratch / "program", scratch / "raw"))
    trace = read_raw(scratch / "raw")
    trace.save(scratch / "trace.json")
    assert trace.workdir == str(scratch / "out") and trace.repeats(0) == [CHECKPOINTS]
    return signature(adapters.read_report(scratch / "program")), scratch / "trace.json"


def replayed(trace: Path, scratch: Path, *options: str) -> tuple[dict, dict]:
    prefix = scratch / f"kernel{len(options)}"
    out = run([sys.executable, "-m", "iobo.replay.run", str(trace), "--workdir", str(scratch / f"replay{len(options)}"),
               *options], shim_env(prefix))
    return json.loads(out.splitlines()[-1]), signature(adapters.read_report(prefix))


def test_replay_of_a_real_program_matches_its_signature(recorded, scratch):
    """Bytes, calls and request sizes per level, files, collective share, transfer modes and the dataset's layout
    are the program's exactly; POSIX reads are the Python interpreter's own (its modules), not the program's."""
    program, trace = recorded
    _, kernel = replayed(trace, scratch)
    rows = compare(program, kernel)
    table = render(rows)
    exact = [row for row in rows if not row["what"].startswith(("posix read", "posix files"))]
    assert exact and all(row["error"] == 0 for row in exact), table
    assert {row["what"] for row in exact} >= {"hdf5 write bytes", "hdf5 write calls", "mpiio write calls",
                                              "mpiio write collective share", "posix write bytes",
                                              "hdf5 write transfers contiguous_collective", "dataset /temperature"}
    assert program["levels"]["hdf5"]["write"]["bytes"] == CHECKPOINTS * MIB * 2 ** 20 * RANKS
    assert "dataset /temperature" in table and "contiguous" in table


def test_reduced_replay_scaled_matches_the_program(recorded, scratch):
    """--steps 1 of 3 checkpoints: the kernel's extensive rows times the printed scale are the program's."""
    program, trace = recorded
    printed, kernel = replayed(trace, scratch, "--steps", "1")
    assert printed["scale"] == pytest.approx(CHECKPOINTS)
    rows = {row["what"]: row for row in compare(program, kernel, scale=printed["scale"])}
    for what in ("hdf5 write bytes", "hdf5 write calls", "hdf5 files", "hdf5 write transfers contiguous_collective",
                 "mpiio write collective share"):
        assert rows[what]["error"] == pytest.approx(0.0), (what, rows[what])
    unscaled = {row["what"]: row for row in compare(program, kernel)}
    assert unscaled["hdf5 write bytes"]["error"] == pytest.approx(2 / 3)


def test_compare_flags_a_different_layout():
    """A kernel whose dataset is chunked where the program's was contiguous: that row's error is 1."""
    levels = {level: {"files": 1, "write": {"bytes": 8, "calls": 1, "histogram": {8: 1}},
                      "read": {"bytes": 0, "calls": 0, "histogram": {}}} for level in ("hdf5", "mpiio", "posix")}
    base = {"levels": levels, "collective_share": {"write": 1.0, "read": None},
            "transfer_modes": {"write": {}, "read": {}}, "datasets": {"/d": {"layout": "contiguous", "chunk": None}}}
    other = {**base, "datasets": {"/d": {"layout": "chunked", "chunk": [4]}}}
    rows = {row["what"]: row for row in compare(base, other)}
    assert rows["dataset /d"] == {"what": "dataset /d", "program": "contiguous", "kernel": "chunked 4", "error": 1.0}
    assert rows["hdf5 write bytes"]["error"] == 0.0
