"""What the extraction kept: each source line marked against the kernel's, and the counts.

Marks: ``+`` a line of a kept statement (unchanged), ``-`` a line whose
statement was dropped (blanked in the kernel), ``~`` a line partly dropped
(a kept statement shares it with a dropped one), blank for lines outside
any statement (includes, declarations, comments, braces)."""

from __future__ import annotations

from pathlib import Path


def marks(program: bytes, kernel: bytes, statement_lines: set[int]) -> list[tuple[int, str, str]]:
    """(line number, mark, program text) per line."""
    rows = []
    for number, (old, new) in enumerate(zip(program.decode(errors="replace").split("\n"),
                                            kernel.decode(errors="replace").split("\n")), start=1):
        old_chars, new_chars = len("".join(old.split())), len("".join(new.split()))
        if old_chars and new_chars < old_chars:
            mark = "-" if new_chars == 0 or set(new.strip()) <= set("{};") else "~"
        elif old_chars and number in statement_lines:
            mark = "+"
        else:
            mark = " "
        rows.append((number, mark, old))
    return rows


def render(program: Path, kernel: Path, statement_lines: set[int]) -> str:
    """The marked listing of one source: ``  57 + | text``."""
    rows = marks(program.read_bytes(), kernel.read_bytes(), statement_lines)
    width = len(str(len(rows)))
    return "\n".join([f"== {program} (+ kept, - dropped, ~ partly) =="] +
                     [f"{n:>{width}} {m} | {text}" for n, m, text in rows])


def summary(counts: dict[str, int]) -> str:
    """``statements: K kept, D dropped; functions: ...``."""
    emptied = counts.get("functions_emptied", 0)
    return (f"statements: {counts['kept']} kept, {counts['dropped']} dropped; functions: "
            f"{counts['functions_kept']} kept, {counts['functions_dropped']} dropped"
            + (f", {emptied} emptied (--drop)" if emptied else ""))
