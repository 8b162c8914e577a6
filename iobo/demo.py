"""``make demo``: tune a real parallel HDF5 write (VPIC-IO) on local MPI ranks.

Settings come from the environment (the Makefile passes them): DEMO_DIR
(where the SQLite study lives), DEMO_WORKDIR (the storage under test; tmpfs
by default, the least noisy target here), DEMO_TRIALS, DEMO_RANKS.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from iobo.integrations.dashboard import command as dashboard_command
from iobo.measure import INTERVAL_MIN_RUNS, Spread, raw_write_mb_per_s
from iobo.progress import console_watchers
from iobo.report import build_report, write_report
from iobo.tuner import Tuner


def main() -> None:
    demo_dir = Path(os.environ.get("DEMO_DIR", "demo-run")).resolve()
    workdir = Path(os.environ.get("DEMO_WORKDIR", "/dev/shm/iobo-demo"))
    trials = int(os.environ.get("DEMO_TRIALS", "30"))
    ranks = int(os.environ.get("DEMO_RANKS", "2"))
    demo_dir.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{demo_dir / 'iobo.db'}"
    study = time.strftime("demo-%Y%m%d-%H%M%S")

    print(f"iobo demo: tuning VPIC-IO (shared HDF5 file, {ranks} MPI ranks) on {workdir}")
    device = Spread(tuple(raw_write_mb_per_s(str(workdir)) for _ in range(3)))
    print(f"raw sequential write of this storage (dd, one writer, 256 MiB, fdatasync): {device.describe()}\n")

    tuner = Tuner(
        kernel="vpic", ranks=ranks, trials=trials, storage=storage, study=study, workdir=str(workdir),
        kernel_options={"particles": 1 << 20, "steps": 2, "fsync": True}, timeout_s=120,
        **console_watchers(),
    )
    with tuner:  # one Parsl executor for the search, the walk-back and the confirmation
        tuner.run()
        print()
        tuner.confirm(repeats=INTERVAL_MIN_RUNS)
    report = build_report(tuner.open_study())
    print("\n" + report.text())
    if report.confirm_best:
        share = 100 * report.confirm_best.median / device.median
        print(f"raw write, one dd:       {device.describe()}; the tuned kernel ({ranks} writers) "
              f"reaches {share:.0f}% of it")
    written = write_report(tuner.open_study(), str(demo_dir / "report"))
    print(f"\nreport with figures: {demo_dir / 'report' / 'report.html'} ({len(written)} files)")
    print(f"study {study!r} is stored in {storage}")
    print(f"watch it:  .venv/bin/{dashboard_command(storage)}   (or: make dashboard)")
    print(f"export it: .venv/bin/iobo export --storage {storage} --study {study} --format romio-hints")


if __name__ == "__main__":
    main()
