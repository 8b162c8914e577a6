"""Characterise an application's I/O from its Darshan log (``iobo characterize LOG``).

Reads the log with pydarshan and reduces its counters to the facts the I/O
tuning rules turn on (SmartIO in DOMAIN.md): bytes per I/O layer, shared file
vs file per process, collective vs independent MPI-IO, access sizes,
sequential vs random access, Lustre striping, and job facts with a bandwidth.

The log is checked before pydarshan sees it: darshan-util trusts the header's
region map and can abort the process on a truncated or corrupt file, so a file
that is not a whole Darshan log raises ``ConfigError`` here instead.
pydarshan is imported inside the functions, so importing this module is light.
"""

from __future__ import annotations

import bz2
import dataclasses
import os
import re
import struct
import zlib
from dataclasses import dataclass

from iobo.errors import ConfigError

MB = 1e6  # bytes; every bandwidth here is in MB/s

# Modules whose records count bytes, with their counter prefix. H5D records are
# datasets rather than files.
BYTE_MODULES = {"POSIX": "POSIX", "MPI-IO": "MPIIO", "STDIO": "STDIO", "H5D": "H5D"}
# Modules darshan-util derives an I/O time for; the headline bandwidth is the
# first present (the highest file layer the application used).
TIMED_MODULES = ("MPI-IO", "POSIX", "STDIO")
# Access-size histogram counters: POSIX counts each read()/write(), MPI-IO each
# call's total size (its "AGG" bins).
SIZE_COUNTER_PREFIX = {"POSIX": "POSIX_SIZE_{op}_", "MPI-IO": "MPIIO_SIZE_{op}_AGG_"}
SIZE_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")

# Darshan log header (darshan-log-format.h): version string, magic number,
# compression type, partial flag, then (offset, length) maps of the name region
# and of each module region, then a version per module.
_MAGIC = 6567223
_HEADER_START = "8sqB3xI"  # version, magic, comp_type (+ padding), partial_flag
_HEADER_START_BYTES = struct.calcsize("<" + _HEADER_START)
_VERSION = re.compile(rb"3\.\d\d\0+\Z")
_ZLIB, _BZIP2, _NO_COMPRESSION = 0, 1, 2


@dataclass(frozen=True)
class ModuleIO:
    """What one Darshan module (I/O layer) saw, summed over its records.

    Darshan reduces a file every rank opened to one record of rank -1: a
    *shared* file. A file fewer ranks opened keeps a record per rank: *per
    process* when one rank opened it, *partly shared* otherwise. Bytes are
    read plus written. ``io_seconds`` is darshan-util's I/O time estimate (the
    slowest rank's time on its own files plus, per shared file, the slowest
    rank's time on it; None where darshan-util derives none, e.g. H5D), and
    ``mb_per_s`` = bytes moved / ``io_seconds`` / 1e6.
    """

    module: str
    bytes_read: int
    bytes_written: int
    shared_files: int
    shared_bytes: int
    per_process_files: int
    per_process_bytes: int
    partly_shared_files: int
    partly_shared_bytes: int
    io_seconds: float | None
    mb_per_s: float | None


@dataclass(frozen=True)
class MpiioOps:
    """MPI-IO read and write calls by kind, summed over files and ranks.

    Split collectives (``MPI_File_write_all_begin``) count as collective.
    """

    collective_reads: int
    collective_writes: int
    independent_reads: int
    independent_writes: int
    nonblocking_reads: int
    nonblocking_writes: int


@dataclass(frozen=True)
class AccessCount:
    """How many accesses had one size."""

    size_bytes: int
    count: int


@dataclass(frozen=True)
class AccessSizes:
    """One layer's access-size histograms and its most common access sizes.

    Histogram keys are Darshan's bins, K/M/G being powers of 1024 (``"1M_4M"``:
    more than 1 MiB, at most 4 MiB). ``most_common`` sums Darshan's four most
    common sizes per record (reads and writes together) over the records, most
    frequent first.
    """

    module: str
    read_histogram: dict[str, int]
    write_histogram: dict[str, int]
    most_common: tuple[AccessCount, ...]


