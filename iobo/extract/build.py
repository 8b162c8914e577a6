"""Build the kernel with the program's compiler: ``h5pcc.mpich -shlib`` for an HDF5 program (shared HDF5, so the
shim sees its calls), ``mpicc.mpich`` otherwise; for a C++ program ``mpicxx.mpich``, with shared HDF5's include and
link flags (those ``h5pcc.mpich -show -shlib`` gives) when it calls HDF5; or the compiler the user names."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from iobo.errors import ConfigError
from iobo.extract import ExtractError

ERROR = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<what>.*)$")
BUILD_TIMEOUT_S = 600.0


def default_compiler(uses_hdf5: bool, cxx: bool = False) -> list[str]:
    """``h5pcc.mpich -shlib`` when the program calls HDF5 (and the wrapper is installed), else ``mpicc.mpich``;
    for C++ (``cxx``) ``mpicxx.mpich`` (its HDF5 flags from :func:`hdf5_flags`)."""
    if cxx:
        return ["mpicxx.mpich"]
    if uses_hdf5 and shutil.which("h5pcc.mpich"):
        return ["h5pcc.mpich", "-shlib"]
    return ["mpicc.mpich"]


def hdf5_flags() -> list[str]:
    """Shared HDF5's include, library path and libraries as ``h5pcc.mpich -show -shlib`` gives them (without its
    compiler): what a C++ kernel built with ``mpicxx.mpich`` links ([] without the wrapper)."""
    if not shutil.which("h5pcc.mpich"):
        return []
    shown = subprocess.run(["h5pcc.mpich", "-show", "-shlib"], capture_output=True, text=True, timeout=60)
    return [w for w in shlex.split(shown.stdout)[1:] if w.startswith(("-I", "-L", "-l", "-Wl,"))]


def absolute_paths(flags: list[str]) -> list[str]:
    """``flags`` with the directories of relative ``-I``/``-L`` made absolute (the build runs elsewhere)."""
    out, attached = [], None
    for word in flags:
        if attached:
            out.append(os.path.abspath(word))
            attached = None
        elif word in ("-I", "-L", "-isystem"):
            out.append(word)
            attached = word
        elif word[:2] in ("-I", "-L") and len(word) > 2 and not os.path.isabs(word[2:]):
            out.append(word[:2] + os.path.abspath(word[2:]))
        else:
            out.append(word)
    return out


def build(sources: list[Path], output: str | os.PathLike, compiler: list[str], flags: list[str],
          include_dirs: list[Path], program_sources: list[Path] | None = None) -> list[str]:
    """Compile and link ``sources`` into ``output``; returns the command run. A failed build raises
    :class:`ExtractError` with the compiler's first errors at the program's file and line (the kernel's lines
    are the program's)."""
    if not shutil.which(compiler[0]):
        raise ConfigError(f"the compiler {compiler[0]} is not on PATH: give the program's with --cc "
                          f"(e.g. --cc 'h5pcc -shlib' or --cc mpicc)")
    command = [*compiler, *(f"-I{d}" for d in include_dirs), "-o", str(output), *map(str, sources),
               *absolute_paths(flags)]
    # in the kernel's directory: h5pcc -shlib leaves its object files in the current one
    done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                          cwd=Path(output).parent)
    if done.returncode != 0:
        names = {Path(k).name: p for k, p in zip(sources, program_sources or sources)}
        errors = []
        for line in (done.stderr + done.stdout).splitlines():
            match = ERROR.match(line)
            if match:
                where = names.get(Path(match["file"]).name, match["file"])
                errors.append(f"{where}:{match['line']}: {match['what']}")
            elif "undefined reference" in line:
                errors.append(line.strip())
        shown = "; ".join(errors[:5]) or (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ExtractError(f"the kernel does not build ({shlex.join(command)} exited {done.returncode}): {shown}. "
                           f"Lines are the program's (dropped statements are blanked in place); tune the recorded "
                           f"kernel (iobo record) or the program instead")
    return command
