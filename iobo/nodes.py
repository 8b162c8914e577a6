"""Per-node figures of one run: which hosts its ranks ran on, the bytes each host moved and which hosts
aggregated for collective buffering.

A trial's attrs name its hosts in one of two shapes: a built-in kernel's own report, ``hosts: {host: [rank,
...]}`` (``MPI_Get_processor_name``), or the preload shim's, ``io.hosts: {host: {"ranks": [...],
"bytes_written": B, "bytes_read": B}}`` (``gethostname``, bytes at the run's top level). The aggregators come
from ROMIO's ``romio_aggregator_list`` as ``MPI_File_get_info`` read it back (trial attr ``hints``): the ranks
that did collective buffering, mapped to their hosts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NodeShare:
    """One host's part of a run: its ranks, the bytes they wrote and read (None: not measured per host) and
    the ranks of it ROMIO chose as collective-buffering aggregators."""

    host: str
    ranks: tuple[int, ...]
    bytes_written: int | None
    bytes_read: int | None
    aggregators: tuple[int, ...]


def node_shares(attrs: Mapping[str, Any]) -> list[NodeShare]:
    """The run's hosts in name order, from a trial's attrs; empty when the run did not name them."""
    kernel_hosts = attrs.get("hosts") or {}
    shim_hosts = (attrs.get("io") or {}).get("hosts") or {}
    aggregators = {int(rank) for rank in str((attrs.get("hints") or {}).get("romio_aggregator_list", "")).split()}
    shares = []
    for host, entry in sorted((shim_hosts or kernel_hosts).items()):
        if not host:
            continue
        measured = isinstance(entry, Mapping)
        ranks = tuple(entry["ranks"] if measured else entry)
        shares.append(NodeShare(host, ranks, entry.get("bytes_written") if measured else None,
                                entry.get("bytes_read") if measured else None,
                                tuple(rank for rank in ranks if rank in aggregators)))
    return shares


def describe_nodes(attrs: Mapping[str, Any]) -> str | None:
    """One line for a run that spanned more than one host, e.g. ``3 hosts: node1 rank 0 (wrote 1.0 MB,
    aggregator 0); ...``; None for a run on one host or one that did not name its hosts."""
    shares = node_shares(attrs)
    if len(shares) < 2:
        return None
    parts = []
    for share in shares:
        notes = [f"wrote {share.bytes_written / 1e6:.1f} MB"] if share.bytes_written else []
        notes += [f"read {share.bytes_read / 1e6:.1f} MB"] if share.bytes_read else []
        if share.aggregators:
            notes.append(f"aggregator{'s' if len(share.aggregators) > 1 else ''} "
                         f"{' '.join(map(str, share.aggregators))}")
        ranks = " ".join(map(str, share.ranks))
        parts.append(f"{share.host} rank{'s' if len(share.ranks) > 1 else ''} {ranks}"
                     + (f" ({', '.join(notes)})" if notes else ""))
    without = [s.host for s in shares if not s.aggregators]
    text = f"{len(shares)} hosts: " + "; ".join(parts)
    if "romio_aggregator_list" in (attrs.get("hints") or {}) and without:
        text += f"; no aggregator on {', '.join(without)}"
    return text