@dataclass(frozen=True)
class AccessPattern:
    """POSIX reads and writes and the fractions that were sequential.

    Darshan counts an access *sequential* when it starts at or after the end of
    the previous one in the file, *consecutive* when it starts exactly there.
    The first access to a file is neither, so a purely sequential stream of n
    accesses scores (n - 1) / n. A fraction is None when there were no such
    operations; ``1 - sequential`` is the random share.

    ``file_not_aligned`` counts reads and writes whose file offset was not a
    multiple of the file system's alignment (``POSIX_FILE_NOT_ALIGNED``);
    ``file_alignment_bytes`` is that alignment (``POSIX_FILE_ALIGNMENT``, the
    largest over the records: 1 MiB on Lustre is the stripe size), 0 without
    records.
    """

    reads: int
    writes: int
    sequential_reads: int
    sequential_writes: int
    consecutive_reads: int
    consecutive_writes: int
    sequential_read_fraction: float | None
    sequential_write_fraction: float | None
    consecutive_read_fraction: float | None
    consecutive_write_fraction: float | None
    file_not_aligned: int = 0
    file_alignment_bytes: int = 0

    @property
    def misaligned_fraction(self) -> float | None:
        """Share of reads and writes at a file offset off the file system's alignment; None without any."""
        operations = self.reads + self.writes
        return self.file_not_aligned / operations if operations else None


@dataclass(frozen=True)
class LustreLayout:
    """One Lustre layout component of a file; a plain (non-composite) file has one.

    ``extent_end_bytes`` is -1 when the component reaches the end of the file.
    """

    path: str
    stripe_size_bytes: int
    stripe_count: int
    extent_start_bytes: int
    extent_end_bytes: int


@dataclass(frozen=True)
class Characterization:
    """The I/O of one job, as its Darshan log records it.

    ``io`` maps each byte-counting module present (POSIX, MPI-IO, STDIO, H5D)
    to its volumes; ``bandwidth_mb_per_s`` is ``io[bandwidth_module].mb_per_s``
    (see ``ModuleIO``). ``mpiio_ops`` is None without MPI-IO, ``pattern`` None
    without POSIX, ``lustre`` empty without the LUSTRE module.
    ``shared_file_bytes`` maps each file every rank opened (a rank -1 record of
    POSIX or STDIO) to the bytes read plus written on it through those layers.
    """

    path: str
    executable: str
    nprocs: int
    run_seconds: float
    log_version: str
    modules_present: tuple[str, ...]
    io: dict[str, ModuleIO]
    bandwidth_module: str | None
    bandwidth_mb_per_s: float | None
    mpiio_ops: MpiioOps | None
    access_sizes: dict[str, AccessSizes]
    pattern: AccessPattern | None
    lustre: tuple[LustreLayout, ...]
    shared_file_bytes: dict[str, int] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        """Plain JSON-able dict (nested dicts and lists) to store on a trial."""
        return dataclasses.asdict(self)


def characterize(path: str | os.PathLike) -> Characterization:
    """Read the Darshan log at ``path`` and characterise the job's I/O.

    Raises ``ConfigError`` when the path is missing or is not a whole Darshan log.
    """
    path = os.fspath(path)
    check_log(path)
    report = _open_report(path)
    frames = _read_frames(report)
    job = report.metadata["job"]
    io = {module: _module_io(module, frame, job["nprocs"]) for module, frame in frames.items()}
    bandwidth_module = next((module for module in TIMED_MODULES if module in io), None)
    return Characterization(
        path=path,
        executable=report.metadata["exe"],
        nprocs=int(job["nprocs"]),
        run_seconds=float(job["run_time"]),
        log_version=job["log_ver"],
        modules_present=tuple(report.modules),
        io=io,
        bandwidth_module=bandwidth_module,
        bandwidth_mb_per_s=io[bandwidth_module].mb_per_s if bandwidth_module else None,
        mpiio_ops=_mpiio_ops(frames["MPI-IO"]["counters"]) if "MPI-IO" in frames else None,
        access_sizes={
            module: _access_sizes(module, frames[module]["counters"])
            for module in SIZE_COUNTER_PREFIX
            if module in frames
        },
        pattern=_access_pattern(frames["POSIX"]["counters"]) if "POSIX" in frames else None,
        lustre=_lustre_layouts(report),
        shared_file_bytes=_shared_file_bytes(report, frames),
    )


