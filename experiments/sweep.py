"""Record a benchmark table: every configuration of a small grid, measured repeatedly.

Each configuration is launched once as a real MPI job with the kernel's
``--repeats R`` option (R timed open+write+close cycles in one process, which
amortises the ~2 s start-up), in a random order so slow drifts of a shared
machine do not line up with any parameter. With ``--passes P`` the whole
grid is swept P times, each pass in a new random order: a configuration's
repeats then come from P jobs at different times, so a burst of load during
one job cannot make that configuration look better or worse than it is (the
single-pass tables carry such job-level bias). One CSV row per repeat: the
parameters, ``repeat``, ``mb_per_s``; a JSON sidecar records the machine,
the kernel, its options, the grid and the run's wall time. Samplers are then
benchmarked on the table (:mod:`experiments.sampler.bench`): each evaluation
draws a recorded repeat at random, and a configuration's true value is its
median.  Run from the project root::

    .venv/bin/python -m experiments.sweep --table vpic-tmpfs   # the recorded tables
    .venv/bin/python -m experiments.sweep --table ior-tmpfs
    .venv/bin/python -m experiments.sweep --table vpic-tmpfs --passes 3 --repeats 2 --out vpic-tmpfs-3pass
    .venv/bin/python -m experiments.sweep --table vpic-tmpfs --limit 5  # a quick look
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import sys
import time
from pathlib import Path

from experiments.harness import TABLES_DIR
from experiments.harness.recording import SWEEPS, columns, configurations, machine, measure, write_sidecar
from iobo import kernels


def default_of(space, names: list[str]) -> dict:
    """The system-default assignment of the table's parameters (inactive ones left out)."""
    defaults = space.default()
    return {n: defaults[n] for n in names if n in defaults}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", choices=sorted(SWEEPS), required=True)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per job (per configuration and pass)")
    parser.add_argument("--passes", type=int, default=1, help="sweeps of the whole grid, each in a new random order")
    parser.add_argument("--out", help="table name to write (default: --table)")
    parser.add_argument("--limit", type=int, help="only the first N configurations (of the shuffled order)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    table = SWEEPS[args.table]
    spec = kernels.get(table["kernel"])
    configs = configurations(table["grid"])
    random.Random(args.seed).shuffle(configs)
    configs = configs[: args.limit] if args.limit else configs
    order = []  # (pass, configuration), each pass in its own random order
    for sweep in range(args.passes):
        shuffled = list(configs)
        random.Random(args.seed + sweep).shuffle(shuffled)
        order += [(sweep, values) for values in shuffled]
    workdir = Path(table["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    csv_path = TABLES_DIR / f"{args.out or args.table}.csv"
    csv_path.parent.mkdir(exist_ok=True)
    names = columns(table["grid"])
    started, load_at_start = time.time(), os.getloadavg()
    failures = 0
    with csv_path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*names, "repeat", "mb_per_s"])
        for i, (sweep, values) in enumerate(order):
            try:
                runs = measure(table, values, args.repeats)
            except Exception as exc:  # recorded as missing; the sweep goes on
                failures += 1
                print(f"[{i + 1}/{len(order)}] FAILED {values}: {exc}", file=sys.stderr)
                continue
            for repeat, mb_per_s in enumerate(runs, start=sweep * args.repeats):
                writer.writerow([values.get(n, "") for n in names] + [repeat, f"{mb_per_s:.1f}"])
            handle.flush()
            median = sorted(runs)[len(runs) // 2]
            print(f"[{i + 1}/{len(order)}] {median:8.0f} MB/s  {values}", flush=True)
    meta = {
        "table": args.out or args.table, "grid_of": args.table, "kernel": table["kernel"], "ranks": table["ranks"],
        "options": table["options"], "workdir": table["workdir"], "passes": args.passes,
        "repeats": args.repeats * args.passes, "repeats_per_job": args.repeats, "configurations": len(configs),
        "failed": failures, "default": default_of(spec.space(), names), "grid": {"+".join(k) if isinstance(k, tuple) else k: v for k, v in table["grid"].items()},
        "machine": machine(), "load_avg_at_start": load_at_start,
        "started_unix": started, "wall_seconds": round(time.time() - started, 1),
        "note": "measured on a shared 2-core machine while other jobs ran; noise is part of the table",
    }
    write_sidecar(csv_path, meta)
    print(f"wrote {csv_path} ({len(configs)} configurations x {args.passes} passes x {args.repeats} repeats; "
          f"{failures} failed jobs)")


if __name__ == "__main__":
    main()
