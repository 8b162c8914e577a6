"""The HDF5 C calls a replay makes, through ctypes on the libhdf5 the process has loaded: no h5py, no numpy.

A replay trial's fixed cost was mostly importing h5py (and numpy with it): about 140 ms of a 360 ms trial on
2 ranks, and more under load. The calls made here are the ones h5py's low-level API made for the replay, with
the same arguments (``H5Fcreate``/``H5Fopen`` with a file access list, ``H5Dcreate2``/``H5Dcreate_anon``,
``H5Dwrite``/``H5Dread`` with memory and file dataspaces and a transfer list, ``H5Acreate2``/``H5Awrite``,
...), and the types h5py made for the recorded classes (a copy of the little-endian standard type, h5py's IEEE
half float, a null-padded fixed string, an opaque type of the size).

Every function is looked up in the process's global symbols first, so the preloaded shim's wrapper (``H5Fcreate``,
``H5Dwrite``, ...) is the one called, as on the program; the library's own when nothing global defines it. The
library is the libhdf5 already loaded (the shim links it: its symbols are global); without the shim it is the one
h5py loads (:func:`iobo.stack.libraries.hdf5_library`). HDF5's automatic error printing is off, as under h5py; a
failed call prints HDF5's error stack to stderr and raises :class:`iobo.errors.KernelError` naming the call.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Sequence

from iobo.errors import KernelError

hid_t, herr_t, hsize_t, hssize_t = ctypes.c_int64, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64
DEFAULT = 0  # H5P_DEFAULT, H5S_ALL, H5E_DEFAULT
UNLIMITED = 2 ** 64 - 1  # H5S_UNLIMITED
ACC_RDONLY, ACC_TRUNC = 0, 2  # H5F_ACC_*
SCOPE_LOCAL = 0  # H5F_SCOPE_LOCAL
SCALAR = 0  # H5S_SCALAR
SELECT_SET = 0  # H5S_SELECT_SET
COMPACT = 0  # H5D_COMPACT
MPIO_COLLECTIVE = 1  # H5FD_MPIO_COLLECTIVE
INTEGER, FLOAT, OPAQUE = 0, 1, 5  # H5T_class_t
STR_NULLPAD = 1  # H5T_STR_NULLPAD
PARALLEL_API = "H5Pset_fapl_mpio"

_SIGNATURES: dict[str, tuple] = {
    "H5open": (herr_t, []),
    "H5Eset_auto2": (herr_t, [hid_t, ctypes.c_void_p, ctypes.c_void_p]),
    "H5Eprint2": (herr_t, [hid_t, ctypes.c_void_p]),
    "H5Pcreate": (hid_t, [hid_t]),
    "H5Pclose": (herr_t, [hid_t]),
    "H5Pset_chunk": (herr_t, [hid_t, ctypes.c_int, ctypes.POINTER(hsize_t)]),
    "H5Pset_layout": (herr_t, [hid_t, ctypes.c_int]),
    "H5Pset_deflate": (herr_t, [hid_t, ctypes.c_uint]),
    "H5Pset_shuffle": (herr_t, [hid_t]),
    "H5Pset_fletcher32": (herr_t, [hid_t]),
    "H5Pset_filter": (herr_t, [hid_t, ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint)]),
    "H5Pset_create_intermediate_group": (herr_t, [hid_t, ctypes.c_uint]),
    "H5Pset_dxpl_mpio": (herr_t, [hid_t, ctypes.c_int]),
    "H5Pset_fapl_mpio": (herr_t, None),  # (hid_t, MPI_Comm, MPI_Info): the handles' C types are the MPI's
    "H5Fcreate": (hid_t, [ctypes.c_char_p, ctypes.c_uint, hid_t, hid_t]),
    "H5Fopen": (hid_t, [ctypes.c_char_p, ctypes.c_uint, hid_t]),
    "H5Fflush": (herr_t, [hid_t, ctypes.c_int]),
    "H5Fclose": (herr_t, [hid_t]),
    "H5Screate": (hid_t, [ctypes.c_int]),
    "H5Screate_simple": (hid_t, [ctypes.c_int, ctypes.POINTER(hsize_t), ctypes.POINTER(hsize_t)]),
    "H5Sselect_all": (herr_t, [hid_t]),
    "H5Sselect_none": (herr_t, [hid_t]),
    "H5Sselect_hyperslab": (herr_t, [hid_t, ctypes.c_int] + [ctypes.POINTER(hsize_t)] * 4),
    "H5Sselect_elements": (herr_t, [hid_t, ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(hsize_t)]),
    "H5Sget_select_npoints": (hssize_t, [hid_t]),
    "H5Sget_simple_extent_npoints": (hssize_t, [hid_t]),
    "H5Sclose": (herr_t, [hid_t]),
    "H5Tcopy": (hid_t, [hid_t]),
    "H5Tcreate": (hid_t, [ctypes.c_int, ctypes.c_size_t]),
    "H5Tset_size": (herr_t, [hid_t, ctypes.c_size_t]),
    "H5Tset_strpad": (herr_t, [hid_t, ctypes.c_int]),
    "H5Tset_fields": (herr_t, [hid_t] + [ctypes.c_size_t] * 5),
    "H5Tset_ebias": (herr_t, [hid_t, ctypes.c_size_t]),
    "H5Tget_size": (ctypes.c_size_t, [hid_t]),
    "H5Tget_class": (ctypes.c_int, [hid_t]),
    "H5Tclose": (herr_t, [hid_t]),
    "H5Dcreate2": (hid_t, [hid_t, ctypes.c_char_p, hid_t, hid_t, hid_t, hid_t, hid_t]),
    "H5Dcreate_anon": (hid_t, [hid_t, hid_t, hid_t, hid_t, hid_t]),
    "H5Dopen2": (hid_t, [hid_t, ctypes.c_char_p, hid_t]),
    "H5Dset_extent": (herr_t, [hid_t, ctypes.POINTER(hsize_t)]),
    "H5Dget_space": (hid_t, [hid_t]),
    "H5Dget_type": (hid_t, [hid_t]),
    "H5Dwrite": (herr_t, [hid_t, hid_t, hid_t, hid_t, hid_t, ctypes.c_void_p]),
    "H5Dread": (herr_t, [hid_t, hid_t, hid_t, hid_t, hid_t, ctypes.c_void_p]),
    "H5Dclose": (herr_t, [hid_t]),
    "H5Acreate2": (hid_t, [hid_t, ctypes.c_char_p, hid_t, hid_t, hid_t, hid_t]),
    "H5Aget_type": (hid_t, [hid_t]),
    "H5Aget_space": (hid_t, [hid_t]),
    "H5Awrite": (herr_t, [hid_t, hid_t, ctypes.c_void_p]),
    "H5Aclose": (herr_t, [hid_t]),
}
"""The C signature (return type, argument types) of every HDF5 function called here (HDF5 1.10+, hid_t 64-bit)."""
_LIST_CLASSES = {"file_access": "H5P_CLS_FILE_ACCESS_ID_g", "dataset_create": "H5P_CLS_DATASET_CREATE_ID_g",
                 "dataset_xfer": "H5P_CLS_DATASET_XFER_ID_g", "link_create": "H5P_CLS_LINK_CREATE_ID_g"}


def dims_array(values: Sequence[int]):
    """A C ``hsize_t[]`` of ``values``."""
    return (hsize_t * len(values))(*values)


class Hdf5:
    """The loaded libhdf5's C API: ``hdf5.H5Dwrite(...)`` calls the function (the shim's wrapper when there is one)
    and checks its result (a negative one raises :class:`KernelError`)."""

    def __init__(self) -> None:
        self.library = _library()
        self._global = ctypes.CDLL(None)
        self.H5open()
        self.H5Eset_auto2(DEFAULT, None, None)

    def __getattr__(self, name: str):
        if name not in _SIGNATURES:
            raise AttributeError(name)
        function = self._function(name)

        def call(*args):
            result = function(*args)
            if result < 0:
                sys.stderr.flush()
                self._function("H5Eprint2")(DEFAULT, None)
                raise KernelError(f"the replay's HDF5 call {name}{args} failed (returned {result}; HDF5's error "
                                  f"stack is above on stderr)")
            return result

        setattr(self, name, call)  # looked up once
        return call

    def _function(self, name: str):
        """The C function ``name`` with its signature: the global symbol (a preloaded shim's wrapper) if any, else
        the library's."""
        try:
            function = getattr(self._global, name)
        except AttributeError:
            function = getattr(self.library, name)
        function.restype, function.argtypes = _SIGNATURES[name]
        return function

    def list_class(self, kind: str) -> int:
        """The property list class id of ``kind`` (file_access, dataset_create, dataset_xfer, link_create)."""
        return hid_t.in_dll(self.library, _LIST_CLASSES[kind]).value

    def predefined(self, name: str) -> int:
        """A predefined type's id (``H5T_STD_I32LE`` ...), valid after ``H5open``."""
        return hid_t.in_dll(self.library, f"{name}_g").value

    def type_of(self, kind: str, size: int, signed: bool = True) -> tuple[int, bool]:
        """A new type id of the recorded class and size, as h5py made it for the replay (little-endian standard
        integers and IEEE floats, h5py's half float, null-padded strings), and whether it is one; an opaque type
        of the size (False) for any other class or size."""
        if kind == "integer" and size in (1, 2, 4, 8):
            return self.H5Tcopy(self.predefined(f"H5T_STD_{'I' if signed else 'U'}{8 * size}LE")), True
        if kind == "float" and size in (4, 8):
            return self.H5Tcopy(self.predefined(f"H5T_IEEE_F{8 * size}LE")), True
        if kind == "float" and size == 2:  # h5py's IEEE_F16LE
            half = self.H5Tcopy(self.predefined("H5T_IEEE_F32LE"))
            self.H5Tset_fields(half, 15, 10, 5, 0, 10)
            self.H5Tset_size(half, 2)
            self.H5Tset_ebias(half, 15)
            return half, True
        if kind == "string":
            string = self.H5Tcopy(self.predefined("H5T_C_S1"))
            self.H5Tset_size(string, size)
            self.H5Tset_strpad(string, STR_NULLPAD)
            return string, True
        return self.H5Tcreate(OPAQUE, size), False

    def simple_space(self, dims: Sequence[int], maxdims: Sequence[int] | None = None) -> int:
        """``H5Screate_simple`` of ``dims`` (and ``maxdims``, :data:`UNLIMITED` for an unlimited one)."""
        return self.H5Screate_simple(len(dims), dims_array(dims), None if maxdims is None else dims_array(maxdims))


@functools.cache
def hdf5() -> Hdf5:
    """The process's :class:`Hdf5` (the library opened once)."""
    return Hdf5()


def _library() -> ctypes.CDLL:
    """The process's global symbols when they hold the parallel HDF5 API (the preloaded shim links libhdf5);
    else the libhdf5 h5py loads (:func:`iobo.stack.libraries.hdf5_library`)."""
    process = ctypes.CDLL(None)
    if hasattr(process, PARALLEL_API):
        return process
    from iobo.stack.libraries import hdf5_library

    return hdf5_library()


__all__ = ["ACC_RDONLY", "ACC_TRUNC", "COMPACT", "DEFAULT", "FLOAT", "INTEGER", "MPIO_COLLECTIVE", "SCALAR",
           "SCOPE_LOCAL", "SELECT_SET", "UNLIMITED", "Hdf5", "dims_array", "hdf5"]
