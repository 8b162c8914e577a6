"""iobo's benchmarks, run as modules from the project root (``python -m experiments.sampler.bench --help``).

- :mod:`experiments.harness`: what the benchmarks share (problems, optimizers,
  the cost model, the process pool, real tuning runs, table recording);
- :mod:`experiments.sweep`, :mod:`experiments.inert_check`: record tables and
  check parameters inert with real MPI runs;
- :mod:`experiments.sampler`, :mod:`experiments.impact`,
  :mod:`experiments.stopping`, :mod:`experiments.pruning`: the benchmarks.

Recorded tables are in ``experiments/tables/``, the printed results in
``experiments/results/``.
"""
