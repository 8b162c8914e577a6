"""Replay a trace: the program's I/O calls, made again with synthetic data, one MPI rank per traced rank.

    mpiexec -n R python -m iobo.replay.run TRACE --workdir DIR [--compute none|recorded|scale=X] [--steps K]

Each rank makes its events' calls in the recorded order, each the library call
the program made, so the preloaded shim applies a configuration to them and
measures them exactly as on the program:

- HDF5 through its C API (ctypes, :mod:`iobo.replay.hdf5_calls`: no h5py,
  no numpy): ``H5Fcreate``/``H5Fopen`` (the MPI-IO
  driver on the traced communicator's size when the program's file was on
  it), ``H5Dcreate2`` with a type of the recorded class and size (opaque
  of the size for compound and other classes), dims and max dims, the
  program's own layout, chunk dims and filters (deflate, shuffle,
  fletcher32, others by id), groups created as the dataset's path needs;
  ``H5Dwrite``/``H5Dread`` on the recorded file selection (a regular
  hyperslab exactly; an irregular one or points approximated by as many
  elements in its bounding box, said in the output) with a collective
  transfer list where the program asked for one; ``H5Dset_extent``,
  attributes, ``H5Fflush``, and ``H5Dclose``/``H5Aclose``/``H5Fclose``
  where the program closed them.
- MPI-IO through mpi4py: ``MPI.File.Open`` with the program's hints, its
  views (a contiguous etype/filetype, or, for a non-contiguous filetype, one
  block of its size per extent, said in the output), every write and read form
  by name (non-blocking ones waited for at once), sync, set_size,
  preallocate, close.
- POSIX through ``os``: open, write, pwrite, read, pread, their vectored forms
  (writev, pwritev, readv, preadv: the recorded bytes split evenly over the
  recorded number of buffers), fsync, fdatasync, ftruncate, close (``write``,
  ``writev``, ``read`` and ``readv`` at the recorded file position: ``lseek`` is
  not traced, so the replay seeks there first).

Data is a fixed byte pattern, one buffer per size, and reads land in one zeroed buffer per size: both mapped
outside the C heap (``mmap``), as a program's large arrays are, and made once. The C library's allocator then
serves HDF5's and MPI-IO's own buffers (type conversion, data sieving, collective buffering) from a heap that grows
and is trimmed as the program's does; that growth (page faults) and trimming are part of what a configuration
costs (experiments/results/kernels-cans-allocator.txt). Paths with ``{workdir}``
go under ``--workdir``; files the program wrote elsewhere go under
``DIR/outside/`` (their absolute path below it), files it read elsewhere are
read where they are. Failed calls and calls on handles the trace never saw
opened are not replayed (counted in the output).

``--compute``: the computation between calls (``gap_s``): ``none`` (default),
``recorded`` (slept), ``scale=X`` (X times the recorded gap). ``--steps K``
replays the first K of the N repetitions of each repeated block; ``scale``
in the output is the traced bytes over the replayed bytes (all ranks), by
which a replay's byte counts are multiplied to stand for the program's.

Rank 0 prints one JSON line at the end: ``events``, ``bytes`` per level and
direction (the replay's outermost calls), ``calls`` per op, ``steps`` (K and
each block's N), ``scale``, ``compute``, ``compute_s`` (the slowest rank's
slept seconds), ``not_replayed`` and ``approximated``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import mmap
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from iobo.errors import ConfigError, KernelError
from iobo.replay._model import Trace, event_bytes, opens_for_writing
from iobo.replay.hdf5_calls import (ACC_RDONLY, ACC_TRUNC, COMPACT, DEFAULT, FLOAT, INTEGER, MPIO_COLLECTIVE, SCALAR,
                                    SCOPE_LOCAL, SELECT_SET, UNLIMITED, dims_array, hdf5)

LEVELS = ("hdf5", "mpiio", "posix")
OPENED = {"H5Fcreate": "file", "H5Fopen": "file", "H5Dcreate": "dset", "H5Dopen": "dset", "H5Acreate": "attr",
          "MPI_File_open": "fh", "open": "fd"}
"""The kind of object each open makes (the event's symbol for it is new, not one to look up)."""
OUTSIDE = "outside"
"""The directory, under --workdir, of the files the program wrote outside its own output directory."""
REGULAR_SELECTIONS = ("all", "none", "hyperslab")
"""The selections replayed exactly; any other kind (blocks, points) is approximated by points (with numpy)."""
PATTERN = bytes(range(251))
"""The synthetic data: byte i of every buffer is i % 251."""


def level_of(op: str) -> str:
    """The level an op belongs to: ``hdf5`` (H5*), ``mpiio`` (MPI_File_*) or ``posix``."""
    return "hdf5" if op.startswith("H5") else "mpiio" if op.startswith("MPI_File_") else "posix"


def direction_of(op: str) -> str | None:
    """``write``, ``read`` or None for an op that moves no data (dataset reads and writes, not attributes)."""
    if op in ("H5Awrite", "H5Aread"):
        return None
    name = op[len("MPI_File_"):] if op.startswith("MPI_File_") else op
    if "write" in name.lower():
        return "write"
    return "read" if "read" in name.lower() else None


def approximated_selection(event: dict[str, Any]) -> bool:
    """Whether an HDF5 transfer's file or memory selection is irregular (blocks or points): replayed as points."""
    selections = [event.get("sel"), (event.get("mem") or {}).get("sel")]
    return any(sel and sel.get("kind") not in REGULAR_SELECTIONS for sel in selections)


def address(view: memoryview) -> ctypes.c_void_p:
    """The address of a writable buffer (one of the replay's, alive as long as the replay)."""
    return ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(view)))


