"""Record a program's I/O once, replay it as a kernel (issue 28).

- :func:`read_raw` reads what the shim wrote with ``IOBO_PRELOAD_TRACE=PREFIX``
  (``PREFIX.<rank>.trace.jsonl``) into a :class:`Trace`: per rank, the
  program's outermost I/O calls with symbolic handles, paths under the
  directory it wrote into as ``{workdir}``, the computation between calls
  (``gap_s``), and repeated blocks folded (a 1,000-step run is stored as one
  step, its count and what advances per step), plus ``not_recorded``: what
  the trace cannot hold, in plain sentences.
- :meth:`Trace.save` / :meth:`Trace.load`: one JSON file;
  :meth:`Trace.expand` gives a rank's events back (``steps=K``: K of the N
  repetitions of each repeated block).
- ``python -m iobo.replay.run TRACE --workdir DIR`` (:mod:`iobo.replay.run`)
  makes the same calls with synthetic data, under ``mpiexec`` and the shim
  like the program.
- :func:`record` runs a program once under the shim and returns its trace
  with metadata (``iobo record``); :func:`kernel_spec` makes a trace a
  kernel of ``iobo tune`` (``--trace``); :mod:`iobo.replay.check` compares
  the kernel with its program (``iobo check``).
- :mod:`iobo.replay.signature`: a run's I/O signature from the shim's report
  and the comparison of a kernel's with the program's.
- :func:`from_darshan`: the trace of a Darshan log's DXT records (POSIX and
  MPI-IO level, ``iobo record --from-darshan``; :class:`DxtMissing` for a
  log without them), :mod:`iobo.replay.darshan`.

Importing this package loads neither h5py, mpi4py nor pydarshan, and neither the recording (which loads iobo's
launcher and kernels) nor the Darshan reader until one of their names is used: the replay process
(:mod:`iobo.replay.run`, started in every trial) needs only the trace.
"""

from iobo.replay._model import (GAP_FLOOR_S, OPEN_OPS, TRACE_FORMAT, TRACE_VERSION, WORKDIR, Trace, event_bytes,
                               opens_for_writing, without_gap)
from iobo.replay._raw import NEVER_RECORDED, RAW_FORMAT, RAW_VERSION, raw_files, read_raw

_LAZY = {"DxtMissing": "iobo.replay.darshan", "from_darshan": "iobo.replay.darshan",
         "kernel_spec": "iobo.replay.record", "record": "iobo.replay.record"}
"""Names imported from their module when first used (module ``__getattr__``)."""

__all__ = ["DxtMissing", "GAP_FLOOR_S", "NEVER_RECORDED", "OPEN_OPS", "RAW_FORMAT", "RAW_VERSION", "TRACE_FORMAT",
           "TRACE_VERSION", "WORKDIR", "Trace", "event_bytes", "from_darshan", "kernel_spec", "opens_for_writing",
           "raw_files", "read_raw", "record", "without_gap"]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'iobo.replay' has no attribute {name!r}")
