"""Fault injection at launch: MPI launcher wrappers a test passes as ``--mpiexec`` / ``MpiexecLauncher(path)``.

Each wrapper is a small Python script (one process, so killing its process
group or its parent leaves nothing behind) that ends by exec-ing the real
``mpiexec.mpich`` with the arguments it was given, after its fault:

- ``flaky``: only the first launch runs; every later one fails at once
  (exit 1), as a launcher whose nodes went away would;
- ``slow``: waits ``seconds`` before launching (a trial that is surely
  running when the test acts).
"""

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
}


def write_launcher(directory: Path, kind: str, seconds: float = 30.0) -> str:
    """Write the wrapper ``kind`` into ``directory``; returns its path (for ``--mpiexec``)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{kind}_mpiexec.py"
    body = _BODIES[kind].format(state=str(directory), real=REAL_MPIEXEC, seconds=seconds)
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)