def compute_factor(text: str) -> float:
    """The --compute option as a factor on the recorded gaps: none 0, recorded 1, scale=X X."""
    if text == "none":
        return 0.0
    if text == "recorded":
        return 1.0
    if text.startswith("scale="):
        try:
            factor = float(text[len("scale="):])
        except ValueError:
            factor = -1.0
        if factor >= 0:
            return factor
    raise argparse.ArgumentTypeError(f"--compute must be none, recorded or scale=X with X >= 0; got {text!r}")


AWAIT_FILE_S = 30.0
"""How long a rank waits for a file it opens without creating it to appear (another rank creates it)."""


class Replayer:
    """One rank's replay: the open objects by symbol, the buffers, and what was done."""

    def __init__(self, comm, workdir: Path, program_workdir: str | None) -> None:
        from mpi4py import MPI

        self.MPI, self.comm, self.workdir, self.program_workdir = MPI, comm, workdir, program_workdir
        self.objects: dict[str, dict[int, Any]] = {k: {} for k in ("file", "dset", "attr", "fh", "fd")}
        self.buffers: dict[int, memoryview] = {}  # the data written, by size
        self.landings: dict[int, memoryview] = {}  # where reads land, by size
        self.libc = ctypes.CDLL(None, use_errno=True)  # read and pread into a landing (os.read allocates)
        for call in (self.libc.read, self.libc.pread):
            call.restype = ctypes.c_ssize_t
        self.bytes = {level: {"write": 0, "read": 0} for level in LEVELS}
        self.calls: Counter = Counter()
        self.not_replayed: Counter = Counter()
        self.approximated: list[str] = []
        self.types: list = []  # MPI datatypes made for views, freed at the end
        self.h5 = None  # the HDF5 C API (hdf5_calls.hdf5()), opened by load_for or the first HDF5 event

    def load_for(self, events: list[dict[str, Any]]) -> None:
        """Load what ``events`` need and only that, before the replay starts (a library loaded or a module imported
        during the replay would be counted in the I/O time): the HDF5 C API for HDF5 calls, numpy for irregular
        selections (their points), the MPI library's datatype constructors for MPI-IO views."""
        if any(event["op"].startswith("H5") for event in events):
            self.h5 = hdf5()
        if any(approximated_selection(event) for event in events):
            import numpy  # noqa: F401
        if any(event["op"] == "MPI_File_set_view" for event in events):
            from iobo.stack.libraries import mpi_library

            mpi_library()

    # -- helpers ---------------------------------------------------------------------------------------------
    def note(self, text: str) -> None:
        if text not in self.approximated:
            self.approximated.append(text)

    def buffer(self, size: int) -> memoryview:
        """The byte pattern of ``size`` bytes (at least 1) to write, mapped outside the heap, made once per size."""
        if size not in self.buffers:
            block = mmap.mmap(-1, max(size, 1))
            filled = min(len(PATTERN), len(block))
            block[:filled] = PATTERN[:filled]
            while filled < len(block):  # doubling: each copy starts at a multiple of the pattern's length
                step = min(filled, len(block) - filled)
                block[filled:filled + step] = block[:step]
                filled += step
            self.buffers[size] = memoryview(block)
        return self.buffers[size]

    def landing(self, size: int) -> memoryview:
        """A buffer of ``size`` bytes (at least 1) to read into, mapped outside the heap, made once per size."""
        if size not in self.landings:
            self.landings[size] = memoryview(mmap.mmap(-1, max(size, 1)))
        return self.landings[size]

    def communicator(self, procs: int | None):
        """The communicator of an open by ``procs`` processes: all ranks, or this one alone."""
        if procs in (None, self.comm.size):
            return self.comm
        if procs == 1:
            return self.MPI.COMM_SELF
        raise KernelError(f"the trace opens a file on a communicator of {procs} processes, neither all "
                          f"{self.comm.size} ranks nor one; the replay cannot tell which ranks formed it")

    def path(self, event: dict[str, Any]) -> str:
        """Where the replay opens the event's file: under --workdir, or under DIR/outside/ for a file the program
        wrote elsewhere, or where it is for one it read elsewhere."""
        path = event.get("path") or event["name"]
        if not os.path.isabs(path) or path.startswith(str(self.workdir) + os.sep):
            target = path
        elif opens_for_writing(event):
            target = str(self.workdir / OUTSIDE / path.lstrip(os.sep))
            self.note(f"files the program wrote outside its output directory are written under {self.workdir / OUTSIDE}")
        else:
            return path
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        return target

    # -- the replay ------------------------------------------------------------------------------------------
    def replay(self, event: dict[str, Any]) -> None:
        op = event["op"]
        if self.h5 is None and op.startswith("H5"):
            self.h5 = hdf5()
        handler = getattr(self, "_" + op.replace("MPI_File_", "mpi_"), None)
        if not event.get("ok", True):
            self.not_replayed["failed in the program"] += 1
            return
        for kind in ("file", "dset", "attr", "fh", "fd"):  # the objects the call uses must be open
            if kind in event and kind != OPENED.get(op) and event[kind] not in self.objects[kind]:
                self.not_replayed["on a handle the trace never saw opened"] += 1
                return
        if handler is None and op.startswith("MPI_File_") and direction_of(op):
            handler = self._mpi_transfer
        if handler is None:
            self.not_replayed[f"{op} (not replayed by this version)"] += 1
            return
        handler(event)
        self.calls[op] += 1
        direction = direction_of(op)
        if direction:
            self.bytes[level_of(op)][direction] += event_bytes(event)

    # HDF5 files
    def _fapl(self, event) -> int:
        h5 = self.h5
        fapl = h5.H5Pcreate(h5.list_class("file_access"))
        if event.get("mpio"):
            info = self.MPI.Info.Create()
            try:
                h5.H5Pset_fapl_mpio(ctypes.c_int64(fapl), self.mpi_handle(self.communicator(event.get("procs"))),
                                    self.mpi_handle(info))
            finally:
                info.Free()
        return fapl

    def mpi_handle(self, obj):
        """An mpi4py object's C handle as ctypes passes it (MPICH: an int; Open MPI: a pointer)."""
        return (ctypes.c_uint32 if self.MPI._sizeof(type(obj)) == 4 else ctypes.c_void_p)(obj.handle)

    def _open_file(self, event, create: bool) -> None:
        h5, fapl = self.h5, self._fapl(event)
        path = os.fsencode(self.path(event))
        try:
            self.objects["file"][event["file"]] = (
                h5.H5Fcreate(path, event.get("flags", ACC_TRUNC), DEFAULT, fapl) if create
                else h5.H5Fopen(path, event.get("flags", ACC_RDONLY), fapl))
        finally:
            h5.H5Pclose(fapl)

    def _H5Fcreate(self, event):
        self._open_file(event, create=True)

    def _H5Fopen(self, event):
        self.await_file(self.path(event))
        self._open_file(event, create=False)

    def _H5Fclose(self, event):
        self.h5.H5Fclose(self.objects["file"].pop(event["file"]))

    def _H5Fflush(self, event):
        target = self.objects["dset"].get(event["dset"]) if "dset" in event else self.objects["file"].get(event["file"])
        self.h5.H5Fflush(target, SCOPE_LOCAL)

    # HDF5 datasets and attributes
    def _type(self, record: dict[str, Any]) -> int:
        """A new HDF5 type of the recorded class and size (the caller closes it)."""
        kind = record["class"]
        type_id, exact = self.h5.type_of(kind, record["size"], record.get("signed", True))
        if not exact:
            self.note(f"{kind} types are replayed as opaque types of their size")
        return type_id

    def _dcpl(self, event) -> int:
        h5 = self.h5
        dcpl = h5.H5Pcreate(h5.list_class("dataset_create"))
        if event.get("layout") == "chunked" and event.get("chunk"):
            h5.H5Pset_chunk(dcpl, len(event["chunk"]), dims_array(event["chunk"]))
        elif event.get("layout") == "compact":
            h5.H5Pset_layout(dcpl, COMPACT)
        for item in event.get("filters") or []:
            values = tuple(item.get("values") or ())
            if item["id"] == 1:
                h5.H5Pset_deflate(dcpl, values[0] if values else 6)
            elif item["id"] == 2:
                h5.H5Pset_shuffle(dcpl)
            elif item["id"] == 3:
                h5.H5Pset_fletcher32(dcpl)
            else:
                h5.H5Pset_filter(dcpl, item["id"], 0, len(values), (ctypes.c_uint * len(values))(*values))
        return dcpl

    def _H5Dcreate(self, event):
        h5 = self.h5
        file = self.objects["file"][event["file"]]
        dims = tuple(event["dims"])
        maxdims = tuple(UNLIMITED if m < 0 else m for m in event["maxdims"]) if event.get("maxdims") else None
        space = h5.simple_space(dims, maxdims) if dims else h5.H5Screate(SCALAR)
        type_id, dcpl = self._type(event["type"]), self._dcpl(event)
        name = event.get("name")
        try:
            if name is None:
                dset = h5.H5Dcreate_anon(file, type_id, space, dcpl, DEFAULT)
            else:
                lcpl = h5.H5Pcreate(h5.list_class("link_create"))
                try:
                    h5.H5Pset_create_intermediate_group(lcpl, 1)
                    dset = h5.H5Dcreate2(file, name.encode(), type_id, space, lcpl, dcpl, DEFAULT)
                finally:
                    h5.H5Pclose(lcpl)
        finally:
            h5.H5Pclose(dcpl)
            h5.H5Tclose(type_id)
            h5.H5Sclose(space)
        self.objects["dset"][event["dset"]] = dset

    def _H5Dopen(self, event):
        self.objects["dset"][event["dset"]] = self.h5.H5Dopen2(self.objects["file"][event["file"]],
                                                                event["name"].encode(), DEFAULT)

    def _H5Dset_extent(self, event):
        self.h5.H5Dset_extent(self.objects["dset"][event["dset"]], dims_array(event["dims"]))

    def _H5Dclose(self, event):
        self.h5.H5Dclose(self.objects["dset"].pop(event["dset"]))

    def _select(self, space: int, selection: dict[str, Any]) -> None:
        """Select the recorded file selection in ``space``."""
        h5, kind = self.h5, selection["kind"]
        if kind == "all":
            h5.H5Sselect_all(space)
        elif kind == "none":
            h5.H5Sselect_none(space)
        elif kind == "hyperslab":
            rank = len(selection["start"])
            h5.H5Sselect_hyperslab(space, SELECT_SET, dims_array(selection["start"]),
                                   dims_array(selection.get("stride") or [1] * rank), dims_array(selection["count"]),
                                   dims_array(selection.get("block") or [1] * rank))
        else:  # blocks or points: as many elements, in C order, from the bounding box's low corner
            import numpy as np  # only for these approximated selections (imported by load_for)

            low, high = (np.array(corner) for corner in selection["bbox"])
            shape = tuple(int(d) for d in high - low + 1)
            flat = np.arange(int(selection["elements"]))
            coords = np.ascontiguousarray(np.stack(np.unravel_index(flat, shape), axis=1) + low, dtype=np.uint64)
            h5.H5Sselect_elements(space, SELECT_SET, len(coords),
                                  coords.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)))
            self.note(f"{kind} selections are replayed as as many points in their bounding box")

    def _memory_type(self, mtype: int, size: int) -> int:
        """The program's memory type when its element ``size`` differs from the file type's: a little-endian type
        of that size and the file type's class (integer or float); else the file type ``mtype`` itself."""
        h5 = self.h5
        cls = h5.H5Tget_class(mtype)
        self.note("writes whose memory type differs in size from the file's use a memory type of that size")
        if cls in (INTEGER, FLOAT) and size in (2, 4, 8):
            other, _ = h5.type_of("float" if cls == FLOAT else "integer", size)
            h5.H5Tclose(mtype)
            return other
        return mtype

    def _dataset_io(self, event, write: bool):
        h5 = self.h5
        dset = self.objects["dset"][event["dset"]]
        fspace = h5.H5Dget_space(dset)
        mtype = h5.H5Dget_type(dset)
        mspace = None
        try:
            self._select(fspace, event["sel"])
            elements = h5.H5Sget_select_npoints(fspace)
            file_size = h5.H5Tget_size(mtype)
            size = event.get("mem_size") or (event["bytes"] // elements if elements else file_size)
            if elements and size != file_size:  # the program's memory type differs from the file's
                mtype = self._memory_type(mtype, size)
            memory = event.get("mem")
            if memory and memory["dims"] and all(memory["dims"]):  # the program's buffer and the part of it moved
                mspace = h5.simple_space(memory["dims"])
                self._select(mspace, memory["sel"])
                size = math.prod(memory["dims"]) * h5.H5Tget_size(mtype)
            else:
                mspace = h5.simple_space((max(elements, 1),))
                if not elements:
                    h5.H5Sselect_none(mspace)
                size = max(elements, 1) * h5.H5Tget_size(mtype)
            dxpl = DEFAULT  # the program passed HDF5's default list ("default")
            if event.get("xfer") in ("collective", "independent"):
                dxpl = h5.H5Pcreate(h5.list_class("dataset_xfer"))
                if event["xfer"] == "collective":
                    h5.H5Pset_dxpl_mpio(dxpl, MPIO_COLLECTIVE)
            try:
                if write:
                    h5.H5Dwrite(dset, mtype, mspace, fspace, dxpl, self.c_buffer(size))
                else:
                    h5.H5Dread(dset, mtype, mspace, fspace, dxpl, address(self.landing(size)))
            finally:
                if dxpl != DEFAULT:
                    h5.H5Pclose(dxpl)
        finally:
            for close, obj in ((h5.H5Sclose, mspace), (h5.H5Sclose, fspace), (h5.H5Tclose, mtype)):
                if obj is not None:
                    close(obj)

    def c_buffer(self, size: int):
        """:meth:`buffer` as a C pointer (it stays alive in :attr:`buffers`)."""
        return address(self.buffer(size))

    def _H5Dwrite(self, event):
        self._dataset_io(event, True)

    def _H5Dread(self, event):
        self._dataset_io(event, False)

    def _H5Acreate(self, event):
        h5 = self.h5
        on = self.objects["dset"][event["dset"]] if "dset" in event else self.objects["file"][event["file"]]
        if event.get("on_group"):
            self.note("attributes of groups are replayed on the file's root group")
        dims = tuple(event.get("dims") or ())
        space = h5.simple_space(dims) if dims else h5.H5Screate(SCALAR)
        type_id = self._type(event["type"])
        try:
            self.objects["attr"][event["attr"]] = h5.H5Acreate2(on, event["name"].encode(), type_id, space, DEFAULT,
                                                                DEFAULT)
        finally:
            h5.H5Tclose(type_id)
            h5.H5Sclose(space)

    def _H5Awrite(self, event):
        """Zeros of the attribute's own type and shape."""
        h5 = self.h5
        attr = self.objects["attr"][event["attr"]]
        type_id, space = h5.H5Aget_type(attr), h5.H5Aget_space(attr)
        try:
            size = h5.H5Sget_simple_extent_npoints(space) * h5.H5Tget_size(type_id)
            h5.H5Awrite(attr, type_id, self.c_buffer(size))
        finally:
            h5.H5Tclose(type_id)
            h5.H5Sclose(space)

    def _H5Aclose(self, event):
        self.h5.H5Aclose(self.objects["attr"].pop(event["attr"]))

    # MPI-IO
    def _mpi_open(self, event):
        info = self.MPI.Info.Create()
        for key, value in (event.get("hints") or {}).items():
            info.Set(key, str(value))
        try:
            self.objects["fh"][event["fh"]] = self.MPI.File.Open(self.communicator(event.get("procs")),
                                                                 self.path(event), event["amode"], info)
        finally:
            info.Free()

    def _datatype(self, function: str, *args):
        """A committed MPI datatype made by C ``function`` through ctypes (mpi4py's large-count constructors give
        types MPICH 4.0.2's ROMIO cannot flatten in a view: iobo.stack.mpiio.byte_subarray)."""
        from iobo.stack.libraries import mpi_library  # only for views (loaded by load_for)

        MPI = self.MPI
        handle_type = ctypes.c_uint32 if MPI._sizeof(MPI.Datatype) == 4 else ctypes.c_void_p
        new = handle_type()
        converted = [handle_type(a.handle) if isinstance(a, MPI.Datatype) else a for a in args]
        status = getattr(mpi_library(), function)(*converted, ctypes.byref(new))
        if status != 0:
            raise KernelError(f"{function} failed (error {status}) for {args}")
        datatype = MPI.Datatype.fromhandle(new.value)
        datatype.Commit()
        self.types.append(datatype)
        return datatype

    def _described_type(self, described: dict[str, Any]):
        """The datatype the shim described (its constructors, ``filetype`` of a view), built of bytes; None when a
        constructor in it is not one the description holds ("other")."""
        MPI, kind = self.MPI, described["combiner"]
        if kind == "named":
            return MPI.BYTE if described["size"] == 1 else self._datatype(
                "MPI_Type_contiguous", ctypes.c_int(described["size"]), MPI.BYTE)
        old = self._described_type(described["old"]) if "old" in described else None
        if old is None:
            return None
        c_int, c_aint = ctypes.c_int, ctypes.c_ssize_t
        if kind == "contiguous":
            return self._datatype("MPI_Type_contiguous", c_int(described["count"]), old)
        if kind == "vector":
            return self._datatype("MPI_Type_vector", c_int(described["count"]), c_int(described["blocklength"]),
                                  c_int(described["stride"]), old)
        if kind == "hvector":
            return self._datatype("MPI_Type_create_hvector", c_int(described["count"]),
                                  c_int(described["blocklength"]), c_aint(described["stride_bytes"]), old)
        if kind == "subarray":
            n = len(described["sizes"])
            arrays = [(c_int * n)(*described[key]) for key in ("sizes", "subsizes", "starts")]
            order = MPI.ORDER_FORTRAN if described["order"] == "fortran" else MPI.ORDER_C
            return self._datatype("MPI_Type_create_subarray", c_int(n), *arrays, c_int(order), old)
        if kind == "resized":
            return self._datatype("MPI_Type_create_resized", old, c_aint(described["lb"]),
                                  c_aint(described["extent"]))
        return None

    def _mpi_set_view(self, event):
        MPI = self.MPI
        etype_size = event.get("etype_size") or 1
        etype = MPI.BYTE if etype_size == 1 else self._datatype("MPI_Type_contiguous", ctypes.c_int(etype_size),
                                                                 MPI.BYTE)
        size, extent = event.get("filetype_size") or etype_size, event.get("filetype_extent") or etype_size
        described = self._described_type(event["filetype"]) if "filetype" in event else None
        if described is not None:  # the program's own filetype, rebuilt of bytes
            filetype = described
        elif event.get("contiguous", size == extent):
            filetype = etype if size == etype_size else self._datatype(
                "MPI_Type_contiguous", ctypes.c_int(size // etype_size), etype)
        else:
            block = self._datatype("MPI_Type_contiguous", ctypes.c_int(size // etype_size), etype)
            filetype = self._datatype("MPI_Type_create_resized", block, ctypes.c_ssize_t(0), ctypes.c_ssize_t(extent))
            self.note("non-contiguous MPI-IO file views are replayed as one block of the filetype's size per extent")
        self.objects["fh"][event["fh"]].Set_view(event.get("disp") or 0, etype, filetype)

    def _mpi_transfer(self, event):
        op = event["op"][len("MPI_File_"):].removesuffix("_c")  # an MPI-4 large-count twin: mpi4py picks it itself
        method = getattr(self.objects["fh"][event["fh"]], op[0].upper() + op[1:])
        size = event.get("bytes") or 0
        buffer = self.buffer(size) if direction_of(event["op"]) == "write" else self.landing(size)
        message = [buffer, size, self.MPI.BYTE]
        result = method(event["offset"], message) if event.get("offset") is not None else method(message)
        if op.startswith("i"):
            result.Wait()
            self.note("non-blocking MPI-IO calls are waited for at once")

    def _mpi_sync(self, event):
        self.objects["fh"][event["fh"]].Sync()

    def _mpi_set_size(self, event):
        self.objects["fh"][event["fh"]].Set_size(event["size"])

    def _mpi_preallocate(self, event):
        self.objects["fh"][event["fh"]].Preallocate(event["size"])

    def _mpi_close(self, event):
        self.objects["fh"].pop(event["fh"]).Close()

    # POSIX
    def _open(self, event):
        path = self.path(event)
        if not event["flags"] & os.O_CREAT:
            self.await_file(path)
        self.objects["fd"][event["fd"]] = os.open(path, event["flags"], 0o644)

    def await_file(self, path: str | os.PathLike) -> None:
        """Wait (at most :data:`AWAIT_FILE_S`) for a file this rank opens without creating it: another rank may
        create it first in the program, after a barrier or a message the trace does not hold (MACSio's rank 0
        creates its log, the others open it after an MPI_Barrier); the open then fails as it would have."""
        deadline = time.monotonic() + AWAIT_FILE_S
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.001)

    def _position(self, event) -> int:
        """The event's descriptor, moved to the recorded position (the program's lseek calls are not traced)."""
        fd = self.objects["fd"][event["fd"]]
        if event.get("offset") is not None:
            os.lseek(fd, event["offset"], os.SEEK_SET)
        return fd

    def _write(self, event):
        os.write(self._position(event), self.buffer(event["bytes"])[:event["bytes"]])

    def _pwrite(self, event):
        os.pwrite(self.objects["fd"][event["fd"]], self.buffer(event["bytes"])[:event["bytes"]], event["offset"])

    def _read(self, event):  # as many bytes asked as the program asked (a read at the file's end returns fewer)
        size = event.get("count", event["bytes"])
        self._posix_read(self.libc.read, self._position(event), size)

    def _pread(self, event):
        size = event.get("count", event["bytes"])
        self._posix_read(self.libc.pread, self.objects["fd"][event["fd"]], size, ctypes.c_int64(event["offset"]))

    def _posix_read(self, call, fd: int, size: int, *offset) -> None:
        """``read``/``pread`` of the C library into :meth:`landing` (``os.read`` would allocate ``size`` bytes)."""
        if call(fd, address(self.landing(size)), ctypes.c_size_t(size), *offset) < 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))

    def _segments(self, event, size: int, writing: bool) -> list:
        """A vectored call's buffers: ``size`` bytes split evenly over the recorded ``segments`` (at least 1)."""
        count = max(int(event.get("segments") or 1), 1)
        sizes = [size // count + (1 if i < size % count else 0) for i in range(count)]
        return [self.buffer(n)[:n] if writing else self.landing(n)[:n] for n in sizes]

    def _writev(self, event):
        os.writev(self._position(event), self._segments(event, event["bytes"], writing=True))

    def _pwritev(self, event):
        os.pwritev(self.objects["fd"][event["fd"]], self._segments(event, event["bytes"], writing=True),
                   event["offset"])

    def _readv(self, event):
        os.readv(self._position(event), self._segments(event, event.get("count", event["bytes"]), writing=False))

    def _preadv(self, event):
        os.preadv(self.objects["fd"][event["fd"]], self._segments(event, event.get("count", event["bytes"]),
                                                                  writing=False), event["offset"])

    def _fsync(self, event):
        os.fsync(self.objects["fd"][event["fd"]])

    def _fdatasync(self, event):
        os.fdatasync(self.objects["fd"][event["fd"]])

    def _ftruncate(self, event):
        os.ftruncate(self.objects["fd"][event["fd"]], event["size"])

    def _close(self, event):
        os.close(self.objects["fd"].pop(event["fd"]))

    def finish(self) -> None:
        for datatype in self.types:
            datatype.Free()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m iobo.replay.run",
                                     description="Replay a program's I/O trace (iobo.replay) under MPI.")
    parser.add_argument("trace", help="the trace file (iobo.replay.Trace.save)")
    parser.add_argument("--workdir", required=True, help="the directory that stands for {workdir}")
    parser.add_argument("--compute", type=compute_factor, default=0.0, metavar="none|recorded|scale=X",
                        help="the computation between calls: skipped (none, the default), slept as recorded, or "
                             "X times the recorded seconds")
    parser.add_argument("--steps", type=int, default=None, metavar="K",
                        help="replay the first K of the N repetitions of each repeated block")
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be at least 1; got {args.steps}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.rank
    try:
        trace = Trace.load(args.trace)
        if comm.size != trace.ranks:
            raise ConfigError(f"the trace was recorded on {trace.ranks} ranks and must be replayed on as many; "
                              f"this run has {comm.size}: mpiexec -n {trace.ranks} python -m iobo.replay.run ...")
        workdir = Path(args.workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        events = trace.expand(rank, steps=args.steps, workdir=workdir)
        traced = sum(event_bytes(e) for e in trace.expand(rank)) if args.steps else None
        replayer = Replayer(comm, workdir, trace.workdir)
        # every rank starts together, as after the program's MPI_Init: the ranks' start-up skew (interpreter,
        # imports, the HDF5 library opened) would otherwise be waited out inside the first collective open, and
        # counted as I/O time
        replayer.load_for(events)
        comm.Barrier()
        slept, started = 0.0, time.monotonic()
        for event in events:
            pause = event.get("gap_s", 0.0) * args.compute
            if pause > 0:
                time.sleep(pause)
                slept += pause
            replayer.replay(event)
        tail = (trace.tail_gap_s[rank] if rank < len(trace.tail_gap_s) else 0.0) * args.compute
        if tail > 0:
            time.sleep(tail)
            slept += tail
        replayer.finish()
    except Exception as exc:  # one rank failing must end every rank, not leave them in a collective call
        print(f"iobo.replay.run: error on rank {rank}: {exc}", file=sys.stderr, flush=True)
        comm.Abort(1)
        return 1
    replayed = sum(event_bytes(e) for e in events)
    mine = {"events": len(events), "bytes": replayer.bytes, "calls": dict(replayer.calls),
            "not_replayed": dict(replayer.not_replayed), "approximated": replayer.approximated,
            "traced": traced if traced is not None else replayed, "replayed": replayed, "slept": slept,
            "repeats": trace.repeats(rank)}
    everyone = comm.gather(mine, root=0)
    if rank == 0:
        total_traced, total_replayed = sum(r["traced"] for r in everyone), sum(r["replayed"] for r in everyone)
        out = {
            "events": sum(r["events"] for r in everyone),
            "bytes": {level: {d: sum(r["bytes"][level][d] for r in everyone) for d in ("write", "read")}
                      for level in LEVELS},
            "calls": dict(sum((Counter(r["calls"]) for r in everyone), Counter())),
            "steps": {"replayed": args.steps, "of": everyone[0]["repeats"]},
            "scale": total_traced / total_replayed if total_replayed else 1.0,
            "compute": args.compute,
            "compute_s": max(r["slept"] for r in everyone),
            "seconds": time.monotonic() - started,
            "not_replayed": dict(sum((Counter(r["not_replayed"]) for r in everyone), Counter())),
            "approximated": sorted({a for r in everyone for a in r["approximated"]}),
        }
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
