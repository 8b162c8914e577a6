"""The recorded tables as benchmark problems, with the system default and a cost per evaluation.

Shared by the stopping, impact and pruning benchmarks.  A measurement draws
one recorded repeat of the configuration at random; its true value is the
median of its repeats (:func:`experiments.harness.problems.load_table`).

Cost model of one evaluation (seconds): ``LAUNCH_S + bytes moved / measured
bandwidth``: ~2 s of ``mpiexec`` start-up and imports measured here
(/work/shared/MEASURED.md) plus the I/O itself, the bytes the table's kernel
options move (VPIC: 2 ranks x 1,048,576 particles x 8 float32 x 2 steps;
IOR: 2 ranks x 4 segments x 4 MiB written, then read).
"""

from __future__ import annotations

import json

from experiments.harness import TABLES_DIR, problems

MiB = 2**20
LAUNCH_S = 2.0
TABLES = {
    # grid (the sidecar's "grid_of", or the table's name) -> (system default: HDF5 / ROMIO defaults, shared file; bytes moved per run)
    "vpic-tmpfs": ({"files": "shared", "layout": "contiguous", "transfer_mode": "independent",
                    "alignment_interval": 1, "cb_buffer_size": 16 * MiB, "romio_cb_write": "automatic"},
                   2 * 1_048_576 * 8 * 4 * 2),
    "ior-tmpfs": ({"files": "shared", "transfer_mode": "independent", "cb_buffer_size": 16 * MiB,
                   "romio_cb_write": "automatic", "romio_ds_write": "automatic", "romio_cb_read": "automatic"},
                  2 * 2 * 4 * 4 * MiB),
}


def table_problem(name: str) -> tuple[problems.Problem, int]:
    """(problem with the system default, bytes moved per evaluation) of a recorded table
    (``vpic-tmpfs``, or a re-recording of its grid such as ``vpic-tmpfs-3pass``)."""
    meta = json.loads((TABLES_DIR / f"{name}.json").read_text())
    default, nbytes = TABLES[meta.get("grid_of", name)]
    return problems.load_table(TABLES_DIR / f"{name}.csv", default=default), nbytes


def cost_minutes(nbytes: int, mb_per_s: float) -> float:
    """Minutes one evaluation costs: launch + bytes / measured bandwidth."""
    return (LAUNCH_S + nbytes / (mb_per_s * 1e6)) / 60
