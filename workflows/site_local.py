"""Parsl site configuration: this machine (the default of ``iobo tune``).

One HighThroughputExecutor worker pool on localhost. Each worker runs one
trial at a time; the trial's ``mpiexec -n R`` then uses R cores, so keep
``max_workers_per_node`` x R within the machine's cores.

Use it explicitly with ``iobo tune vpic --parsl-config workflows/site_local.py``
or adapt it; ``config`` is the name iobo looks for.
"""

from iobo.runners.parsl import local_config

config = local_config(max_workers=1, run_dir="runinfo")
