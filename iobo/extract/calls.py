"""Which external calls are I/O (kept as slice seeds), which only compute, and which arguments are bulk data.

- :func:`kind`: ``"io"`` for HDF5 (``H5*``), MPI-IO (``MPI_File_*``), MPI
  set-up and synchronisation (init, finalize, abort, barrier, communicators,
  topologies, info objects, datatypes), ``exit``/``abort`` and POSIX/stdio file calls (open,
  write, fwrite, fprintf to a file, ...; reads too: the program's input files
  must keep working); ``"compute"`` for the other functions of the C library,
  MPI and HDF5 headers (memcpy, sqrt, MPI_Sendrecv, printf, fprintf to stdout
  or stderr); ``"unknown"`` for every other function the sources do not
  define (a library's own, e.g. libpng's): kept, as it may do I/O.
- :data:`BULK`: the argument of a data write that holds the data: the slice
  keeps its address (allocation, offsets) but not the stores that computed
  its contents, so the kernel writes what the buffer holds as allocated.
- :data:`OUTPUT`: the argument a read, ``snprintf`` or a copy only stores
  into (and scanf's variadic ones): what it held before is not needed.
- :data:`COMPRESSION`: calls after which the contents decide the bytes
  written: with one in the program no argument is bulk.
- :func:`stream_kind`: C++ streams: a file stream's methods are I/O,
  ``std::cout``'s and a string stream's are not.
"""

from __future__ import annotations

import functools
import os

IO_PREFIXES = ("H5", "MPI_File_", "MPI_Info_", "MPI_Comm_", "MPI_Cart_", "MPI_Type_", "MPI_Init", "MPI_Group_")
IO_MPI = {"MPI_Finalize", "MPI_Abort", "MPI_Barrier", "MPI_Dims_create"}
POINT_TO_POINT = ("MPI_Send", "MPI_Isend", "MPI_Ssend", "MPI_Issend", "MPI_Bsend", "MPI_Ibsend", "MPI_Rsend",
                  "MPI_Irsend", "MPI_Recv", "MPI_Irecv", "MPI_Mrecv", "MPI_Imrecv", "MPI_Sendrecv", "MPI_Probe",
                  "MPI_Iprobe", "MPI_Mprobe", "MPI_Improbe", "MPI_Wait", "MPI_Test", "MPI_Start")
"""Prefixes of MPI's point-to-point calls (and the completions of their requests): a receive's data come from
another rank's send, which no data flow of this rank shows, so when one is kept all are."""
EXITS = {"exit", "_exit", "_Exit", "abort", "quick_exit"}
"""Calls that end the process: kept like I/O (a kernel stops where the program stops)."""
IO_POSIX = {
    "open", "open64", "openat", "creat", "close", "read", "write", "pread", "pwrite", "pread64", "pwrite64",
    "readv", "writev", "lseek", "lseek64", "fsync", "fdatasync", "ftruncate", "truncate", "mkdir", "unlink",
    "remove", "rename", "stat", "fstat", "lstat", "access", "opendir", "closedir", "readdir", "chdir",
    "fopen", "fopen64", "fdopen", "freopen", "fclose", "fread", "fwrite", "fflush", "fseek", "fseeko", "ftell",
    "ftello", "rewind", "fputs", "fputc", "putc", "fprintf", "vfprintf", "fscanf", "vfscanf", "fgets", "fgetc",
    "getc", "ungetc", "setvbuf", "fileno", "feof", "ferror",
}
STREAM_FIRST = {"fprintf", "vfprintf", "fputs", "fflush", "fscanf", "vfscanf"}
"""Stdio calls that are console output when their stream (first argument; fputs: second) is stdout or stderr."""
CONSOLE = {"stdout", "stderr", "stdin"}
SCANF = {"scanf", "fscanf", "sscanf", "vscanf", "vfscanf", "vsscanf"}
"""Calls whose variadic pointer arguments are only written."""
BULK = {
    "H5Dwrite": 5, "H5Dwrite_async": 5, "write": 1, "pwrite": 1, "pwrite64": 1, "fwrite": 0,
    "MPI_File_write": 1, "MPI_File_write_all": 1, "MPI_File_write_at": 2, "MPI_File_write_at_all": 2,
    "MPI_File_iwrite": 1, "MPI_File_iwrite_all": 1, "MPI_File_iwrite_at": 2, "MPI_File_iwrite_at_all": 2,
    "MPI_File_write_shared": 1, "MPI_File_write_ordered": 1, "MPI_File_iwrite_shared": 1,
    "MPI_File_write_all_begin": 1, "MPI_File_write_at_all_begin": 2, "MPI_File_write_ordered_begin": 1,
}
"""Function -> index of its data argument (0-based)."""
OUTPUT = {
    "H5Dread": 5, "H5Dread_async": 5, "H5Aread": 2, "read": 1, "pread": 1, "pread64": 1, "fread": 0,
    "fgets": 0, "MPI_File_read": 1, "MPI_File_read_all": 1, "MPI_File_read_at": 2, "MPI_File_read_at_all": 2,
    "MPI_File_iread": 1, "MPI_File_iread_all": 1, "MPI_File_iread_at": 2, "MPI_File_iread_at_all": 2,
    "MPI_File_read_shared": 1, "MPI_File_read_ordered": 1, "H5Sget_simple_extent_dims": 1,
    "sprintf": 0, "snprintf": 0, "vsprintf": 0, "vsnprintf": 0, "strcpy": 0, "strncpy": 0, "memcpy": 0,
    "memset": 0, "MPI_Get_count": 2, "MPI_Get_elements": 2, "MPI_Get_elements_x": 2,
}
"""Function -> index of the argument it only stores into (a read's buffer, a formatted name, a copy's
destination): its old contents are not read."""
DEALLOCATORS = {"free", "cfree"}
"""Calls that end a block's life: they neither read nor write its contents (reading it after is undefined)."""
COMPRESSION = {"H5Pset_deflate", "H5Pset_szip", "H5Pset_filter", "H5Pset_nbit", "H5Pset_scaleoffset",
               "H5Pset_shuffle", "H5Pset_fletcher32"}