# --- checking the file before darshan-util reads it -------------------------


def check_log(path: str) -> None:
    """Raise ``ConfigError`` unless ``path`` is a whole, readable Darshan log.

    Checks the header (version string, magic number, compression type), that
    every region the header maps lies inside the file (a truncated copy fails
    here) and that every compressed region decompresses completely.
    """
    data = _read_bytes(path)
    version, order, comp_type = _parse_header_start(path, data)
    header_bytes = _header_bytes(version)
    if len(data) < header_bytes:
        raise ConfigError(
            f"Darshan log {path} is truncated: a format {version} header takes {header_bytes} bytes "
            f"but the file has {len(data)}; copy the complete log again"
        )
    regions = _regions(data, version, order)
    for offset, length in regions:
        if offset < header_bytes or length < 0:
            raise ConfigError(
                f"Darshan log {path} is corrupt: its header maps a region (offset {offset}, length {length}) "
                f"that overlaps the {header_bytes}-byte header"
            )
        if offset + length > len(data):
            raise ConfigError(
                f"Darshan log {path} is truncated: its header maps data up to byte {offset + length} "
                f"but the file has {len(data)} bytes; copy the complete log again"
            )
    for offset, length in regions:
        _check_decompresses(path, data[offset : offset + length], comp_type)


def _read_bytes(path: str) -> bytes:
    if not os.path.exists(path):
        raise ConfigError(f"Darshan log {path} does not exist; pass the path of a .darshan log file")
    if not os.path.isfile(path):
        raise ConfigError(f"Darshan log {path} is not a regular file; pass the path of a .darshan log file")
    try:
        with open(path, "rb") as log:
            return log.read()
    except OSError as error:
        raise ConfigError(f"Darshan log {path} cannot be read ({error.strerror}); check its permissions") from error


def _parse_header_start(path: str, data: bytes) -> tuple[str, str, int]:
    """The log's format version, byte order ('<' or '>') and compression type."""
    not_a_log = f"{path} is not a Darshan log: expected a file written by the Darshan runtime"
    if len(data) < _HEADER_START_BYTES or not _VERSION.match(data[:8]):
        raise ConfigError(f"{not_a_log}, starting with a format version such as '3.21' (found {data[:8]!r})")
    for order in "<>":
        version, magic, comp_type, _partial = struct.unpack_from(order + _HEADER_START, data)
        if magic == _MAGIC:
            break
    else:
        raise ConfigError(f"{not_a_log}, with magic number {_MAGIC} after the version (found {data[8:16]!r})")
    if comp_type not in (_ZLIB, _BZIP2, _NO_COMPRESSION):
        raise ConfigError(f"Darshan log {path} is corrupt: unknown compression type {comp_type} in its header")
    return version.rstrip(b"\0").decode(), order, comp_type


def _header_bytes(version: str) -> int:
    """Header size: its start, an (offset, length) map per region, a version per module."""
    modules = _mapped_modules(version)
    return _HEADER_START_BYTES + 16 * (1 + modules) + 4 * modules


def _mapped_modules(version: str) -> int:
    """Logs before format 3.41 map 16 modules, later ones 64 (darshan PR #726)."""
    return 64 if version >= "3.41" else 16


def _regions(data: bytes, version: str, order: str) -> list[tuple[int, int]]:
    """(offset, length) of the job region and of every region the header maps.

    The maps (name region, then one per module) follow the header's start; the
    job region runs from the end of the header to the first mapped region.
    """
    maps = 1 + _mapped_modules(version)
    fields = struct.unpack_from(f"{order}{2 * maps}Q", data, _HEADER_START_BYTES)
    mapped = sorted((offset, length) for offset, length in zip(fields[::2], fields[1::2]) if length > 0)
    job_start = _header_bytes(version)
    job_end = mapped[0][0] if mapped else len(data)
    return [(job_start, job_end - job_start), *mapped]


