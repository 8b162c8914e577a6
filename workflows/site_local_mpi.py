"""Parsl site configuration: Parsl's MPI mode on this machine (a stand-in for a cluster).

An ``MPIExecutor`` whose "nodes" are all localhost: Parsl's MPI mode reads a
batch job's nodes from ``$PBS_NODEFILE``, so the worker pool is started with
one pointing at a file that lists localhost. Each trial asks Parsl for its
nodes (``parsl_resource_specification``) and starts its kernel with the
``$PARSL_MPI_PREFIX`` Parsl composes (``mpiexec -n R -ppn P -hosts localhost``),
the same code path as on a cluster (``workflows/site_slurm_mpi.py``).

    .venv/bin/python workflows/tune_parsl_mpi.py --site workflows/site_local_mpi.py ...

``mpiexec`` must be the MPI that mpi4py and h5py use (Debian: MPICH via
update-alternatives), or name it with ``ParslMPIPrefixLauncher(executable=...)``.
"""

from iobo.runners.parsl import local_mpi_config

config = local_mpi_config(max_workers=1, run_dir="runinfo")
