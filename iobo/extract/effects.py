"""What a C or C++ statement reads and writes, as abstract memory locations, and which functions it calls.

A location is a tuple:

- ``("var", KEY)``: a named variable (a local or parameter by its file and
  offset, a global by its USR);
- ``("mem", TYPE)``: memory reached through a pointer, by the canonical type
  of what is stored (``"double"``, ``"double *"``; a struct by its USR);
  ``("mem", STRUCT, FIELD)``: one field of every struct of that type (fields
  are told apart, objects are not); ``("mem",)``: any memory (a ``void *``);
- ``("ret", FUNCTION)``: the value a function of the sources returns.

Two locations conflict when one is a prefix of the other. A variable whose
address escapes (``&v`` given to a function of the sources or stored, an
array passed to one) is also its type's memory, so stores through pointers
reach it. The analysis is flow-insensitive (order is ignored) and
conservative: an unknown operator, a call through a pointer or an external
function the C library does not declare counts as reading and writing what
it may.

A call to an external function reads what its pointer arguments point to and
writes it when the parameter is not ``const``; the data argument of a data
write (:data:`iobo.extract.calls.BULK`) is not read: only its address is
(the slice keeps the buffer's allocation, not the computation of its contents).

C++: a reference is its referent's memory (by type, as a pointer's; the
binding itself is a variable, written where it is declared), so an argument
bound to a reference parameter is evaluated for its place, not its value,
and a variable bound to a reference of the sources escapes. A member call of
a function of the sources is followed like a call (the object's fields are
told apart as a struct's); a method of the C++ library reads its object, and
writes it unless it is ``const`` or an accessor (:data:`ACCESSORS`:
``v[i]``, ``v.data()`` give the elements' memory, the element type's, without
changing ``v``); the elements of a library object a non-const method changes
are the memory of its template arguments' types. A virtual call may reach
every defined virtual method of its name. ``new`` allocates like ``malloc``,
``delete`` calls the class's destructor when the sources define it; ``throw``
is kept like ``exit``; a lambda reads and writes any memory.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, field

from iobo.extract import calls as call_kinds

ASSIGN = 22
COMPOUND_ASSIGN = range(23, 33)
POST_INC, POST_DEC, PRE_INC, PRE_DEC, ADDRESS_OF, DEREF = 1, 2, 3, 4, 5, 6
"""libclang's CXBinaryOperatorKind and CXUnaryOperatorKind values used (LLVM 17+; checked on the wheel's 18.1.1)."""
QUALIFIERS = re.compile(r"\b(const|volatile|restrict)\b\s*")
ANY_MEMORY = ("mem",)
ANY_RETURN = ("ret",)
"""What a call through a function pointer reads besides any memory: the return value of any function (a prefix of
every ``("ret", USR)``), so the final ``return`` of a function called through a pointer is kept."""
FUNCTION_KINDS = ("FUNCTION_DECL", "CXX_METHOD", "CONSTRUCTOR", "DESTRUCTOR", "CONVERSION_FUNCTION",
                  "FUNCTION_TEMPLATE")
"""The cursor kinds of a function (C's, and C++'s methods, constructors, destructors, conversions, templates)."""
ACCESSORS = {"operator[]", "at", "front", "back", "data", "begin", "end", "cbegin", "cend", "rbegin", "rend",
             "c_str", "get", "operator*", "operator->", "size", "length", "empty", "capacity", "find", "count"}
"""Methods of the C++ library that give access to an object's elements or tell its size without changing the object
(a non-const ``std::vector::operator[]`` included): they read the object, and what they return a reference or
pointer to is the elements' memory."""
CASTS = ("PAREN_EXPR", "CSTYLE_CAST_EXPR", "UNEXPOSED_EXPR", "CXX_STATIC_CAST_EXPR", "CXX_CONST_CAST_EXPR",
         "CXX_REINTERPRET_CAST_EXPR", "CXX_FUNCTIONAL_CAST_EXPR", "CXX_DYNAMIC_CAST_EXPR")
