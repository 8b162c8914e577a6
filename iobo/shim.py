"""Build iobo's LD_PRELOAD shim against the site's MPI and HDF5, and find the one a program needs (``iobo shim``).

The shim's C sources travel inside the package (``iobo/_shim/``). :func:`build`
compiles them with an MPI compiler wrapper (``--mpicc``, else the first of
``mpicc.mpich``, ``mpicc``, ``cc`` on PATH: Cray's ``cc`` wraps Cray MPICH)
and HDF5's flags (``h5pcc -shlib -show``, ``--hdf5 PREFIX``, else
``pkg-config`` ``hdf5-<mpi>`` or ``hdf5``, else ``h5pcc`` on PATH) into a
per-user cache::

    $XDG_CACHE_HOME/iobo/shim/<key>/libiobo_preload.so   (default ~/.cache)
    $XDG_CACHE_HOME/iobo/shim/<key>/shim.json            compiler, flags, MPI and HDF5 library and version

``key`` is a hash of the sources and of the identities of the MPI and HDF5
libraries the shim resolved to (their real paths and version strings), so
one cache holds a shim per MPI/HDF5 pair, and an upgraded iobo builds anew.

A shim only acts on a program that calls the same libraries: a program
linked to another ``libmpi`` or ``libhdf5`` would call its own, and every
setting would be silently ignored (or the two MPIs would crash it).
:func:`check_program` compares what ``ldd`` resolves for both.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iobo.errors import ConfigError

SOURCES_DIR = Path(__file__).resolve().parent / "_shim"
SOURCES = ("common.c", "hdf5.c", "mpiio.c", "posix.c", "trace.c")
HEADERS = ("common.h",)
LIBRARY_NAME = "libiobo_preload.so"
INFO_NAME = "shim.json"
INFO_FORMAT = "iobo-shim"
INFO_VERSION = 1
MPICC_CANDIDATES = ("mpicc.mpich", "mpicc", "cc")
"""Tried in order when no ``--mpicc`` is given: Debian's MPICH (what the Makefile uses), the path's MPI, Cray."""
BUILD_COMMAND = "iobo shim build"
COMPILE_FLAGS = ("-shared", "-fPIC", "-O2", "-Wall", "-Wextra")
"""As the Makefile's rule for adapters/libiobo_preload.so."""

FAMILIES = {
    # the main C library of each MPI: MPICH and its derivatives (libmpich), Open MPI and Intel MPI (libmpi),
    # Cray MPICH (libmpi_cray); not the Fortran or C++ bindings, which call the main one
    "mpi": re.compile(r"lib(mpi|mpich|mpi_cray|mpi_intel)\.so(\.\d+)*"),
    # HDF5 itself (libhdf5, Debian's libhdf5_mpich / libhdf5_openmpi / libhdf5_serial), not its high-level library
    "hdf5": re.compile(r"libhdf5(_(?!hl)[a-z]+)?\.so(\.\d+)*"),
}
"""Sonames of the libraries whose identity the shim must share with a program, by family."""


@dataclass(frozen=True)
class Library:
    """One shared library a binary resolves: its soname (as in ``ldd``) and real path."""

    soname: str
    path: str


@dataclass(frozen=True)
class Toolchain:
    """How the shim is compiled: the MPI compiler wrapper, HDF5's compile and link flags, where they came from."""

    mpicc: str
    cflags: tuple[str, ...]
    libs: tuple[str, ...]
    hdf5_from: str


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/iobo/shim`` (``~/.cache/iobo/shim`` without it): one directory per built shim."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "iobo" / "shim"


def sources_digest() -> str:
    """SHA-256 of the shim's sources (names and contents): a shim built from other sources is not this iobo's."""
    digest = hashlib.sha256()
    for name in (*SOURCES, *HEADERS):
        digest.update(name.encode() + b"\0" + (SOURCES_DIR / name).read_bytes() + b"\0")
    return digest.hexdigest()


def _run(argv: list[str], what: str) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise ConfigError(f"{what}: {argv[0]!r} is not on PATH; name it with the option or load its module") from None
    if done.returncode != 0:
        raise ConfigError(f"{what} failed (exit {done.returncode}): {shlex.join(argv)}\n{done.stderr.strip()[-2000:]}")
    return done.stdout


