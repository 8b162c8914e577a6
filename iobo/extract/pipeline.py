"""``iobo extract`` as a function: parse, slice, write, build (:func:`extract`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from iobo.errors import ConfigError

KERNEL_NAME = "kernel"
"""The kernel's executable in the kernel directory."""


@dataclass
class Extraction:
    """What :func:`extract` made: the kernel directory, its sources and executable (None when not built), the
    build command, the counts of :meth:`iobo.extract.slice.Slice.counts`, the notes (file, line, what) and the
    marked view of every source."""

    kernel_dir: Path
    sources: list[Path]
    executable: Path | None
    build_command: list[str] | None
    counts: dict[str, int]
    notes: list[tuple[str, int, str]] = field(default_factory=list)
    view: str = ""
    kept_lines: dict[str, list[int]] = field(default_factory=dict)


def extract(sources, kernel_dir, flags: list[str] | None = None, compile_commands=None, compiler=None,
            synthetic=(), build: bool = True) -> Extraction:
    """Cut the I/O kernel of the C program made of ``sources`` into ``kernel_dir``: parse each with ``flags``
    (or its entry in ``compile_commands``), slice (:class:`iobo.extract.slice.Slice`), write the kernel's sources
    (:mod:`iobo.extract.emit`), and with ``build`` compile them with ``compiler`` (a command as a list; default
    :func:`iobo.extract.build.default_compiler`) and ``flags`` into ``kernel_dir/kernel``. ``synthetic``:
    external functions whose pointer arguments may hold synthetic data (e.g. an image writer's pixels).
    Raises :class:`iobo.extract.ExtractError` saying where it could not."""
    from iobo.extract import build as builder
    from iobo.extract import emit, parse, view
    from iobo.extract.slice import Slice

    paths = [Path(s).resolve() for s in sources]
    if not paths:
        raise ConfigError("iobo extract needs the program's C sources, e.g. iobo extract main.c io.c -o kernel")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ConfigError(f"sources not found: {', '.join(missing)}")
    kernel_dir = Path(kernel_dir).resolve()
    if kernel_dir in {p.parent for p in paths}:
        raise ConfigError(f"the kernel directory {kernel_dir} holds the program's sources: the kernel's copies "
                          f"would overwrite them; give another -o")
    flags = list(flags or [])
    ci = parse.cindex()
    index = ci.Index.create()
    units, build_flags = [], list(flags)
    for path in paths:
        own = parse.flags_from_compile_commands(compile_commands, path) if compile_commands else flags
        build_flags += [f for f in own if f not in build_flags]  # one build: the union of the entries' flags
        units.append(parse.parse(path, own, index))
    sliced = Slice(ci, units, paths, frozenset(synthetic)).run()
    written = emit.write(kernel_dir, paths, sliced.drops())
    statement_lines: dict[str, set[int]] = {}
    for unit in sliced.units:
        if unit.id in sliced.kept:
            statement_lines.setdefault(unit.file, set()).update(range(unit.line, unit.end_line + 1))
    listing = "\n\n".join(view.render(p, k, statement_lines.get(str(p), set())) for p, k in zip(paths, written))
    counts = sliced.counts()
    (kernel_dir / "view.txt").write_text(listing + "\n\n" + view.summary(counts) + "\n")
    result = Extraction(kernel_dir, written, None, None, counts, sorted(set(sliced.notes)), listing,
                        {f: sorted(lines) for f, lines in statement_lines.items()})
    (kernel_dir / "extract.json").write_text(json.dumps(
        {"sources": [str(p) for p in paths], "flags": flags, "counts": counts,
         "notes": [list(n) for n in result.notes]}, indent=1) + "\n")
    if build:
        uses_hdf5 = any(name.startswith("H5") for unit in sliced.units for name, _ in unit.effects.io)
        command = compiler or builder.default_compiler(uses_hdf5)
        include_dirs = list(dict.fromkeys(p.parent for p in paths))
        result.build_command = builder.build(written, kernel_dir / KERNEL_NAME, command, build_flags,
                                             include_dirs, paths)
        result.executable = kernel_dir / KERNEL_NAME
    return result


def kernel_template(executable: str | os.PathLike, arguments: str) -> str:
    """The kernel's command line: its executable (quoted) and the program's arguments as given."""
    import shlex

    return f"{shlex.quote(str(executable))} {arguments}".strip()
