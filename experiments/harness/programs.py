"""Compiled C programs the experiments run as applications iobo did not write (experiments/programs/).

:func:`build` compiles one with Debian's ``h5pcc.mpich -shlib`` (parallel
HDF5 shared, so the preload shim can intercept its HDF5 calls) into
``experiments/programs/out/``, once per source change.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from experiments.harness import EXPERIMENTS_DIR

PROGRAMS_DIR = EXPERIMENTS_DIR / "programs"


def build(name: str) -> Path:
    """The executable of ``experiments/programs/<name>.c``, compiled when missing or older than its source."""
    source, out = PROGRAMS_DIR / f"{name}.c", PROGRAMS_DIR / "out"
    binary = out / name
    if binary.exists() and binary.stat().st_mtime >= source.stat().st_mtime:
        return binary
    out.mkdir(exist_ok=True)
    command = ["h5pcc.mpich", "-shlib", "-O2", "-Wall", "-Wextra", "-o", str(binary), str(source)]
    done = subprocess.run(command, cwd=out, capture_output=True, text=True)  # h5pcc leaves objects in its cwd
    if done.returncode != 0:
        raise SystemExit(f"cannot build {name}: {shlex.join(command)}\n{done.stdout}{done.stderr}")
    return binary
