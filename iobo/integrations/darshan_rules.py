"""Candidate settings from a Darshan characterisation, by published I/O tuning rules.

``suggest(characterization)`` applies two published rule sets to the facts
:func:`iobo.integrations.darshan.characterize` reads from a log, and returns
the rules that fire, each with its evidence (the counters and the threshold
they crossed) and the settings of iobo's space it points to:

- Drishti (Bez et al., "Drishti: guiding end-users in the I/O optimization
  journey", PDSW 2022): requests of at most 1 MiB above 10% of the requests
  and above 1,000 of them; operations off the file system's alignment above
  10%; MPI-IO without a collective call and more than 1,000 independent
  operations; a large shared file on a single Lustre stripe;
- SmartIO (PDSW 2025, /work/shared/DOMAIN.md item 4): shared file +
  sequential access -> independent transfers without collective buffering;
  shared file + non-sequential -> collective; file per process -> stripe
  count 1; HDF5 alignment and metadata cache of 1-16 MiB for transfers
  below 16 MiB, else 16 MiB; more aggregators per node for collective
  buffering.

Where a published rule names no number, the one used here is ours and named
so below (``SEQUENTIAL_SHARE``, ``LARGE_SHARED_FILE_BYTES``,
``BYTES_PER_STRIPE``, ``AGGREGATORS_PER_NODE``).  Rules can disagree (a
sequential shared file that already writes collectively): each suggestion is
a candidate to measure, not a verdict.  :func:`candidates` turns the
suggestions into whole configurations of a kernel's space, the first trials
``iobo tune --from-darshan LOG`` runs after the default runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iobo.integrations.darshan import SIZE_BINS, Characterization
from iobo.space import KiB, MiB, Space, Workload, format_value, io_stack_space
from iobo.trials import ORIGIN_ATTR, ROLE_SEARCH, enqueue_first

GiB = 1024 * MiB

# Drishti's thresholds
SMALL_REQUEST_BINS = SIZE_BINS[:5]
"""Darshan's size bins up to 1 MiB (``0_100`` .. ``100K_1M``): Drishti's small requests."""
SMALL_REQUEST_SHARE = 0.10
SMALL_REQUEST_COUNT = 1000
MISALIGNED_SHARE = 0.10
INDEPENDENT_OPERATIONS = 1000
# SmartIO's split between small and large transfers
LARGE_TRANSFER_BYTES = 16 * MiB
# ours, where the published rule names no number
SEQUENTIAL_SHARE = 0.8
"""POSIX reads + writes Darshan counts sequential, above which access is sequential (SmartIO names no number)."""
LARGE_SHARED_FILE_BYTES = GiB
"""A shared file at least this large on one stripe fires Drishti's striping rule (its size limit is ours)."""
BYTES_PER_STRIPE = 256 * MiB
"""Stripe count for a large shared file: one stripe per this many bytes, a power of two, 2 .. min(ranks, 128)."""
AGGREGATORS_PER_NODE = "*:4"
"""SmartIO's "more aggregators per node" as a ``cb_config_list`` value (ROMIO's default is ``*:1``)."""
COLLECTIVE_SHARE = 0.5
"""Collective writes above this share of the MPI-IO writes: the application relies on collective buffering."""

DRISHTI, SMARTIO = "Drishti", "SmartIO"


@dataclass(frozen=True)
class Suggestion:
    """A rule that fired: its name, where it comes from, the evidence and the settings it points to.

    settings: ``{parameter: value}`` in iobo's spelling (values from
    :func:`iobo.space.io_stack_space` and the read hints); reason: why those
    settings, in a sentence.
    """

    rule: str
    source: str
    evidence: str
    settings: dict[str, Any]
    reason: str

    @property
    def origin(self) -> str:
        """The ``origin`` trial attr of a trial it proposed."""
        return f"rule:{self.rule}"

    def describe(self) -> str:
        settings = ", ".join(f"{k}={_value(k, v)}" for k, v in self.settings.items())
        return (f"{self.rule} ({self.source}): {self.evidence}\n"
                f"  -> {settings}\n"
                f"     {self.reason}")

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "source": self.source, "evidence": self.evidence,
                "settings": dict(self.settings), "reason": self.reason}


