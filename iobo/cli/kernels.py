"""``iobo kernels``: the registered I/O kernels."""

from __future__ import annotations


def add_parser(sub) -> None:
    sub.add_parser("kernels", help="list the registered kernels")


def run(args) -> int:
    from iobo import kernels

    for name in kernels.names():
        print(f"{name:10s} {kernels.get(name).doc}")
    return 0
