"""The search space: tunable parameters of the I/O stack, grouped by layer.

A :class:`Parameter` is one knob as its library spells it (``cb_buffer_size``,
``striping_factor``...), with its finite, ordered set of allowed values (powers
of two where the literature uses them), its unit and the **system default**,
which is the baseline every speedup is measured against.  A default of ``None``
means "leave unset": the library or file system then chooses.

A :class:`Space` is an ordered set of parameters plus cross-parameter
:class:`Constraint` s that depend on the workload (ranks, dataset size).  It
validates user-given assignments strictly (:meth:`Space.validate`) and turns
sampler proposals into runnable ones (:meth:`Space.suggest` and
:meth:`Space.repair`).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from iobo.errors import SpaceError

LAYERS = ("hdf5", "mpiio", "lustre", "app")

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


def _pow2(lo: int, hi: int, step: int = 1) -> tuple[int, ...]:
    """Powers of two from ``lo`` to ``hi`` inclusive, every ``step``-th exponent."""
    return tuple(2**e for e in range(int(math.log2(lo)), int(math.log2(hi)) + 1, step))


def format_value(value: Any, unit: str = "") -> str:
    """Human form of a parameter value: ``4 MiB``, ``unset``, ``enable``."""
    if value is None:
        return "unset"
    if unit == "bytes" and isinstance(value, int) and not isinstance(value, bool):
        for size, suffix in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
            if value >= size and value % size == 0:
                return f"{value // size} {suffix}"
        return f"{value} B"
    return str(value)


@dataclass(frozen=True)
class Workload:
    """What a configuration is checked against before launch.

    ranks: MPI ranks of the job; nodes: compute nodes (hosts) it spans, or
    ``None`` when not known (the rules that need it then hold vacuously);
    dataset_bytes: size of the largest single dataset written (bytes), or
    ``None`` when the kernel does not say.
    """

    ranks: int = 1
    nodes: int | None = None
    dataset_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("ranks", "nodes"):
            value = getattr(self, name)
            if name == "nodes" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpaceError(f"workload {name} must be a positive integer; got {value!r}")
        if self.nodes is not None and self.nodes > self.ranks:
            raise SpaceError(f"workload nodes ({self.nodes}) must not exceed ranks ({self.ranks}): each node runs "
                             f"at least one rank; ask for fewer nodes or more ranks")
        if self.dataset_bytes is not None and self.dataset_bytes < 1:
            raise SpaceError(f"workload dataset_bytes must be positive; got {self.dataset_bytes!r}")


@dataclass(frozen=True)
class Parameter:
    """One tunable knob.

    name: as its library spells it; layer: one of ``LAYERS``; values: the
    allowed values in their natural order (numbers ascending, ``None`` first
    meaning "unset"); default: the system default (one of ``values``); unit:
    ``"bytes"``, ``"count"`` or ``""``; active_if: ``(other_name, value)`` when
    the parameter only exists for one value of another (chunk size only for a
    chunked layout).
    """

    name: str
    layer: str
    values: tuple[Any, ...]
    default: Any
    unit: str = ""
    doc: str = ""
    active_if: tuple[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.layer not in LAYERS:
            raise SpaceError(f"parameter {self.name!r}: layer must be one of {LAYERS}; got {self.layer!r}")
        if len(self.values) < 2:
            raise SpaceError(f"parameter {self.name!r} needs at least two allowed values; got {self.values!r}")
        if len(set(map(repr, self.values))) != len(self.values):
            raise SpaceError(f"parameter {self.name!r} lists a value twice: {self.values!r}")
        if not any(self._same(self.default, v) for v in self.values):
            raise SpaceError(
                f"parameter {self.name!r}: default {self.default!r} is not among its values {self.values!r}"
            )

    @staticmethod
    def _same(a: Any, b: Any) -> bool:
        # True == 1 in Python; a bool must not pass for an int or back.
        return type(a) is type(b) and a == b

    @property
    def numeric(self) -> bool:
        """True when the values are ordered numbers (``None`` allowed as 'unset')."""
        return all(
            v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in self.values
        )

    def allowed(self) -> str:
        """The allowed values, written for an error message."""
        return ", ".join(format_value(v, self.unit) if self.unit == "bytes" else repr(v) for v in self.values)

    def check(self, value: Any) -> Any:
        """Return ``value`` if allowed, else raise :class:`SpaceError` naming the rule."""
        for allowed in self.values:
            if self._same(value, allowed):
                return allowed
        kind = type(value).__name__
        raise SpaceError(
            f"parameter {self.name!r} ({self.layer}) does not allow {value!r} ({kind}); "
            f"allowed: {self.allowed()}; default: {self.default!r}"
        )

    def index(self, value: Any) -> int:
        """Position of ``value`` in ``values``."""
        for i, allowed in enumerate(self.values):
            if self._same(value, allowed):
                return i
        raise SpaceError(f"parameter {self.name!r}: {value!r} is not an allowed value")

    def distribution(self):
        """The Optuna distribution that samples this parameter."""
        from optuna.distributions import CategoricalDistribution

        return CategoricalDistribution(self.values)


class Constraint(abc.ABC):
    """A rule over several parameters and the workload.

    ``violation`` explains a broken rule (naming parameter, value and the
    allowed range) or returns ``None``; ``repair`` returns the nearest
    assignment that keeps the rule, changing as little as possible. A rule
    that needs the workload holds vacuously when ``workload`` is ``None``.
    """

    @abc.abstractmethod
    def violation(self, values: Mapping[str, Any], workload: Workload | None) -> str | None: ...

    @abc.abstractmethod
    def repair(self, values: dict[str, Any], workload: Workload) -> dict[str, Any]: ...


class AlignmentOrder(Constraint):
    """An alignment threshold above the alignment interval makes no sense."""

    def violation(self, values, workload):
        threshold, interval = values.get("alignment_threshold"), values.get("alignment_interval")
        if threshold is None or interval is None or interval == 1 or threshold <= interval:
            return None
        return (
            f"alignment_threshold={format_value(threshold, 'bytes')} exceeds "
            f"alignment_interval={format_value(interval, 'bytes')}; allowed: threshold <= interval "
            f"(or interval 1 B, no alignment)"
        )

    def repair(self, values, workload):
        if self.violation(values, workload):
            values["alignment_threshold"] = values["alignment_interval"]
        return values


class ChunkWithinDataset(Constraint):
    """An HDF5 chunk may not be larger than the dataset it tiles."""

    def violation(self, values, workload):
        chunk = values.get("chunk_size")
        if values.get("layout") != "chunked" or chunk is None or workload is None or workload.dataset_bytes is None:
            return None
        if chunk <= workload.dataset_bytes:
            return None
        return (
            f"chunk_size={format_value(chunk, 'bytes')} is larger than the dataset "
            f"({workload.dataset_bytes} bytes); allowed: chunk_size <= {workload.dataset_bytes} bytes"
        )

    def repair(self, values, workload):
        if self.violation(values, workload):
            values["chunk_size"] = _largest_at_most(values, "chunk_size", workload.dataset_bytes)
        return values


class AggregatorsWithinRanks(Constraint):
    """ROMIO cannot use more collective-buffering aggregators than ranks."""

    def violation(self, values, workload):
        cb_nodes = values.get("cb_nodes")
        if cb_nodes is None or workload is None or cb_nodes <= workload.ranks:
            return None
        return f"cb_nodes={cb_nodes} exceeds the job's {workload.ranks} ranks; allowed: 1..{workload.ranks}"

    def repair(self, values, workload):
        if self.violation(values, workload):
            values["cb_nodes"] = _largest_at_most(values, "cb_nodes", workload.ranks)
        return values


def aggregators_allowed(cb_config_list: str, ranks: int, nodes: int) -> int:
    """The most collective-buffering aggregators ROMIO can place: ``cb_config_list`` ``"*:k"`` allows k per host
    (at most the ranks on it), ``"*:*"`` every rank; ``ranks`` spread as evenly as a launcher spreads them
    over ``nodes`` hosts (``ceil`` on the first ``ranks % nodes``). ROMIO lowers ``cb_nodes`` to this."""
    per_host = cb_config_list.rpartition(":")[2]
    if per_host == "*":
        return ranks
    fuller, rest = ranks % nodes, ranks // nodes
    return fuller * min(int(per_host), rest + 1) + (nodes - fuller) * min(int(per_host), rest)


class AggregatorsWithinHosts(Constraint):
    """ROMIO lowers ``cb_nodes`` to the aggregators ``cb_config_list`` allows on the job's hosts (``*:1``, its
    default: one per host; on one host, one), so a larger value is the same run as that limit."""

    def violation(self, values, workload):
        cb_nodes = values.get("cb_nodes")
        if cb_nodes is None or workload is None or workload.nodes is None:
            return None
        config_list = values.get("cb_config_list") or "*:1"
        allowed = aggregators_allowed(config_list, workload.ranks, workload.nodes)
        if cb_nodes <= allowed:
            return None
        return (f"cb_nodes={cb_nodes} exceeds the {allowed} aggregator(s) cb_config_list={config_list!r} allows "
                f"for {workload.ranks} ranks on {workload.nodes} node(s) (ROMIO would lower it to {allowed}); "
                f"allowed: cb_nodes <= {allowed}, or a cb_config_list with more aggregators per node "
                f"('*:*': up to {workload.ranks})")

    def repair(self, values, workload):
        if self.violation(values, workload):
            allowed = aggregators_allowed(values.get("cb_config_list") or "*:1", workload.ranks, workload.nodes)
            values["cb_nodes"] = _largest_at_most(values, "cb_nodes", allowed)
        return values


def _largest_at_most(values: dict[str, Any], name: str, limit: int) -> Any:
    """Largest allowed value of parameter ``name`` that is <= ``limit``.

    Needs the owning space's values; stored on the dict by :meth:`Space.repair`.
    """
    choices = values["__allowed__"][name]
    fitting = [v for v in choices if v is not None and v <= limit]
    return max(fitting) if fitting else min(v for v in choices if v is not None)


DEFAULT_CONSTRAINTS: tuple[Constraint, ...] = (AlignmentOrder(), ChunkWithinDataset(), AggregatorsWithinRanks(),
                                                AggregatorsWithinHosts())


@dataclass(frozen=True)
class Space:
    """An ordered set of parameters with cross-parameter constraints."""

    parameters: tuple[Parameter, ...]
    constraints: tuple[Constraint, ...] = field(default=DEFAULT_CONSTRAINTS)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", tuple(self.parameters))
        object.__setattr__(self, "constraints", tuple(self.constraints))
        names = [p.name for p in self.parameters]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise SpaceError(f"a space names each parameter once; repeated: {duplicated}")
        for p in self.parameters:
            if p.active_if is not None:
                parent, value = p.active_if
                if parent not in names:
                    raise SpaceError(f"parameter {p.name!r} depends on {parent!r}, which is not in the space")
                self[parent].check(value)

    # -- container -----------------------------------------------------------
    def __iter__(self) -> Iterator[Parameter]:
        return iter(self.parameters)

    def __len__(self) -> int:
        return len(self.parameters)

    def __contains__(self, name: object) -> bool:
        return any(p.name == name for p in self.parameters)

    def __getitem__(self, name: str) -> Parameter:
        for p in self.parameters:
            if p.name == name:
                return p
        raise SpaceError(f"unknown parameter {name!r}; this space has: {', '.join(self.names)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def layer(self, layer: str) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if p.layer == layer)

    def size(self) -> int:
        """Number of distinct assignments, conditional parameters counted once per parent value."""
        total = 1
        for p in self.parameters:
            if p.active_if is None:
                total *= len(p.values)
        for p in self.parameters:
            if p.active_if is not None:
                parent = self[p.active_if[0]]
                # assignments with the parent at the activating value multiply by len(values)
                total = total // len(parent.values) * (len(parent.values) - 1 + len(p.values))
        return total

    def select(self, names: Iterable[str]) -> "Space":
        """The sub-space of the named parameters (and the parents they depend on)."""
        wanted = set(names)
        for name in list(wanted):
            self[name]  # raises for an unknown name
            parent = self[name].active_if
            if parent:
                wanted.add(parent[0])
        return Space(tuple(p for p in self.parameters if p.name in wanted), self.constraints)

    # -- assignments ---------------------------------------------------------
    def is_active(self, p: Parameter, values: Mapping[str, Any]) -> bool:
        if p.active_if is None:
            return True
        parent, value = p.active_if
        return Parameter._same(values.get(parent, self[parent].default), value)

    def default(self) -> dict[str, Any]:
        """The system-default assignment (inactive parameters left out)."""
        values = {p.name: p.default for p in self.parameters if p.active_if is None}
        return {p.name: p.default for p in self.parameters if self.is_active(p, values)}

    def complete(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Check names and values, fill missing active parameters with defaults, drop none."""
        unknown = [n for n in values if n not in self]
        if unknown:
            raise SpaceError(
                f"unknown parameter(s) {unknown}; allowed names: {', '.join(self.names)}"
            )
        out: dict[str, Any] = {}
        for p in self.parameters:
            if p.active_if is None:
                out[p.name] = p.check(values[p.name]) if p.name in values else p.default
        for p in self.parameters:
            if p.active_if is not None:
                if self.is_active(p, out):
                    out[p.name] = p.check(values[p.name]) if p.name in values else p.default
                elif p.name in values and values[p.name] != p.default:
                    parent, needed = p.active_if
                    raise SpaceError(
                        f"parameter {p.name!r}={values[p.name]!r} only applies when {parent}={needed!r}; "
                        f"got {parent}={out[parent]!r}: drop {p.name} or set {parent}={needed!r}"
                    )
        return out

    def violations(self, values: Mapping[str, Any], workload: Workload | None) -> list[str]:
        """Messages of the broken constraints; workload-dependent ones need ``workload``."""
        return [msg for c in self.constraints if (msg := c.violation(values, workload))]

    def validate(self, values: Mapping[str, Any], workload: Workload | None = None) -> dict[str, Any]:
        """Strict check of a user-given assignment; returns it completed with defaults.

        Raises :class:`SpaceError` naming every unknown parameter, disallowed
        value or violated constraint. Nothing is changed silently.
        """
        out = self.complete(values)
        problems = self.violations(out, workload)
        if problems:
            raise SpaceError("configuration violates constraint(s): " + "; ".join(problems))
        return out

    def repair(self, values: Mapping[str, Any], workload: Workload) -> tuple[dict[str, Any], list[str]]:
        """Make a sampler's proposal runnable: returns (assignment, notes on what changed)."""
        out = self.complete(values)
        notes = self.violations(out, workload)
        if notes:
            work = dict(out, __allowed__={p.name: p.values for p in self.parameters})
            for c in self.constraints:
                work = c.repair(work, workload)
            work.pop("__allowed__")
            out = work
        return out, notes

    def suggest(self, trial, workload: Workload, frozen: Iterable[str] = ()) -> tuple[dict[str, Any], list[str]]:
        """Ask an Optuna trial for every active parameter, then repair constraints.

        Conditional parameters are only suggested when active, so the study
        records exactly the parameters that took part. ``frozen`` parameters
        are not asked for: they keep their defaults (knobs the environment
        showed to have no effect, e.g. striping off Lustre).
        """
        frozen = set(frozen)
        values: dict[str, Any] = {}
        for stage in ("unconditional", "conditional"):
            for p in self.parameters:
                if (p.active_if is None) != (stage == "unconditional"):
                    continue
                if p.active_if is not None and not self.is_active(p, values):
                    continue
                values[p.name] = p.default if p.name in frozen else trial.suggest_categorical(p.name, p.values)
        return self.repair(values, workload)

    def to_records(self) -> list[dict[str, Any]]:
        """The parameters as JSON-able dicts, in order: what a study stores so that any process can read its
        configurations without the code that made the space (constraints are not recorded)."""
        return [{"name": p.name, "layer": p.layer, "values": list(p.values), "default": p.default, "unit": p.unit,
                 "doc": p.doc, "active_if": list(p.active_if) if p.active_if else None} for p in self.parameters]

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]]) -> "Space":
        """The space :meth:`to_records` wrote, with the default constraints."""
        try:
            parameters = tuple(
                Parameter(r["name"], r["layer"], tuple(r["values"]), r["default"], r.get("unit", ""), r.get("doc", ""),
                          tuple(r["active_if"]) if r.get("active_if") else None)
                for r in records
            )
        except (KeyError, TypeError) as exc:
            raise SpaceError(f"a recorded space is a list of parameter records (name, layer, values, default); "
                             f"cannot read {str(records)[:200]!r}: {exc!r}") from None
        return cls(parameters)

    def describe(self) -> str:
        """A table of the space, one parameter a line, for the CLI and docs."""
        rows = []
        for p in self.parameters:
            cond = f" (when {p.active_if[0]}={p.active_if[1]})" if p.active_if else ""
            vals = ", ".join(format_value(v, p.unit) for v in p.values)
            rows.append(f"{p.layer:7s} {p.name:20s} default {format_value(p.default, p.unit):10s} [{vals}]{cond}")
        return "\n".join(rows)


