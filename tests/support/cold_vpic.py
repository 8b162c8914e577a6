"""A cold start for the baseline tests: the real VPIC-IO kernel, except that the first run in a
directory (``$COLD_VPIC_MARKER`` not there yet; rank 0 creates it as the run starts) waits 1 s before each
step's write, inside the timed
open + write + close, as a first run after start-up pays for cold caches and MPI-IO initialisation.

Registered as a user kernel (``iobo.kernels.register``).
"""

import os
import time
from pathlib import Path

from iobo.kernels import vpic
from iobo.kernels.run import run_main

if __name__ == "__main__":
    marker = Path(os.environ["COLD_VPIC_MARKER"])
    if not marker.exists():
        from mpi4py import MPI

        MPI.COMM_WORLD.Barrier()
        if MPI.COMM_WORLD.rank == 0:
            marker.touch()
        do_step = vpic.Writer.do_step

        def slow_step(self, file, step):
            time.sleep(1.0)  # the 8.4 MB of 2 steps in >= 2 s: <= 4.2 MB/s, whatever the load
            do_step(self, file, step)

        vpic.Writer.do_step = slow_step
    run_main(vpic.main)
