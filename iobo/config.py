"""``IOConfig``: one complete assignment of a space, and its exports.

A configuration applies only what differs from the system default: a value
equal to its parameter's default is left to the library, so the default
configuration passes no hint and sets no property (that is the baseline).

Exports, for taking a tuned setting to production:

- ``json``         the assignment, reloadable with :meth:`IOConfig.from_json`
- ``romio-hints``  a file for ``ROMIO_HINTS=path`` (MPI-IO and Lustre hints)
- ``env``          shell ``export`` lines: ``ROMIO_HINTS`` plus ``IOBO_*``
                   variables read by iobo's production mode and preload shim
- ``h5tuner-xml``  H5Tuner's XML layout (High_Level_IO_Library,
                   Middleware_Layer, Parallel_File_System)
- ``lfs``          the ``lfs setstripe`` command for the output directory
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

from iobo.errors import ConfigError, SpaceError
from iobo.space import Parameter, Space, Workload, format_value, io_stack_space

EXPORT_FORMATS = ("json", "romio-hints", "env", "h5tuner-xml", "lfs")
HINT_LAYERS = ("mpiio", "lustre")
H5TUNER_HDF5 = ("chunk_size", "sieve_buf_size", "meta_block_size", "mdc_initial_size", "layout", "transfer_mode",
                "coll_metadata")
"""The HDF5 parameters H5Tuner's XML names as elements of their own (alignment is one element of two)."""
ENV_PREFIX = "IOBO_"


