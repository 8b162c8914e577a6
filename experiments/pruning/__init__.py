"""Pruning benchmarks: emulated steps (``bench``), live real runs (``real``), replayed recordings (``replay``)."""
