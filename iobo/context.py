"""A study's context: what was tuned, at what scale, on what, with what I/O.

Two studies of one application at different scales, sizes or file systems
differ in their context, and the context is what says whether an earlier
study's optimum may carry over. It is recorded once per study as the study
attr ``context`` (one dict, :meth:`Context.to_attr`):

- kernel / command / task: what ran (one of them);
- ranks, nodes: the job's MPI ranks and the compute nodes they span (nodes: as
  the first completed trial counts its ranks' hosts, a kernel's own report or
  the shim's for a program; before, the node count the tuner was given, else 1);
- bytes_per_rank: bytes one rank moves in one run (written + read), as the
  first completed trial measured it;
- access_bytes: bytes one rank moves per write (or read) call: the kernel's
  ``transfer_size`` option when it has one (IOR), else its largest
  dataset's bytes / ranks (each rank writes its share of a dataset in one
  call);
- file_layout: ``shared`` (one file for all ranks) or ``per_process``, as the
  system default runs it (the kernel's ``files`` knob at its default);
- fs_type: the file system under the trials' output (the first completed
  trial's);
- characterization: a summary of the application's I/O, from its Darshan
  log when one was given (:func:`iobo.integrations.darshan_rules.summary`),
  else None.

:func:`study_context` reads it back for any study, also one made before
contexts were recorded (from its kernel attrs and first trial).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from iobo import kernels, trials
from iobo.space import format_value

CONTEXT_ATTR = "context"
MEASURED = ("bytes_per_rank", "fs_type")
"""Fields only a completed trial can tell."""


@dataclass(frozen=True)
class Context:
    """See the module docstring; bytes are bytes, None is unknown."""

    ranks: int
    nodes: int = 1
    kernel: str | None = None
    command: str | None = None
    task: str | None = None
    kernel_options: dict[str, Any] | None = None
    bytes_per_rank: int | None = None
    access_bytes: int | None = None
    file_layout: str | None = None
    fs_type: str | None = None
    characterization: dict[str, Any] | None = None

    def to_attr(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_attr(cls, attr: Mapping[str, Any]) -> "Context":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in attr.items() if k in known})

    @property
    def what(self) -> str:
        """The kernel, command or task, as a user names it."""
        return self.kernel or self.command or self.task or "?"

    def describe(self) -> str:
        """One line, e.g. ``vpic on 4 rank(s) (1 node(s)), 64 MiB per rank and run, 16 MiB per call, ...``."""
        parts = [f"{self.what} on {self.ranks} rank(s) ({self.nodes} node(s))"]
        if self.bytes_per_rank is not None:
            parts.append(f"{format_value(self.bytes_per_rank, 'bytes')} per rank and run")
        if self.access_bytes is not None:
            parts.append(f"{format_value(self.access_bytes, 'bytes')} per call")
        if self.file_layout:
            parts.append("one shared file" if self.file_layout == "shared" else "a file per process")
        parts.append(f"on {self.fs_type or 'a file system not seen yet'}")
        text = ", ".join(parts)
        if self.characterization:
            found = self.characterization
            rules = ", ".join(found.get("rules", [])) or "none"
            text += f"; characterised from {found.get('source')} ({found.get('log', '')}), rules fired: {rules}"
        return text


def kernel_context(kernel: "str | kernels.JobSpec", ranks: int, options: Mapping[str, Any],
                   characterization: Mapping[str, Any] | None = None) -> Context:
    """The context of a kernel's (or a command's) study before any trial ran (``bytes_per_rank`` and ``fs_type``
    unknown)."""
    spec = kernels.get(kernel)
    options = spec.resolve_options(options)
    workload = spec.workload(ranks, options)
    if "transfer_size" in options:
        access = int(options["transfer_size"])
    else:
        access = workload.dataset_bytes // ranks if workload.dataset_bytes else None
    default = spec.space().default()
    layout = default.get("files", "shared" if spec.name in kernels.BUILTINS else None)
    what = {"command": spec.template} if spec.kind == "command" else {"kernel": spec.name}
    return Context(ranks=ranks, nodes=workload.nodes or 1, **what, kernel_options=dict(options),
                   access_bytes=access, file_layout=layout,
                   characterization=dict(characterization) if characterization else None)


def record_context(study, context: Context) -> Context:
    """Store ``context`` on ``study``, keeping what the stored one already measured (and its characterisation
    when ``context`` has none). Returns what is stored."""
    stored = study.user_attrs.get(CONTEXT_ATTR)
    if stored:
        old = Context.from_attr(stored)
        keep = {name: getattr(old, name) for name in (*MEASURED, "characterization")
                if getattr(context, name) is None and getattr(old, name) is not None}
        if "fs_type" in keep:  # the nodes were measured by the same run (see _measured)
            keep["nodes"] = old.nodes
        context = replace(context, **keep)
    if context.to_attr() != stored:
        study.set_user_attr(CONTEXT_ATTR, context.to_attr())
    return context


def note_outcome(study, attrs: Mapping[str, Any]) -> None:
    """Fill the stored context's measured fields from a completed run's trial attrs (bytes, fs_type, the nodes
    its ranks ran on), once."""
    stored = study.user_attrs.get(CONTEXT_ATTR)
    if not stored or all(stored.get(name) is not None for name in MEASURED):
        return
    context = _measured(Context.from_attr(stored), attrs)
    if context.to_attr() != stored:
        study.set_user_attr(CONTEXT_ATTR, context.to_attr())


def study_context(study) -> Context | None:
    """The context of any study: the stored one, completed from its first completed tuning trial; for a
    study stored without one, what its attrs and trials tell; None when they tell nothing (not made by iobo)."""
    attrs = study.user_attrs
    if CONTEXT_ATTR in attrs:
        context = Context.from_attr(attrs[CONTEXT_ATTR])
    elif attrs.get("kernel") in kernels.names():
        context = kernel_context(attrs["kernel"], attrs["ranks"], attrs.get("kernel_options", {}))
    elif any(key in attrs for key in ("kernel", "command", "task")):
        context = Context(ranks=attrs.get("ranks", 1), kernel=attrs.get("kernel"), command=attrs.get("command"),
                          task=attrs.get("task"))
    else:
        return None
    if any(getattr(context, name) is None for name in MEASURED):
        first = next(iter(trials.tuning_trials(study)), None)
        if first is not None:
            context = _measured(context, first.user_attrs)
    return context


def _measured(context: Context, attrs: Mapping[str, Any]) -> Context:
    found = {}
    if context.bytes_per_rank is None and attrs.get("bytes"):
        found["bytes_per_rank"] = int(attrs["bytes"]) // context.ranks
    if context.fs_type is None and attrs.get("fs_type"):
        found["fs_type"] = attrs["fs_type"]
        nodes = hosts_ran_on(attrs)
        if nodes:  # measured with the file system, by the same first completed run
            found["nodes"] = nodes
    return replace(context, **found)


def hosts_ran_on(attrs: Mapping[str, Any]) -> int | None:
    """How many hosts a completed run's ranks ran on, from its trial attrs: a kernel's own ``hosts``, or the
    shim's ``io.hosts`` for a program; None when the run did not say."""
    hosts = [host for host in (attrs.get("hosts") or (attrs.get("io") or {}).get("hosts") or {}) if host]
    return len(hosts) or None
