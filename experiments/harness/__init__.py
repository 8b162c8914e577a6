"""What the benchmarks share; each benchmark imports these modules' public names.

- :mod:`~experiments.harness.grid`: a problem's finite, conditional space;
- :mod:`~experiments.harness.problems`: recorded tables and synthetic models as problems;
- :mod:`~experiments.harness.optimizers`: the optimizers compared and their ask/tell loop;
- :mod:`~experiments.harness.cost`: minutes per evaluation of a recorded table;
- :mod:`~experiments.harness.runs`: the process pool, problem specs, evaluations to a target;
- :mod:`~experiments.harness.recording`: real MPI runs of a table's grid (sweeps, inert checks);
- :mod:`~experiments.harness.real_runs`: real vpic tuning studies with and without a pruner;
- :mod:`~experiments.harness.programs`: the C programs run as applications iobo did not write.
- :mod:`~experiments.harness.faults`: launcher wrappers that inject faults (flaky, slow, hanging trials);
- :mod:`~experiments.harness.postgres`: a throw-away PostgreSQL cluster (tests and the soak).

Importing this package is light (paths only).
"""

from pathlib import Path

EXPERIMENTS_DIR = Path(__file__).resolve().parents[1]
TABLES_DIR = EXPERIMENTS_DIR / "tables"  # recorded tables (CSV) and their JSON sidecars
RESULTS_DIR = EXPERIMENTS_DIR / "results"  # printed results and recordings