_RESOLVED: dict[tuple, tuple[tuple[str, str], ...]] = {}
""":func:`resolved_libraries`' answers, by file and ``LD_LIBRARY_PATH``."""


def resolved_libraries(binary: str | os.PathLike) -> tuple[tuple[str, str], ...]:
    """(soname, path or "not found") of every library ``binary`` (an executable or a shared library) resolves,
    directly or through its dependencies, as the dynamic loader would (``ldd``); empty for a file that is not
    dynamically linked (a script, a static executable).

    The answer is kept for the file as it is (path, inode, size, modification time) under this
    ``LD_LIBRARY_PATH``: a tuner asks it of the same program and shim at every run, and a rebuilt file is asked
    again."""
    path = os.path.realpath(binary)
    try:
        stat = os.stat(path)
    except OSError:
        stat = None
    key = (path, None if stat is None else (stat.st_ino, stat.st_size, stat.st_mtime_ns),
           os.environ.get("LD_LIBRARY_PATH", ""))
    if stat is not None and key in _RESOLVED:
        return _RESOLVED[key]
    done = subprocess.run(["ldd", os.fspath(binary)], capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines() if done.returncode == 0 else []
    pairs = tuple((name, rest.split(" (")[0].strip())
                  for name, arrow, rest in (line.strip().partition(" => ") for line in lines) if arrow)
    if stat is not None:
        _RESOLVED[key] = pairs
    return pairs


def linked_libraries(binary: str | os.PathLike) -> dict[str, Library]:
    """{family: Library} of :data:`FAMILIES` that ``binary`` resolves (:func:`resolved_libraries`)."""
    found: dict[str, Library] = {}
    for name, target in resolved_libraries(binary):
        for family, pattern in FAMILIES.items():
            if family not in found and pattern.fullmatch(name):
                found[family] = Library(name, os.path.realpath(target) if target != "not found" else "not found")
    return found


def is_elf(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an ELF file (an executable or shared library, not a script)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


# -- the program a command line runs --------------------------------------------------

LAUNCHERS = ("mpiexec", "mpirun", "srun", "aprun", "jsrun")
"""MPI launchers (and their flavoured names: ``mpiexec.mpich``, ``mpirun.openmpi``), which start a program."""
LAUNCHER_PAIR_OPTIONS = ("-env", "-genv", "-mca", "--mca", "-gmca", "--gmca")
"""Launcher options followed by two words (a name and its value: MPICH's ``-genv K V``, Open MPI's ``--mca K V``)."""
SHELL_SEPARATORS = ("&&", "||", ";", "|", "&", "(", ")", "|&", ";;")


def program_word(argv: list[str] | tuple[str, ...]) -> str:
    """The program a command line runs: its first word, past ``VAR=value`` settings and an ``env`` with its
    settings and options (``env HDF5_PARAPREFIX=/scratch ./app`` runs ``./app``)."""
    words = list(argv)
    while words and "=" in words[0] and not words[0].startswith(("=", "/", ".")):
        words = words[1:]
    if words and Path(words[0]).name == "env":
        words = words[1:]
        while words and ("=" in words[0] or words[0].startswith("-")):
            words = words[2:] if words[0] in ("-u", "--unset", "-C", "--chdir") else words[1:]
    return words[0] if words else argv[0]


def is_launcher(word: str) -> bool:
    """Whether ``word`` names an MPI launcher (:data:`LAUNCHERS`)."""
    return Path(word).name.startswith(LAUNCHERS)


def resolve_program(word: str, cwd: str | os.PathLike | None = None) -> Path | None:
    """The executable file ``word`` runs: a path (relative to ``cwd``, default this process's), or a name on
    PATH; None when there is none."""
    if "/" in word:
        path = Path(cwd or os.getcwd(), word)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which(word)
    return Path(found) if found else None


def launched_program(argv: list[str] | tuple[str, ...], cwd: str | os.PathLike | None = None) -> Path | None:
    """The executable a command line runs, past an MPI launcher and its options (``mpiexec -n 4 ./app`` and
    ``srun --mpi=pmix -N 2 app`` run ``app``); None when it cannot be told or found. A launcher's option
    ``--opt=value`` is one word and :data:`LAUNCHER_PAIR_OPTIONS` take two; any other option takes the word
    after it as its value unless that word is an option or an executable file (``--oversubscribe ./app``)."""
    words = list(argv)
    if not words:
        return None
    first = program_word(words)
    if not is_launcher(first):
        return resolve_program(first, cwd)
    rest = words[words.index(first) + 1:]
    while rest and rest[0] != ":":
        word = rest[0]
        if word in LAUNCHER_PAIR_OPTIONS:
            rest = rest[3:]
        elif word.startswith("-"):
            takes_value = ("=" not in word and len(rest) > 1 and not rest[1].startswith("-")
                           and resolve_program(rest[1], cwd) is None)
            rest = rest[2:] if takes_value else rest[1:]
        else:
            return resolve_program(word, cwd)
    return None


def command_program(command: str, cwd: str | os.PathLike | None = None) -> Path | None:
    """The MPI or HDF5 program a shell command line runs: of its simple commands (split at newlines, ``&&``,
    ``;``, ``|`` ...), the first whose program (:func:`launched_program`) links an MPI or HDF5 library
    (``echo``, ``cd`` and ``mkdir`` before it do not count); None when none can be told or found (a script,
    a path relative to a directory the command changes to)."""
    for line in command.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # an unclosed quote: nothing can be told
            return None
        simple: list[str] = []
        for token in [*tokens, ";"]:
            if token not in SHELL_SEPARATORS:
                simple.append(token)
                continue
            path = launched_program(simple, cwd) if simple else None
            if path is not None and is_elf(path) and linked_libraries(path):
                return path
            simple = []
    return None


# -- finding the compilers ---------------------------------------------------------

def _which(name: str) -> str | None:
    return shutil.which(name)


def toolchain(mpicc: str | None = None, h5pcc: str | None = None, hdf5: str | os.PathLike | None = None) -> Toolchain:
    """The compiler and HDF5 flags to build with: the ones named, else the first found (module docstring)."""
    if h5pcc and hdf5:
        raise ConfigError(f"give --h5pcc or --hdf5, not both (got --h5pcc {h5pcc} and --hdf5 {hdf5})")
    if mpicc is not None and not _which(mpicc):
        raise ConfigError(f"--mpicc {mpicc} is not an executable on PATH or a path to one")
    if h5pcc:
        words = shlex.split(_run([h5pcc, "-shlib", "-show"], f"asking {h5pcc} for HDF5's flags"))
        flags = [w for w in words[1:] if w not in ("-c", "-shlib")]  # words[0]: the MPI compiler h5pcc wraps
        return Toolchain(mpicc or words[0], tuple(w for w in flags if w.startswith(("-I", "-D"))),
                         tuple(w for w in flags if not w.startswith(("-I", "-D"))), f"{h5pcc} -shlib -show")
    if mpicc is None:
        mpicc = next((c for c in MPICC_CANDIDATES if _which(c)), None)
        if mpicc is None:
            raise ConfigError(f"no MPI compiler wrapper on PATH (looked for {', '.join(MPICC_CANDIDATES)}): load "
                              f"your MPI module or name it with {BUILD_COMMAND} --mpicc PATH")
    if hdf5:
        prefix = Path(hdf5).resolve()
        libdir = next((prefix / d for d in ("lib", "lib64") if (prefix / d).is_dir()
                       and any((prefix / d).glob("libhdf5*.so*"))), None)
        if not (prefix / "include" / "hdf5.h").is_file() or libdir is None:
            raise ConfigError(f"--hdf5 {hdf5} must be an HDF5 installation prefix with include/hdf5.h and "
                              f"lib/libhdf5.so (or lib64/); it has "
                              f"{'no include/hdf5.h' if not (prefix / 'include' / 'hdf5.h').is_file() else 'no shared libhdf5'}")
        return Toolchain(mpicc, (f"-I{prefix / 'include'}",), (f"-L{libdir}", f"-Wl,-rpath,{libdir}", "-lhdf5"),
                         f"--hdf5 {prefix}")
    family = mpi_identity(mpicc, ())["family"]
    names = ([f"hdf5-{family}"] if family in ("mpich", "openmpi") else []) + ["hdf5"]
    if _which("pkg-config"):
        for name in names:
            if subprocess.run(["pkg-config", "--exists", name], capture_output=True).returncode == 0:
                cflags = shlex.split(_run(["pkg-config", "--cflags", name], "pkg-config"))
                libs = shlex.split(_run(["pkg-config", "--libs", name], "pkg-config"))
                return Toolchain(mpicc, tuple(cflags), tuple(libs), f"pkg-config {name}")
    found = _which("h5pcc")
    if found:
        return toolchain(mpicc, found)
    raise ConfigError(f"no parallel HDF5 found for {mpicc} (no pkg-config {' or '.join(names)}, no h5pcc on PATH): "
                      f"load your HDF5 module, or name it with {BUILD_COMMAND} --h5pcc PATH or --hdf5 PREFIX")


def _macros(mpicc: str, cflags: tuple[str, ...], headers: tuple[str, ...]) -> dict[str, str]:
    """The preprocessor macros ``mpicc`` defines after including ``headers``: where the versions are stated."""
    with tempfile.TemporaryDirectory(prefix="iobo-shim-probe-") as scratch:
        probe = Path(scratch, "probe.c")
        probe.write_text("".join(f"#include <{h}>\n" for h in headers))
        text = _run([mpicc, *cflags, "-E", "-dM", str(probe)], f"compiling a probe including {', '.join(headers)}")
    macros = {}
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0] == "#define":
            macros[parts[1]] = parts[2].strip() if len(parts) == 3 else ""
    return macros


def mpi_identity(mpicc: str, cflags: tuple[str, ...]) -> dict[str, str]:
    """{"family": "mpich" | "openmpi" | "intel" | "cray" | "mpi", "version": ...} from ``mpi.h``'s macros."""
    m = _macros(mpicc, cflags, ("mpi.h",))
    if "OMPI_MAJOR_VERSION" in m:
        return {"family": "openmpi", "version": "Open MPI " + ".".join(
            m.get(f"OMPI_{k}_VERSION", "?") for k in ("MAJOR", "MINOR", "RELEASE"))}
    if "I_MPI_VERSION" in m:
        return {"family": "intel", "version": "Intel MPI " + m["I_MPI_VERSION"].strip('"')}
    if "CRAY_MPICH_VERSION" in m:
        return {"family": "cray", "version": "Cray MPICH " + m["CRAY_MPICH_VERSION"].strip('"')}
    if "MPICH_VERSION" in m:
        return {"family": "mpich", "version": "MPICH " + m["MPICH_VERSION"].strip('"')}
    return {"family": "mpi", "version": f"MPI {m.get('MPI_VERSION', '?')}.{m.get('MPI_SUBVERSION', '?')}"}


def hdf5_version(mpicc: str, cflags: tuple[str, ...]) -> str:
    """HDF5's version from ``hdf5.h`` (``H5_VERS_MAJOR.MINOR.RELEASE``), e.g. ``1.10.8``."""
    m = _macros(mpicc, cflags, ("hdf5.h",))
    if "H5_VERS_MAJOR" not in m:
        raise ConfigError(f"hdf5.h (flags {' '.join(cflags) or 'none'}) states no H5_VERS_MAJOR: not HDF5's header?")
    version = ".".join(m.get(f"H5_VERS_{k}", "?") for k in ("MAJOR", "MINOR", "RELEASE"))
    if "H5_HAVE_PARALLEL" not in m:
        raise ConfigError(f"the HDF5 {version} of flags {' '.join(cflags)} is not a parallel build (hdf5.h does not "
                          f"define H5_HAVE_PARALLEL): name a parallel HDF5 (--h5pcc, --hdf5)")
    return version


# -- building and the cache ------------------------------------------------------------

def _key(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def build(mpicc: str | None = None, h5pcc: str | None = None, hdf5: str | os.PathLike | None = None,
          cache: Path | None = None) -> dict[str, Any]:
    """Compile the shim (:func:`toolchain`), check it resolves one MPI and one HDF5 and that this HDF5 uses
    this MPI, store it in the cache (:func:`cache_dir`) under its key, and return its information (the JSON
    written beside it: ``library``, ``compiler``, ``cflags``, ``libs``, ``hdf5_from``, ``mpi`` and ``hdf5``
    each with ``soname``, ``path`` and ``version``, ``sources``, ``built``)."""
    tools = toolchain(mpicc, h5pcc, hdf5)
    mpi = mpi_identity(tools.mpicc, tools.cflags)
    h5 = hdf5_version(tools.mpicc, tools.cflags)
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=cache))
    try:
        library = staging / LIBRARY_NAME
        _run([tools.mpicc, *COMPILE_FLAGS, *tools.cflags, "-o", str(library),
              *(str(SOURCES_DIR / s) for s in SOURCES), "-ldl", *tools.libs], "compiling the shim")
        linked = linked_libraries(library)
        for family in FAMILIES:
            if family not in linked or linked[family].path == "not found":
                raise ConfigError(f"the shim built with {tools.mpicc} and {tools.hdf5_from} resolves no "
                                  f"{family} library ({linked.get(family)}): the flags do not link it, or it is "
                                  f"not on the loader's path (LD_LIBRARY_PATH)")
        hdf5_mpi = linked_libraries(linked["hdf5"].path).get("mpi")
        if hdf5_mpi and hdf5_mpi.path != linked["mpi"].path:
            raise ConfigError(f"the HDF5 of {tools.hdf5_from} ({linked['hdf5'].path}) is built for the MPI "
                              f"{hdf5_mpi.path}, {tools.mpicc} links {linked['mpi'].path}: name the HDF5 built for "
                              f"this MPI (--h5pcc, --hdf5) or this HDF5's MPI compiler (--mpicc)")
        sources = sources_digest()
        info = {
            "format": INFO_FORMAT, "version": INFO_VERSION,
            "compiler": tools.mpicc, "compiler_path": shutil.which(tools.mpicc),
            "cflags": list(tools.cflags), "libs": list(tools.libs), "hdf5_from": tools.hdf5_from,
            "mpi": {**asdict(linked["mpi"]), "family": mpi["family"], "version": mpi["version"]},
            "hdf5": {**asdict(linked["hdf5"]), "version": h5},
            "sources": sources,
        }
        key = _key({"sources": sources, "mpi": [linked["mpi"].path, mpi["version"]],
                    "hdf5": [linked["hdf5"].path, h5]})
        final = cache / key
        info.update(key=key, library=str(final / LIBRARY_NAME), built=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        (staging / INFO_NAME).write_text(json.dumps(info, indent=2) + "\n")
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
        return info
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def built(cache: Path | None = None) -> list[dict[str, Any]]:
    """The shims in the cache, newest first: their information (:func:`build`) with ``current`` (built from
    this iobo's sources) added; entries whose library is gone are left out."""
    cache = cache or cache_dir()
    found = []
    for path in cache.glob(f"*/{INFO_NAME}") if cache.is_dir() else []:
        try:
            info = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(info, dict) and info.get("format") == INFO_FORMAT and Path(info.get("library", "")).is_file():
            found.append(info)
    digest = sources_digest()
    for info in found:
        info["current"] = info.get("sources") == digest
    return sorted(found, key=lambda i: i.get("built", ""), reverse=True)


def _matches(shim: dict[str, Library], program: dict[str, Library]) -> bool:
    return all(shim[f].path == program[f].path for f in FAMILIES if f in shim and f in program)


def find(program: str | os.PathLike | None = None, cache: Path | None = None) -> Path | None:
    """The newest shim of the cache built from this iobo's sources for the MPI and HDF5 ``program`` resolves
    (any, when it is not given or links neither dynamically); None when there is none."""
    wanted = linked_libraries(program) if program is not None and is_elf(program) else {}
    for info in built(cache):
        if info["current"] and _matches({f: Library(info[f]["soname"], info[f]["path"]) for f in FAMILIES}, wanted):
            return Path(info["library"])
    return None


def fits(library: str | os.PathLike, program: str | os.PathLike) -> bool:
    """Whether the shim ``library`` resolves the same MPI and HDF5 as ``program`` (where both link them)."""
    return not is_elf(program) or _matches(linked_libraries(library), linked_libraries(program))


OPEN_MPI_RUNTIME = re.compile(r"libopen-pal\.so(\.\d+)*")
"""Open MPI's portability layer, which every Open MPI ``libmpi`` links (Intel MPI's ``libmpi`` does not)."""
OMPI_IO_VARIABLE = "OMPI_MCA_io"
ROMIO_COMPONENT = "romio321"
"""Open MPI 4's ROMIO component. Its default MPI-IO component, OMPIO, ignores the romio_* hints and
``ROMIO_HINTS`` while ``MPI_File_get_info`` echoes them (/work/shared/MEASURED.md): every MPI-IO knob would read
back "in effect" and do nothing."""


def links_open_mpi(library: str | os.PathLike) -> bool:
    """Whether the shared library (or executable) ``library`` resolves Open MPI's runtime (:data:`OPEN_MPI_RUNTIME`)."""
    return any(OPEN_MPI_RUNTIME.fullmatch(name) for name, _ in resolved_libraries(library))


def selects_romio(value: str) -> bool:
    """Whether Open MPI's ``OMPI_MCA_io=value`` leaves ROMIO as the MPI-IO component: a list of ROMIO components
    only (``romio321``), or one that excludes OMPIO and no ROMIO (``^ompio``). Any other (``ompio``,
    ``ompio,romio321``: OMPIO's priority is higher) selects OMPIO."""
    excluded = value.strip().startswith("^")
    names = [n.strip() for n in value.strip().lstrip("^").split(",") if n.strip()]
    romio = [n for n in names if n.startswith("romio")]
    if excluded:
        return "ompio" in names and not romio
    return bool(names) and len(romio) == len(names)


def mpi_environment(library: str | os.PathLike, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables a program needs under the shim ``library`` for its MPI-IO settings to act: for a shim linked to
    Open MPI, ``OMPI_MCA_io=romio321`` (ROMIO instead of OMPIO), unless ``environ`` (default: this process's)
    already chooses a component (the user's choice stands: :func:`io_component` tells which). Empty for other
    MPIs."""
    environ = os.environ if environ is None else environ
    if OMPI_IO_VARIABLE in environ or not links_open_mpi(library):
        return {}
    return {OMPI_IO_VARIABLE: ROMIO_COMPONENT}


def io_component(library: str | os.PathLike, environ: Mapping[str, str] | None = None) -> str | None:
    """The MPI-IO component a program runs with under the shim ``library`` and :func:`mpi_environment` in
    ``environ`` (default: this process's): ``"ompio"`` when the shim is linked to Open MPI and ``OMPI_MCA_io``
    selects OMPIO (:func:`selects_romio`), ``"romio"`` for Open MPI otherwise, None for other MPIs (whose MPI-IO
    is ROMIO: MPICH, Intel MPI, Cray MPICH)."""
    environ = os.environ if environ is None else environ
    if not links_open_mpi(library):
        return None
    return "romio" if selects_romio(environ.get(OMPI_IO_VARIABLE, ROMIO_COMPONENT)) else "ompio"


def check_program(program: str | os.PathLike, library: str | os.PathLike) -> None:
    """Raise :class:`ConfigError` when ``program`` (an ELF executable) resolves another MPI or HDF5 library than
    the shim ``library``: the shim's wrappers would call the other library, and its settings would not act."""
    if not is_elf(program):
        return
    mine, theirs = linked_libraries(library), linked_libraries(program)
    for family in FAMILIES:
        if family in mine and family in theirs and mine[family].path != theirs[family].path:
            raise ConfigError(
                f"the program {program} is linked to {theirs[family].path} ({family}), the shim {library} to "
                f"{mine[family].path}: the shim would not act on the program's calls (its settings silently "
                f"ignored, or two MPIs in one process); build a shim for the program's libraries with "
                f"{BUILD_COMMAND} --mpicc <the MPI compiler that built it> [--h5pcc H5PCC | --hdf5 PREFIX] "
                f"(or set IOBO_PRELOAD_LIBRARY to one)")