LIBRARY_DIRS = ("/bits/", "/sys/", "/mpich", "/openmpi", "/hdf5", "/gcc/", "/linux/", "/asm", "/c++/")
LIBRARY_HEADERS = {
    "string.h", "strings.h", "stdlib.h", "math.h", "ctype.h", "time.h", "assert.h", "stdio.h", "stdint.h",
    "inttypes.h", "complex.h", "unistd.h", "fcntl.h", "errno.h", "limits.h", "float.h", "stdarg.h", "signal.h",
    "omp.h", "mpi.h", "mpio.h", "hdf5.h", "getopt.h", "libgen.h", "alloca.h", "malloc.h", "stdbool.h",
    "stddef.h", "wchar.h", "locale.h", "setjmp.h", "tgmath.h", "pthread.h", "sched.h", "dirent.h",
}


FILE_STREAMS = {"basic_ofstream", "basic_ifstream", "basic_fstream", "basic_filebuf"}
"""C++ library classes whose every method (and constructor: it opens the file) is file I/O."""
STREAMS = {"basic_ostream", "basic_istream", "basic_iostream", "basic_ios", "ios_base"}
"""C++ stream classes whose methods and operators are file I/O unless the stream is the console or a string."""
CONSOLE_STREAMS = {"cout", "cerr", "clog", "cin", "wcout", "wcerr", "wclog", "wcin"}


def stream_kind(owner: str, stream: str | None, stream_type: str = "") -> str | None:
    """``"io"``, ``"compute"`` (a string stream) or ``"console"`` (``std::cout``...: it changes nothing the program
    reads) for a method of the C++ library class ``owner`` (``basic_ofstream``...) called on ``stream`` (its
    spelling) of type ``stream_type``; None when ``owner`` is no stream class."""
    if owner in FILE_STREAMS:
        return "io"
    if owner in STREAMS:
        if stream in CONSOLE_STREAMS:
            return "console"
        return "compute" if "stringstream" in stream_type else "io"
    return None


@functools.lru_cache(maxsize=4096)
def _physical(path: str) -> str:
    """``path`` with its symbolic links resolved: the wheel's libclang names the C++ headers
    ``/../lib/gcc/x86_64-linux-gnu/12/../../../../include/c++/12/...``, which is ``/usr/include/c++/12/...`` only
    once ``/lib`` is read as the link to ``/usr/lib`` it is."""
    return os.path.realpath(path)


def library_header(path: str | None) -> bool:
    """Is ``path`` a header of the C library, MPI or HDF5 (or the compiler's own)?"""
    if not path:
        return False
    path = _physical(path)
    if not path.startswith("/usr/"):
        return False
    return os.path.basename(path) in LIBRARY_HEADERS or any(part in path for part in LIBRARY_DIRS)


def kind(name: str, header: str | None, stream: str | None = None, synthetic: frozenset[str] = frozenset()) -> str:
    """``"io"``, ``"compute"`` or ``"unknown"`` for an external function ``name`` declared in ``header``
    (``stream``: the spelling of a stdio call's stream argument; ``synthetic``: functions the user named, I/O)."""
    if name.startswith(IO_PREFIXES) or name in IO_MPI or name in EXITS or name in synthetic:
        return "io"
    if name in IO_POSIX:
        return "compute" if name in STREAM_FIRST and stream in CONSOLE else "io"
    return "compute" if library_header(header) else "unknown"


def bulk_argument(name: str, synthetic: frozenset[str] = frozenset()) -> int | None:
    """The index of ``name``'s data argument, -1 for every argument of a function the user named synthetic (but
    its strings: a file name is no data), None for no bulk argument."""
    if name in synthetic:
        return -1
    return BULK.get(name)
