"""An extracted kernel against its program at several inputs: the I/O signature and the trial time (issue 29).

    python -m experiments.kernels.extracted --program 'sh -c "cd {workdir} && exec PROGRAM {args}"' \\
        --kernel 'sh -c "cd {workdir} && exec KERNEL {args}"' --input 'a:2:ARGS' --input 'b:3:ARGS' \\
        [--rounds 3] [--source 'github:OWNER/NAME COMMIT'] [--extraction 'iobo extract ...'] > RESULTS.txt

Each ``--input NAME:RANKS:ARGS`` puts ARGS in the templates' ``{args}``. Per input, program and kernel run
``--rounds`` times each, interleaved (program, kernel, program, ...), under the shim on RANKS ranks (a fresh
``{workdir}`` each). It prints the signature table of the first round (the rows ``iobo check`` compares; targets
bytes 0.1%, calls 2% per level) with the check's failures, and the trial time: each side's median wall seconds with
its 95% bootstrap interval and program / kernel (the ratio of medians, resampled on both sides). A kernel built with
``--reduce-loops`` is compared on its counts estimated back (:func:`iobo.extract.run.run_scaled`). Then, evidence
independent of the shim (which does not see stdio), each side runs once more without it (``mpiexec`` alone) and
the files each run left are listed with their sizes side by side. ``--rounds 0``: the listing only.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from experiments.kernels.benchmark import median_interval, speedup_interval
from iobo.extract.run import run_once, run_scaled
from iobo.replay.check import failures
from iobo.replay.signature import compare, render, signature


def parse_input(text: str) -> tuple[str, int, str]:
    name, ranks, args = text.split(":", 2)
    return name, int(ranks), args


def commit() -> str:
    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "iobo", "experiments/kernels"],
                           capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + (" (dirty tree)" if dirty else "")


def files_left(template: str, ranks: int, workdir: str, timeout_s: float) -> dict[str, int]:
    """Run ``template`` once on ``ranks`` ranks with ``mpiexec.mpich`` (no shim) in a fresh directory under
    ``workdir``; {relative path: bytes} of the files it left there."""
    run_dir = Path(workdir) / "files-left"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    try:
        subprocess.run(["mpiexec.mpich", "-n", str(ranks), *shlex.split(template.replace("{workdir}", str(run_dir)))],
                       check=True, capture_output=True, timeout=timeout_s)
        return {str(path.relative_to(run_dir)): path.stat().st_size
                for path in sorted(run_dir.rglob("*")) if path.is_file()}
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def files_table(program: dict[str, int], kernel: dict[str, int]) -> str:
    rows = [f"{'file (left in the run directory)':<44} {'program B':>12} {'kernel B':>12}"]
    for name in sorted(set(program) | set(kernel)):
        p, k = program.get(name), kernel.get(name)
        mark = "" if p == k else "   differs"
        rows.append(f"{name:<44} {'-' if p is None else p:>12} {'-' if k is None else k:>12}{mark}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", required=True, help="the program's command template ({workdir}, {args})")
    parser.add_argument("--kernel", required=True, help="the kernel's command template ({workdir}, {args})")
    parser.add_argument("--input", action="append", required=True, type=parse_input, metavar="NAME:RANKS:ARGS")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs per side and input (default 3)")
    parser.add_argument("--source", default="", help="the program's repository and commit, for the header")
    parser.add_argument("--extraction", default="", help="the iobo extract command, for the header")
    parser.add_argument("--timeout", type=float, default=1800.0, help="limit of one run, seconds")
    parser.add_argument("--workdir", default="/dev/shm/iobo-extracted", help="where the runs' directories go "
                                                                            "(default: %(default)s, tmpfs)")
    args = parser.parse_args(argv)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    print(f"# experiments.kernels.extracted, iobo commit {commit()}, load average at start "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.source:
        print(f"# program source: {args.source}")
    if args.extraction:
        print(f"# extraction: {args.extraction}")
    print(f"# program: {args.program}\n# kernel: {args.kernel}")
    print("# signature thresholds (iobo check): bytes 0.1%, calls 2% per level; error = |kernel - program| / program")
    for name, ranks, words in args.input:
        if args.rounds == 0:
            print(f"\n## input {name}: {ranks} ranks, {words}")
        else:
            measure(args, name, ranks, words)
        program_files = files_left(args.program.replace("{args}", words), ranks, args.workdir, args.timeout)
        kernel_files = files_left(args.kernel.replace("{args}", words), ranks, args.workdir, args.timeout)
        print("# the files one run of each side left (mpiexec alone, no shim; sizes in bytes):")
        print(files_table(program_files, kernel_files), flush=True)
    print(f"# load average at end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def measure(args, name: str, ranks: int, words: str) -> None:
    """The signature table and the trial time of one input, ``args.rounds`` interleaved rounds."""
    program_times, kernel_times, rows = [], [], None
    for round_ in range(args.rounds):
        ran = run_once(args.program.replace("{args}", words), ranks, args.workdir, timeout_s=args.timeout)
        kernel = run_scaled(args.kernel.replace("{args}", words), ranks, args.workdir, timeout_s=args.timeout)
        program_times.append(ran["wall_seconds"])
        kernel_times.append(kernel["wall_seconds"])
        if rows is None:
            rows = compare(signature(ran["report"]), kernel["estimate"])
            how = kernel["how"]
        print(f"#   input {name} round {round_ + 1}: program {ran['wall_seconds']:.2f} s, kernel "
              f"{kernel['wall_seconds']:.2f} s", file=sys.stderr, flush=True)
    print(f"\n## input {name}: {ranks} ranks, {words}")
    print(f"# kernel counts: {how}")
    print(render(rows))
    print(f"failures: {failures(rows)}")
    p, p_low, p_high = median_interval(program_times)
    k, k_low, k_high = median_interval(kernel_times)
    ratio, r_low, r_high = speedup_interval(program_times, kernel_times)
    print(f"trial time, {args.rounds} interleaved rounds (median wall seconds [95% bootstrap]): program "
          f"{p:.2f} [{p_low:.2f}-{p_high:.2f}], kernel {k:.2f} [{k_low:.2f}-{k_high:.2f}]; program / kernel "
          f"{ratio:.2f}x [{r_low:.2f}-{r_high:.2f}]")
    print(f"# runs, s: program {[round(t, 2) for t in program_times]}, kernel "
          f"{[round(t, 2) for t in kernel_times]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
