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
    reduce_loops: int = 1
    reduced: list[str] = field(default_factory=list)
    """The loops whose I/O is reduced, ``file.c:LINE (I/O from line L1, L2)``: each gate group's first line."""
    redirect: str | None = None
    redirected: list[tuple[str, int, str]] = field(default_factory=list)


def extract(sources, kernel_dir, flags: list[str] | None = None, compile_commands=None, compiler=None,
            synthetic=(), build: bool = True, reduce_loops: int = 1, redirect=None, drop=()) -> Extraction:
    """Cut the I/O kernel of the C or C++ program made of ``sources`` into ``kernel_dir``: parse each with ``flags``
    (or its entry in ``compile_commands``) in the language its build gives it (:func:`iobo.extract.parse.language`:
    C++ for a C++ source or ``compiler``), slice (:class:`iobo.extract.slice.Slice`), write the kernel's sources
    (:mod:`iobo.extract.emit`), and with ``build`` compile them with ``compiler`` (a command as a list; default
    :func:`iobo.extract.build.default_compiler`, for C++ with :func:`iobo.extract.build.hdf5_flags`) and ``flags``
    into ``kernel_dir/kernel``. ``synthetic``: external functions whose pointer arguments may hold synthetic data
    (e.g. an image writer's pixels). ``drop``: functions of the sources the kernel empties (their calls do
    nothing; :mod:`iobo.extract.slice`), e.g. a solver whose results only a log of residuals reads.
    ``reduce_loops`` k > 1: the loops with I/O run the I/O of 1 in k iterations (:mod:`iobo.extract.loops`);
    ``redirect``: a directory the files the kernel creates go to (:mod:`iobo.extract.redirect`); either builds
    the kernel with :mod:`iobo.extract.helper`'s ``iobo_kernel.c`` (its header given with ``-include``).
    Raises :class:`iobo.extract.ExtractError` saying where it could not."""
    from iobo.extract import build as builder
    from iobo.extract import emit, helper, parse, view
    from iobo.extract import redirect as redirection
    from iobo.extract.loops import LoopPlan
    from iobo.extract.slice import Slice

    paths = [Path(s).resolve() for s in sources]
    if not paths:
        raise ConfigError("iobo extract needs the program's C sources (C or C++), e.g. iobo extract main.c io.c "
                          "-o kernel")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ConfigError(f"sources not found: {', '.join(missing)}")
    kernel_dir = Path(kernel_dir).resolve()
    if kernel_dir in {p.parent for p in paths}:
        raise ConfigError(f"the kernel directory {kernel_dir} holds the program's sources: the kernel's copies "
                          f"would overwrite them; give another -o")
    flags = list(flags or [])
    if isinstance(reduce_loops, bool) or not isinstance(reduce_loops, int) or reduce_loops < 1:
        raise ConfigError(f"--reduce-loops keeps 1 in k iterations: k must be an integer >= 1; got {reduce_loops!r}")
    if redirect is not None:
        redirect = Path(redirect).resolve()
        if redirect.exists() and not redirect.is_dir():
            raise ConfigError(f"--redirect {redirect}: it is a file; give a directory (e.g. /dev/shm/run)")
    ci = parse.cindex()
    index = ci.Index.create()
    units, build_flags, languages = [], parse.without_language(flags), []
    for path in paths:
        their_compiler = compiler[0] if compiler else None
        if compile_commands:
            own = parse.flags_from_compile_commands(compile_commands, path)
            their_compiler = their_compiler or parse.compile_command(compile_commands, path)[0]
        else:
            own = flags
        # one build: the union of the entries' flags
        build_flags += [f for f in parse.without_language(own) if f not in build_flags]
        languages.append(parse.language(path, own, their_compiler))
        units.append(parse.parse(path, own, index, their_compiler))
    sliced = Slice(ci, units, paths, frozenset(synthetic), cxx="c++" in languages, drop=frozenset(drop)).run()
    drops = sliced.drops()
    insertions: dict[str, list] = {}
    notes = list(sliced.notes)
    reduced, redirected, gates = [], [], []
    if reduce_loops > 1:
        plan = LoopPlan(sliced, frozenset(synthetic)).plan(lambda file: Path(file).read_bytes())
        for file, edits in plan.insertions.items():
            insertions.setdefault(file, []).extend(edits)
        reduced = [f"{loop.where} (I/O from line {', '.join(map(str, loop.gates))})" for loop in plan.reduced]
        gates = plan.gates
        notes += plan.notes
    if redirect is not None:
        def in_kernel(file: str, offset: int) -> bool:  # in a function the kernel keeps, not in a dropped statement
            if any(start <= offset < end for start, end, _ in drops.get(file, [])):
                return False
            return any(f.file == file and f.start <= offset < f.end for f in sliced.functions.values())

        switched, redirected, redirect_notes = redirection.plan(ci, units, paths, in_kernel)
        for file, edits in switched.items():
            insertions.setdefault(file, []).extend(edits)
        notes += redirect_notes
    written = emit.write(kernel_dir, paths, drops, insertions)
    statement_lines: dict[str, set[int]] = {}
    for unit in sliced.units:
        if unit.id in sliced.kept:
            statement_lines.setdefault(unit.file, set()).update(range(unit.line, unit.end_line + 1))
    listing = "\n\n".join(view.render(p, k, statement_lines.get(str(p), set())) for p, k in zip(paths, written))
    counts = sliced.counts()
    (kernel_dir / "view.txt").write_text(listing + "\n\n" + view.summary(counts) + "\n")
    result = Extraction(kernel_dir, written, None, None, counts, sorted(set(notes)), listing,
                        {f: sorted(lines) for f, lines in statement_lines.items()}, reduce_loops, reduced,
                        str(redirect) if redirect is not None else None, redirected)
    (kernel_dir / "extract.json").write_text(json.dumps(
        {"sources": [str(p) for p in paths], "flags": flags, "counts": counts,
         "notes": [list(n) for n in result.notes], "drop": sorted(drop), "reduce_loops": reduce_loops,
         "reduced": reduced,
         "redirect": result.redirect, "redirected": [list(r) for r in redirected]}, indent=1) + "\n")
    extra_sources, extra_flags = [], []
    if reduced or redirect is not None:
        header, source = helper.write(kernel_dir, reduce_loops, gates, result.redirect)
        extra_sources, extra_flags = [source], ["-include", str(header)]
    if build:
        uses_hdf5 = any(name.startswith("H5") for unit in sliced.units for name, _ in unit.effects.io)
        cxx = "c++" in languages
        command = compiler or builder.default_compiler(uses_hdf5, cxx)
        if not compiler and cxx and uses_hdf5:
            extra_flags += [f for f in builder.hdf5_flags() if f not in build_flags]
        include_dirs = list(dict.fromkeys(p.parent for p in paths))
        result.build_command = builder.build(written + extra_sources, kernel_dir / KERNEL_NAME, command,
                                             build_flags + extra_flags, include_dirs, paths + extra_sources)
        result.executable = kernel_dir / KERNEL_NAME
    return result


def kernel_template(executable: str | os.PathLike, arguments: str) -> str:
    """The kernel's command line: its executable (quoted) and the program's arguments as given."""
    import shlex

    return f"{shlex.quote(str(executable))} {arguments}".strip()
