"""Run an unmodified program with a tuned configuration: iobo's LD_PRELOAD shim.

``adapters/libiobo_preload.so`` (built by ``make adapters/libiobo_preload.so``,
source and rules in ``adapters/``) intercepts ``H5Fcreate``/``H5Fopen``,
``H5Dcreate2``/``H5Dcreate_anon``, ``H5Dwrite`` and ``MPI_File_open`` and
applies the ``IOBO_*`` variables of :meth:`IOConfig.env`, as H5Tuner's
preloaded library does with its XML file::

    env = {**os.environ, **preload_env(config, "romio-hints")}
    subprocess.run(["mpiexec.mpich", "-n", "4", "./app"], env=env)

The program must use the libraries the shim was built against (Debian's
MPICH and parallel HDF5 1.10.8).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from iobo.errors import ConfigError
from iobo.config import IOConfig

ADAPTERS_DIR = Path(__file__).resolve().parent.parent / "adapters"
PRELOAD_NAME = "libiobo_preload.so"
BUILD_COMMAND = f"make -C {shlex.quote(str(ADAPTERS_DIR.parent))} adapters/{PRELOAD_NAME}"


def preload_library() -> Path:
    """Path of the built shim; raises :class:`ConfigError` with the build command when it is missing."""
    path = ADAPTERS_DIR / PRELOAD_NAME
    if not path.is_file():
        raise ConfigError(f"the preload library {path} is not built; build it with: {BUILD_COMMAND} "
                          f"(needs mpicc.mpich and libhdf5-mpich-dev)")
    return path


def preload_env(config: IOConfig, hints_path: str | os.PathLike | None = None) -> dict[str, str]:
    """Environment variables that make a program started with them apply ``config``.

    ``LD_PRELOAD`` (the shim first, then any ``LD_PRELOAD`` already in this
    process's environment) plus :meth:`IOConfig.env`: ``IOBO_*`` for every
    parameter away from its default, and ``ROMIO_HINTS=hints_path`` when
    ``hints_path`` is given and the configuration has MPI-IO hints (the
    caller writes that file, e.g. with :func:`iobo.hdf5.shell_exports`).
    """
    library = str(preload_library())
    chain = [library] + [p for p in os.environ.get("LD_PRELOAD", "").replace(":", " ").split() if p != library]
    return {"LD_PRELOAD": ":".join(chain), **config.env(os.fspath(hints_path) if hints_path is not None else None)}
