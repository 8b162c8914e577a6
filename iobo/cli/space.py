"""``iobo space KERNEL``: a kernel's search space, per layer, with defaults."""

from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("space", help="print a kernel's search space")
    p.add_argument("kernel")


def run(args) -> int:
    from iobo import kernels

    print(kernels.get(args.kernel).space().describe())
    return 0
