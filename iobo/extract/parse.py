"""The program's translation units, parsed by libclang with the program's real compile flags.

Flags come from the user (``-- FLAGS``) or a ``compile_commands.json``
(:func:`flags_from_compile_commands`); the include paths of ``mpi.h`` and
``hdf5.h`` from the compiler wrappers' ``-show`` (:func:`wrapper_flags`), and
the compiler's own headers (``stddef.h``, ``stdbool.h``: the wheel ships none)
from ``gcc -print-file-name=include``. A translation unit with an error is
refused with its diagnostics (:class:`iobo.extract.ExtractError`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from iobo.errors import ConfigError
from iobo.extract import ExtractError

WRAPPERS = ("h5pcc.mpich", "mpicc.mpich")
"""The compiler wrappers asked for include paths (``-show``), in order; a missing one is skipped."""
KEPT_FLAGS = ("-I", "-D", "-U", "-isystem", "-include", "-std")


def cindex():
    """The ``clang.cindex`` module of the libclang wheel; :class:`ConfigError` naming the extra when missing."""
    try:
        import clang.cindex
    except ImportError:
        raise ConfigError("iobo extract parses C with libclang, which is not installed: pip install "
                          "'iobo[extract]' (or pip install libclang)") from None
    return clang.cindex


def preprocessor_flags(words: list[str]) -> list[str]:
    """The include, macro and standard flags of a compiler command line (what parsing needs)."""
    kept, i = [], 0
    while i < len(words):
        word = words[i]
        flag = next((f for f in KEPT_FLAGS if word.startswith(f)), None)
        if flag is not None:
            if word == flag and flag != "-std" and i + 1 < len(words):
                kept += [word, words[i + 1]]
                i += 1
            else:
                kept.append(word)
        i += 1
    return kept


def wrapper_flags(wrappers=WRAPPERS) -> list[str]:
    """The include and macro flags the MPI and HDF5 compiler wrappers add (``WRAPPER -show``), and the
    compiler's own header directory."""
    flags = []
    for wrapper in wrappers:
        if shutil.which(wrapper):
            shown = subprocess.run([wrapper, "-show"], capture_output=True, text=True, timeout=60)
            flags += preprocessor_flags(shlex.split(shown.stdout))
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc:
        include = subprocess.run([gcc, "-print-file-name=include"], capture_output=True, text=True,
                                 timeout=60).stdout.strip()
        if include and Path(include).is_dir():
            flags += ["-isystem", include]
    return flags


def flags_from_compile_commands(path: str | os.PathLike, source: str | os.PathLike) -> list[str]:
    """The preprocessor flags of ``source``'s entry in the compilation database at ``path`` (relative ``-I``
    made absolute against the entry's directory); :class:`ConfigError` when the source has no entry."""
    entries = json.loads(Path(path).read_text())
    wanted = Path(source).resolve()
    for entry in entries:
        directory = Path(entry.get("directory", "."))
        if (directory / entry["file"]).resolve() != wanted:
            continue
        words = entry.get("arguments") or shlex.split(entry["command"])
        flags = preprocessor_flags(words[1:])
        absolute = []
        for word in flags:
            if word.startswith("-I") and len(word) > 2 and not os.path.isabs(word[2:]):
                word = "-I" + str(directory / word[2:])
            absolute.append(word)
        return absolute
    raise ConfigError(f"{source} has no entry in the compilation database {path}: give its flags after -- "
                      f"instead, or regenerate the database (e.g. bear -- make, or cmake "
                      f"-DCMAKE_EXPORT_COMPILE_COMMANDS=ON)")


def parse(source: str | os.PathLike, flags: list[str], index=None):
    """The translation unit of one C source parsed with ``flags`` (plus :func:`wrapper_flags` and ``-I`` of
    the source's directory); :class:`ExtractError` listing the first errors when Clang reports any."""
    ci = cindex()
    source = Path(source).resolve()
    if source.suffix != ".c":
        raise ExtractError(f"{source}: iobo extract handles C sources (.c) only so far; C++ and Fortran are not "
                           f"sliced: tune the recorded kernel (iobo record) or the program")
    args = ["-x", "c", *flags, f"-I{source.parent}", *wrapper_flags()]
    index = index or ci.Index.create()
    try:
        unit = index.parse(str(source), args=args)
    except ci.TranslationUnitLoadError as exc:
        raise ExtractError(f"{source}: libclang could not parse it ({exc}); check the flags given after --") \
            from None
    errors = [d for d in unit.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        shown = "; ".join(f"{d.location.file}:{d.location.line}: {d.spelling}" for d in errors[:5])
        raise ExtractError(f"{source} does not parse with the flags given ({len(errors)} errors: {shown}): give "
                           f"the program's compile flags after -- (e.g. -- -I include -DUSE_MPI) or "
                           f"--compile-commands; the kernel cannot be cut from it, tune the recorded kernel "
                           f"(iobo record) or the program")
    return unit