def suggest(c: Characterization) -> list[Suggestion]:
    """Every rule that fires on ``c``, in the order listed in the module docstring."""
    found: list[Suggestion] = []
    for direction in ("write", "read"):
        found += _small_requests(c, direction)
    found += _misaligned(c)
    for direction in ("write", "read"):
        found += _no_collective(c, direction)
    found += _single_stripe(c)
    found += _shared_file_access(c)
    found += _file_per_process(c)
    found += _transfer_alignment(c)
    found += _collective_aggregators(c)
    return found


def format_suggestions(suggestions: Sequence[Suggestion]) -> str:
    """What ``iobo characterize LOG --suggest`` prints."""
    if not suggestions:
        return "Suggested settings: none (no rule fired on this log)"
    lines = [f"Suggested settings ({len(suggestions)} rule(s) fired; each is a candidate to measure):"]
    lines += [suggestion.describe() for suggestion in suggestions]
    return "\n".join(lines)


# --- facts the rules share -----------------------------------------------------


def file_layout(c: Characterization) -> str | None:
    """``"shared"`` or ``"per_process"``: how most bytes of the data layer moved (None on one rank or no data).

    The data layer is MPI-IO when the job used it, else POSIX.
    """
    module = "MPI-IO" if "MPI-IO" in c.io else "POSIX" if "POSIX" in c.io else None
    if module is None or c.nprocs < 2:
        return None
    io = c.io[module]
    if io.shared_bytes == io.per_process_bytes == 0:
        return None
    return "shared" if io.shared_bytes >= io.per_process_bytes + io.partly_shared_bytes else "per_process"


def sequential_share(c: Characterization) -> float | None:
    """Sequential POSIX reads + writes over all of them (None without POSIX operations)."""
    p = c.pattern
    if p is None or not p.reads + p.writes:
        return None
    return (p.sequential_reads + p.sequential_writes) / (p.reads + p.writes)


def typical_transfer(c: Characterization) -> tuple[int, int] | None:
    """(size in bytes, count) of the access size that moved the most bytes among Darshan's most common ones.

    From MPI-IO when the job used it (each call's whole size), else POSIX.
    """
    sizes = c.access_sizes.get("MPI-IO") or c.access_sizes.get("POSIX")
    if sizes is None or not sizes.most_common:
        return None
    top = max(sizes.most_common, key=lambda a: (a.size_bytes * a.count, a.size_bytes))
    return top.size_bytes, top.count


def summary(c: Characterization, suggestions: Sequence[Suggestion]) -> dict[str, Any]:
    """The characterisation in a few JSON values, for a study's context (:mod:`iobo.context`)."""
    transfer = typical_transfer(c)
    ops = c.mpiio_ops
    return {
        "source": "darshan",
        "log": c.path,
        "executable": c.executable,
        "nprocs": c.nprocs,
        "bytes_written": max((io.bytes_written for io in c.io.values()), default=0),
        "bytes_read": max((io.bytes_read for io in c.io.values()), default=0),
        "file_layout": file_layout(c),
        "sequential_share": sequential_share(c),
        "typical_transfer_bytes": transfer[0] if transfer else None,
        "collective_writes": ops.collective_writes if ops else None,
        "independent_writes": ops.independent_writes if ops else None,
        "lustre_stripe_counts": sorted({layout.stripe_count for layout in c.lustre}),
        "rules": [s.rule for s in suggestions],
    }


# --- Drishti --------------------------------------------------------------------


def _small_requests(c: Characterization, direction: str) -> list[Suggestion]:
    sizes = c.access_sizes.get("POSIX")
    if sizes is None:
        return []
    histogram = sizes.write_histogram if direction == "write" else sizes.read_histogram
    total = sum(histogram.values())
    small = sum(histogram[b] for b in SMALL_REQUEST_BINS)
    if not total or small / total <= SMALL_REQUEST_SHARE or small <= SMALL_REQUEST_COUNT:
        return []
    evidence = (f"{small:,} of {total:,} POSIX {direction}s ({small / total:.0%}) are at most 1 MiB "
                f"(thresholds: > {SMALL_REQUEST_SHARE:.0%} and > {SMALL_REQUEST_COUNT:,})")
    if "MPI-IO" in c.io:
        hint = "romio_cb_write" if direction == "write" else "romio_cb_read"
        return [Suggestion(f"small-{direction}s", DRISHTI, evidence, {"transfer_mode": "collective", hint: "enable"},
                           "collective buffering gathers many small requests into a few large ones on the "
                           "aggregators (Drishti: use collective I/O for small requests through MPI-IO)")]
    if direction == "read":
        return [Suggestion("small-reads", DRISHTI, evidence, {"sieve_buf_size": 4 * MiB},
                           "without MPI-IO, a larger HDF5 sieve buffer serves many small raw-data reads from one "
                           "large read (Drishti: buffer small requests)")]
    return [Suggestion("small-writes", DRISHTI, evidence, {"sieve_buf_size": 4 * MiB, "meta_block_size": 2 * MiB},
                       "without MPI-IO, HDF5's sieve buffer coalesces small raw-data writes and a larger metadata "
                       "block gathers small metadata writes (Drishti: buffer small requests)")]


