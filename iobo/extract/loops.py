"""``--reduce-loops k``: the kernel does 1 in k of the I/O its loops repeat, and its counts are scaled back by the
executions of that I/O over those kept.

:func:`LoopPlan.plan` picks, after the slice, the outermost kept loops whose
bodies do data I/O (HDF5 files, datasets and attributes, MPI-IO, POSIX/stdio
file calls; directly or through the functions they call). In each body it
finds the run of statements that does the I/O (a *gate group*): from the
first statement with I/O to the last, with the statements after it that read
what it made (``H5Fclose(file)``) and those before it whose results only it
reads (the file's name), and wraps it in ``{ if (iobo_kernel_keep(N)) { ...
} }`` (:mod:`iobo.extract.helper`): 1 in k of its executions (the first,
then every k-th) run. Everything else keeps running: the loop's header (a trip
count known only at run time still works), a counter of dumps the program
keeps beside its I/O, the conditions around it. So a checkpoint named or
placed by its step or by a counter is written under the name and at the
offset the program gives it, and an I/O branch taken every 100 steps is
reduced as often as it is taken, not as the steps go. A group is gated only
when skipping it changes nothing but its own I/O:

- no ``break``, ``continue``, ``return`` or ``goto`` in it leaves it;
- what it writes (but its own declarations and the I/O handles' state:
  ``FILE``, ``MPI_File``) is read by no kept statement outside it (after it,
  in the loop's header, in a later iteration, after the loop), and is not
  read in it before it is written (a value carried from one execution to the
  next, ``offset += n``).

A group that is one ``if`` (or a bare block) is looked into: its branches'
groups are gated instead (the condition runs every time, and a gate counts
the runs of the I/O, not of the iterations that test it), unless its
condition does the I/O (``if (write(...) != n)``). Other loops with
I/O are left whole and named in the notes, with the reason.

The counts each process writes at exit give the kernel's counts scaled back to the program's
(:mod:`iobo.extract.scaling`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from iobo.extract import calls as call_kinds
from iobo.extract.slice import LOOPS

DATA_IO_PREFIXES = ("H5D", "H5F", "H5A", "H5G", "H5O", "H5L", "MPI_File_")
"""Calls that move a file's data or make its objects: what makes a loop's iterations worth reducing (not MPI
set-up, dataspaces, property lists or exits)."""


@dataclass
class Reduced:
    """A loop with gated I/O: its place (``file.c:LINE``), its kind and the first lines of its gate groups."""

    where: str
    file: str
    line: int
    kind: str
    gates: list


def data_io(name: str, synthetic: frozenset = frozenset()) -> bool:
    return name.startswith(DATA_IO_PREFIXES) or name in call_kinds.IO_POSIX or name in synthetic


HANDLE_TYPES = ("_IO_FILE", "FILE", "ADIOI_FileD", "ompi_file_t")
"""The structs behind I/O handles (stdio's ``FILE``, MPICH's and Open MPI's ``MPI_File``)."""


def handle_state(location: tuple) -> bool:
    """Is ``location`` an I/O handle's own state (a ``FILE``, an ``MPI_File``)? A handle written in one iteration
    and read in the next is the I/O itself (its position, its buffer), not state the kernel must carry."""
    return location[0] == "mem" and len(location) > 1 and str(location[1]).rsplit("@", 1)[-1] in HANDLE_TYPES


def _conflict(a: tuple, b: tuple) -> bool:
    """Do two abstract locations overlap (one is a prefix of the other)?"""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


class LoopPlan:
    """The loops of a run slice (:class:`iobo.extract.slice.Slice`) to reduce: :attr:`reduced`, :attr:`notes`."""

    def __init__(self, sliced, synthetic: frozenset = frozenset()):
        self.s = sliced
        self.synthetic = synthetic
        self.reached = sliced.reached()
        self.children: dict[int, list[int]] = {}
        for unit in sliced.units:
            if unit.parent is not None:
                self.children.setdefault(unit.parent, []).append(unit.id)
        self.io_functions = self._io_functions()
        self.reduced: list[Reduced] = []
        self.gates: list[str] = []  # each gate's file.c:LINE, by number
        self.insertions: dict[str, list] = {}
        self.notes: list[tuple[str, int, str]] = []
        self._effects: dict[int, tuple[set, set]] = {}
        self._summaries: dict[str, tuple[set, set]] = {}

    # -- what a unit does --------------------------------------------------------------------------------------

    def kept(self, unit) -> bool:
        return unit.id in self.s.kept and unit.function in self.reached

    def subtree(self, unit_id: int) -> list[int]:
        """The kept units under ``unit_id`` (itself excluded), in the text's order."""
        found, stack = [], list(self.children.get(unit_id, []))
        while stack:
            child = stack.pop()
            if child in self.s.kept:
                found.append(child)
                stack.extend(self.children.get(child, []))
        return sorted(found, key=lambda i: self.s.units[i].start)

    def _io_functions(self) -> set[str]:
        """The functions that do data I/O, themselves or through the functions they call."""
        direct, calls = set(), {}
        for unit in self.s.units:
            if unit.id not in self.s.kept:
                continue
            if any(data_io(name, self.synthetic) for name, _ in unit.effects.io):
                direct.add(unit.function)
            calls.setdefault(unit.function, set()).update(unit.effects.calls)
        found, changed = set(direct), True
        while changed:
            changed = False
            for function, called in calls.items():
                if function not in found and called & found:
                    found.add(function)
                    changed = True
        return found

    def does_io(self, unit) -> bool:
        return any(data_io(name, self.synthetic) for name, _ in unit.effects.io) or \
            bool(unit.effects.calls & self.io_functions)

    def callees(self, units: list[int]) -> set[str]:
        """The functions of the sources ``units`` call, directly or not."""
        found, stack = set(), [usr for i in units for usr in self.s.units[i].effects.calls]
        while stack:
            usr = stack.pop()
            if usr in found or usr not in self.s.functions:
                continue
            found.add(usr)
            for i in self.s.functions[usr].units:
                if i in self.s.kept:
                    stack.extend(self.s.units[i].effects.calls)
        return found

    def _own_local(self, location: tuple, functions: set[str]) -> bool:
        """Is ``location`` a local variable or parameter of one of ``functions``?"""
        if location[0] != "var" or len(location) != 3:
            return False
        return any(f.file == location[1] and f.start <= location[2] <= f.end
                   for f in (self.s.functions[usr] for usr in functions))

    # -- gate groups -------------------------------------------------------------------------------------------

    def members(self, ids) -> set[int]:
        """``ids`` and the kept units under them."""
        found = set(ids)
        for i in ids:
            found |= set(self.subtree(i))
        return found

    def contains_io(self, unit_id: int) -> bool:
        return any(self.does_io(self.s.units[i]) for i in self.members([unit_id]))

    def summary(self, usr: str, active: frozenset = frozenset()) -> tuple[set, set]:
        """(the locations a function of the sources reads before it writes them, in its text's order; all it
        writes), with the functions it calls (a recursive call: all their reads)."""
        if usr in self._summaries:
            return self._summaries[usr]
        function = self.s.functions.get(usr)
        if function is None:
            return set(), set()
        units = sorted((self.s.units[j] for j in function.units if j in self.s.kept), key=lambda u: u.start)
        exposed, written = set(), set()
        for unit in units:
            reads, writes = set(unit.effects.reads), set(unit.effects.plain_writes)
            for callee in unit.effects.calls:
                if callee in active or callee == usr:
                    for j in self.s.functions[callee].units if callee in self.s.functions else ():
                        reads |= self.s.units[j].effects.reads
                        writes |= self.s.units[j].effects.plain_writes
                else:
                    callee_reads, callee_writes = self.summary(callee, active | {usr})
                    reads |= callee_reads
                    writes |= callee_writes
            written |= unit.initializes
            exposed |= reads - written
            written |= writes
        if not active:
            self._summaries[usr] = (exposed, written)
        return exposed, written

    def effects(self, unit_id: int) -> tuple[set, set]:
        """(reads, writes) of one unit (a container: its header), with those of the functions it calls (their
        reads before their writes), but the callees' own locals and return values, and the stores into memory
        allocated where they are made (:attr:`iobo.extract.effects.Effects.plain_writes`)."""
        cached = self._effects.get(unit_id)
        if cached is None:
            unit = self.s.units[unit_id]
            reads, writes = set(unit.effects.reads), set(unit.effects.plain_writes)
            for usr in unit.effects.calls:
                callee_reads, callee_writes = self.summary(usr)
                reads |= callee_reads
                writes |= callee_writes
            called = self.callees([unit_id])
            own = {w for w in reads | writes if w[0] == "ret" or self._own_local(w, called)}
            cached = self._effects[unit_id] = (reads - own, writes - own)
        return cached

    def rw(self, ids) -> tuple[set, set]:
        reads, writes = set(), set()
        for i in self.members(ids):
            r, w = self.effects(i)
            reads |= r - self.s.units[i].initializes
            writes |= w
        return reads, writes

    def outside_readers(self, inside: set[int], location: tuple) -> str | None:
        """Where (``file.c:LINE``) a kept unit not in ``inside`` (nor in a function its units call) reads
        ``location`` (a ``for`` that assigns it first does not), or None."""
        called = self.callees(sorted(inside))
        for unit in self.s.units:
            if unit.id in inside or unit.function in called or not self.kept(unit):
                continue
            if any(_conflict(location, r) for r in self.effects(unit.id)[0] - unit.initializes):
                return f"{Path(unit.file).name}:{unit.line}"
        return None

    def jump(self, inside: set[int]) -> int | None:
        """A unit of ``inside`` that jumps out of it (``return``, ``goto``, a ``break`` or ``continue`` of a loop
        around it), or None."""
        for i in sorted(inside):
            unit = self.s.units[i]
            if unit.kind in ("RETURN_STMT", "GOTO_STMT", "INDIRECT_GOTO_STMT", "LABEL_STMT") or (
                    unit.kind in ("BREAK_STMT", "CONTINUE_STMT") and unit.jump_target not in inside):
                return i
        return None

    def why_not(self, group: list[int]) -> str | None:
        """Why the consecutive units ``group`` cannot be skipped together, or None."""
        units = self.s.units
        inside = self.members(group)
        jump = self.jump(inside)
        if jump is not None:
            return f"the {units[jump].kind.split('_')[0].lower()} line {units[jump].line} leaves its I/O: skipping " \
                   f"the I/O would change what runs"
        declared = {key for i in inside for key in units[i].declares}
        events = sorted([((units[i].start, 1, i), units[i].line, *self.effects(i)) for i in inside] +
                        [((units[i].start, 0, i), units[i].line, set(), units[i].initializes)
                         for i in inside if units[i].initializes], key=lambda event: event[0])
        written = {w for _, _, _, writes in events for w in writes if w not in declared and not handle_state(w)}
        first_write = {location: min((position, line) for position, line, _, writes in events
                                     if any(_conflict(location, w) for w in writes)) for location in written}
        for location in sorted(written, key=lambda w: (first_write[w], str(w))):  # in the text's order
            name = self.describe(location)
            first, line_written = first_write[location]
            carried = next((line for position, line, reads, _ in events
                            if position <= first and any(_conflict(location, r) for r in reads)), None)
            if carried is not None:
                return f"line {carried} reads {name}, which line {line_written} writes: the value is carried from " \
                       f"one run of the I/O to the next"
            where = self.outside_readers(inside, location)
            if where is not None:
                return f"its I/O writes {name}, which {where} reads"
        return None

    def groups(self, block_id: int) -> tuple[list[tuple[int, int]], str | None]:
        """The gate groups (first unit, last unit) in the statement ``block_id`` (a block: among its statements),
        or ([], why not)."""
        units = self.s.units
        block = units[block_id]
        sequence = [c for c in self.children.get(block_id, []) if c in self.s.kept] \
            if block.kind == "COMPOUND_STMT" and block.container else [block_id]
        sequence.sort(key=lambda i: units[i].start)
        with_io = [n for n, i in enumerate(sequence) if self.contains_io(i)]
        spans = []  # each statement with I/O and what it needs around it, overlapping ones merged
        for a, b in sorted(self.closed(sequence, n) for n in with_io):
            if spans and a <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(b, spans[-1][1]))
            else:
                spans.append((a, b))
        found = []
        for a, b in spans:
            group = sequence[a:b + 1]
            only = units[group[0]]
            if len(group) > 1 or not only.container or only.kind not in ("IF_STMT", "COMPOUND_STMT") or \
                    self.does_io(only):  # I/O in an if's condition: the if is the group
                reason = self.why_not(group)
                if reason:
                    return [], reason
                found.append((group[0], group[-1]))
                continue
            for child in sorted((c for c in self.children.get(only.id, []) if c in self.s.kept),
                                key=lambda i: units[i].start):  # an if's branches, a block's statements
                inner, why = self.groups(child)
                if why:
                    return [], why
                found += inner
        return found, None

    def closed(self, sequence: list[int], n: int) -> tuple[int, int]:
        """The span (first, last index) of ``sequence`` around its statement ``n``: with the statements after it
        that read what the span writes, and those before it whose results only the span reads."""
        a = b = n
        while True:
            writes = self.rw(sequence[a:b + 1])[1]
            later = [m for m in range(b + 1, len(sequence))
                     if any(_conflict(w, r) for w in writes for r in self.rw([sequence[m]])[0])]
            if not later:
                break
            b = max(later)
        while a > 0:
            before = sequence[a - 1]
            writes = {w for w in self.rw([before])[1] if not handle_state(w)}
            reads = self.rw(sequence[a:b + 1])[0]
            if not writes or self.jump(self.members([before])) is not None or \
                    not all(any(_conflict(w, r) for r in reads) for w in writes) or \
                    any(self.outside_readers(self.members(sequence[a - 1:b + 1]), w) is not None for w in writes):
                break
            a -= 1
        return a, b

    def describe(self, location: tuple) -> str:
        """A location as the message names it: a variable's name, a struct's field, memory of a type."""
        if location[0] == "var" and len(location) == 3:
            text = self.read_source(location[1])[location[2]:location[2] + 80].decode(errors="replace")
            match = re.match(r"[A-Za-z_]\w*", text)
            return f"the variable {match[0]}" if match else "a variable"
        if location[0] == "var":
            return f"the variable {str(location[1]).rsplit('@', 1)[-1]}"
        if len(location) == 3:
            return f"the field {str(location[2]).rsplit('@', 1)[-1]} of struct {str(location[1]).rsplit('@', 1)[-1]}"
        return f"memory of type {str(location[1]).rsplit('@', 1)[-1]}" if len(location) > 1 else "memory"

    def gate(self, first: int, last: int, number: int, source: bytes) -> list[tuple[int, str]]:
        """The insertions that wrap the units ``first`` to ``last`` (one block's) in gate ``number``."""
        end = self.s.units[last].end
        rest = source[end:]
        stripped = rest.lstrip(b" \t\r\n")
        if stripped.startswith(b";") and not source[:end].rstrip().endswith((b";", b"}")):
            end += len(rest) - len(stripped) + 1  # an expression statement's own ;
        return [(self.s.units[first].start, f"{{ if (iobo_kernel_keep({number})) {{ "), (end, " } }")]

    def plan(self, read_source) -> "LoopPlan":
        """Choose the loops and make their gates (``read_source(file) -> bytes``); returns self."""
        self.read_source = read_source
        units = self.s.units
        candidates = []
        for loop in units:
            if loop.kind not in LOOPS or not loop.container or not self.kept(loop):
                continue
            if not self.s.functions[loop.function].editable:
                continue
            body = self.subtree(loop.id)
            if any(self.does_io(units[i]) for i in body) or self.does_io(loop):
                candidates.append((loop, body))
        inner = set()  # loops inside another candidate, or in a function one calls
        candidate_ids = {loop.id for loop, _ in candidates}
        called = set()
        for loop, body in candidates:
            inner |= set(body) & candidate_ids
            called |= self.callees(body)
        for loop, body in candidates:
            if loop.id in inner or loop.function in called:
                continue
            source = read_source(loop.file)
            where = f"{Path(loop.file).name}:{loop.line}"
            if loop.kind == "DO_STMT" and b"".join(source[loop.start:loop.end].split()).endswith(b"while(0)"):
                continue  # runs once
            body_units = [c for c in self.children.get(loop.id, []) if c in self.s.kept]
            found, reason = self.groups(body_units[0]) if len(body_units) == 1 else \
                ([], "its body is not one statement")
            if not found and reason is None:
                reason = "its I/O is in its header"
            if reason:
                self.notes.append((loop.file, loop.line, f"loop not reduced: {reason}"))
                continue
            gates = []
            for first, last in found:
                number = len(self.gates)
                self.gates.append(f"{Path(loop.file).name}:{self.s.units[first].line}")
                gates.append(self.s.units[first].line)
                self.insertions.setdefault(loop.file, []).extend(self.gate(first, last, number, source))
            self.reduced.append(Reduced(where, loop.file, loop.line, loop.kind.split("_")[0].lower(), gates))
        return self
