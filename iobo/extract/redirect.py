"""``--redirect DIR``: the file names the kernel creates are switched into DIR (e.g. ``/dev/shm``) in its source.

Each call of the table :data:`NAMED` in the kernel's statements gets its name
argument wrapped, ``H5Fcreate(path, ...)`` -> ``H5Fcreate(iobo_kernel_path_created(path), ...)``,
so names computed at run time (a checkpoint's step in its name) follow. The
helpers (:mod:`iobo.extract.helper`) put a file created or truncated at
``DIR`` + its absolute path (HDF5 ``H5Fcreate``, ``MPI_File_open`` with
``MPI_MODE_CREATE``, ``open`` with ``O_CREAT``/``O_TRUNC``, ``creat``,
``fopen`` for ``w``/``a``, ``mkdir``), and a name opened without creating
it (``H5Fopen``, a read, ``stat``, ``unlink``...) there when the kernel made
it there, else where it is: the program's inputs keep their paths and the
files it writes and reads back follow each other.

A name argument that is not spelled in the source itself (it comes out of a
macro's body) cannot be wrapped: it is left and listed in the notes.
"""

from __future__ import annotations

NAMED = {
    "H5Fcreate": (0, "created", None), "H5Fopen": (0, "existing", None), "H5Fis_hdf5": (0, "existing", None),
    "H5Fis_accessible": (0, "existing", None), "H5Fdelete": (0, "existing", None),
    "MPI_File_open": (1, "mpi", 2), "MPI_File_delete": (0, "existing", None),
    "open": (0, "posix", 1), "open64": (0, "posix", 1), "creat": (0, "created", None),
    "creat64": (0, "created", None), "fopen": (0, "stdio", 1), "fopen64": (0, "stdio", 1),
    "freopen": (0, "stdio", 1), "truncate": (0, "existing", None), "unlink": (0, "existing", None),
    "remove": (0, "existing", None), "stat": (0, "existing", None), "lstat": (0, "existing", None),
    "access": (0, "existing", None), "opendir": (0, "existing", None), "mkdir": (0, "created", None),
}
"""Function -> (index of its file name argument, the helper's kind, index of the mode argument it takes or
None). ``rename`` (both names) is handled apart: its old name as ``existing``, its new one as ``created``."""


def _text(source: bytes, extent) -> str:
    return source[extent.start.offset:extent.end.offset].decode(errors="replace")


def _spelled_here(argument, call, source: bytes) -> bool:
    """Is ``argument`` spelled in the source text inside ``call``'s parentheses (itself, or a macro's name), not
    produced by a macro's body (whose arguments Clang places at the macro's whole use)?"""
    a, c = argument.extent, call.extent
    if a.start.file is None or c.start.file is None or a.start.file.name != c.start.file.name:
        return False
    if not (c.start.offset < a.start.offset < a.end.offset < c.end.offset):
        return False
    text = _text(source, a)
    if text.count("(") != text.count(")"):
        return False
    tokens = "".join(t.spelling for t in argument.get_tokens())  # none for a macro's use
    return not tokens or tokens == "".join(text.split())


def plan(ci, translation_units, sources, editable) -> tuple[dict[str, list], list, list]:
    """(insertions per source file ``{file: [(offset, text)]}``, the wrapped names ``[(file, line, call)]``, the
    notes ``[(file, line, what)]``) for every call of :data:`NAMED` in the function bodies of ``sources``;
    ``editable(file, offset)`` says whether that place is in a kept statement of the kernel."""
    sources = {str(s) for s in sources}
    texts: dict[str, bytes] = {}
    insertions: dict[str, list] = {}
    wrapped, notes, seen = [], [], set()
    for tu in translation_units:
        for cursor in tu.cursor.walk_preorder():
            if cursor.kind != ci.CursorKind.CALL_EXPR or cursor.location.file is None:
                continue
            name = cursor.spelling
            if name not in NAMED and name != "rename":
                continue
            file = cursor.location.file.name
            if file not in sources or (file, cursor.extent.start.offset) in seen:
                continue
            seen.add((file, cursor.extent.start.offset))
            if not editable(file, cursor.extent.start.offset):
                continue
            source = texts.setdefault(file, open(file, "rb").read())
            arguments = list(cursor.get_arguments())
            wanted = [(0, "existing", None), (1, "created", None)] if name == "rename" else [NAMED[name]]
            for index, how, mode in wanted:
                if max(index, mode or 0) >= len(arguments):
                    continue
                argument = arguments[index]
                mode_argument = arguments[mode] if mode is not None else None
                if not _spelled_here(argument, cursor, source) or (
                        mode_argument is not None and not _spelled_here(mode_argument, cursor, source)):
                    notes.append((file, cursor.location.line, f"{name}: its file name comes out of a macro's body: "
                                                              f"not redirected (the file keeps its path)"))
                    continue
                mode_text = f", {' '.join(_text(source, mode_argument.extent).split())}" \
                    if mode_argument is not None else ""  # evaluated twice: a mode is a constant or a variable
                edits = insertions.setdefault(file, [])
                edits.append((argument.extent.start.offset, f"iobo_kernel_path_{how}("))
                edits.append((argument.extent.end.offset, f"{mode_text})"))
                wrapped.append((file, cursor.location.line, name))
    return insertions, sorted(set(wrapped)), notes
