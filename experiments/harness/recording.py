"""Real MPI runs of a recorded table's grid: what :mod:`experiments.sweep` and :mod:`experiments.inert_check` share.

:data:`SWEEPS` describes each table's runs (kernel, ranks, where it writes,
kernel options, the grid of parameters); :func:`measure` launches one
configuration as one MPI job and returns its timed repeats (MB/s).
"""

from __future__ import annotations

import itertools
import json
import os
import platform
from pathlib import Path

from iobo import kernels
from iobo.launch import KernelJob, run_kernel
from iobo.space import KiB, MiB

SWEEPS = {
    # 6 parameters, 216 configurations: file layout, chunking, transfer mode, alignment, MPI-IO buffering
    "vpic-tmpfs": {
        "kernel": "vpic",
        "ranks": 2,
        "workdir": "/dev/shm/iobo-sweep",
        "options": {"particles": 1 << 20, "steps": 2, "fsync": True},
        "grid": {
            "files": ["shared", "per_process"],
            ("layout", "chunk_size"): [("contiguous", None), ("chunked", 256 * KiB), ("chunked", 4 * MiB)],
            "transfer_mode": ["independent", "collective"],
            "alignment_interval": [1, 64 * KiB, 4 * MiB],
            "cb_buffer_size": [MiB, 16 * MiB],
            "romio_cb_write": ["automatic", "enable", "disable"],
        },
    },
    # 6 parameters, 216 configurations: IOR-like MPI-IO write+read (TunIO's mixed objective)
    "ior-tmpfs": {
        "kernel": "ior",
        "ranks": 2,
        "workdir": "/dev/shm/iobo-sweep",
        "options": {"api": "mpiio", "block_size": 4 * MiB, "transfer_size": 256 * KiB, "segments": 4,
                    "phases": "write+read", "fsync": True},
        "grid": {
            "files": ["shared", "per_process"],
            "transfer_mode": ["independent", "collective"],
            "cb_buffer_size": [MiB, 4 * MiB, 16 * MiB],
            "romio_cb_write": ["automatic", "enable", "disable"],
            "romio_ds_write": ["automatic", "disable"],
            "romio_cb_read": ["automatic", "enable", "disable"],
        },
    },
}

# Sub-grids common to all contexts of a kernel, for the warm-start benchmark (experiments/warmstart): 72
# configurations each, so a context records 5 interleaved passes in ~15 minutes.  The 2-rank tmpfs context is
# the 3-pass table above filtered to these grids (the parameters left out at their value here).
VPIC_CONTEXT_GRID = {
    "files": ["shared", "per_process"],
    ("layout", "chunk_size"): [("contiguous", None), ("chunked", 256 * KiB), ("chunked", 4 * MiB)],
    "transfer_mode": ["independent", "collective"],
    "alignment_interval": [1, 4 * MiB],
    "romio_cb_write": ["automatic", "enable", "disable"],
}  # cb_buffer_size at its default, 16 MiB
IOR_CONTEXT_GRID = {
    "files": ["shared", "per_process"],
    "transfer_mode": ["independent", "collective"],
    "cb_buffer_size": [MiB, 16 * MiB],
    "romio_cb_write": ["automatic", "enable", "disable"],
    "romio_cb_read": ["automatic", "enable", "disable"],
}  # romio_ds_write at its default, automatic
SWEEPS.update({
    # VPIC-IO at 1 rank: same bytes per rank, the shared file is one process's (4-rank tables did not fit the
    # recording budget: each job starts 4 Pythons on the 2 cores)
    "vpic-tmpfs-1r": {**SWEEPS["vpic-tmpfs"], "ranks": 1, "grid": VPIC_CONTEXT_GRID},
    # VPIC-IO at 2 ranks on the local disk, fsync before close (MEASURED.md: ~20% run-to-run CV)
    "vpic-disk": {**SWEEPS["vpic-tmpfs"], "workdir": "/var/tmp/iobo-sweep", "grid": VPIC_CONTEXT_GRID},
    # IOR at 1 rank: same bytes and transfers per rank
    "ior-tmpfs-1r": {**SWEEPS["ior-tmpfs"], "ranks": 1, "grid": IOR_CONTEXT_GRID},
    # IOR at 2 ranks with small accesses: 16 KiB transfers in 1 MiB blocks (another access size and data size)
    "ior-tmpfs-small": {**SWEEPS["ior-tmpfs"], "grid": IOR_CONTEXT_GRID,
                        "options": {**SWEEPS["ior-tmpfs"]["options"], "block_size": MiB, "transfer_size": 16 * KiB}},
})
# Fourth contexts (issue 31, item 4): in a leave-one-context-out warm start over the three above, the left-out
# context's rank count (VPIC 1 rank, IOR 1 rank), file system (VPIC on disk) or access size (IOR 16 KiB) was in
# no earlier study, so the transfer GP had no data on that feature's effect.  In a family of four (the quiet
# families of experiments.warmstart.bench, recorded with --out NAME-quiet) every value of every feature is held
# by two contexts.  The 2-rank tmpfs contexts on the context grids alone (the 3-pass tables hold them among 216
# configurations) let a whole family be recorded in one sitting.
SWEEPS.update({
    # VPIC-IO at 1 rank on the local disk: 1 rank as vpic-tmpfs-1r, the disk as vpic-disk
    "vpic-disk-1r": {**SWEEPS["vpic-disk"], "ranks": 1},
    # IOR at 1 rank with 16 KiB accesses: 1 rank as ior-tmpfs-1r, the access size as ior-tmpfs-small
    "ior-tmpfs-small-1r": {**SWEEPS["ior-tmpfs-small"], "ranks": 1},
    "vpic-tmpfs-2r": {**SWEEPS["vpic-tmpfs"], "grid": VPIC_CONTEXT_GRID},
    "ior-tmpfs-2r": {**SWEEPS["ior-tmpfs"], "grid": IOR_CONTEXT_GRID},
})


def configurations(grid: dict) -> list[dict]:
    """Every assignment of the grid; tuple keys vary together (conditional pairs)."""
    keys = list(grid)
    rows = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        values = {}
        for key, value in zip(keys, combo):
            if isinstance(key, tuple):
                values.update({k: v for k, v in zip(key, value) if v is not None})
            else:
                values[key] = value
        rows.append(values)
    return rows


def columns(grid: dict) -> list[str]:
    """The grid's parameter names, tuple keys flattened: the table's columns before ``repeat`` and ``mb_per_s``."""
    names = []
    for key in grid:
        names.extend(key if isinstance(key, tuple) else [key])
    return names


def measure(table: dict, values: dict, repeats: int) -> list[float]:
    """One MPI job of ``table``'s kernel on ``values``: its ``repeats`` timed runs, MB/s."""
    job = KernelJob(kernel=kernels.get(table["kernel"]), values=values, ranks=table["ranks"],
                    workdir=table["workdir"], options={**table["options"], "repeats": repeats}, timeout_s=600)
    return run_kernel(job)["result"]["repeats_mb_per_s"]


def machine() -> dict:
    """Where a table was measured, for its sidecar."""
    return {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "load_avg_at_end": os.getloadavg()}


def write_sidecar(csv_path: Path, meta: dict) -> None:
    """``meta`` as the JSON sidecar of a recorded CSV (same name, ``.json``)."""
    csv_path.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
