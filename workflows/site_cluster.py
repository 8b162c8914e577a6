"""Parsl site configuration: the multi-node test cluster of ``make cluster-up`` (tests/support/cluster.py).

Run the tuner on the cluster's login host (the controller's network namespace, where ``sbatch`` reaches
slurmctld and the compute nodes reach the tuner at 10.77.0.1)::

    make cluster-up
    .venv/bin/python tests/support/cluster.py run -- .venv/bin/iobo tune vpic --ranks 3 --trials 4 \\
        --parsl-config workflows/site_cluster.py --workdir /tmp/iobo-cluster/work \\
        --storage sqlite:////tmp/iobo-cluster/work/iobo.db

How the pieces fit (the same as workflows/site_slurm.py, with this cluster's names):
- One Slurm job (a "block") per trial in flight, each of NODES_PER_TRIAL nodes, so trials running at once have
  disjoint nodes; Parsl's worker pool runs once per block, on its lead node (``SimpleLauncher``), with one
  worker: one trial at a time per block. Both figures can be set from the environment
  (``IOBO_CLUSTER_NODES_PER_TRIAL``, default 3, ``IOBO_CLUSTER_IN_FLIGHT``, default 1): with
  ``make cluster-up`` (3 nodes), ``IOBO_CLUSTER_NODES_PER_TRIAL=1 IOBO_CLUSTER_IN_FLIGHT=3`` and
  ``iobo tune --in-flight 3`` run three trials at once, one node each.
- Each trial's ``mpiexec.mpich -n R`` runs inside that job: MPICH's hydra sees the allocation
  (``$SLURM_JOB_NODELIST``, one task per node) and starts one proxy per node with ``srun`` (``--overlap``:
  the proxies share the CPUs the job holds), so the R ranks are spread over the NODES_PER_TRIAL nodes.
- The interchange listens on ``ADDRESS``, the login host's address the nodes reach; on a real site that is
  your login node's address on the compute network (or drop ``address`` and let Parsl pick).
- Every node sees the same file system (the namespaces share this machine's), as a cluster's shared scratch.
"""

import os
import sys
from pathlib import Path

from parsl.config import Config
from parsl.executors import HighThroughputExecutor
from parsl.launchers import SimpleLauncher
from parsl.providers import SlurmProvider

NODES_PER_TRIAL = int(os.environ.get("IOBO_CLUSTER_NODES_PER_TRIAL", "3"))  # EDIT: nodes each trial spans
TRIALS_IN_FLIGHT = int(os.environ.get("IOBO_CLUSTER_IN_FLIGHT", "1"))  # EDIT: trials at once (iobo tune --in-flight)
ADDRESS = "10.77.0.1"  # EDIT: the address the compute nodes reach the tuner at (the cluster's controller here)
ROOT = Path(__file__).resolve().parents[1]
WORKER_INIT = (f"export PATH={Path(sys.executable).parent}:$PATH; "
               f"export PYTHONPATH={ROOT}:{os.environ.get('PYTHONPATH', '')}; "
               "export HYDRA_LAUNCHER_EXTRA_ARGS=--overlap")  # EDIT: module load ...; source .venv/bin/activate

config = Config(
    executors=[
        HighThroughputExecutor(
            label="iobo_cluster",
            address=ADDRESS,
            max_workers_per_node=1,
            cpu_affinity="none",
            heartbeat_period=2,
            heartbeat_threshold=8,
            provider=SlurmProvider(
                partition="debug",  # EDIT: your partition
                nodes_per_block=NODES_PER_TRIAL,
                init_blocks=TRIALS_IN_FLIGHT,
                min_blocks=0,
                max_blocks=TRIALS_IN_FLIGHT,
                walltime="00:30:00",
                exclusive=True,  # whole nodes: trials in flight get disjoint nodes
                launcher=SimpleLauncher(),  # the worker pool runs once, on the lead node
                worker_init=WORKER_INIT,
                cmd_timeout=30,
            ),
        )
    ],
    run_dir="runinfo",
    strategy="simple",
)
