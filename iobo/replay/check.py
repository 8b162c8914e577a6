"""Is a trace's kernel faithful to its program? (``iobo check --trace``, issue 28 item 3)

:func:`check` runs the recorded program (its command line, directory and
ranks, from the trace's metadata) and the kernel (:func:`kernel_spec`) under
the shim:

1. once each with the system default: their I/O signatures side by side
   (:func:`iobo.replay.signature.compare`), judged against :data:`THRESHOLDS`
   (bytes per level within 0.1%, operation counts within 2%: issue 28's
   targets) and the same datasets and layouts;
2. then :data:`SPREAD` configurations (the default first, then the first
   ``configs - 1`` of the others valid in the space), kernel and program
   interleaved, ``repeats`` runs each (the first repeat's default runs are
   step 1's): each configuration's speedup over
   the default on both (median bandwidths, the shim's objective), their
   Spearman rank correlation, and both median wall times (what a kernel
   trial saves).

The result is stored next to the trace (``<trace>.check.json``,
:func:`iobo.replay.record.check_path`); ``iobo tune --trace`` warns when it
is missing, failed or of another recording.

A kernel given as a command (an extracted kernel, ``iobo extract``; issue 29
item 4) gets the same two steps against the program's command
(:func:`check_command`, ``iobo check --command P --kernel-command K``): both
are :func:`check_kernel`'s, for any two command specs. The kernel's signature is
the program's it stands for: a kernel built with ``--reduce-loops k`` does 1 in
k of the I/O its loops repeat, and its counts are estimated back to the
program's (:func:`iobo.extract.run.run_scaled`: one more run per gate that
skipped runs), its bandwidth and wall time taken from the reduced run.

A trace made from a Darshan DXT log (:mod:`iobo.replay.darshan`) has no
program here to run: :func:`check_log` runs its kernel once with the system
default and compares its signature with the log's own counters, at the level
the trace replays (no speedups: nothing to compare them with).
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from iobo.errors import ConfigError, SpaceError
from iobo.replay.darshan import DARSHAN_SOURCE
from iobo.space import KiB, MiB

THRESHOLDS = {"bytes": 0.001, "calls": 0.02}
"""Largest relative error, kernel vs program, of each level's bytes and of its operation counts for a pass."""
SPREAD = (
    ("default", {}),
    ("chunked 1 MiB", {"layout": "chunked", "chunk_size": MiB}),
    ("collective buffering 4 MiB", {"romio_cb_write": "enable", "cb_buffer_size": 4 * MiB}),
    ("aligned 1 MiB over 64 KiB", {"alignment_interval": MiB, "alignment_threshold": 64 * KiB}),
    ("collective transfers", {"transfer_mode": "collective"}),
    ("data sieving off", {"romio_ds_write": "disable"}),
    ("independent writes", {"romio_cb_write": "disable"}),
    ("chunked 4 MiB, collective", {"layout": "chunked", "chunk_size": 4 * MiB, "transfer_mode": "collective"}),
)
"""The configurations a check runs, in order, as changes from the default: deterministic, spread over the layers
(HDF5 layout, ROMIO collective buffering, HDF5 alignment, the transfer mode, data sieving)."""


def configurations(space, count: int) -> list[tuple[str, dict[str, Any]]]:
    """The first ``count`` of :data:`SPREAD` valid in ``space`` (changes on parameters it lacks, or that break
    its constraints, are left out), as (name, full values)."""
    from iobo.config import IOConfig

    if count < 1:
        raise ConfigError(f"a check runs at least the default configuration: configs must be >= 1; got {count}")
    chosen = []
    for name, changes in SPREAD:
        if set(changes) - set(space.names):
            continue
        try:
            config = IOConfig.from_values(changes, space)
        except (ConfigError, SpaceError):
            continue
        chosen.append((name, dict(config.values)))
        if len(chosen) == count:
            break
    return chosen


def failures(rows: list[Mapping[str, Any]]) -> list[str]:
    """The signature rows beyond :data:`THRESHOLDS` (a level's bytes or calls) or a dataset's layout differing."""
    found = []
    for row in rows:
        words = row["what"].split()
        kind = words[-1] if len(words) == 3 and words[0] in ("hdf5", "mpiio", "posix") else None
        if kind in THRESHOLDS and row["error"] is not None and row["error"] > THRESHOLDS[kind]:
            found.append(f"{row['what']}: program {row['program']}, kernel {row['kernel']} "
                         f"({100 * row['error']:.3g}% > {100 * THRESHOLDS[kind]:g}%)")
        elif words[0] == "dataset" and row["error"]:
            found.append(f"{row['what']}: program {row['program']}, kernel {row['kernel']}")
    return found