def _misaligned(c: Characterization) -> list[Suggestion]:
    p = c.pattern
    share = p.misaligned_fraction if p else None
    if share is None or share <= MISALIGNED_SHARE or not p.file_alignment_bytes:
        return []
    stripe = _common_stripe_size(c)
    boundary = stripe or p.file_alignment_bytes
    interval = _largest_at_most("alignment_interval", boundary, floor=4 * KiB)
    where = f"the Lustre stripe size {format_value(stripe, 'bytes')}" if stripe else \
        f"the file system's alignment {format_value(p.file_alignment_bytes, 'bytes')}"
    evidence = (f"{p.file_not_aligned:,} of {p.reads + p.writes:,} POSIX operations ({share:.0%}) start off the "
                f"file system's {format_value(p.file_alignment_bytes, 'bytes')} alignment "
                f"(threshold: > {MISALIGNED_SHARE:.0%})")
    return [Suggestion("misaligned", DRISHTI, evidence, _alignment(interval),
                       f"HDF5 alignment places large objects on multiples of {where}, so writes stop "
                       f"straddling blocks (Drishti: align requests)")]


def _no_collective(c: Characterization, direction: str) -> list[Suggestion]:
    ops = c.mpiio_ops
    if ops is None:
        return []
    collective = ops.collective_writes if direction == "write" else ops.collective_reads
    independent = ops.independent_writes if direction == "write" else ops.independent_reads
    if collective or independent <= INDEPENDENT_OPERATIONS:
        return []
    hint = "romio_cb_write" if direction == "write" else "romio_cb_read"
    return [Suggestion(
        f"no-collective-{direction}s", DRISHTI,
        f"MPI-IO {direction}s: 0 collective, {independent:,} independent (threshold: > {INDEPENDENT_OPERATIONS:,} "
        f"independent without any collective)",
        {"transfer_mode": "collective", hint: "enable"},
        "collective transfers let ROMIO merge the ranks' requests (Drishti: use collective I/O)")]


def _single_stripe(c: Characterization) -> list[Suggestion]:
    stripes_of: dict[str, set[int]] = {}
    for layout in c.lustre:
        stripes_of.setdefault(layout.path, set()).add(layout.stripe_count)
    large = {path: n for path, n in c.shared_file_bytes.items()
             if n >= LARGE_SHARED_FILE_BYTES and stripes_of.get(path) == {1}}
    if not large:
        return []
    path, n_bytes = max(large.items(), key=lambda item: item[1])
    count = _stripe_count(n_bytes, c.nprocs)
    evidence = (f"{len(large)} shared file(s) of at least {format_value(LARGE_SHARED_FILE_BYTES, 'bytes')} on one "
                f"Lustre stripe; the largest, {path}, moved {n_bytes:,} bytes")
    return [Suggestion("shared-file-one-stripe", DRISHTI, evidence, {"striping_factor": count},
                       f"spreading a large shared file over {count} OSTs (one per "
                       f"{format_value(BYTES_PER_STRIPE, 'bytes')}, at most one per rank) lets the ranks write "
                       f"to several servers at once (Drishti: stripe large shared files)")]


# --- SmartIO ----------------------------------------------------------------------


