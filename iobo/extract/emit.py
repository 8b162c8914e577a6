"""Write the kernel's sources: each source with its dropped statements blanked, line for line.

A dropped range becomes spaces (its newlines stay, so the kernel's line N is
the program's line N and a compiler message points at the program's line);
a dropped statement that a kept ``if``/loop/label needs as its body becomes
``{}``; an emptied function's body (``--drop``) becomes ``{ (void)x; }`` or
``{ (void)x; return 0; }`` (x: its parameters) on the body's first line.
Text the options add (a loop's iteration gate, a file name's redirection:
:mod:`iobo.extract.loops`, :mod:`iobo.extract.redirect`) is inserted at byte
offsets of the program's text, within a line. Headers are not copied: the kernel is compiled with ``-I`` of each
source's directory, so its ``#include "..."`` find the program's own.
"""

from __future__ import annotations

import os
from pathlib import Path


def blank(text: bytes, ranges: list[tuple[int, int, str]], insertions: list[tuple[int, str]] = ()) -> bytes:
    """``text`` with every (start, end, how) byte range removed as :mod:`the module <iobo.extract.emit>` says and
    every (offset, text) insertion made (offsets of ``text``; none may hold a newline); an insertion inside a
    removed range is left out. ``how``: ``blank``, ``empty``, ``function``, or a body ``{...}`` to put there."""
    out = bytearray(text)
    bodies = []
    for start, end, how in sorted(ranges):
        for i in range(start, min(end, len(out))):
            if out[i] not in (ord("\n"), ord("\r")):
                out[i] = ord(" ")
        if (how == "empty" or how.startswith("{")) and end - start >= 2:  # first and last characters: no newline
            out[start], out[end - 1] = ord("{"), ord("}")
        elif how == "empty":  # a loop's empty body, ``;``: it stays (blank, the next statement would be the body)
            out[start] = ord(";")
        if how.startswith("{") and how[1:-1].strip():
            bodies.append((start + 1, how[1:-1]))
    kept = [(offset, added) for offset, added in insertions
            if not any(start <= offset < end for start, end, _ in ranges)]
    for offset, added in sorted(kept + bodies, key=lambda item: item[0], reverse=True):
        if "\n" in added:
            raise ValueError(f"an insertion must stay within its line: {added!r}")
        out[offset:offset] = added.encode()
    return b"\n".join(line.rstrip(b" \t") for line in bytes(out).split(b"\n"))


def kernel_path(kernel_dir: str | os.PathLike, source: str | os.PathLike) -> Path:
    """Where the kernel's copy of ``source`` goes: ``KERNEL_DIR/<its file name>``."""
    return Path(kernel_dir) / Path(source).name


def write(kernel_dir: str | os.PathLike, sources: list[Path], drops: dict[str, list],
          insertions: dict[str, list] | None = None) -> list[Path]:
    """Write each source's kernel copy into ``kernel_dir`` (made), with ``insertions`` (per source, (offset,
    text)); returns their paths, in the sources' order."""
    Path(kernel_dir).mkdir(parents=True, exist_ok=True)
    names = [Path(s).name for s in sources]
    if len(set(names)) != len(names):
        from iobo.extract import ExtractError

        raise ExtractError(f"two sources share a file name ({sorted(n for n in names if names.count(n) > 1)}): "
                           f"the kernel directory holds one copy per name; extract them separately")
    written = []
    for source in sources:
        path = kernel_path(kernel_dir, source)
        path.write_bytes(blank(Path(source).read_bytes(), drops.get(str(source), []),
                               (insertions or {}).get(str(source), [])))
        written.append(path)
    return written