def _check_decompresses(path: str, region: bytes, comp_type: int) -> None:
    """Raise ``ConfigError`` unless ``region`` is whole compressed streams back to back."""
    if comp_type == _NO_COMPRESSION:
        return
    while region:
        stream = zlib.decompressobj() if comp_type == _ZLIB else bz2.BZ2Decompressor()
        try:
            stream.decompress(region)
        except (zlib.error, OSError, ValueError) as error:
            raise ConfigError(
                f"Darshan log {path} is corrupt: its compressed data does not decompress ({error})"
            ) from error
        if not stream.eof:
            raise ConfigError(f"Darshan log {path} is corrupt: a compressed region ends early")
        region = stream.unused_data


# --- reading counters with pydarshan -----------------------------------------


def _open_report(path: str):
    import darshan

    try:
        return darshan.DarshanReport(path, read_all=False)
    except RuntimeError as error:
        raise ConfigError(
            f"pydarshan could not open Darshan log {path} ({error}); it reads log formats 3.00 to 3.41"
        ) from error


def _read_frames(report) -> dict:
    """``{module: {"counters": DataFrame, "fcounters": DataFrame}}`` for each byte-counting module with records."""
    frames = {}
    for module in BYTE_MODULES:
        if module in report.modules:
            report.mod_read_all_records(module)
            if len(report.records[module]):
                frames[module] = report.records[module].to_df()
    return frames


def _module_io(module: str, frames, nprocs: int) -> ModuleIO:
    counters = frames["counters"]
    prefix = BYTE_MODULES[module]
    moved = counters[f"{prefix}_BYTES_READ"] + counters[f"{prefix}_BYTES_WRITTEN"]
    shared = counters["rank"] == -1
    ranks_per_file = counters[~shared].groupby("id")["rank"].nunique()
    per_process = ~shared & counters["id"].isin(ranks_per_file.index[ranks_per_file == 1])
    partly_shared = ~shared & ~per_process
    io_seconds = _io_seconds(module, frames, nprocs)
    bytes_moved = int(moved.sum())
    return ModuleIO(
        module=module,
        bytes_read=int(counters[f"{prefix}_BYTES_READ"].sum()),
        bytes_written=int(counters[f"{prefix}_BYTES_WRITTEN"].sum()),
        shared_files=int(counters.loc[shared, "id"].nunique()),
        shared_bytes=int(moved[shared].sum()),
        per_process_files=int(counters.loc[per_process, "id"].nunique()),
        per_process_bytes=int(moved[per_process].sum()),
        partly_shared_files=int(counters.loc[partly_shared, "id"].nunique()),
        partly_shared_bytes=int(moved[partly_shared].sum()),
        io_seconds=io_seconds,
        mb_per_s=bytes_moved / io_seconds / MB if io_seconds else None,
    )


def _io_seconds(module: str, frames, nprocs: int) -> float | None:
    """darshan-util's I/O time for the module (``agg_time_by_slowest``, as darshan-parser --perf)."""
    if module not in TIMED_MODULES:
        return None
    from darshan.backend.cffi_backend import accumulate_records

    return float(accumulate_records(frames, module, nprocs).derived_metrics.agg_time_by_slowest)


def _mpiio_ops(counters) -> MpiioOps:
    def total(*names: str) -> int:
        return int(sum(counters[f"MPIIO_{name}"].sum() for name in names))

    return MpiioOps(
        collective_reads=total("COLL_READS", "SPLIT_READS"),
        collective_writes=total("COLL_WRITES", "SPLIT_WRITES"),
        independent_reads=total("INDEP_READS"),
        independent_writes=total("INDEP_WRITES"),
        nonblocking_reads=total("NB_READS"),
        nonblocking_writes=total("NB_WRITES"),
    )