def _shared_file_access(c: Characterization) -> list[Suggestion]:
    share = sequential_share(c)
    if file_layout(c) != "shared" or share is None:
        return []
    evidence = (f"shared file; {share:.0%} of {c.pattern.reads + c.pattern.writes:,} POSIX operations sequential "
                f"(sequential from {SEQUENTIAL_SHARE:.0%})")
    if share >= SEQUENTIAL_SHARE:
        return [Suggestion("shared-sequential", SMARTIO, evidence,
                           {"transfer_mode": "independent", "romio_cb_write": "disable"},
                           "each rank already writes one contiguous stretch: independent transfers skip the "
                           "shuffle to aggregators (SmartIO: shared + sequential -> independent, no collective "
                           "buffering)")]
    return [Suggestion("shared-random", SMARTIO, evidence, {"transfer_mode": "collective", "romio_cb_write": "enable"},
                       "scattered requests to one file are merged into large contiguous ones by collective "
                       "buffering (SmartIO: shared + non-sequential -> collective)")]


def _file_per_process(c: Characterization) -> list[Suggestion]:
    if file_layout(c) != "per_process":
        return []
    module = "MPI-IO" if "MPI-IO" in c.io else "POSIX"
    io = c.io[module]
    counts = sorted({layout.stripe_count for layout in c.lustre})
    seen = f"; Lustre stripe counts seen: {', '.join(map(str, counts))}" if counts else ""
    evidence = (f"{io.per_process_files:,} files opened by one rank each moved {io.per_process_bytes:,} of "
                f"{io.bytes_read + io.bytes_written:,} {module} bytes{seen}")
    return [Suggestion("file-per-process", SMARTIO, evidence, {"striping_factor": 1},
                       "with a file per rank the files already spread over the servers; one stripe each avoids "
                       "every rank contending on every server (SmartIO: file per process -> stripe count 1)")]


def _transfer_alignment(c: Characterization) -> list[Suggestion]:
    transfer = typical_transfer(c)
    if transfer is None:
        return []
    size, count = transfer
    if size < LARGE_TRANSFER_BYTES:
        interval = _smallest_at_least("alignment_interval", max(size, MiB), ceiling=LARGE_TRANSFER_BYTES)
        band = f"below {format_value(LARGE_TRANSFER_BYTES, 'bytes')}: alignment in 1-16 MiB"
    else:
        interval = _smallest_at_least("alignment_interval", LARGE_TRANSFER_BYTES)
        band = f"at least {format_value(LARGE_TRANSFER_BYTES, 'bytes')}: alignment of 16 MiB or more"
    settings = {**_alignment(interval), "mdc_initial_size": _largest_at_most("mdc_initial_size", interval)}
    evidence = f"typical transfer {format_value(size, 'bytes')} (x{count:,}, the most bytes of the most common sizes)"
    return [Suggestion("transfer-alignment", SMARTIO, evidence, settings,
                       f"transfers {band}, the same for the metadata cache (SmartIO's alignment rule)")]


def _collective_aggregators(c: Characterization) -> list[Suggestion]:
    ops = c.mpiio_ops
    if ops is None:
        return []
    writes = ops.collective_writes + ops.independent_writes + ops.nonblocking_writes
    if not ops.collective_writes or ops.collective_writes / writes <= COLLECTIVE_SHARE:
        return []
    evidence = (f"{ops.collective_writes:,} of {writes:,} MPI-IO writes ({ops.collective_writes / writes:.0%}) "
                f"collective (from {COLLECTIVE_SHARE:.0%})")
    return [Suggestion("collective-aggregators", SMARTIO, evidence,
                       {"transfer_mode": "collective", "romio_cb_write": "enable",
                        "cb_config_list": AGGREGATORS_PER_NODE},
                       f"collective buffering with {AGGREGATORS_PER_NODE.split(':')[1]} aggregators per node instead "
                       f"of ROMIO's one (SmartIO: more aggregators per node via cb_config_list)")]


# --- turning suggestions into configurations of a kernel's space ---------------------


@dataclass(frozen=True)
class Candidate:
    """A whole configuration of a space that one or more rules proposed.

    values: the system default with the rules' settings (constraints
    repaired); rules: the rules that proposed exactly this configuration;
    reason: their evidence; dropped: ``{parameter: why}`` of settings that
    could not be used here.
    """

    values: dict[str, Any]
    rules: tuple[str, ...]
    reason: str
    dropped: dict[str, str] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        """``rule:<name>`` (``rule:<a>+<b>`` when several rules proposed the same configuration)."""
        return "rule:" + "+".join(self.rules)

    def trial_attrs(self) -> dict[str, Any]:
        """The user attrs of the search trial that measures it."""
        return {"role": ROLE_SEARCH, ORIGIN_ATTR: self.origin, "origin_reason": self.reason}