def check(trace_path: str | os.PathLike, configs: int = 4, repeats: int = 3, workdir: str | os.PathLike | None = None,
          launcher=None, timeout_s: float = 600.0, echo=None) -> dict[str, Any]:
    """Check the kernel of the trace at ``trace_path`` against its program (the module's steps 1 and 2), store the
    result at ``<trace>.check.json`` and return it. ``workdir``: where the kernel's trials write (default: the
    directory the program wrote into, the same file system); ``echo``: called with a line per run."""
    from iobo.replay.record import check_path, kernel_spec, load_trace, program_spec, trace_digest

    trace = load_trace(trace_path)
    if trace.metadata.get("source") == DARSHAN_SOURCE:
        return check_log(trace_path, workdir, launcher, timeout_s, echo)
    ranks = trace.metadata["ranks"]
    result = {
        "trace": str(Path(trace_path).resolve()), "trace_sha256": trace_digest(trace_path),
        **check_kernel(program_spec(trace), kernel_spec(trace_path, ranks=ranks), ranks, configs, repeats,
                       workdir or trace.workdir or trace.metadata["cwd"], launcher, timeout_s, echo),
    }
    check_path(trace_path).write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


def check_command(program, kernel, ranks: int, saved: str | os.PathLike, configs: int = 4, repeats: int = 3,
                  workdir: str | os.PathLike = "iobo-work", launcher=None, timeout_s: float = 600.0,
                  echo=None) -> dict[str, Any]:
    """Check a kernel given as a command (an extracted kernel, ``iobo extract``, or any program meant to do
    ``program``'s I/O with less computation) against the program: the module's steps 1 and 2 on the two
    :class:`iobo.kernels.command.CommandSpec` (each run with its ``{workdir}`` a directory of its own under
    ``workdir``), stored at ``saved`` and returned."""
    result = {"program_command": program.template, "kernel_command": kernel.template,
              **check_kernel(program, kernel, ranks, configs, repeats, workdir, launcher, timeout_s, echo)}
    Path(saved).write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


def check_kernel(program, kernel, ranks: int, configs: int, repeats: int, workdir: str | os.PathLike,
                 launcher=None, timeout_s: float = 600.0, echo=None) -> dict[str, Any]:
    """Steps 1 and 2 of the module for any two command specs (:class:`iobo.kernels.command.CommandSpec`),
    ``program`` and its ``kernel``, on ``ranks`` ranks, their trials under ``workdir``; the result, not stored."""
    from scipy.stats import spearmanr

    from iobo.extract.run import run_scaled
    from iobo.launch import KernelJob, MpiexecLauncher, prepare_workdir, run_kernel
    from iobo.replay.record import ProgramRun
    from iobo.replay.signature import compare, signature

    if repeats < 1:
        raise ConfigError(f"repeats (runs of each configuration on each side) must be >= 1; got {repeats}")
    kernel, program = ProgramRun.of(kernel), ProgramRun.of(program)
    workdir = prepare_workdir(workdir)
    launcher = launcher or MpiexecLauncher()
    chosen = configurations(kernel.space(), configs)
    say = echo or (lambda line: None)

    def run(spec, values, label):
        job = KernelJob(kernel=spec, values=values, ranks=ranks, workdir=str(workdir), launcher=launcher,
                        timeout_s=timeout_s, tag="check")
        outcome = run_kernel(job)
        say(f"{label}: {outcome['mb_per_s']:.4g} MB/s, {outcome['wall_seconds']:.3g} s")
        return outcome

    default = chosen[0][1]
    first = {"program": run(program, default, "program default")}
    # the system default is the space's default (what chosen[0] is), so run_scaled's default runs are step 1's
    first["kernel"] = scaled = run_scaled(kernel, ranks, workdir, launcher, timeout_s)
    say(f"kernel default: {scaled['mb_per_s']:.4g} MB/s, {scaled['wall_seconds']:.3g} s")
    rows = compare(signature(first["program"]["report"]), scaled["estimate"])
    failed = failures(rows)

    runs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {"program": [], "kernel": []} for name, _ in chosen}
    for repeat in range(repeats):
        for name, values in chosen:
            for side, spec in (("kernel", kernel), ("program", program)):
                reused = repeat == 0 and name == chosen[0][0]  # step 1's default runs are the first repeat's
                outcome = first[side] if reused else run(spec, values, f"{side} {name} ({repeat + 1}/{repeats})")
                runs[name][side].append({"mb_per_s": outcome["mb_per_s"], "wall_s": outcome["wall_seconds"]})

    def median(name, side, key):
        return statistics.median(r[key] for r in runs[name][side])

    results = []
    for name, values in chosen:
        results.append({"name": name, "changes": {k: v for k, v in values.items() if default.get(k, None) != v},
                        **{f"{side}_speedup": median(name, side, "mb_per_s") / median(chosen[0][0], side, "mb_per_s")
                           for side in ("kernel", "program")}})
    correlation = None
    if len(results) >= 3:
        rho = spearmanr([r["kernel_speedup"] for r in results], [r["program_speedup"] for r in results]).statistic
        correlation = None if rho != rho else float(rho)  # NaN when one side's speedups are all equal
    walls = {side: statistics.median(r["wall_s"] for name, _ in chosen for r in runs[name][side])
             for side in ("kernel", "program")}
    return {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "ranks": ranks, "repeats": repeats, "thresholds": THRESHOLDS,
        "signature": rows, "failures": failed, "passed": not failed,
        "kernel_counts": None if scaled["scale"] == 1.0 else scaled["how"],
        "configurations": results, "spearman": correlation,
        "median_wall_s": walls, "runs": runs,
    }


