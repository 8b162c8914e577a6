"""The replay kernel's per-trial floor, guarded without timing: what a real replay process imports.

A replay trial's fixed cost is mostly imports (issue 28: 1.2-2 s a trial under load against programs of 8-10 s).
The replay process makes its HDF5 calls through ctypes on the C library the preloaded shim has loaded, so it needs
neither h5py nor numpy, and it loads none of iobo's tuning, recording or launching modules. This test replays a
trace with HDF5, MPI-IO and POSIX calls on 2 real MPI ranks under the shim, as a trial does, and reads rank 0's
``sys.modules`` at its exit.
"""

import json
import os
import subprocess
import sys
import textwrap

from iobo import adapters
from iobo.config import IOConfig
from iobo.kernels import ior
from iobo.replay import read_raw

from support.traces import checkpoint_steps, write_raw

RANKS = 2
NOT_IMPORTED = ("h5py", "numpy", "scipy", "optuna", "torch", "parsl", "iobo.kernels",
                "iobo.kernels.command", "iobo.adapters", "iobo.launch", "iobo.tuner", "iobo.replay.record",
                "iobo.replay.darshan", "iobo.replay.check")
"""Modules the replay process must not load (each costs start-up time in every trial and none is used)."""
WRAPPER = textwrap.dedent('''
    import atexit, json, os, runpy, sys
    path = sys.argv[1]
    def dump():
        if os.environ.get("PMI_RANK") == "0":
            with open(path, "w") as out:
                json.dump(sorted(sys.modules), out)
    atexit.register(dump)
    sys.argv = ["iobo.replay.run", *sys.argv[2:]]
    runpy.run_module("iobo.replay.run", run_name="__main__", alter_sys=True)
''')


def mixed_events(rank: int) -> list[dict]:
    """Two HDF5 checkpoints, then an MPI-IO file and a POSIX file written."""
    mpiio = [{"op": "MPI_File_open", "fh": 0, "name": "{workdir}/m.dat", "path": "{workdir}/m.dat", "amode": 1 | 4,
              "procs": RANKS, "hints": {}, "ok": True},
             {"op": "MPI_File_write_at_all", "fh": 0, "offset": rank * 4096, "bytes": 4096, "collective": True,
              "ok": True},
             {"op": "MPI_File_close", "fh": 0, "ok": True}]
    posix = [{"op": "open", "fd": 0, "name": f"{{workdir}}/p.{rank}", "path": f"{{workdir}}/p.{rank}",
              "flags": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "ok": True},
             {"op": "pwrite", "fd": 0, "offset": 0, "bytes": 8192, "ok": True},
             {"op": "close", "fd": 0, "ok": True}]
    return checkpoint_steps(rank, RANKS, 2, chunked=True) + mpiio + posix


def test_a_replay_imports_neither_h5py_numpy_nor_iobos_tuning_modules(library, scratch):
    write_raw(scratch / "raw", [mixed_events(r) for r in range(RANKS)], scratch / "program")
    trace = scratch / "trace.json"
    read_raw(scratch / "raw").save(trace)
    wrapper, modules = scratch / "wrapper.py", scratch / "modules.json"
    wrapper.write_text(WRAPPER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("IOBO_") and k not in ("LD_PRELOAD", "ROMIO_HINTS")}
    env.update(adapters.preload_env(IOConfig.from_values({}, space=ior.space()), report_prefix=scratch / "report"))
    done = subprocess.run(["mpiexec.mpich", "-n", str(RANKS), sys.executable, str(wrapper), str(modules), str(trace),
                           "--workdir", str(scratch / "replay")], env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    printed = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    report = adapters.read_report(scratch / "report")

    # it did the I/O (the shim saw every level's writes) ...
    assert printed["bytes"]["hdf5"]["write"] == report["levels"]["hdf5"]["write"]["bytes"] > 0
    assert report["levels"]["mpiio"]["write"]["bytes"] >= RANKS * 4096
    assert printed["bytes"]["posix"]["write"] == RANKS * 8192 and printed["not_replayed"] == {}
    # ... without loading what it does not use
    loaded = set(json.loads(modules.read_text()))
    assert "mpi4py.MPI" in loaded and "iobo.replay._model" in loaded
    assert sorted(loaded & set(NOT_IMPORTED)) == []