def _access_sizes(module: str, counters, most_common: int = 4) -> AccessSizes:
    def histogram(op: str) -> dict[str, int]:
        prefix = SIZE_COUNTER_PREFIX[module].format(op=op)
        return {size_bin: int(counters[prefix + size_bin].sum()) for size_bin in SIZE_BINS}

    prefix = BYTE_MODULES[module]
    counts: dict[int, int] = {}
    for slot in range(1, 5):
        for size, count in zip(counters[f"{prefix}_ACCESS{slot}_ACCESS"], counters[f"{prefix}_ACCESS{slot}_COUNT"]):
            if count > 0:
                counts[int(size)] = counts.get(int(size), 0) + int(count)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:most_common]
    return AccessSizes(
        module=module,
        read_histogram=histogram("READ"),
        write_histogram=histogram("WRITE"),
        most_common=tuple(AccessCount(size_bytes=size, count=count) for size, count in ranked),
    )


def _access_pattern(counters) -> AccessPattern:
    def total(name: str) -> int:
        return int(counters[f"POSIX_{name}"].sum())

    def fraction(part: int, whole: int) -> float | None:
        return part / whole if whole else None

    reads, writes = total("READS"), total("WRITES")
    seq_reads, seq_writes = total("SEQ_READS"), total("SEQ_WRITES")
    consec_reads, consec_writes = total("CONSEC_READS"), total("CONSEC_WRITES")
    return AccessPattern(
        reads=reads,
        writes=writes,
        sequential_reads=seq_reads,
        sequential_writes=seq_writes,
        consecutive_reads=consec_reads,
        consecutive_writes=consec_writes,
        sequential_read_fraction=fraction(seq_reads, reads),
        sequential_write_fraction=fraction(seq_writes, writes),
        consecutive_read_fraction=fraction(consec_reads, reads),
        consecutive_write_fraction=fraction(consec_writes, writes),
        file_not_aligned=total("FILE_NOT_ALIGNED"),
        file_alignment_bytes=int(counters["POSIX_FILE_ALIGNMENT"].max()),
    )


FILE_MODULES = ("POSIX", "STDIO")
"""Modules whose records are files as the file system sees them (what Lustre stripes)."""


def _shared_file_bytes(report, frames) -> dict[str, int]:
    moved: dict[str, int] = {}
    for module in FILE_MODULES:
        if module not in frames:
            continue
        counters = frames[module]["counters"]
        shared = counters[counters["rank"] == -1]
        prefix = BYTE_MODULES[module]
        for file_id, n_bytes in zip(shared["id"], shared[f"{prefix}_BYTES_READ"] + shared[f"{prefix}_BYTES_WRITTEN"]):
            path = report.name_records.get(int(file_id), str(int(file_id)))
            moved[path] = moved.get(path, 0) + int(n_bytes)
    return moved


def _lustre_layouts(report) -> tuple[LustreLayout, ...]:
    if "LUSTRE" not in report.modules:
        return ()
    report.mod_read_all_lustre_records()
    if not len(report.records["LUSTRE"]):
        return ()
    components = report.records["LUSTRE"].to_df()["components"]
    return tuple(
        LustreLayout(
            path=report.name_records[row.id],
            stripe_size_bytes=int(row.LUSTRE_COMP_STRIPE_SIZE),
            stripe_count=int(row.LUSTRE_COMP_STRIPE_COUNT),
            extent_start_bytes=int(row.LUSTRE_COMP_EXT_START),
            extent_end_bytes=int(row.LUSTRE_COMP_EXT_END),
        )
        for row in components.itertuples(index=False)
    )


# --- the readable summary ----------------------------------------------------


def format_characterization(c: Characterization) -> str:
    """A readable multi-line summary of ``c`` (what ``iobo characterize LOG`` prints)."""
    lines = [
        f"Darshan log {c.path} (format {c.log_version})",
        f"job: {c.executable or '(executable not recorded)'}",
        f"  {c.nprocs} ranks, {c.run_seconds:g} s run time; modules: {', '.join(c.modules_present)}",
        "I/O by layer (MB = 1e6 bytes):",
        *(_format_module_io(io) for io in c.io.values()),
        _format_bandwidth(c),
    ]
    if c.mpiio_ops:
        lines.append(_format_mpiio_ops(c.mpiio_ops))
    lines += [_format_access_sizes(sizes) for sizes in c.access_sizes.values()]
    if c.pattern:
        lines.append(_format_pattern(c.pattern))
    if c.lustre:
        lines.append(_format_lustre(c.lustre))
    return "\n".join(lines)