def xml_text(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` escaped, as XML element content (the H5Tuner config file)."""
    return escape(text, quote=False)


@dataclass(frozen=True)
class IOConfig:
    """A validated assignment of every active parameter of ``space``."""

    values: Mapping[str, Any]
    space: Space = field(default_factory=io_stack_space, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", dict(self.space.complete(self.values)))

    # -- construction ----------------------------------------------------------
    @classmethod
    def default(cls, space: Space | None = None) -> "IOConfig":
        space = space or io_stack_space()
        return cls(space.default(), space)

    @classmethod
    def from_values(
        cls, values: Mapping[str, Any], space: Space | None = None, workload: Workload | None = None
    ) -> "IOConfig":
        """Strictly validated: unknown names, bad values, broken constraints raise."""
        space = space or io_stack_space()
        return cls(space.validate(values, workload), space)

    @classmethod
    def from_json(cls, text: str, space: Space | None = None, workload: Workload | None = None) -> "IOConfig":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"an IOConfig JSON must be an object of parameter values; not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"an IOConfig JSON must be an object of parameter values; got {type(data).__name__}")
        values = data.get("values", data)
        return cls.from_values(values, space, workload)

    # -- views -------------------------------------------------------------------
    def __getitem__(self, name: str) -> Any:
        if name not in self.values:
            self.space[name]  # unknown name: SpaceError
            raise SpaceError(f"parameter {name!r} is not active in this configuration")
        return self.values[name]

    def changed(self) -> dict[str, Any]:
        """Parameters set away from the system default (what is applied)."""
        return {n: v for n, v in self.values.items() if not Parameter._same(v, self.space[n].default)}

    def is_default(self) -> bool:
        return not self.changed()

    def layer(self, layer: str) -> dict[str, Any]:
        return {p.name: self.values[p.name] for p in self.space.layer(layer) if p.name in self.values}

    def mpi_hints(self) -> dict[str, str]:
        """MPI-IO ``Info`` hints (ROMIO and Lustre), only those away from default."""
        hints = {}
        for name, value in self.changed().items():
            if self.space[name].layer in HINT_LAYERS and value is not None:
                hints[name] = str(value)
        return hints

    def describe(self) -> str:
        """One line per layer, human units."""
        lines = []
        for layer in ("hdf5", "mpiio", "lustre", "app"):
            items = self.layer(layer)
            if items:
                body = ", ".join(f"{n}={format_value(v, self.space[n].unit)}" for n, v in items.items())
                lines.append(f"{layer}: {body}")
        return "\n".join(lines)

    # -- exports -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dict(self.values)

    def to_json(self) -> str:
        return json.dumps(self.values, sort_keys=True)

    def romio_hints_text(self) -> str:
        """Contents of a ``ROMIO_HINTS`` file: ``key value`` per line."""
        return "".join(f"{k} {v}\n" for k, v in sorted(self.mpi_hints().items()))

    def env(self, hints_path: str | None = None) -> dict[str, str]:
        """Environment variables carrying this configuration to a program.

        ``ROMIO_HINTS`` is made absolute: the program may run in another directory.
        """
        env = {f"{ENV_PREFIX}{n.upper()}": json.dumps(v) for n, v in sorted(self.changed().items())}
        if hints_path and self.mpi_hints():
            env["ROMIO_HINTS"] = os.path.abspath(hints_path)
        return env

    def env_text(self, hints_path: str | None = None) -> str:
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in self.env(hints_path).items())

    def h5tuner_xml(self) -> str:
        """H5Tuner's configuration file layout (the XML its preloaded library reads)."""
        v = self.changed()
        hdf5, mpi, pfs = [], [], []
        if "alignment_threshold" in v or "alignment_interval" in v:
            hdf5.append(
                f"<alignment>{self.values['alignment_threshold']},{self.values['alignment_interval']}</alignment>"
            )
        for name in H5TUNER_HDF5:
            if name in v:
                hdf5.append(f"<{name}>{xml_text(str(v[name]))}</{name}>")
        for name, value in self.mpi_hints().items():
            (pfs if self.space[name].layer == "lustre" else mpi).append(f"<{name}>{xml_text(value)}</{name}>")

        def section(tag: str, items: list[str]) -> str:
            inner = "".join(f"\n    {i}" for i in items)
            return f"  <{tag}>{inner}\n  </{tag}>\n" if items else f"  <{tag}/>\n"

        return (
            '<?xml version="1.0"?>\n<Parameters>\n'
            + section("High_Level_IO_Library", hdf5)
            + section("Middleware_Layer", mpi)
            + section("Parallel_File_System", pfs)
            + "</Parameters>\n"
        )

    def lfs_command(self, directory: str = "OUTPUT_DIR") -> str:
        """``lfs setstripe`` for the output directory, or a comment when striping is default."""
        count, unit = self.values.get("striping_factor"), self.values.get("striping_unit")
        if count is None and unit is None:
            return "# Lustre striping left at the file system default\n"
        args = ["lfs", "setstripe"]
        if count is not None:
            args += ["-c", str(count)]
        if unit is not None:
            args += ["-S", str(unit)]
        return shlex.join(args + [directory]) + "\n"

    def carried(self, fmt: str) -> list[str]:
        """The parameters changed from the system default that ``export(fmt)`` writes (empty: the export says
        nothing); json and env write every change."""
        changed = self.changed()
        if fmt == "romio-hints":
            return list(self.mpi_hints())
        if fmt == "h5tuner-xml":
            alignment = [n for n in ("alignment_threshold", "alignment_interval") if n in changed]
            return alignment + [n for n in H5TUNER_HDF5 if n in changed] + list(self.mpi_hints())
        if fmt == "lfs":
            return [n for n in ("striping_factor", "striping_unit") if self.values.get(n) is not None]
        return list(changed)

    def export(self, fmt: str, hints_path: str = "romio-hints") -> str:
        """Text of this configuration in one of ``EXPORT_FORMATS``."""
        if fmt == "json":
            return json.dumps(self.values, indent=2, sort_keys=True) + "\n"
        if fmt == "romio-hints":
            return self.romio_hints_text()
        if fmt == "env":
            return self.env_text(hints_path)
        if fmt == "h5tuner-xml":
            return self.h5tuner_xml()
        if fmt == "lfs":
            return self.lfs_command()
        raise ConfigError(f"export format {fmt!r} is unknown; allowed: {', '.join(EXPORT_FORMATS)}")