def candidates(suggestions: Sequence[Suggestion], space: Space, workload: Workload,
               frozen: Mapping[str, str] = ()) -> tuple[list[Candidate], list[str]]:
    """(configurations to measure first, notes on the suggestions left out).

    Settings of parameters not in ``space`` or ``frozen`` (``{name: why}``,
    e.g. striping off Lustre) are dropped; a suggestion left with nothing
    that differs from the default is skipped; suggestions that lead to the
    same configuration become one candidate.
    """
    frozen = dict(frozen or {})
    default = space.default()
    found: dict[tuple, Candidate] = {}
    notes: list[str] = []
    for s in suggestions:
        kept, dropped = {}, {}
        for name, value in s.settings.items():
            if name not in space:
                dropped[name] = "not a parameter of this kernel's space"
            elif name in frozen:
                dropped[name] = frozen[name]
            else:
                kept[name] = space[name].check(value)
        values, _ = space.repair({**default, **kept}, workload)
        if values == default:
            why = "; ".join(f"{k}: {v}" for k, v in dropped.items()) or "its settings are the system default"
            notes.append(f"rule {s.rule} left out: {why}")
            continue
        key = tuple(sorted((k, repr(v)) for k, v in values.items()))
        if key in found:
            old = found[key]
            found[key] = Candidate(old.values, old.rules + (s.rule,), f"{old.reason}; {s.evidence}",
                                   {**old.dropped, **dropped})
        else:
            found[key] = Candidate(values, (s.rule,), s.evidence, dropped)
    return list(found.values()), notes


# --- values in iobo's space ---------------------------------------------------------------

_STACK = io_stack_space()


def _alignment(interval: int) -> dict[str, int]:
    """Alignment interval and a threshold of at most half of it: smaller objects (metadata, small chunks) stay
    unpadded; padding them to the interval can make files many times larger."""
    threshold = _largest_at_most("alignment_threshold", interval // 2)
    return {"alignment_interval": interval, "alignment_threshold": threshold}


def _largest_at_most(name: str, limit: int, floor: int | None = None) -> int:
    allowed = [v for v in _STACK[name].values if v is not None]
    fitting = [v for v in allowed if v <= limit and (floor is None or v >= floor)]
    return max(fitting) if fitting else min(v for v in allowed if floor is None or v >= floor)


def _smallest_at_least(name: str, limit: int, ceiling: int | None = None) -> int:
    allowed = [v for v in _STACK[name].values if v is not None and (ceiling is None or v <= ceiling)]
    above = [v for v in allowed if v >= limit]
    return min(above) if above else max(allowed)


def _stripe_count(n_bytes: int, nprocs: int) -> int:
    wanted = max(2, -(-n_bytes // BYTES_PER_STRIPE))
    return _smallest_at_least("striping_factor", min(wanted, max(2, nprocs)), ceiling=max(2, nprocs))


def _common_stripe_size(c: Characterization) -> int | None:
    sizes = [layout.stripe_size_bytes for layout in c.lustre]
    return max(set(sizes), key=sizes.count) if sizes else None


def _value(name: str, value: Any) -> str:
    unit = _STACK[name].unit if name in _STACK else ""
    return format_value(value, unit)


def enqueue_suggestions(study, suggestions: Sequence[Suggestion], space: Space, workload: Workload,
                        fs_type: str) -> tuple[list[Candidate], list[str]]:
    """Queue the :func:`candidates` of ``suggestions`` as the study's next search trials (after the default
    runs it already queued), each with its origin; striping is dropped off Lustre (``fs_type``, see
    :func:`iobo.stack.environment_limits`). Returns (the candidates queued now, notes on those left out)."""
    from iobo.stack import environment_limits

    found, notes = candidates(suggestions, space, workload, environment_limits(space, fs_type))
    have = {t.user_attrs.get(ORIGIN_ATTR) for t in study.get_trials(deepcopy=False)}
    fresh = [c for c in found if c.origin not in have]
    enqueue_first(study, [(c.values, c.trial_attrs()) for c in fresh])
    notes += [f"rule trial {c.origin} already in the study" for c in found if c.origin in have]
    return fresh, notes
