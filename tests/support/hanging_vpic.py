"""Fault injection for timeout tests: a real MPI deadlock.

Rank 0 waits in a barrier that the other ranks never reach (they sleep), as
a job stuck on a lost message or a hung file system would. Registered as a
user kernel with VPIC's space, it lets a test show that a hung trial is
killed at its time limit and recorded as failed.
"""

import time

from mpi4py import MPI

if __name__ == "__main__":
    if MPI.COMM_WORLD.Get_rank() == 0:
        MPI.COMM_WORLD.Barrier()
    else:
        time.sleep(3600)
