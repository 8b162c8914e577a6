"""``iobo shim build [--mpicc CC] [--h5pcc H5PCC | --hdf5 PREFIX]`` and ``iobo shim info``: the preload shim for
the site's MPI and HDF5 (:mod:`iobo.shim`).

``build`` compiles the shim's sources (carried by the package) with the MPI
compiler and HDF5 named, or the first found, into the per-user cache and
prints where it is and what it is built against; ``info`` lists the shims of
the cache and which one ``iobo tune --command`` and ``iobo run`` use here.
"""

from __future__ import annotations

import sys

from iobo import shim


def add_parser(sub) -> None:
    p = sub.add_parser("shim", help="build the preload shim against this site's MPI and HDF5; list the built ones")
    actions = p.add_subparsers(dest="action", required=True)
    b = actions.add_parser("build", help=f"compile the shim into {shim.cache_dir()}/<key>/")
    b.add_argument("--mpicc", help=f"MPI C compiler wrapper (default: the first of {', '.join(shim.MPICC_CANDIDATES)} "
                                   f"on PATH; with --h5pcc: the one it wraps)")
    hdf5 = b.add_mutually_exclusive_group()
    hdf5.add_argument("--h5pcc", help="HDF5's compiler wrapper, asked for its flags (h5pcc -shlib -show)")
    hdf5.add_argument("--hdf5", metavar="PREFIX", help="HDF5 installation prefix (PREFIX/include, PREFIX/lib)")
    actions.add_parser("info", help="the built shims: MPI and HDF5 of each, and which one is used here")


def run(args) -> int:
    if args.action == "build":
        info = shim.build(args.mpicc, args.h5pcc, args.hdf5)
        print(info["library"])
        _describe(info, sys.stderr)
        return 0
    from iobo import adapters
    from iobo.errors import ConfigError

    found = shim.built()
    if not found:
        print(f"no shim built in {shim.cache_dir()}; build one with: {shim.BUILD_COMMAND}")
    for info in found:
        print(info["library"] + ("" if info["current"] else "  (built from other sources: rebuild it)"))
        _describe(info, sys.stdout)
    try:
        print(f"used here (no program named): {adapters.preload_library()}")
    except ConfigError as exc:
        print(f"used here: none ({exc})")
    return 0


def _describe(info, out) -> None:
    print(f"  MPI:  {info['mpi']['version']}, {info['mpi']['path']}\n"
          f"  HDF5: {info['hdf5']['version']}, {info['hdf5']['path']}\n"
          f"  built {info['built']} with {info['compiler']} and {info['hdf5_from']}", file=out)