def _format_module_io(io: ModuleIO) -> str:
    groups = [
        (io.shared_files, "shared by all ranks", io.shared_bytes),
        (io.per_process_files, "per process", io.per_process_bytes),
        (io.partly_shared_files, "shared by some ranks", io.partly_shared_bytes),
    ]
    noun = "datasets" if io.module == "H5D" else "files"
    kinds = ", ".join(f"{count} {kind} ({_volume(moved)})" for count, kind, moved in groups if count) or "none"
    timing = f"; {_number(io.io_seconds)} s I/O, {_number(io.mb_per_s)} MB/s" if io.mb_per_s else ""
    return f"  {io.module:<7} read {_volume(io.bytes_read)}, wrote {_volume(io.bytes_written)}; {noun}: {kinds}{timing}"


def _format_bandwidth(c: Characterization) -> str:
    if c.bandwidth_mb_per_s is None:
        return "bandwidth: not derivable (no timed MPI-IO, POSIX or STDIO I/O)"
    return (
        f"bandwidth: {_number(c.bandwidth_mb_per_s)} MB/s = {c.bandwidth_module} bytes read + written "
        f"/ Darshan's slowest-rank I/O time"
    )


def _format_mpiio_ops(ops: MpiioOps) -> str:
    return (
        f"MPI-IO calls (reads/writes): collective {ops.collective_reads}/{ops.collective_writes}, "
        f"independent {ops.independent_reads}/{ops.independent_writes}, "
        f"non-blocking {ops.nonblocking_reads}/{ops.nonblocking_writes}"
    )


def _format_access_sizes(sizes: AccessSizes) -> str:
    def nonzero(histogram: dict[str, int]) -> str:
        return ", ".join(f"{size_bin} x{count}" for size_bin, count in histogram.items() if count) or "none"

    common = ", ".join(f"{_size(access.size_bytes)} x{access.count}" for access in sizes.most_common) or "none"
    return (
        f"{sizes.module} access sizes: reads {nonzero(sizes.read_histogram)}; writes {nonzero(sizes.write_histogram)}\n"
        f"  most common: {common}"
    )


def _format_pattern(pattern: AccessPattern) -> str:
    def share(fraction: float | None) -> str:
        return "-" if fraction is None else f"{fraction:.0%}"

    return (
        f"POSIX pattern: {pattern.reads} reads ({share(pattern.sequential_read_fraction)} sequential, "
        f"{share(pattern.consecutive_read_fraction)} consecutive), {pattern.writes} writes "
        f"({share(pattern.sequential_write_fraction)} sequential, "
        f"{share(pattern.consecutive_write_fraction)} consecutive); {pattern.file_not_aligned} "
        f"({share(pattern.misaligned_fraction)}) off the file system's {_size(pattern.file_alignment_bytes)} alignment"
    )


def _format_lustre(layouts: tuple[LustreLayout, ...]) -> str:
    files: dict[tuple[int, int], set[str]] = {}
    for layout in layouts:
        files.setdefault((layout.stripe_size_bytes, layout.stripe_count), set()).add(layout.path)
    groups = sorted(files.items(), key=lambda item: -len(item[1]))
    return "Lustre striping: " + "; ".join(
        f"{len(paths)} file(s) with stripe size {_size(size)}, stripe count {count}" for (size, count), paths in groups
    )


def _number(value: float) -> str:
    """Whole above 100, else three significant digits."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def _volume(n_bytes: int) -> str:
    """Decimal units: 1 MB = 1e6 bytes."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes} B"


def _size(n_bytes: int) -> str:
    """Exact binary units for access and stripe sizes (1 MiB = 1048576 bytes), else bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n_bytes >= scale and n_bytes % scale == 0:
            return f"{n_bytes // scale} {unit}"
    return f"{n_bytes} B"
