"""Run an unmodified program with a tuned configuration: iobo's LD_PRELOAD shim.

``adapters/libiobo_preload.so`` (built by ``make adapters/libiobo_preload.so``,
source and rules in ``adapters/``) intercepts ``H5Fcreate``/``H5Fopen``,
``H5Dcreate2``/``H5Dcreate1``/``H5Dcreate_anon``, ``H5Dwrite`` and
``MPI_File_open`` and applies the ``IOBO_*`` variables of
:meth:`IOConfig.env`, as H5Tuner's preloaded library does with its XML file.
It also counts the program's I/O and, with a report prefix, writes what took
effect; :func:`read_report` merges that over the ranks::

    env = {**os.environ, **preload_env(config, "romio-hints", report_prefix="/abs/run/io")}
    subprocess.run(["mpiexec.mpich", "-n", "4", "./app"], env=env)
    report = read_report("/abs/run/io")  # bytes_written, io_seconds, mb_per_s, not_applied, ...

The program must use the MPI and HDF5 libraries the shim was built against:
:func:`preload_library` picks a shim that does, and refuses a program that
resolves others (:func:`iobo.shim.check_program`). In a clone that is
``adapters/libiobo_preload.so`` (Debian's MPICH and parallel HDF5 1.10.8);
an installed iobo builds its shim with ``iobo shim build`` (:mod:`iobo.shim`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from iobo import shim
from iobo.config import IOConfig
from iobo.errors import ConfigError
from iobo.measure import bandwidth_mb_per_s

ADAPTERS_DIR = Path(__file__).resolve().parent.parent / "adapters"
"""The clone's adapters/ (absent beside an installed package)."""
PRELOAD_NAME = shim.LIBRARY_NAME
BUILD_COMMAND = f"make -C {shlex.quote(str(ADAPTERS_DIR.parent))} adapters/{PRELOAD_NAME}"
"""How a clone builds its shim; an installed iobo: ``iobo shim build`` (:data:`iobo.shim.BUILD_COMMAND`)."""
LIBRARY_VARIABLE = "IOBO_PRELOAD_LIBRARY"


SHIM_VARIABLES = tuple(f"IOBO_{name}" for name in (
    "ALIGNMENT_THRESHOLD", "ALIGNMENT_INTERVAL", "META_BLOCK_SIZE", "SIEVE_BUF_SIZE", "MDC_INITIAL_SIZE",
    "COLL_METADATA", "LAYOUT", "CHUNK_SIZE", "TRANSFER_MODE", "CB_BUFFER_SIZE", "CB_NODES", "ROMIO_CB_WRITE",
    "ROMIO_DS_WRITE", "ROMIO_CB_READ", "ROMIO_DS_READ", "CB_CONFIG_LIST", "STRIPING_FACTOR", "STRIPING_UNIT",
    "PRELOAD_REPORT", "PRELOAD_TRACE", "PRELOAD_EXCLUDE"))
"""The variables the shim reads (adapters/README.md), but ``IOBO_PRELOAD_VERBOSE``, which a user may set."""


def preload_library(program: str | os.PathLike | None = None) -> Path:
    """Path of the shim to preload, the first of: ``$IOBO_PRELOAD_LIBRARY``; the clone's
    ``adapters/libiobo_preload.so`` (when it resolves the MPI and HDF5 ``program`` does, or no program is
    named); the newest shim of ``iobo shim build``'s cache built for them (:func:`iobo.shim.find`).

    With ``program`` (an executable: a path, or a name looked up on PATH), the shim chosen must resolve the same
    MPI and HDF5 libraries as the program (:func:`iobo.shim.check_program`). Raises :class:`ConfigError` with
    the one command that builds a shim when none exists, or with the reason the program cannot run under it.
    """
    if program is not None and os.sep not in os.fspath(program):
        program = shutil.which(os.fspath(program)) or program
    explicit = os.environ.get(LIBRARY_VARIABLE)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{LIBRARY_VARIABLE}={explicit} is not a file: point it at a built shim "
                              f"({shim.BUILD_COMMAND} prints where it puts one) or unset it")
    else:
        clone = ADAPTERS_DIR / PRELOAD_NAME
        path = clone if clone.is_file() and (program is None or shim.fits(clone, program)) else None
        # none for the program's libraries: the one there is, which check_program then refuses with the reason
        path = path or shim.find(program) or (clone if clone.is_file() else None) or shim.find()
        if path is None:
            how = (f"{BUILD_COMMAND} (needs mpicc.mpich and libhdf5-mpich-dev), or {shim.BUILD_COMMAND}"
                   if ADAPTERS_DIR.is_dir() else shim.BUILD_COMMAND)
            where = f"{ADAPTERS_DIR} and {shim.cache_dir()}" if ADAPTERS_DIR.is_dir() else shim.cache_dir()
            raise ConfigError(f"the preload library {PRELOAD_NAME} is not built; build it with: {how} "
                              f"(looked in {where})")
    if program is not None:
        shim.check_program(program, path)
    return path


