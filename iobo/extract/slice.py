"""The statement-level backward slice of a C or C++ program from its I/O calls.

The statements of every function defined in the parsed translation units
become :class:`Unit` s (a compound, if, loop, switch or label is a container
with its own header; a container whose parts come out of one macro
expansion is one unit). A unit is kept (:meth:`Slice.run`, to a fixpoint)
when

- it makes an I/O call or a call of unknown kind (:mod:`iobo.extract.calls`),
  or is inline assembly;
- it writes a location a kept unit reads (:mod:`iobo.extract.effects`);
- it calls a function of the sources that has a kept unit (its effects
  reach the caller only through the call);
- it sends or receives an MPI point-to-point message and a kept unit does
  (which send feeds which receive is not traced: all are kept);
- it declares a variable a kept unit names (the kernel must compile);
- it is a ``break``/``continue`` of a kept loop or switch, a ``case`` of a
  kept switch, a ``goto``/label or an early ``return`` of a function with
  kept units, or a ``return`` whose value is read (``main``'s always);

and a kept unit keeps the containers around it with their headers (the
loops and conditions that reach it). Everything else is dropped; a function
no kept unit calls is dropped whole. When unsure the slice keeps: a kernel
must do the program's I/O, a larger one is only slower.

A function the user names to drop (``iobo extract --drop F``: a solver, a
compute phase whose results reach the I/O only through what the user accepts
to lose, such as a log of residuals) is emptied: its calls stay and do
nothing (the slice reads only their arguments' values), its body becomes
``{}`` or a ``return`` of zero. Whether the I/O stayed the same is for
``iobo check`` to show.

C++: the functions are those of namespaces, ``extern "C"`` blocks and
classes too (methods, constructors, destructors); a constructor's member
initialisers are one unit that cannot be removed, kept (with what it reads)
when the constructor is called by kept code; destructors and virtual methods
are never dropped whole (they are called where no call is written); a range
``for`` is a loop, a ``try`` a container whose ``catch`` handlers stay with
it. Templates defined in the sources are not sliced: kept whole, their calls
kept as calls of unknown functions, with a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iobo.extract.calls import COMPRESSION, library_header
from iobo.extract.effects import Analyzer, Effects

CONTAINERS = {"COMPOUND_STMT", "IF_STMT", "FOR_STMT", "WHILE_STMT", "DO_STMT", "SWITCH_STMT", "CASE_STMT",
              "DEFAULT_STMT", "LABEL_STMT", "CXX_FOR_RANGE_STMT", "CXX_TRY_STMT", "CXX_CATCH_STMT"}
LOOPS = {"FOR_STMT", "WHILE_STMT", "DO_STMT", "CXX_FOR_RANGE_STMT"}
SCOPES = {"NAMESPACE", "LINKAGE_SPEC", "CLASS_DECL", "STRUCT_DECL", "UNION_DECL"}
"""Declarations whose members may be functions the slice sees (C++)."""
TEMPLATES = {"FUNCTION_TEMPLATE", "CLASS_TEMPLATE", "CLASS_TEMPLATE_PARTIAL_SPECIALIZATION"}
DEFINED_KINDS = {"FUNCTION_DECL", "CXX_METHOD", "CONSTRUCTOR", "DESTRUCTOR", "CONVERSION_FUNCTION"}


@dataclass
class Unit:
    """One statement: where it is (file, byte offsets, lines), its function (USR), the unit around it, its
    effects (a container's header only), and what the keep rules need to know of it."""

    id: int
    kind: str
    function: str
    parent: int | None
    file: str
    start: int
    end: int
    line: int
    end_line: int
    effects: Effects
    container: bool = False
    declares: set = field(default_factory=set)
    jump_target: int | None = None
    switch: int | None = None
    last: bool = False
    expression: bool = False
    asm: bool = False
    initializes: set = field(default_factory=set)
    """A ``for``'s variables its init assigns (``for (j = 0; ...)``): written before its header reads them."""
    returns_value: bool = False
    """A ``return`` with a value."""
    pinned: bool = False
    """Text that cannot be removed (a constructor's member initialisers): kept when its function is called."""


@dataclass
class Function:
    """A function definition the slice sees: ``editable`` when it is in one of the sources (not a header)."""

    usr: str
    name: str
    file: str
    start: int
    end: int
    line: int
    editable: bool
    units: list = field(default_factory=list)
    emptied: str | None = None
    """The body an emptied function (``--drop``) gets in the kernel: ``{ (void)x; }``, ``{ (void)x; return 0; }``..."""
    body: tuple[int, int] | None = None
    """The byte range of its body (``{`` to ``}``), where :attr:`emptied` goes."""


class Slice:
    """The units of the translation units ``units`` of ``sources`` and, after :meth:`run`, the kept ones."""

    def __init__(self, ci, translation_units, sources, synthetic=frozenset(), cxx=False, drop=frozenset()):
        self.ci = ci
        self.cxx = cxx
        """C++ sources: a value-returning function that keeps statements keeps its last ``return`` (flowing off
        its end is undefined behaviour in C++, which g++ -O2 compiles as unreachable, whoever reads the value)."""
        self.sources = {str(s) for s in sources}
        self.units: list[Unit] = []
        self.functions: dict[str, Function] = {}
        self.notes: list[tuple[str, int, str]] = []
        definitions, opaque_bodies, templates = [], [], []
        for tu in translation_units:
            for cursor, template in self._definitions(tu.cursor):
                if cursor.location.is_in_system_header or cursor.location.file is None or \
                        library_header(cursor.location.file.name):  # MPICH's C++ bindings: the library's
                    continue
                usr = cursor.get_usr()
                if usr in self.functions:
                    continue
                file = cursor.location.file.name
                opaque = cursor.spelling in synthetic or template  # kept whole (synthetic: called as I/O)
                self.functions[usr] = Function(usr, cursor.spelling, file, cursor.extent.start.offset,
                                               cursor.extent.end.offset, cursor.location.line,
                                               file in self.sources and not opaque)
                if template:
                    templates.append(cursor)
                    opaque_bodies.append(cursor)
                elif not opaque:
                    definitions.append(cursor)
                else:
                    opaque_bodies.append(cursor)
        for cursor in templates[:1]:
            more = f" (and {len(templates) - 1} more)" if len(templates) > 1 else ""
            self.notes.append((cursor.location.file.name, cursor.location.line,
                               f"template {cursor.spelling}{more}: not sliced, kept whole; its calls are kept as "
                               f"calls of unknown functions"))
        self._empty(definitions, drop)
        defined = {usr: True for usr, f in self.functions.items()
                   if f.name not in synthetic and usr not in {c.get_usr() for c in templates} and not f.emptied}
        virtual: dict[str, set] = {}
        self.always: set[str] = set()  # called where no call is written: destructors, virtual methods
        for cursor in definitions:
            if cursor.kind == ci.CursorKind.DESTRUCTOR or (
                    cursor.kind == ci.CursorKind.CXX_METHOD and cursor.is_virtual_method()):
                self.always.add(cursor.get_usr())
            if cursor.kind == ci.CursorKind.CXX_METHOD and cursor.is_virtual_method():
                virtual.setdefault(cursor.spelling, set()).add(cursor.get_usr())
        emptied = frozenset(usr for usr, f in self.functions.items() if f.emptied)
        self.analyzer = Analyzer(ci, defined, frozenset(synthetic), virtual, emptied)
        for cursor in definitions:
            self.analyzer.find_escapes(cursor)
        self.analyzer.find_fresh(definitions)
        compression = [c for definition in definitions for c in definition.walk_preorder()
                       if c.kind == ci.CursorKind.CALL_EXPR and c.spelling in COMPRESSION]
        if compression:
            self.analyzer.bulk = False
            first = compression[0]
            self.notes.append((first.location.file.name, first.location.line,
                               f"{first.spelling}: the data are compressed, so their contents decide the bytes "
                               f"written: the computation of every written buffer is kept"))
        self.reached_by_globals = set()
        file_scope = [c for tu in translation_units for c in self._scope_members(tu.cursor)
                      if c.kind == ci.CursorKind.VAR_DECL]
        self.forced: set[str] = set()  # functions an opaque one calls: kept whole, as it is
        for cursor in file_scope + opaque_bodies:  # the functions they name are kept: they are
            for inner in cursor.walk_preorder():
                if inner.kind in (ci.CursorKind.DECL_REF_EXPR, ci.CursorKind.CALL_EXPR) \
                        and inner.referenced is not None and inner.referenced.kind.name in DEFINED_KINDS:
                    self.reached_by_globals.add(inner.referenced.get_usr())
                    if cursor.kind != ci.CursorKind.VAR_DECL:
                        self.forced.add(inner.referenced.get_usr())
        for cursor in definitions:
            body = next((c for c in cursor.get_children() if c.kind == ci.CursorKind.COMPOUND_STMT), None)
            if body is None:
                continue
            function = self.functions[cursor.get_usr()]
            if cursor.kind == ci.CursorKind.CONSTRUCTOR:
                self._initializers(cursor, body, function)
            children = list(body.get_children())
            for i, child in enumerate(children):
                self._build(child, function, None, None, None, i == len(children) - 1)
        self.main = next((usr for usr, f in self.functions.items() if f.name == "main"), None)
        self.kept: set[int] = set()
        self.called: set = {self.main} | self.reached_by_globals | self.always
        """The functions kept code calls or names (and those called where no call is written)."""
        self.why: dict[int, str] = {}
        self.messaging = False
        self.needed: set = set()
        self.prefixes: set = set()
        self.live: set[str] = set()
        self.declared_by = {key: unit.id for unit in self.units for key in unit.declares}

    # -- units ------------------------------------------------------------------------------------------------

    def _empty(self, definitions, names) -> None:
        """Mark the definitions of the functions ``names`` (``--drop``) emptied, with the body each gets; a name
        no source defines, ``main``, a constructor or destructor, or a function returning a reference is
        refused."""
        from iobo.errors import ConfigError

        K = self.ci.CursorKind
        found, notes = set(), []
        for cursor in definitions:
            if cursor.spelling not in names:
                continue
            where = f"{cursor.location.file.name}:{cursor.location.line}"
            if cursor.spelling == "main" or cursor.kind in (K.CONSTRUCTOR, K.DESTRUCTOR):
                raise ConfigError(f"--drop {cursor.spelling} ({where}): main, constructors and destructors cannot "
                                  f"be emptied; name the functions they call that compute")
            result = cursor.result_type.get_canonical()
            kinds = self.ci.TypeKind
            unused = "".join(f" (void){a.spelling};" for a in cursor.get_arguments() if a.spelling)  # no warning
            returns = "zero"
            if result.kind == kinds.VOID:
                text, returns = (f"{{{unused} }}" if unused else "{}"), "nothing"
            elif result.kind in (kinds.LVALUEREFERENCE, kinds.RVALUEREFERENCE):
                raise ConfigError(f"--drop {cursor.spelling} ({where}): it returns a reference "
                                  f"({cursor.result_type.spelling}), which an emptied function has nothing to "
                                  f"return for; name the functions it calls that compute")
            elif result.kind == kinds.RECORD:
                text = f"{{{unused} static {cursor.result_type.spelling} iobo_dropped; return iobo_dropped; }}"
            else:
                text = f"{{{unused} return 0; }}"
            body = next((c for c in cursor.get_children() if c.kind == K.COMPOUND_STMT), None)
            function = self.functions[cursor.get_usr()]
            if body is None or not function.editable:
                continue
            function.emptied, function.body = text, (body.extent.start.offset, body.extent.end.offset)
            found.add(cursor.spelling)
            notes.append((function.file, function.line, f"{function.name}: emptied on request (--drop): its calls do "
                                                        f"nothing and return {returns}; iobo check shows whether the "
                                                        f"I/O stayed the program's"))
        missing = sorted(set(names) - found)
        if missing:
            defined = sorted({f.name for f in self.functions.values() if f.editable} - {"main"})
            shown = ", ".join(defined[:12]) + (f" ... ({len(defined)} in all)" if len(defined) > 12 else "")
            raise ConfigError(f"--drop {', '.join(missing)}: no such function is defined in the sources (only a "
                              f"function whose body is in SOURCES can be emptied); defined there: {shown}")
        self.notes += notes

    def _scope_members(self, cursor):
        """The declarations of a translation unit, with those in its namespaces, ``extern "C"`` blocks and
        classes (C++), recursively; templates' members not."""
        for child in cursor.get_children():
            yield child
            if child.kind.name in SCOPES:
                yield from self._scope_members(child)

    def _definitions(self, cursor, template=False):
        """(function definition, in a template?) of a translation unit, recursively through namespaces,
        ``extern "C"``, classes and (flagged) templates."""
        for child in cursor.get_children():
            kind = child.kind.name
            if kind in DEFINED_KINDS and child.is_definition():
                yield child, template
            elif kind == "FUNCTION_TEMPLATE" and child.is_definition():
                yield child, True
            elif kind in SCOPES or kind in TEMPLATES:
                yield from self._definitions(child, template or kind in TEMPLATES)

    def _initializers(self, cursor, body, function: "Function") -> None:
        """A constructor's member and base initialisers, one pinned unit: they write the members they name
        and read what their expressions read."""
        parts = [c for c in cursor.get_children() if c.kind.name in ("MEMBER_REF", "TYPE_REF", "TEMPLATE_REF")
                 or c.kind.is_expression()]
        parts = [c for c in parts if c.extent.end.offset <= body.extent.start.offset and c.location.file is not None
                 and c.location.file.name == function.file]
        expressions = [c for c in parts if c.kind.is_expression()]
        if not expressions:
            return
        effects = Effects()
        for part in parts:
            if part.kind.name == "MEMBER_REF" and part.referenced is not None:
                member = part.referenced
                record = member.semantic_parent
                found = {("mem", record.get_usr() or record.spelling, member.get_usr() or member.spelling)}
                if member.type.get_canonical().kind == self.ci.TypeKind.RECORD:
                    found.add(self.analyzer.mem_key(member.type))
                self.analyzer.write(effects, found)
            elif part.kind.is_expression():
                effects.add(self.analyzer.rvalue(part))
        start = min((c.extent.start for c in parts), key=lambda loc: loc.offset)
        end = max((c.extent.end for c in parts), key=lambda loc: loc.offset)
        unit = Unit(len(self.units), "CXX_CTOR_INITIALIZER", function.usr, None, function.file, start.offset,
                    end.offset, start.line, end.line, effects, pinned=True)
        self.units.append(unit)
        function.units.append(unit.id)

    def _parts(self, cursor):
        """(header cursors, sub-statement cursors) of a container."""
        children = list(cursor.get_children())
        kind = cursor.kind.name
        if kind == "COMPOUND_STMT":
            return [], children
        if kind in ("IF_STMT", "WHILE_STMT", "SWITCH_STMT"):
            return children[:1], children[1:]
        if kind == "CXX_TRY_STMT":
            return [], children
        if kind == "DO_STMT":
            return children[1:], children[:1]
        return children[:-1], children[-1:]  # FOR, CASE (the constant), DEFAULT, LABEL

    def _separable(self, cursor, parts) -> bool:
        """Can the sub-statements be kept or dropped one by one? Not when one of them is not strictly inside the
        container's text or two overlap (a macro expanded to several statements)."""
        start, end = cursor.extent.start.offset, cursor.extent.end.offset
        spans = []
        for part in parts:
            s, e = part.extent.start.offset, part.extent.end.offset
            if part.extent.start.file is None or part.extent.start.file.name != cursor.extent.start.file.name:
                return False
            if s < start or e > end or (s, e) == (start, end) or e <= s:
                return False
            spans.append((s, e))
        spans.sort()
        return all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))

    def _initialized(self, cursor, header, function: Function) -> set:
        """The variables a ``for``'s init expression assigns without reading them first."""
        semicolon = next((t.extent.start.offset for t in cursor.get_tokens() if t.spelling == ";"), None)
        found = set()
        for part in header:
            if semicolon is not None and part.extent.end.offset <= semicolon and part.kind.name != "DECL_STMT":
                effects = self.analyzer.whole(part, function.usr)
                found |= {w for w in effects.writes if w[0] == "var"} - effects.reads
        return found

    def _build(self, cursor, function: Function, parent, loop, switch, last) -> None:
        kind = cursor.kind.name
        extent = cursor.extent
        unit = Unit(len(self.units), kind, function.usr, parent,
                    extent.start.file.name if extent.start.file else function.file, extent.start.offset,
                    extent.end.offset, extent.start.line, extent.end.line, Effects(), last=last,
                    expression=cursor.kind.is_expression())
        self.units.append(unit)
        function.units.append(unit.id)
        analyzer = self.analyzer
        if kind in CONTAINERS:
            header, subs = self._parts(cursor)
            if self._separable(cursor, subs):
                unit.container = True
                if kind == "FOR_STMT":
                    unit.initializes = self._initialized(cursor, header, function)
                for part in header:
                    if part.kind.name in ("DECL_STMT", "VAR_DECL"):  # a for's, or a range for's or catch's
                        unit.effects.add(analyzer.declaration(part))
                        unit.declares |= {analyzer.var_key(d) for d in
                                          ([part] if part.kind.name == "VAR_DECL" else part.get_children())
                                          if d.kind.name == "VAR_DECL"}
                    else:
                        unit.effects.add(analyzer.whole(part, function.usr))
                inner_loop = unit.id if kind in LOOPS else loop
                inner_switch = unit.id if kind == "SWITCH_STMT" else switch
                if kind in ("CASE_STMT", "DEFAULT_STMT"):
                    unit.switch = switch
                for sub in subs:
                    self._build(sub, function, unit.id, inner_loop, inner_switch, False)
                return
        unit.effects = analyzer.whole(cursor, function.usr)
        if kind == "DECL_STMT":
            unit.declares = {analyzer.var_key(d) for d in cursor.get_children() if d.kind.name == "VAR_DECL"}
        elif kind == "BREAK_STMT":
            unit.jump_target = switch if switch is not None and (loop is None or switch > loop) else loop
        elif kind == "CONTINUE_STMT":
            unit.jump_target = loop
        elif kind == "RETURN_STMT":
            unit.returns_value = any(c.kind.is_expression() for c in cursor.get_children())
        elif kind in ("GCC_ASM_STMT", "ASM_STMT", "MS_ASM_STMT"):
            unit.asm = True

    # -- the fixpoint ------------------------------------------------------------------------------------------

    def _need(self, locations) -> None:
        for location in locations:
            if location not in self.needed:
                self.needed.add(location)
                for i in range(1, len(location) + 1):
                    self.prefixes.add(location[:i])

    def _conflicts(self, writes) -> bool:
        for location in writes:
            if location in self.prefixes:  # equal to, or a prefix of, a needed location
                return True
            if any(location[:i] in self.needed for i in range(1, len(location))):
                return True
        return False

    def _keep(self, unit_id: int, reason: str) -> None:
        stack = [(unit_id, reason)]
        while stack:
            unit_id, reason = stack.pop()
            unit = self.units[unit_id]
            if unit.id in self.kept:
                continue
            self.kept.add(unit.id)
            self.why[unit.id] = reason
            self.messaging |= unit.effects.messages
            self.live.add(unit.function)
            self.called |= unit.effects.calls
            self._need(unit.effects.reads)
            if unit.parent is not None:
                stack.append((unit.parent, f"encloses line {unit.line}"))
            for name in unit.effects.names:
                declaring = self.declared_by.get(name)
                if declaring is not None:
                    stack.append((declaring, f"declares a variable line {unit.line} names"))

    def _wanted(self, unit: Unit) -> str | None:
        """Why ``unit`` must be kept now, or None."""
        effects = unit.effects
        if self.functions[unit.function].emptied:
            return None
        if effects.io or effects.unknown:
            return f"calls {(effects.io or effects.unknown)[0][0]}"
        if unit.asm:
            return "inline assembly"
        if unit.function in self.forced:
            return "in a function an opaque one calls"
        if effects.messages and self.messaging:
            return "sends or receives MPI messages, as a kept statement does (their pairs are not traced)"
        live = effects.calls & self.live
        if live:
            return f"calls {self.functions[min(live)].name}, which has kept statements"
        if unit.kind in ("BREAK_STMT", "CONTINUE_STMT"):
            return "jumps in a kept loop or switch" if unit.jump_target in self.kept else None
        if unit.kind in ("CASE_STMT", "DEFAULT_STMT"):
            return "a case of a kept switch" if unit.switch in self.kept else None
        if unit.kind == "CXX_CATCH_STMT" and unit.parent in self.kept:
            return "a handler of a kept try"
        if unit.pinned and unit.function in self.called:
            return "initialises the members of a constructor kept code calls"
        if unit.function in self.live and unit.kind in ("GOTO_STMT", "LABEL_STMT", "INDIRECT_GOTO_STMT"):
            return "a jump or label of a kept function"
        if unit.kind == "RETURN_STMT" and unit.function in self.live and (
                not unit.last or unit.function == self.main or ("ret", unit.function) in self.needed
                or (self.cxx and unit.returns_value)):
            return "returns from a kept function"
        for location in effects.writes:
            if self._conflicts([location]):
                return f"writes {location[-1] if location[0] != 'var' else 'a variable'} that kept code reads"
        return None

    def run(self) -> "Slice":
        """Keep units to the fixpoint; returns self."""
        if self.main is not None:
            self._need({("ret", self.main)})
        changed = True
        while changed:
            changed = False
            for unit in self.units:
                if unit.id not in self.kept:
                    reason = self._wanted(unit)
                    if reason:
                        self._keep(unit.id, reason)
                        changed = True
        unknown: dict[str, list] = {}
        for unit in self.units:
            if unit.id in self.kept:
                for name, line in unit.effects.unknown:
                    unknown.setdefault(name, []).append((unit.file, line))
                if unit.asm:
                    self.notes.append((unit.file, unit.line, "inline assembly: kept"))
        for name, places in unknown.items():
            file, line = min(places)
            more = f" (and {len(places) - 1} more calls)" if len(places) > 1 else ""
            self.notes.append((file, line, f"{name}{more}: not defined in the sources nor known to iobo: kept (it "
                                           f"may do I/O), with what its arguments need"))
        return self

    # -- results ----------------------------------------------------------------------------------------------

    def reached(self) -> set[str]:
        """The functions the kernel keeps: main, every function a kept unit calls or names, and those file-scope
        variables name."""
        found = {self.main} | self.reached_by_globals | self.always
        found |= {usr for usr, f in self.functions.items() if f.emptied}  # a call may go through a pointer
        for unit_id in self.kept:
            found |= self.units[unit_id].effects.calls
        return {usr for usr in found if usr is not None}

    def counts(self) -> dict[str, int]:
        """Statements kept and dropped in the sources (each unit once; the units of dropped functions dropped)."""
        reached = self.reached()
        kept = dropped = 0
        for unit in self.units:
            function = self.functions[unit.function]
            if not function.editable:
                continue
            if unit.id in self.kept and function.usr in reached:
                kept += 1
            else:
                dropped += 1
        dropped_functions = sum(1 for f in self.functions.values() if f.editable and f.usr not in reached)
        emptied = sum(1 for f in self.functions.values() if f.emptied)
        return {"kept": kept, "dropped": dropped, "functions_dropped": dropped_functions,
                "functions_kept": sum(1 for f in self.functions.values() if f.editable and f.usr in reached) - emptied,
                "functions_emptied": emptied}

    def drops(self) -> dict[str, list[tuple[int, int, str]]]:
        """Per source file, the text ranges to remove: (start, end, how) with how ``blank`` (spaces; an
        expression's own ``;`` stays), ``empty`` (an empty statement ``{}``, where a container needs one),
        ``function`` (a dropped definition) or ``{...}``, the body an emptied function gets
        (:attr:`Function.emptied`)."""
        reached = self.reached()
        ranges: dict[str, list[tuple[int, int, str]]] = {}
        for function in self.functions.values():
            if function.editable and function.usr not in reached:
                ranges.setdefault(function.file, []).append((function.start, function.end, "function"))
            elif function.emptied:
                ranges.setdefault(function.file, []).append((*function.body, function.emptied))
        for unit in self.units:
            function = self.functions[unit.function]
            if not function.editable or function.usr not in reached or unit.id in self.kept or unit.pinned \
                    or function.emptied:
                continue
            parent = self.units[unit.parent] if unit.parent is not None else None
            if parent is not None and parent.id not in self.kept:
                continue  # removed with its parent
            in_block = parent is None or parent.kind == "COMPOUND_STMT"
            how = "blank" if in_block or unit.expression else "empty"
            ranges.setdefault(unit.file, []).append((unit.start, unit.end, how))
        return ranges
