"""Tune a compiled program iobo did not write, confirm the gain, and check that what it reports took effect.

The program is ``experiments/programs/h5write.c`` (parallel HDF5, its own
choices: one shared file, independent transfer, no hints), with one knob
of its own: ``-F``, a file per process. This is what a user types (from the
project root; ``--runner local`` runs trials from this process)::

    .venv/bin/iobo tune --command 'experiments/programs/out/h5write -s 256 {workdir}/out.h5' \\
        --knob files=shared:,per_process:-F --ranks 2 --trials 24 --runner local --confirm 5

and this benchmark runs the same through the API (``iobo.Tuner`` with a
``CommandSpec``), then re-measures the system default and the recommended
configuration 5 times each, interleaved (``Tuner.confirm``), and prints the
report: default vs best, the speedup and its 95% bootstrap interval; and the
same re-measurement runs as the program timed them itself (H5Fcreate to
H5Fclose), a check of the shim's accounting from outside.

Then production: ``iobo run`` applies the recommended configuration to the
program once more, and the evidence that each setting took effect is read
from outside iobo: the MPI-IO hints the program got from
``MPI_File_get_info``, the files it wrote (one, or one per rank), and
``h5dump -p -H`` / ``h5ls -va`` on them (layout, chunks, addresses).

    .venv/bin/python -m experiments.command_tune            # ~5-10 min on 2 cores; run alone
    .venv/bin/python -m experiments.command_tune --trials 30 --mib 64

Written to ``experiments/results/command-tune.txt`` (the study's SQLite file
next to it, ``command-tune.db``, is left in the scratch directory).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from experiments.harness import RESULTS_DIR
from experiments.harness.programs import build
from experiments.harness.recording import machine
from iobo import adapters
from iobo.config import IOConfig
from iobo.kernels.command import CommandSpec, Knob
from iobo.measure import Spread, bootstrap_speedup
from iobo.minimize import recommended
from iobo.report import build_report
from iobo.runners.local import LocalRunner
from iobo.samplers.registry import make_sampler
from iobo.space import format_value
from iobo.trials import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, stored_space
from iobo.tuner import Tuner

FILES = Knob("files", (("shared", ""), ("per_process", "-F")), doc="h5write -F: a file per process")


MODES = {0: "independent", 2: "chunk collective", 4: "contiguous collective"}  # H5D_mpio_actual_io_mode_t


def evidence(config: IOConfig, printed: dict, files: list[Path]) -> list[str]:
    """For each setting of ``config`` away from the default: what the program was told by HDF5 and MPI-IO (its
    own calls), what its files show (h5dump; h5ls or h5py for the data's addresses), and the verdict."""
    values, changed = config.values, config.changed()
    program_sees = {
        "alignment_threshold": printed["alignment"][0], "alignment_interval": printed["alignment"][1],
        "meta_block_size": printed["meta_block_size"], "sieve_buf_size": printed["sieve_buf_size"],
        "mdc_initial_size": printed["mdc_initial_size"], "coll_metadata": all(printed["coll_metadata"]),
        "transfer_mode": "collective" if printed["actual_io_mode"] else "independent",
    }
    lines = []
    for name, value in changed.items():
        parameter = config.space[name]
        if name in program_sees:
            seen = program_sees[name]
            how = {"transfer_mode": "H5Pget_mpio_actual_io_mode: " + MODES.get(printed["actual_io_mode"], "?"),
                   "mdc_initial_size": "H5Fget_mdc_config"}.get(name, "H5Fget_access_plist")
            lines.append(f"  {name}={format_value(value, parameter.unit)}: the program reads {seen} ({how}): "
                         f"{'in effect' if seen == value else 'NOT in effect'}")
        elif parameter.layer in ("mpiio", "lustre"):
            seen = printed["hints"].get(name, "(not reported)")
            note = " (ROMIO echoes striping hints; they act only on Lustre)" if parameter.layer == "lustre" else ""
            lines.append(f"  {name}={value}: MPI_File_get_info in the program says {seen}: "
                         f"{'in effect' if seen == str(value) else 'NOT in effect'}{note}")
        elif name == "files":
            lines.append(f"  files={value}: the program wrote {len(files)} file(s): {', '.join(p.name for p in files)}")
    dump = subprocess.run(["h5dump", "-p", "-H", str(files[0])], capture_output=True, text=True).stdout
    shown = re.search(r"STORAGE_LAYOUT \{\s*(\w+(?: \( [\d, ]+ \))?)", dump)
    asked = values["layout"]
    if asked == "chunked":
        asked += f", {format_value(values['chunk_size'], 'bytes')} chunks of 8-byte values"
    lines.append(f"  layout={asked}: h5dump -p -H {files[0].name} shows {shown.group(1) if shown else 'nothing'}")
    interval = printed["alignment"][1]
    if interval > 1:
        import h5py  # reads the file's chunk index with HDF5's own default driver, not through the shim

        with h5py.File(files[0], "r") as f:
            data = f["data"]
            offsets = [data.id.get_chunk_info(i).byte_offset for i in range(data.id.get_num_chunks())] \
                if data.chunks else [data.id.get_offset()]
        aligned = all(offset % interval == 0 for offset in offsets)
        lines.append(f"  alignment interval {interval}: the data of {files[0].name} starts at {offsets[:4]}"
                     f"{' ...' if len(offsets) > 4 else ''} (h5py): {'aligned' if aligned else 'NOT aligned'}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=24, help="tuning trials, 3 default runs included")
    parser.add_argument("--confirm", type=int, default=5, help="interleaved re-measurements of each")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--mib", type=int, default=256, help="MiB each rank writes (default %(default)s)")
    parser.add_argument("--sampler", default="gp")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", default="/dev/shm", help="where trials write (default tmpfs)")
    parser.add_argument("--out", default=str(RESULTS_DIR / "command-tune.txt"))
    args = parser.parse_args(argv)
    binary = build("h5write")
    scratch = Path(tempfile.mkdtemp(prefix="iobo-command-tune-", dir=args.dir))
    storage = f"sqlite:///{scratch / 'command-tune.db'}"
    log: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        log.append(line)

    spec = CommandSpec(f"{binary} -s {args.mib} {{workdir}}/out.h5", knobs=(FILES,))
    say(f"command-tune: {spec.template} with knob files=shared:,per_process:-F, {args.ranks} ranks, "
        f"{args.trials} trials ({args.sampler}, seed {args.seed}), then confirm x{args.confirm}; writes on {args.dir}")
    say(f"machine: {machine()}")
    tuner = Tuner(kernel=spec, ranks=args.ranks, trials=args.trials, storage=storage, study="h5write",
                  workdir=str(scratch / "trials"), runner=LocalRunner(), sampler=make_sampler(args.sampler, args.seed),
                  timeout_s=300, echo=say)
    study = tuner.run()
    # the recommended configuration as it is now (not minimized: `iobo minimize` would test which changes matter)
    study = tuner.confirm(args.confirm, minimize=False)
    report = build_report(study)
    say("")
    say(report.text())
    say("")
    say("the same re-measurement runs timed by the program itself (H5Fcreate..H5Fclose, slowest rank, MPI_Wtime):")
    own = {}
    for role in (ROLE_CONFIRM_DEFAULT, ROLE_CONFIRM_BEST):
        own[role] = [json.loads(next(line for line in t.user_attrs["stdout_tail"].splitlines()
                                     if line.startswith("{")))["mb_per_s"]
                     for t in study.get_trials() if t.user_attrs.get("role") == role and t.value is not None]
        say(f"  {role:16s} {Spread(tuple(own[role])).describe()}")
    low, high = bootstrap_speedup(own[ROLE_CONFIRM_DEFAULT], own[ROLE_CONFIRM_BEST])
    ratio = Spread(tuple(own[ROLE_CONFIRM_BEST])).median / Spread(tuple(own[ROLE_CONFIRM_DEFAULT])).median
    say(f"  speedup by the program's own clock: {ratio:.2f}x, 95% CI {low:.2f}x - {high:.2f}x")

    space = stored_space(study)
    values, source = recommended(study, space)
    config = IOConfig(values, space)
    say("")
    say(f"production: iobo run of the recommended configuration ({source})")
    out_dir = scratch / "production"
    out_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in adapters.SHIM_VARIABLES}
    env["IOBO_PRELOAD_VERBOSE"] = "1"
    argv_run = [sys.executable, "-m", "iobo.cli", "run", "--storage", storage, "--workdir", str(out_dir)]
    done = subprocess.run(argv_run, capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"iobo run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    printed = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    files = sorted(out_dir.iterdir())
    say("  $ iobo " + " ".join(argv_run[3:]))
    say("  " + "\n  ".join(line for line in done.stderr.splitlines() if line.startswith("iobo run:")))
    say(f"  the program printed: files={printed['files']}, {printed['bytes_written']:,} bytes in "
        f"{printed['seconds']:.4f} s ({printed['mb_per_s']:,.0f} MB/s)")
    say("independent evidence, per setting of the recommended configuration:")
    for line in evidence(config, printed, files):
        say(line)
    verbose = [line for line in done.stderr.splitlines() if line.startswith("iobo_preload:")]
    say("the shim's verbose log (read back after each call):")
    for line in verbose[:12]:
        say(f"  {line}")
    Path(args.out).write_text("\n".join(log) + "\n")
    shutil.rmtree(scratch / "trials", ignore_errors=True)
    shutil.rmtree(out_dir, ignore_errors=True)
    print(f"wrote {args.out}; study kept in {storage}", file=sys.stderr)


if __name__ == "__main__":
    main()