def preload_env(
    config: IOConfig,
    hints_path: str | os.PathLike | None = None,
    report_prefix: str | os.PathLike | None = None,
    program: str | os.PathLike | None = None,
) -> dict[str, str]:
    """Environment variables that make a program started with them apply ``config``.

    ``LD_PRELOAD`` (the shim first, then any ``LD_PRELOAD`` already in this
    process's environment) plus :meth:`IOConfig.env`: ``IOBO_*`` for every
    parameter away from its default, and ``ROMIO_HINTS=hints_path`` when
    ``hints_path`` is given and the configuration has MPI-IO hints (the
    caller writes that file, e.g. with :func:`iobo.hdf5.shell_exports`).
    With ``report_prefix``, ``IOBO_PRELOAD_REPORT`` (made absolute): each
    process writes ``<prefix>.<rank>.json`` at exit, read by :func:`read_report`.
    With ``program``, the shim is the one for its MPI and HDF5 (:func:`preload_library`). Under Open MPI,
    ``OMPI_MCA_io=romio321`` unless set already (:func:`iobo.shim.mpi_environment`: OMPIO ignores the hints).
    """
    library = str(preload_library(program))
    chain = [library] + [p for p in os.environ.get("LD_PRELOAD", "").replace(":", " ").split() if p != library]
    app = {f"IOBO_{p.name.upper()}" for p in config.space.layer("app")}  # the program's own knobs: not the shim's
    settings = config.env(os.fspath(hints_path) if hints_path is not None else None)
    env = {"LD_PRELOAD": ":".join(chain), **{k: v for k, v in settings.items() if k not in app}}
    if report_prefix is not None:
        env["IOBO_PRELOAD_REPORT"] = os.path.abspath(os.fspath(report_prefix))
    env["IOBO_PRELOAD_EXCLUDE"] = ":".join(interpreter_directories())
    env.update(shim.mpi_environment(library))
    return env


def interpreter_directories() -> list[str]:
    """This Python's own directories (its prefixes and library paths) and iobo's package (a source checkout is
    outside them): the shim does not count files under them (``IOBO_PRELOAD_EXCLUDE``), so a Python program's
    imports, a replay kernel's included, are not its I/O."""
    import sysconfig

    found = {sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parent),
             *(sysconfig.get_paths().get(key, "") for key in ("stdlib", "platstdlib", "purelib", "platlib"))}
    return sorted(os.path.realpath(d) for d in found if d)


def program_environment(
    config: IOConfig,
    hints_path: str | os.PathLike,
    report_prefix: str | os.PathLike | None = None,
    base: Mapping[str, str] | None = None,
    program: str | os.PathLike | None = None,
) -> dict[str, str]:
    """The whole environment of a program run under the shim with ``config``: ``base`` (default: this
    process's) without the shim's settings (:data:`SHIM_VARIABLES`), ``ROMIO_HINTS`` and the shim it may carry
    from an earlier export, plus
    :func:`preload_env` (for ``program``, when given). Writes the ROMIO hints file at ``hints_path`` when
    ``config`` has hints."""
    base = dict(os.environ if base is None else base)
    library = str(preload_library(program))
    env = {k: v for k, v in base.items() if k not in SHIM_VARIABLES and k != "ROMIO_HINTS"}
    preload = [p for p in env.pop("LD_PRELOAD", "").replace(":", " ").split() if Path(p).name != PRELOAD_NAME]
    if config.mpi_hints():
        Path(hints_path).write_text(config.romio_hints_text())
    settings = preload_env(config, hints_path, report_prefix, program)
    settings["LD_PRELOAD"] = ":".join([library, *preload])
    return {**env, **settings}


