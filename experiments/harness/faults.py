"""Fault injection at launch: MPI launcher wrappers passed as ``iobo tune --mpiexec PATH``
(or ``MpiexecLauncher(PATH)``), for the reliability tests and the soak benchmark.

Each wrapper is a small Python script that replaces itself (``exec``) with
the real ``mpiexec.mpich``, so killing the trial's process group, or the
process that started it, leaves nothing of the wrapper behind:

- ``flaky``: only the first launch runs; every later one fails at once
  (exit 1), as a launcher whose nodes went away would;
- ``slow``: waits ``seconds`` before launching (a trial surely running when
  a test acts on it);
- ``hang``: with ``probability`` (or for the ``first`` launches only, when
  given), starts the MPI job with ranks that sleep forever instead of the
  kernel (``mpiexec``, ``hydra_pmi_proxy`` and the ranks all alive, as a job
  stuck on a hung file system); otherwise the kernel, unchanged.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

REAL_MPIEXEC = "mpiexec.mpich"

_BODIES = {
    "flaky": """
import os, sys
try:
    os.mkdir(os.path.join({state!r}, "launched"))  # atomic: only the first launch gets through
except FileExistsError:
    print("flaky launcher: injected failure: the node went away", file=sys.stderr)
    sys.exit(1)
os.execvp({real!r}, [{real!r}, *sys.argv[1:]])
""",
    "slow": """
import os, sys, time
time.sleep({seconds})
os.execvp({real!r}, [{real!r}, *sys.argv[1:]])
""",
    "hang": """
import os, random, sys
args = sys.argv[1:]
first = {first}
def counted():  # True for the first `first` launches (atomic directories)
    for number in range(first):
        try:
            os.mkdir(os.path.join({state!r}, f"hung-{{number}}"))
            return True
        except FileExistsError:
            continue
    return False
if (counted() if first else random.random() < {probability}):
    ranks = args[args.index("-n") + 1]
    print("hang launcher: injected hang", file=sys.stderr, flush=True)
    args = ["-n", ranks, sys.executable, "-c", "import time; time.sleep(86400)"]
os.execvp({real!r}, [{real!r}, *args])
""",
}


def write_launcher(directory: Path, kind: str, seconds: float = 30.0, probability: float = 1.0,
                   first: int = 0) -> str:
    """Write the wrapper ``kind`` (see the module docstring) into ``directory``; returns its path."""
    if kind not in _BODIES:
        raise KeyError(f"unknown launcher kind {kind!r}; allowed: {', '.join(_BODIES)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{kind}_mpiexec.py"
    body = _BODIES[kind].format(state=str(directory), real=REAL_MPIEXEC, seconds=seconds, probability=probability,
                                first=int(first))
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)
