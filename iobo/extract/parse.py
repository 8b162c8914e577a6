"""The program's translation units, parsed by libclang with the program's real compile flags and language.

Flags come from the user (``-- FLAGS``) or a ``compile_commands.json``
(:func:`flags_from_compile_commands`); the include paths of ``mpi.h`` and
``hdf5.h`` from the compiler wrappers' ``-show`` (:func:`wrapper_flags`), and
the compiler's own headers (``stddef.h``, ``stdbool.h``: the wheel ships none)
from ``gcc -print-file-name=include``. The language (:func:`language`) is the
one the program's compiler gives the source: C++ for a ``.cpp``/``.cc``/``.cxx``
source, for any source a C++ compiler (``mpicxx``, ``g++``, ``h5c++``...) or
``-x c++`` compiles (MACSio's ``.c`` files are built with ``mpicxx``), else C.
A translation unit with an error is refused with its diagnostics
(:class:`iobo.extract.ExtractError`).
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
CXX_SUFFIXES = {".cpp", ".cc", ".cxx", ".c++", ".cp", ".C", ".CPP"}
C_SUFFIXES = {".c"}
CXX_COMPILERS = ("c++", "g++", "clang++", "mpicxx", "mpic++", "mpiCC", "h5c++", "icpx", "icpc", "CC")
"""Compiler names (a wrapper's ``.mpich``/``.openmpi``/version suffix aside) that compile every source as C++."""
CXX_PARSE_FLAGS = ("-Wno-c++11-narrowing",)
"""Added when parsing C++: g++ accepts a narrowing conversion of a non-constant in braces (a warning), Clang refuses
it by default (MACSio's ``macsio_main.c:687``)."""
C_PARSE_FLAGS = ("-Wno-error=implicit-function-declaration", "-Wno-error=implicit-int", "-Wno-error=int-conversion",
                 "-Wno-error=incompatible-function-pointer-types")
"""Added when parsing C: what gcc 12 (the programs' compiler here) only warns about and Clang 16+ refuses by default
(a call of an undeclared function: CitcomS's ``Output.c:81`` strcmp without ``<string.h>``)."""


def cxx_compiler(word: str | None) -> bool:
    """Is ``word`` (a compiler command's first word) a C++ compiler: ``mpicxx.mpich``, ``/usr/bin/g++-12``...?"""
    if not word:
        return False
    name = os.path.basename(word)
    return any(name == c or name.startswith(c + ".") or name.startswith(c + "-") for c in CXX_COMPILERS)


def language(source: str | os.PathLike, flags: list[str] = (), compiler: str | None = None) -> str:
    """``"c++"`` or ``"c"``: how the program's build compiles ``source``. ``-x LANG`` in ``flags`` decides, then a
    C++ compiler (``compiler``: its command's first word), then the suffix; ``ExtractError`` for a suffix that
    is neither (a Fortran source)."""
    flags = list(flags)
    for i, word in enumerate(flags):
        given = word[2:] if word.startswith("-x") and len(word) > 2 else (
            flags[i + 1] if word == "-x" and i + 1 < len(flags) else None)
        if given in ("c++", "c"):
            return given
    suffix = Path(source).suffix
    if suffix not in CXX_SUFFIXES | C_SUFFIXES:
        raise ExtractError(f"{source}: iobo extract slices C and C++ sources (.c, .cpp, .cc, .cxx), not "
                           f"'{suffix}' ones: tune the recorded kernel (iobo record) or the program")
    if suffix in CXX_SUFFIXES or cxx_compiler(compiler):
        return "c++"
    return "c"


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


def compile_command(path: str | os.PathLike, source: str | os.PathLike) -> list[str]:
    """The words of ``source``'s command in the compilation database at ``path``, the compiler first (relative
    ``-I`` made absolute against the entry's directory); :class:`ConfigError` when the source has no entry."""
    entries = json.loads(Path(path).read_text())
    wanted = Path(source).resolve()
    for entry in entries:
        directory = Path(entry.get("directory", "."))
        if (directory / entry["file"]).resolve() != wanted:
            continue
        words = entry.get("arguments") or shlex.split(entry["command"])
        absolute = words[:1]
        for word in words[1:]:
            if word.startswith("-I") and len(word) > 2 and not os.path.isabs(word[2:]):
                word = "-I" + str(directory / word[2:])
            absolute.append(word)
        return absolute
    raise ConfigError(f"{source} has no entry in the compilation database {path}: give its flags after -- "
                      f"instead, or regenerate the database (e.g. bear -- make, or cmake "
                      f"-DCMAKE_EXPORT_COMPILE_COMMANDS=ON)")


def without_language(flags: list[str]) -> list[str]:
    """``flags`` without ``-x LANG`` (the language is given to the parser apart, and the kernel's compiler knows
    its own)."""
    return [word for i, word in enumerate(flags)
            if not (word in ("-x", "-xc", "-xc++") or (i > 0 and flags[i - 1] == "-x"))]


def flags_from_compile_commands(path: str | os.PathLike, source: str | os.PathLike) -> list[str]:
    """The preprocessor flags of ``source``'s entry in the compilation database at ``path``, with ``-x c++`` when
    its compiler is a C++ one (:func:`compile_command`)."""
    words = compile_command(path, source)
    flags = preprocessor_flags(words[1:])
    if language(source, words[1:], words[0]) == "c++" and Path(source).suffix not in CXX_SUFFIXES:
        flags = ["-x", "c++", *flags]
    return flags


def parse(source: str | os.PathLike, flags: list[str], index=None, compiler: str | None = None):
    """The translation unit of one C or C++ source (:func:`language`, ``compiler`` the program's) parsed with
    ``flags`` (plus :func:`wrapper_flags` and ``-I`` of the source's directory); :class:`ExtractError` listing
    the first errors when Clang reports any."""
    ci = cindex()
    source = Path(source).resolve()
    lang = language(source, flags, compiler)
    flags = preprocessor_flags(without_language(flags))  # not -O3, -lpng, a library's path: no input of Clang's
    extra = list(CXX_PARSE_FLAGS if lang == "c++" else C_PARSE_FLAGS)
    args = ["-x", lang, *flags, *extra, f"-I{source.parent}", *wrapper_flags()]
    index = index or ci.Index.create()
    try:
        unit = index.parse(str(source), args=args)
    except ci.TranslationUnitLoadError as exc:
        raise ExtractError(f"{source}: libclang could not parse it ({exc}); check the flags given after --") \
            from None
    errors = [d for d in unit.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        shown = "; ".join(f"{d.location.file}:{d.location.line}: {d.spelling}" for d in errors[:5])
        hint = " (a C++ program's sources are C++ with its C++ compiler: --cc mpicxx, or -- -x c++)" \
            if lang == "c" else ""
        raise ExtractError(f"{source} does not parse as {lang.upper()} with the flags given ({len(errors)} errors: "
                           f"{shown}): give the program's compile flags after -- (e.g. -- -I include -DUSE_MPI) or "
                           f"--compile-commands{hint}; the kernel cannot be cut from it, tune the recorded kernel "
                           f"(iobo record) or the program")
    return unit