# -- the shim's per-run report ---------------------------------------------------

COLLECTIVE_IO_MODES = ("chunk_collective", "chunk_mixed", "contiguous_collective")
"""The HDF5 transfer modes (``H5D_mpio_actual_io_mode_t``, as the shim's report names them) in which I/O was
collective."""

REPORT_FORMAT = "iobo-preload-report"
REPORT_VERSION = 1
LEVELS = ("hdf5", "mpiio", "posix")  # the topmost first; each ends in the next
DIRECTIONS = ("write", "read")


def report_files(prefix: str | os.PathLike) -> list[Path]:
    """The per-rank files ``<prefix>.<rank>.json`` the shim wrote, in rank order."""
    prefix = Path(prefix)
    pattern = re.compile(re.escape(prefix.name) + r"\.(\d+)\.json")
    found = []
    if prefix.parent.is_dir():
        for path in prefix.parent.iterdir():
            match = pattern.fullmatch(path.name)
            if match:
                found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def _load_rank(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"the shim report {path} must be a JSON file the shim wrote; cannot read it: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != REPORT_FORMAT or data.get("version") != REPORT_VERSION:
        raise ConfigError(
            f"{path} is not a shim report of format {REPORT_FORMAT!r} version {REPORT_VERSION}; got format "
            f"{data.get('format') if isinstance(data, dict) else None!r}: rebuild the shim "
            f"({BUILD_COMMAND}) and run the program again"
        )
    return data


def _seconds(rank: dict[str, Any], level: str) -> float:
    """Seconds inside the level's reads and writes on one rank."""
    return sum(rank["levels"][level][d]["seconds"] for d in DIRECTIONS)


PHASE_PARTS = {"hdf5": ("hdf5", "mpiio", "posix_outputs"), "mpiio": ("mpiio", "posix_outputs"), "posix": ("posix",)}
"""Which parts of a rank's I/O phases (the report's ``phase_seconds``) count for a program whose topmost level
with reads or writes is the key: every call at that level and below it that no call above contains (the
library's own I/O outside the program's calls), and, under HDF5 or MPI-IO, POSIX calls only on files opened
for writing (a sync of the output; not the inputs a program reads, nor Python's modules)."""


def _phase_seconds(rank: dict[str, Any], level: str) -> float:
    """Seconds of one rank's I/O phases for a program whose topmost level is ``level`` (:data:`PHASE_PARTS`)."""
    return sum(rank["phase_seconds"][part] for part in PHASE_PARTS[level])


def _merged_levels(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Per level and direction: calls, bytes and histograms summed, seconds as the max over ranks."""
    merged: dict[str, Any] = {}
    for level in LEVELS:
        out: dict[str, Any] = {"files_opened": sum(r["levels"][level]["files_opened"] for r in ranks)}
        for direction in DIRECTIONS:
            parts = [r["levels"][level][direction] for r in ranks]
            histogram: dict[int, int] = {}
            for part in parts:
                for lower, count in part["histogram"].items():
                    histogram[int(lower)] = histogram.get(int(lower), 0) + count
            entry = {
                "calls": sum(p["calls"] for p in parts),
                "bytes": sum(p["bytes"] for p in parts),
                "max_seconds": max(p["seconds"] for p in parts),
                "histogram": dict(sorted(histogram.items())),
            }
            if level == "posix":  # what the calls asked for; reads at a file's end return fewer
                entry["requested"] = sum(p.get("requested", p["bytes"]) for p in parts)
            if level == "mpiio":
                entry["collective_calls"] = sum(p["collective_calls"] for p in parts)
                entry["independent_calls"] = sum(p["independent_calls"] for p in parts)
            out[direction] = entry
        merged[level] = out
    return merged


def _effective(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """What was in effect: files (first rank that has each), datasets, transfer modes summed."""
    files: dict[str, dict[str, Any]] = {"mpiio": {}, "hdf5": {}}
    datasets: dict[str, Any] = {}
    transfer: dict[str, Any] = {d: {"modes": {}, "no_collective_causes": []} for d in DIRECTIONS}
    for rank in ranks:
        for record in rank["files"]:
            entry = files[record["level"]].setdefault(record["name"], {k: v for k, v in record.items()
                                                                      if k not in ("level", "name", "opens")})
            entry["opens"] = entry.get("opens", 0) + record["opens"]
            seconds = [s for s in (entry["open_seconds"], record["open_seconds"]) if s is not None]
            entry["open_seconds"] = max(seconds) if seconds else None
        for dataset in rank["datasets"]:
            datasets.setdefault(dataset["name"], {k: v for k, v in dataset.items() if k != "name"})
        for direction in DIRECTIONS:
            mine, merged = rank["transfer"][direction], transfer[direction]
            for mode, count in mine["modes"].items():
                merged["modes"][mode] = merged["modes"].get(mode, 0) + count
            merged["no_collective_causes"] += [c for c in mine["no_collective_causes"]
                                               if c not in merged["no_collective_causes"]]
    return {"files": files, "datasets": datasets, "transfer": transfer}


def _applied(ranks: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per requested setting, the calls summed over ranks: where it could act (``considered``), where the shim
    set it (``acted``), where reading back showed the requested value (``in_effect``) or another (``differ``)."""
    applied: dict[str, dict[str, int]] = {}
    for rank in ranks:
        for item in rank["requested"]:
            counts = applied.setdefault(item["setting"], {"considered": 0, "acted": 0, "in_effect": 0, "differ": 0})
            for key in counts:
                counts[key] += item[f"calls_{key}"]
    return applied


def _not_applied(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requested settings that did not take effect somewhere, each with a reason.

    Mismatches merge over ranks by (variable, value in effect, reason), their
    counts summed; a setting is unused (``in_effect`` None) only when it is
    unused on every rank.
    """
    merged: dict[tuple, dict[str, Any]] = {}
    for rank in ranks:
        for item in rank["not_applied"]:
            key = (item["variable"], item["in_effect"], item["reason"])
            if key in merged:
                merged[key]["count"] += item["count"]
            else:
                merged[key] = dict(item)
    unused = [{item["variable"] for item in rank["unused"]} for rank in ranks]
    everywhere = set.intersection(*unused) if unused else set()
    listed = []
    for item in ranks[0]["unused"]:
        if item["variable"] in everywhere:
            listed.append({**item, "in_effect": None, "where": None, "count": 0})
    return listed + list(merged.values())


def _hosts(ranks: list[dict[str, Any]], level: str | None) -> dict[str, dict[str, Any]]:
    """Per host (the node a rank ran on, ``gethostname``): its ranks and the bytes they wrote and read at the
    run's top level ``level``."""
    hosts: dict[str, dict[str, Any]] = {}
    for rank in ranks:
        entry = hosts.setdefault(rank.get("host", ""), {"ranks": [], "bytes_written": 0, "bytes_read": 0})
        entry["ranks"].append(rank["rank"])
        if level:
            entry["bytes_written"] += rank["levels"][level]["write"]["bytes"]
            entry["bytes_read"] += rank["levels"][level]["read"]["bytes"]
    return dict(sorted(hosts.items()))


def run_measure(report: Mapping[str, Any]) -> tuple[int, float]:
    """What a run's bandwidth is made of: (bytes the program moved, at its topmost level; the slowest rank's
    seconds in its I/O phases, ``phase_seconds``: opens, creates, reads, writes, flushes, syncs and closes,
    the library's own I/O outside the program's calls included). So a setting cannot look fast by moving work
    out of ``H5Dwrite`` into ``H5Dcreate`` (fill values) or ``H5Dclose`` (a chunk cache's flush), and the
    figure is the one a program that times its own open-to-close I/O prints. (0, 0.0) for a run without
    I/O."""
    return report["bytes_written"] + report["bytes_read"], report["phase_seconds"]


def read_report(prefix: str | os.PathLike) -> dict[str, Any]:
    """The shim's report of one run, merged over the ranks' ``<prefix>.<rank>.json``.

    ``level`` is the topmost level with reads or writes (``hdf5`` when HDF5
    calls moved data, else ``mpiio``, else ``posix``; None when no I/O was
    seen); ``bytes_written`` and ``bytes_read`` are summed over ranks at that
    level; ``io_seconds`` is the max over ranks of the seconds inside that
    level's reads and writes (the slowest rank, ``slowest_rank``).
    ``phase_seconds`` is the max over ranks (``phase_rank``) of the seconds
    of the rank's I/O phases: inside every open, create, read, write, flush,
    sync and close, nested calls once (:data:`PHASE_PARTS`), so it also holds
    what HDF5 does at ``H5Dcreate`` (fill values) and ``H5Dclose`` /
    ``H5Fclose`` (chunk-cache and metadata flushes), which ``io_seconds``
    leaves out, and ranks waiting for each other inside collective calls;
    ``mb_per_s`` is the bytes moved over it (MB = 10**6 bytes; None without
    I/O time): the bandwidth the program sees from its opens to its closes.
    The levels nest, so ``levels`` reports each separately and never adds
    them up. ``effective`` holds the hints and HDF5 settings read back per
    file, the datasets' layouts and the transfer modes HDF5 used;
    ``not_applied`` the requested settings that did not take effect (each
    with ``reason``; ``in_effect`` None for one that never found a call to
    act on), and ``applied`` per setting the calls summed over ranks where it
    could act, was set, and was read back in effect or not; ``warnings``
    what the shim printed at exit, and whether ranks
    are missing. ``hosts`` gives per host (each rank's ``gethostname``) its
    ranks and their bytes written and read at ``level``.
    """
    paths = report_files(prefix)
    if not paths:
        raise ConfigError(
            f"no shim report {os.fspath(prefix)}.<rank>.json: run the program with "
            f"LD_PRELOAD=<the shim, preload_library()> and IOBO_PRELOAD_REPORT={os.path.abspath(os.fspath(prefix))} "
            f"(preload_env(..., report_prefix=...)) and let it reach MPI_Finalize or exit"
        )
    ranks = sorted((_load_rank(path) for path in paths), key=lambda r: r["rank"])
    levels = _merged_levels(ranks)
    level = next((name for name in LEVELS if any(levels[name][d]["calls"] for d in DIRECTIONS)), None)

    bytes_written = levels[level]["write"]["bytes"] if level else 0
    bytes_read = levels[level]["read"]["bytes"] if level else 0
    slowest = max(ranks, key=lambda r: _seconds(r, level)) if level else None
    io_seconds = _seconds(slowest, level) if slowest else 0.0
    phases = {r["rank"]: _phase_seconds(r, level) if level else 0.0 for r in ranks}
    moved = bytes_written + bytes_read
    linked = {r["hdf5_linked"] for r in ranks}
    warnings: list[str] = []
    expected = max(r["ranks"] for r in ranks)
    if len(ranks) < expected:
        warnings.append(f"only {len(ranks)} of {expected} ranks wrote a report (ranks {[r['rank'] for r in ranks]}): "
                        f"the others ended before MPI_Finalize or exit; the totals cover the ranks listed")
    for rank in ranks:
        warnings += [w for w in rank["warnings"] if w not in warnings]
    return {
        "ranks": len(ranks),
        "level": level,
        "bytes_written": bytes_written,
        "bytes_read": bytes_read,
        "io_seconds": io_seconds,
        "slowest_rank": slowest["rank"] if slowest else None,
        "phase_seconds": max(phases.values()),
        "phase_rank": max(phases, key=phases.get),
        "mb_per_s": bandwidth_mb_per_s(moved, max(phases.values())) if moved and max(phases.values()) > 0 else None,
        "levels": levels,
        "per_rank": [{"rank": r["rank"], "host": r.get("host", ""), "levels": r["levels"]} for r in ranks],
        "hosts": _hosts(ranks, level),
        "hdf5_linked": next((kind for kind in ("dynamic", "static", "none") if kind in linked), "none"),
        "hdf5_calls": sum(r["hdf5_calls"] for r in ranks),
        "requested": {item["variable"]: item["value"] for item in ranks[0]["requested"]},
        "applied": _applied(ranks),
        "effective": _effective(ranks),
        "not_applied": _not_applied(ranks),
        "warnings": warnings,
    }