# Pairs of parameters that act through their ratio, as I/O practice tunes them:
# the collective buffer and the chunk size matched to the stripe size (H5Tuner
# tied stripe size and cb_buffer_size), as many aggregators as stripes, HDF5
# objects aligned to stripe boundaries.  The GP models log2(first / second) as
# one more input (iobo._gp.encoding.Ratio).
SIZE_RATIOS: tuple[tuple[str, str], ...] = (
    ("cb_buffer_size", "striping_unit"),
    ("cb_nodes", "striping_factor"),
    ("chunk_size", "striping_unit"),
    ("alignment_interval", "striping_unit"),
)


def io_stack_space() -> Space:
    """The HDF5 + MPI-IO (ROMIO) + Lustre parameters of the literature.

    Value ranges follow H5Tuner (SC13) and TunIO: powers of two for sizes and
    counts; defaults are the libraries' own (HDF5 1.10, ROMIO, Lustre).
    """
    return Space(
        (
            # HDF5 file access and dataset creation/transfer properties
            Parameter("alignment_threshold", "hdf5", (1, 4 * KiB, 64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB),
                      1, "bytes", "H5Pset_alignment threshold: objects at least this large are aligned"),
            Parameter("alignment_interval", "hdf5", (1, 4 * KiB, 64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB, 32 * MiB),
                      1, "bytes", "H5Pset_alignment interval: aligned objects start at multiples of it (1: off)"),
            Parameter("meta_block_size", "hdf5", _pow2(2 * KiB, 2 * MiB, 2),
                      2 * KiB, "bytes", "H5Pset_meta_block_size: metadata aggregation block"),
            Parameter("sieve_buf_size", "hdf5", (64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB),
                      64 * KiB, "bytes", "H5Pset_sieve_buf_size: data sieving buffer"),
            Parameter("mdc_initial_size", "hdf5", (MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB, 32 * MiB),
                      2 * MiB, "bytes", "H5Pset_mdc_config initial_size: metadata cache size"),
            Parameter("layout", "hdf5", ("contiguous", "chunked"), "contiguous", "",
                      "dataset storage layout"),
            Parameter("chunk_size", "hdf5", (64 * KiB, 256 * KiB, MiB, 4 * MiB, 16 * MiB, 64 * MiB),
                      MiB, "bytes", "H5Pset_chunk: bytes per chunk (1-D datasets)", ("layout", "chunked")),
            Parameter("transfer_mode", "hdf5", ("independent", "collective"), "independent", "",
                      "H5Pset_dxpl_mpio: collective or independent raw-data transfer"),
            Parameter("coll_metadata", "hdf5", (False, True), False, "",
                      "H5Pset_all_coll_metadata_ops + H5Pset_coll_metadata_write"),
            # MPI-IO hints (ROMIO)
            Parameter("cb_buffer_size", "mpiio", _pow2(MiB, 128 * MiB), 16 * MiB, "bytes",
                      "collective-buffering buffer per aggregator"),
            Parameter("cb_nodes", "mpiio", (None,) + _pow2(1, 256), None, "count",
                      "number of collective-buffering aggregators (unset: one per node)"),
            Parameter("romio_cb_write", "mpiio", ("automatic", "enable", "disable"), "automatic", "",
                      "collective buffering for writes"),
            Parameter("romio_ds_write", "mpiio", ("automatic", "enable", "disable"), "automatic", "",
                      "data sieving for independent writes"),
            Parameter("cb_config_list", "mpiio", ("*:1", "*:2", "*:4", "*:*"), "*:1", "",
                      "aggregators per node ('*:*': every rank may aggregate)"),
            # Lustre striping, passed as MPI-IO hints at file creation
            Parameter("striping_factor", "lustre", (None,) + _pow2(1, 128), None, "count",
                      "Lustre stripe count (OSTs per file; unset: file system default)"),
            Parameter("striping_unit", "lustre", (None,) + _pow2(MiB, 128 * MiB), None, "bytes",
                      "Lustre stripe size (unset: file system default)"),
        )
    )