"""Expressions that only pass their operand's value or place on (strip looks through them)."""


@dataclass
class Effects:
    """The locations an expression or statement reads and writes, the functions of the sources it calls, its
    I/O calls (name, line), the external functions of unknown kind it calls, the local variables it names, and
    whether it compresses or sends or receives MPI messages."""

    reads: set = field(default_factory=set)
    writes: set = field(default_factory=set)
    calls: set = field(default_factory=set)
    io: list = field(default_factory=list)
    unknown: list = field(default_factory=list)
    names: set = field(default_factory=set)
    compression: bool = False
    messages: bool = False
    plain_writes: set = field(default_factory=set)
    """The writes but those through a pointer to memory its function allocated (:attr:`Analyzer.fresh`): a
    store into a fresh array (``a = malloc(...); a[i] = ...``) is no store into what the program held before."""

    def add(self, other: "Effects") -> "Effects":
        self.reads |= other.reads
        self.writes |= other.writes
        self.plain_writes |= other.plain_writes
        self.calls |= other.calls
        self.io += other.io
        self.unknown += other.unknown
        self.names |= other.names
        self.compression |= other.compression
        self.messages |= other.messages
        return self


class Analyzer:
    """Effects of statements and expressions of translation units parsed by :mod:`iobo.extract.parse`.

    defined: USR -> True for every function whose body the slice sees (calls to them are followed through
    ``("ret", USR)`` and liveness); escaped: the keys of variables whose address escapes (:meth:`find_escapes`);
    synthetic: external functions whose pointer arguments all hold bulk data; bulk: False when the program
    compresses (the contents then decide the bytes written); emptied: the USRs of the functions the kernel
    empties (``--drop``): a call of one reads its arguments' values and nothing else."""

    def __init__(self, ci, defined: dict, synthetic: frozenset = frozenset(), virtual: dict | None = None,
                 emptied: frozenset = frozenset()):
        self.ci = ci
        self.emptied = emptied
        self.K = ci.CursorKind
        self.defined = defined
        self.virtual = virtual or {}
        """name -> USRs of the virtual methods of the sources of that name (a virtual call may reach any)."""
        self.function_kinds = {getattr(ci.CursorKind, name) for name in FUNCTION_KINDS}
        self.casts = {getattr(ci.CursorKind, name) for name in CASTS}
        self.escaped: set = set()
        self.fresh: set = set()
        self.synthetic = synthetic
        self.bulk = True
        lib = ci.conf.lib
        self._binary = lib.clang_getCursorBinaryOperatorKind
        self._binary.argtypes, self._binary.restype = [ci.Cursor], ctypes.c_int
        self._unary = lib.clang_getCursorUnaryOperatorKind
        self._unary.argtypes, self._unary.restype = [ci.Cursor], ctypes.c_int

    # -- keys -------------------------------------------------------------------------------------------------

    def var_key(self, decl) -> tuple:
        parent = decl.semantic_parent
        if decl.kind == self.K.PARM_DECL or (parent is not None and parent.kind in self.function_kinds):
            return ("var", decl.location.file.name if decl.location.file else "", decl.location.offset)
        return ("var", decl.get_usr() or decl.spelling)

    def mem_key(self, type_) -> tuple:
        TK = self.ci.TypeKind
        canonical = type_.get_canonical()
        if canonical.kind in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):  # a reference's memory: its referent's
            canonical = canonical.get_pointee().get_canonical()
        while canonical.kind in (TK.CONSTANTARRAY, TK.INCOMPLETEARRAY, TK.VARIABLEARRAY, TK.DEPENDENTSIZEDARRAY):
            canonical = canonical.element_type.get_canonical()
        if canonical.kind == TK.RECORD:
            declaration = canonical.get_declaration()
            return ("mem", declaration.get_usr() or canonical.spelling)
        if canonical.kind == TK.VOID:
            return ANY_MEMORY
        return ("mem", QUALIFIERS.sub("", canonical.spelling).strip())

    def is_array(self, type_) -> bool:
        TK = self.ci.TypeKind
        return type_.get_canonical().kind in (TK.CONSTANTARRAY, TK.INCOMPLETEARRAY, TK.VARIABLEARRAY)

    def is_string(self, argument) -> bool:
        """Is ``argument`` a C string (a ``char *`` or char array): a name or a mode, never bulk data?"""
        TK = self.ci.TypeKind
        type_ = self.strip(argument).type.get_canonical()
        if type_.kind == TK.POINTER:
            type_ = type_.get_pointee().get_canonical()
        elif type_.kind in (TK.CONSTANTARRAY, TK.INCOMPLETEARRAY, TK.VARIABLEARRAY):
            type_ = type_.element_type.get_canonical()
        else:
            return False
        return type_.kind in (TK.CHAR_S, TK.CHAR_U, TK.SCHAR)

    def is_pointer(self, type_) -> bool:
        return type_.get_canonical().kind == self.ci.TypeKind.POINTER

    def is_reference(self, type_) -> bool:
        return type_.get_canonical().kind in (self.ci.TypeKind.LVALUEREFERENCE, self.ci.TypeKind.RVALUEREFERENCE)

    def var_locations(self, decl) -> set:
        """What naming the variable ``decl`` designates: itself (a reference: its referent's memory)."""
        key = self.var_key(decl)
        if self.is_reference(decl.type):
            return {self.mem_key(decl.type)}
        found = {key}
        if key in self.escaped or (decl.kind == self.K.PARM_DECL and self.is_array(decl.type)):
            # an array parameter (double v[9]) is a pointer to the caller's array: its elements are memory
            found.add(self.mem_key(decl.type))
        if decl.type.get_canonical().kind == self.ci.TypeKind.RECORD:
            found.add(self.mem_key(decl.type))
        return found

    def write(self, effects: Effects, found: set, target=None) -> None:
        """``found`` written, through ``target`` (an lvalue or a pointer argument; None: not through memory)."""
        effects.writes |= found
        if target is None or not self.through_fresh(target):
            effects.plain_writes |= found

    def through_fresh(self, target) -> bool:
        """Does ``target`` (``p[i]``, ``*p``, ``p``, ``&p[i]``) reach memory through a pointer in :attr:`fresh`?"""
        K = self.K
        target = self.strip(target)
        if target.kind == K.UNARY_OPERATOR and self._unary(target) == ADDRESS_OF:
            return self.through_fresh(next(target.get_children()))
        if target.kind == K.ARRAY_SUBSCRIPT_EXPR or (target.kind == K.UNARY_OPERATOR and self._unary(target) == DEREF):
            base = self.strip(next(target.get_children()))
            return base.kind == K.DECL_REF_EXPR and self.is_pointer(base.type) and base.referenced is not None \
                and self.var_key(base.referenced) in self.fresh
        return target.kind == K.DECL_REF_EXPR and self.is_pointer(target.type) and target.referenced is not None \
            and self.var_key(target.referenced) in self.fresh

    # -- expressions ------------------------------------------------------------------------------------------

    def strip(self, cursor):
        """Through parentheses and casts (implicit ones are UNEXPOSED_EXPR with one child)."""
        while True:
            children = [c for c in cursor.get_children() if c.kind not in (self.K.TYPE_REF, self.K.TEMPLATE_REF,
                                                                           self.K.NAMESPACE_REF)]
            if cursor.kind in self.casts and len(children) == 1:
                cursor = children[0]
            else:
                return cursor

    def lvalue(self, cursor) -> tuple[set, Effects]:
        """(the locations ``cursor`` designates, the effects of computing where they are)."""
        K = self.K
        cursor = self.strip(cursor)
        kind = cursor.kind
        effects = Effects()
        if kind == K.DECL_REF_EXPR:
            decl = cursor.referenced
            if decl is None:
                return set(), effects
            if decl.kind in (K.VAR_DECL, K.PARM_DECL):
                effects.names.add(self.var_key(decl))
                if self.is_reference(decl.type):  # which object it is bound to
                    effects.reads.add(self.var_key(decl))
                return self.var_locations(decl), effects
            if decl.kind in self.function_kinds:
                self.call_target(decl, effects)
            return set(), effects
        if kind == K.MEMBER_REF_EXPR:
            member = cursor.referenced
            children = list(cursor.get_children())
            if children:
                base = children[0]
                if self.is_pointer(base.type):
                    effects.add(self.rvalue(base))
                else:
                    effects.add(self.lvalue(base)[1])
            if member is None:
                return {ANY_MEMORY}, effects
            record = member.semantic_parent
            found = {("mem", record.get_usr() or record.spelling, member.get_usr() or member.spelling)}
            if member.type.get_canonical().kind == self.ci.TypeKind.RECORD:
                found.add(self.mem_key(member.type))
            return found, effects
        if kind == K.ARRAY_SUBSCRIPT_EXPR:
            children = list(cursor.get_children())
            base, index = children[0], children[1] if len(children) > 1 else None
            if index is not None:
                effects.add(self.rvalue(index))
            if self.is_array(self.strip(base).type):
                found, inner = self.lvalue(base)
                effects.add(inner)
                return found, effects
            effects.add(self.rvalue(base))
            return {self.mem_key(cursor.type)}, effects
        if kind == K.UNARY_OPERATOR and self._unary(cursor) == DEREF:
            effects.add(self.rvalue(next(cursor.get_children())))
            return {self.mem_key(cursor.type)}, effects
        if kind == K.CALL_EXPR:
            returned = self.returned_reference(cursor)
            if returned is not None:  # v[i], a method returning T&: the referent's memory
                return returned, self.call(cursor)
        return set(), self.rvalue(cursor)

    def returned_reference(self, call) -> set | None:
        """The memory a call's returned reference designates (its type's), or None when it returns no reference."""
        callee = call.referenced
        if callee is None or callee.kind not in self.function_kinds:
            return None
        result = callee.result_type
        if result is None or not self.is_reference(result):
            return None
        return {self.mem_key(result)}

    def rvalue(self, cursor) -> Effects:
        """The effects of evaluating ``cursor`` for its value."""
        K = self.K
        kind = cursor.kind
        if kind in (K.DECL_REF_EXPR, K.MEMBER_REF_EXPR, K.ARRAY_SUBSCRIPT_EXPR) or (
                kind == K.UNARY_OPERATOR and self._unary(cursor) == DEREF):
            found, effects = self.lvalue(cursor)
            if not self.is_array(cursor.type):  # an array's value is its address
                effects.reads |= found
            return effects
        if kind == K.UNARY_OPERATOR:
            operator = self._unary(cursor)
            operand = next(cursor.get_children())
            if operator == ADDRESS_OF:
                return self.lvalue(operand)[1]
            if operator in (POST_INC, POST_DEC, PRE_INC, PRE_DEC):
                found, effects = self.lvalue(operand)
                effects.reads |= found
                self.write(effects, found, operand)
                return effects
            return self.rvalue(operand)
        if kind in (K.BINARY_OPERATOR, K.COMPOUND_ASSIGNMENT_OPERATOR):
            children = list(cursor.get_children())
            operator = self._binary(cursor)
            if len(children) == 2 and (operator == ASSIGN or operator in COMPOUND_ASSIGN or operator == 0):
                found, effects = self.lvalue(children[0])
                self.write(effects, found, children[0])
                if operator != ASSIGN:  # a compound assignment, or an operator libclang did not name: both
                    effects.reads |= found
                return effects.add(self.rvalue(children[1]))
        if kind == K.CALL_EXPR:
            effects = self.call(cursor)
            effects.reads |= self.returned_reference(cursor) or set()  # the value of what it refers to
            return effects
        if kind == K.CXX_UNARY_EXPR:  # sizeof, alignof: not evaluated
            return Effects()
        if kind == K.LAMBDA_EXPR:  # its captures and body are not followed: it may read and write anything
            effects = Effects()
            effects.unknown.append(("a lambda", cursor.location.line))
            effects.reads.add(ANY_MEMORY)
            self.write(effects, {ANY_MEMORY})
            return effects
        effects = Effects()
        if kind == K.CXX_THROW_EXPR:  # ends the process or leaves the function: kept as exit is
            effects.io.append(("throw", cursor.location.line))
        elif kind == K.CXX_DELETE_EXPR:  # the destructor of the sources' class runs (the block is not read)
            operand = next(iter(c for c in cursor.get_children() if c.kind.is_expression()), None)
            if operand is not None:
                destructor = self.destructor(self.strip(operand).type.get_canonical().get_pointee())
                if destructor is not None:
                    self.call_target(destructor, effects)
        for child in cursor.get_children():
            effects.add(self.rvalue(child))
        return effects

    # -- calls ------------------------------------------------------------------------------------------------

    def destructor(self, type_):
        """The destructor of a class type (its definition's cursor), or None."""
        declaration = type_.get_canonical().get_declaration()
        if declaration is None or declaration.kind not in (self.K.CLASS_DECL, self.K.STRUCT_DECL):
            return None
        return next((c for c in declaration.get_children() if c.kind == self.K.DESTRUCTOR), None)

    def call_target(self, decl, effects: Effects) -> None:
        """A function named in the sources (called or taken by address): followed when the slice sees its body."""
        usr = decl.get_usr()
        if usr in self.defined:
            effects.calls.add(usr)
            effects.reads.add(("ret", usr))

    def pointee(self, argument) -> set:
        """The locations an argument points to: ``&x`` -> x's; an array -> its own; a ``T *`` -> T's memory."""
        inner = self.strip(argument)
        if inner.kind == self.K.UNARY_OPERATOR and self._unary(inner) == ADDRESS_OF:
            return self.lvalue(next(inner.get_children()))[0]
        if self.is_array(inner.type):
            return self.lvalue(inner)[0]
        if self.is_pointer(inner.type):
            return {self.mem_key(inner.type.get_canonical().get_pointee())}
        return set()

    def call(self, cursor) -> Effects:
        K = self.K
        effects = Effects()
        arguments = list(cursor.get_arguments())
        callee = cursor.referenced
        line = cursor.location.line
        if callee is None or callee.kind not in self.function_kinds:
            for argument in arguments:
                effects.add(self.rvalue(argument))
            effects.unknown.append(("a call through a function pointer", line))
            target = next(cursor.get_children(), None)
            if target is not None:  # the pointer's value
                effects.add(self.rvalue(target))
            for argument in arguments:
                effects.reads |= self.pointee(argument)
                self.write(effects, self.pointee(argument))
            effects.reads.add(ANY_MEMORY)
            effects.reads.add(ANY_RETURN)  # whichever function it calls, its return value is read
            self.write(effects, {ANY_MEMORY})
            return effects
        parameters = list(callee.type.argument_types()) if callee.type.kind == self.ci.TypeKind.FUNCTIONPROTO else []
        member = callee.kind in (K.CXX_METHOD, K.CONVERSION_FUNCTION, K.DESTRUCTOR) and not callee.is_static_method()
        target = None  # the object of a member call (None: the implicit this)
        if member and len(arguments) == len(parameters) + 1:  # an operator's call (v[i]): the object comes first
            target, arguments = arguments[0], arguments[1:]
        elif member:
            first = self.strip(next(cursor.get_children(), cursor))
            if first.kind == K.MEMBER_REF_EXPR:
                target = next(first.get_children(), None)
        by_reference = [i < len(parameters) and self.is_reference(parameters[i]) for i in range(len(arguments))]
        for argument, bound in zip(arguments, by_reference):  # a reference parameter: the argument's place
            effects.add(self.lvalue(argument)[1] if bound else self.rvalue(argument))
        target_locations = set()
        if target is not None:
            if self.is_pointer(self.strip(target).type):  # p->m(): p's value, then its pointee
                effects.add(self.rvalue(target))
                target_locations = {self.mem_key(self.strip(target).type.get_canonical().get_pointee())}
            else:
                target_locations, where = self.lvalue(target)
                effects.add(where)
        elif member and callee.semantic_parent is not None:  # this's own members
            target_locations = {self.mem_key(callee.semantic_parent.type)}
        name = callee.spelling
        usr = callee.get_usr()
        if usr in self.emptied:  # it does nothing in the kernel: only its arguments' values are read
            return effects
        reached = {usr} if usr in self.defined else set()
        if member and callee.is_virtual_method():
            reached |= self.virtual.get(name, set())
        if reached:
            for function in reached:
                effects.calls.add(function)
                effects.reads.add(("ret", function))
            return effects
        header = callee.location.file.name if callee.location.file else None
        stream = None
        if name in call_kinds.STREAM_FIRST and arguments:
            stream = self.strip(arguments[1 if name == "fputs" and len(arguments) > 1 else 0]).spelling
        what = call_kinds.kind(name, header, stream, self.synthetic)
        streamed = self.stream_call(callee, target, arguments)
        if streamed == "console":  # std::cout << x: reads x, changes nothing the program reads
            return effects
        if streamed is not None:
            what = streamed
        if what == "io":
            effects.io.append((name, line))
        elif what == "unknown":
            effects.unknown.append((name, line))
        if name in call_kinds.COMPRESSION:
            effects.compression = True
        if name.startswith(call_kinds.POINT_TO_POINT):
            effects.messages = True
        if target_locations:  # a library method: it reads its object, and changes it unless const or an accessor
            effects.reads |= target_locations
            if not callee.is_const_method() and name not in ACCESSORS:
                elements = self.elements(target) if streamed is None else set()  # a stream's state is its own
                self.write(effects, target_locations | elements, target)
        bulk = call_kinds.bulk_argument(name, self.synthetic) if self.bulk else None
        for i, argument in enumerate(arguments):
            if name in call_kinds.DEALLOCATORS:
                continue
            pointed = self.lvalue(argument)[0] if by_reference[i] else self.pointee(argument)
            if not pointed:
                continue
            output = call_kinds.OUTPUT.get(name) == i or (name in call_kinds.SCANF and i >= len(parameters))
            if bulk != i and (bulk != -1 or self.is_string(argument)) and not output:
                effects.reads |= pointed
            if i < len(parameters):
                parameter = parameters[i].get_canonical()
                writes = parameter.kind in (self.ci.TypeKind.POINTER, self.ci.TypeKind.LVALUEREFERENCE,
                                            self.ci.TypeKind.RVALUEREFERENCE) and \
                    not parameter.get_pointee().is_const_qualified()
            else:
                writes = name in call_kinds.SCANF or not parameters
            if writes:
                self.write(effects, pointed, argument)
        return effects

    def elements(self, target) -> set:
        """The memory of the template arguments' types of a library object (``std::vector<double>``: ``double``'s)."""
        if target is None:
            return set()
        type_ = self.strip(target).type.get_canonical()
        if type_.kind == self.ci.TypeKind.POINTER:
            type_ = type_.get_pointee().get_canonical()
        found = set()
        for i in range(max(type_.get_num_template_arguments(), 0)):
            argument = type_.get_template_argument_type(i)
            if argument.kind != self.ci.TypeKind.INVALID:
                found.add(self.mem_key(argument))
        return found

    def stream_call(self, callee, target, arguments) -> str | None:
        """``"io"``, ``"compute"`` or ``"console"`` for a C++ stream's method or operator (a file stream's is I/O,
        ``std::cout``'s console output), None for any other function (:func:`iobo.extract.calls.stream_kind`)."""
        parent = callee.semantic_parent
        owner = parent.spelling if parent is not None and parent.kind in (
            self.K.CLASS_DECL, self.K.STRUCT_DECL, self.K.CLASS_TEMPLATE) else None
        stream = target
        if owner is None and arguments and callee.spelling in ("operator<<", "operator>>", "getline"):
            stream = arguments[0]  # a free operator << (stream, value)
            owner = self.strip(stream).type.get_canonical().spelling.split("<")[0].rsplit("::", 1)[-1]
        if owner is None:
            return None
        while stream is not None:  # std::cout << a << b: the stream the chain starts from
            stream = self.strip(stream)
            if stream.kind != self.K.CALL_EXPR or stream.spelling not in ("operator<<", "operator>>"):
                break
            stream = next(iter(stream.get_arguments()), None)
        if stream is None:
            return call_kinds.stream_kind(owner, None)
        return call_kinds.stream_kind(owner, stream.spelling, stream.type.get_canonical().spelling)

    # -- statements -------------------------------------------------------------------------------------------

    def declaration(self, cursor) -> Effects:
        """A DECL_STMT (or one VAR_DECL: a range ``for``'s): it writes each variable it declares and reads its
        initialisers (and array sizes); a reference's initialiser is evaluated for its place, not its value."""
        effects = Effects()
        for decl in [cursor] if cursor.kind == self.K.VAR_DECL else cursor.get_children():
            if decl.kind != self.K.VAR_DECL:
                continue
            reference = self.is_reference(decl.type)
            self.write(effects, {self.var_key(decl)} if reference else self.var_locations(decl))
            effects.names.add(self.var_key(decl))
            for child in decl.get_children():
                if child.kind.is_expression():
                    effects.add(self.lvalue(child)[1] if reference else self.rvalue(child))
        return effects

    def whole(self, cursor, function_usr: str | None = None) -> Effects:
        """Every effect of a statement and of all it contains."""
        K = self.K
        if cursor.kind in (K.DECL_STMT, K.VAR_DECL):
            return self.declaration(cursor)
        if cursor.kind.is_expression():
            return self.rvalue(cursor)
        effects = Effects()
        if cursor.kind == K.RETURN_STMT and function_usr is not None:
            self.write(effects, {("ret", function_usr)})
        for child in cursor.get_children():
            effects.add(self.whole(child, function_usr))
        return effects

    def root_variable(self, cursor):
        """The variable an lvalue is part of (``v``, ``v[i]`` of an array ``v``, ``v.f``), or None."""
        K = self.K
        cursor = self.strip(cursor)
        if cursor.kind == K.DECL_REF_EXPR:
            return cursor.referenced
        children = list(cursor.get_children())
        if cursor.kind == K.ARRAY_SUBSCRIPT_EXPR and children and self.is_array(self.strip(children[0]).type):
            return self.root_variable(children[0])
        if cursor.kind == K.MEMBER_REF_EXPR and children and not self.is_pointer(children[0].type):
            return self.root_variable(children[0])
        return None

    def find_escapes(self, root) -> None:
        """Add to :attr:`escaped` every variable whose address leaves a direct argument of an external call:
        ``&v`` or an array ``v`` given to a function of the sources, assigned, stored or returned; in C++ also a
        variable bound to a reference (declared, or a parameter of a function of the sources)."""
        K = self.K

        def bind(expression) -> None:
            target = self.root_variable(expression)
            if target is not None and target.kind in (K.VAR_DECL, K.PARM_DECL):
                self.escaped.add(self.var_key(target))

        def visit(cursor, parent_call):
            kind = cursor.kind
            if kind == K.VAR_DECL and self.is_reference(cursor.type):
                for child in cursor.get_children():
                    if child.kind.is_expression():
                        bind(child)
            if kind == K.CALL_EXPR:
                callee = cursor.referenced
                external = callee is not None and callee.get_usr() not in self.defined
                if callee is not None and not external and callee.type.kind == self.ci.TypeKind.FUNCTIONPROTO:
                    parameters = list(callee.type.argument_types())
                    given = list(cursor.get_arguments())[-len(parameters):] if parameters else []
                    for argument, parameter in zip(given, parameters):
                        if self.is_reference(parameter):
                            bind(argument)
                arguments = {a.hash for a in cursor.get_arguments()}
                for child in cursor.get_children():
                    visit(child, external and child.hash in arguments)
                return
            if kind == K.CXX_UNARY_EXPR:  # sizeof, alignof: not evaluated
                return
            inner = self.strip(cursor) if kind in (K.PAREN_EXPR, K.CSTYLE_CAST_EXPR, K.UNEXPOSED_EXPR) else cursor
            target = None
            if inner.kind == K.UNARY_OPERATOR and self._unary(inner) == ADDRESS_OF:
                target = self.root_variable(next(inner.get_children()))
            elif inner.kind == K.DECL_REF_EXPR and self.is_array(inner.type):
                target = inner.referenced
            if target is not None and target.kind in (K.VAR_DECL, K.PARM_DECL) and not parent_call:
                self.escaped.add(self.var_key(target))
            # an array's own subscript (a[i]) is no escape, nor is an argument's decay, cast, parentheses or &
            passed = parent_call and (kind in (K.PAREN_EXPR, K.CSTYLE_CAST_EXPR, K.UNEXPOSED_EXPR) or (
                kind == K.UNARY_OPERATOR and self._unary(cursor) == ADDRESS_OF))
            children = list(cursor.get_children())
            for i, child in enumerate(children):
                visit(child, (kind == K.ARRAY_SUBSCRIPT_EXPR and i == 0) or passed)

        visit(root, False)

    ALLOCATORS = ("malloc", "calloc", "aligned_alloc", "valloc", "memalign", "strdup", "strndup")

    def find_fresh(self, definitions) -> None:
        """Set :attr:`fresh`: the local pointers of ``definitions`` (function cursors) only ever assigned an
        allocation (``malloc`` and its kin, or a function of the sources that returns one of its own fresh
        pointers), whose address does not escape; to a fixpoint over the functions."""
        K = self.K
        assigned: dict[tuple, list] = {}
        returned: dict[str, list] = {}
        for definition in definitions:
            usr = definition.get_usr()
            for cursor in definition.walk_preorder():
                if cursor.kind == K.VAR_DECL and self.is_pointer(cursor.type) and \
                        cursor.semantic_parent is not None and cursor.semantic_parent.kind in self.function_kinds and \
                        cursor.storage_class != self.ci.StorageClass.STATIC:
                    init = [c for c in cursor.get_children() if c.kind.is_expression()]
                    assigned.setdefault(self.var_key(cursor), []).extend(init[-1:])
                elif cursor.kind == K.BINARY_OPERATOR and self._binary(cursor) == ASSIGN:
                    left, right = list(cursor.get_children())[:2]
                    left = self.strip(left)
                    if left.kind == K.DECL_REF_EXPR and left.referenced is not None:
                        assigned.setdefault(self.var_key(left.referenced), []).append(right)
                elif cursor.kind == K.RETURN_STMT:
                    returned.setdefault(usr, []).extend(c for c in cursor.get_children() if c.kind.is_expression())
        fresh_functions: set[str] = set()
        candidates = {key for key in assigned if len(key) == 3 and key not in self.escaped}

        def allocates(expression) -> bool:
            expression = self.strip(expression)
            if expression.kind == K.CXX_NEW_EXPR:
                return True
            if expression.kind == K.CALL_EXPR and expression.referenced is not None:
                return expression.spelling in self.ALLOCATORS or expression.referenced.get_usr() in fresh_functions
            return False

        changed = True
        while changed:
            self.fresh = {key for key in candidates if assigned[key] and all(allocates(e) for e in assigned[key])}
            found = set()
            for usr, values in returned.items():
                stripped = [self.strip(v) for v in values]
                if values and all(v.kind == K.DECL_REF_EXPR and v.referenced is not None
                                  and self.var_key(v.referenced) in self.fresh for v in stripped):
                    found.add(usr)
            changed = found != fresh_functions
            fresh_functions = found