def check_log(trace_path: str | os.PathLike, workdir: str | os.PathLike | None = None, launcher=None,
              timeout_s: float = 600.0, echo=None) -> dict[str, Any]:
    """Check the kernel of a trace made from a Darshan DXT log: one run with the system default under the shim,
    its I/O signature beside the log's counters (the trace's ``metadata["signature"]``, the program's column),
    judged against :data:`THRESHOLDS` at the trace's top level (MPI-IO, or POSIX when it replays no MPI-IO: the
    POSIX calls MPI-IO makes here are not the ones it made there). Stored and returned as :func:`check` does;
    ``workdir`` defaults to ``iobo-work`` here (the log's directories are another machine's)."""
    from iobo.launch import KernelJob, MpiexecLauncher, prepare_workdir, run_kernel
    from iobo.replay.record import ProgramRun, check_path, kernel_spec, load_trace, trace_digest
    from iobo.replay.signature import compare, signature

    trace = load_trace(trace_path)
    ranks = trace.metadata["ranks"]
    kernel = ProgramRun.of(kernel_spec(trace_path, ranks=ranks))
    job = KernelJob(kernel=kernel, values=kernel.space().default(), ranks=ranks,
                    workdir=str(prepare_workdir(workdir or "iobo-work")), launcher=launcher or MpiexecLauncher(),
                    timeout_s=timeout_s, tag="check")
    outcome = run_kernel(job)
    (echo or (lambda line: None))(f"kernel default: {outcome['mb_per_s']:.4g} MB/s, {outcome['wall_seconds']:.3g} s")
    logged = trace.metadata["signature"]
    for level in logged["levels"].values():  # JSON made the histograms' bins strings
        for direction in ("write", "read"):
            level[direction]["histogram"] = {int(k): v for k, v in level[direction]["histogram"].items()}
    rows = compare(logged, signature(outcome["report"]))
    level = trace.metadata["signature"]["top_level"]
    judged = [row for row in rows if row["what"].split()[0] == level]
    failed = failures(judged)
    result = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "source": DARSHAN_SOURCE, "log": trace.metadata.get("log"), "judged_level": level,
        "trace": str(Path(trace_path).resolve()), "trace_sha256": trace_digest(trace_path),
        "ranks": ranks, "repeats": 1, "thresholds": THRESHOLDS,
        "signature": rows, "failures": failed, "passed": not failed,
        "configurations": [], "spearman": None,
        "median_wall_s": {"kernel": outcome["wall_seconds"], "program": trace.metadata.get("wall_s")},
    }
    check_path(trace_path).write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result
