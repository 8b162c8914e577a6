"""Which knob of a configuration does a replay kernel not reproduce? (issue 28, a diagnostic for the benchmark)

Given a results file of :mod:`experiments.kernels.benchmark` (its ``<out>.json``: the program's command and the
configurations it re-measured) and the benchmark's work directory (the trace ``via/<program>.trace.json``), runs
the default, the named configuration whole and (but with ``--whole-only``) each of its changed knobs alone, on the
program, on its replay kernel and, with ``--compute C``, on the replay with the computation between calls
(``recorded``: slept), and with ``--pinned-allocator`` on the program with the C library's allocator pinned
(``GLIBC_TUNABLES``: mmap threshold 32 MiB, trim threshold 64 MiB, so that no free moves them and the heap is not
trimmed), one unrecorded warm-up run per side, then ``--rounds`` interleaved rounds in a shuffled (seeded) order.
Prints each one's speedup over the default on every side (medians, with their 95% bootstrap interval) and each
other side's over the program's, each side's noise (sd of log MB/s pooled within configurations) and the raw runs
(MB/s); writes them to ``--out``.

    .venv/bin/python -m experiments.kernels.ablate --results experiments/results/kernels-cans-e2e-seed2.json \\
        --config 'search trial 10' --work /dev/shm/iobo-kernels-bench/cans-e2e-s2/cans --rounds 6 \\
        --out experiments/results/kernels-cans-ablation.txt
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from pathlib import Path

from experiments.harness.recording import machine
from experiments.harness.runs import commit
from experiments.kernels.benchmark import log_noise_sd, run_on

PINNED_ALLOCATOR = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864"
"""glibc's allocator with fixed thresholds: its mmap threshold no longer follows the largest block freed."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", required=True, help="the benchmark's <out>.json")
    parser.add_argument("--config", required=True, help="a configuration named in it")
    parser.add_argument("--work", required=True, help="the benchmark's work directory (<--workdir>/<--name>)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compute", default=None, metavar="recorded|scale=X",
                        help="also a kernel side replaying the computation between calls so (slept)")
    parser.add_argument("--pinned-allocator", action="store_true",
                        help="also a program side with the allocator's thresholds pinned (GLIBC_TUNABLES)")
    parser.add_argument("--whole-only", action="store_true", help="the default and the configuration, no knob alone")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    commit_at_start, load_at_start = commit(), os.getloadavg()

    from iobo.kernels.command import CommandSpec
    from iobo.measure import speedup_interval
    from iobo.replay.record import kernel_spec

    results = json.loads(Path(args.results).read_text())
    default, whole = results["configs"]["default"], results["configs"][args.config]
    changed = [name for name in whole if whole[name] != default.get(name)]
    configs = {"default": default, f"{args.config} (all {len(changed)} changes)": whole}
    if not args.whole_only:
        configs.update({f"only {name}={whole[name]}": {**default, name: whole[name]} for name in changed})
    program = CommandSpec(results["command"])
    work = Path(args.work)
    trace = work / "via" / f"{program.name}.trace.json"
    sides = {"program": program, "kernel": kernel_spec(trace, ranks=args.ranks)}
    if args.compute:
        sides[f"kernel --compute {args.compute}"] = kernel_spec(trace, compute=args.compute, ranks=args.ranks)
    if args.pinned_allocator:
        sides["program, allocator pinned"] = CommandSpec(f"env GLIBC_TUNABLES={PINNED_ALLOCATOR} "
                                                         f"{results['command']}")
    measure_dir = work / "ablate"
    measure_dir.mkdir(exist_ok=True)

    def run(side: str, values: dict) -> float:
        return run_on(sides[side], values, args.ranks, measure_dir)["mb_per_s"]

    for side in sides:  # warm-up, unrecorded
        run(side, default)
    runs: dict[tuple[str, str], list[float]] = {(name, side): [] for name in configs for side in sides}
    order, rng = list(runs), random.Random(args.seed)
    for round_ in range(args.rounds):
        rng.shuffle(order)
        for name, side in order:
            runs[name, side].append(run(side, configs[name]))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    def speedup(name: str, side: str) -> float:
        return statistics.median(runs[name, side]) / statistics.median(runs["default", side])

    def shown(name: str, side: str) -> str:
        """The speedup with its 95% bootstrap interval (none for the default itself)."""
        interval = speedup_interval(runs["default", side], runs[name, side]) if name != "default" else None
        return f"{speedup(name, side):.3f}" + (f" [{interval[0]:.2f}-{interval[1]:.2f}]" if interval else "")

    def noise(side: str) -> float:
        return log_noise_sd([runs[name, side] for name in configs])

    lines = [f"# experiments.kernels.ablate on {machine()}, commit {commit_at_start}",
             f"# load average at start {', '.join(f'{v:.2f}' for v in load_at_start)}; at end "
             f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}",
             f"# {args.config!r} of {args.results}, program {results['command']}, {args.ranks} ranks, "
             f"{args.rounds} interleaved rounds after one warm-up run a side",
             "",
             "speedup over the default on each side (medians, 95% bootstrap interval), and each other side's over "
             "the program's:",
             f"{'configuration':<48} " + " ".join(f"{side:>26}" for side in sides)]
    for name in configs:
        p = speedup(name, "program")
        lines.append(f"{name:<48} {shown(name, 'program'):>26} " + " ".join(
            f"{shown(name, side) + f' ({speedup(name, side) / p:.2f}x of p)':>26}" for side in sides
            if side != "program"))
    lines += ["", "noise, sd of log(MB/s) pooled within configurations: "
              + ", ".join(f"{side} {noise(side):.3f}" for side in sides),
              "median MB/s of the default: "
              + ", ".join(f"{side} {statistics.median(runs['default', side]):.0f}" for side in sides),
              "", "runs (MB/s):"]
    lines += [f"  {name} on {side}: {', '.join(f'{v:.0f}' for v in runs[name, side])}" for name, side in runs]
    text = "\n".join(lines)
    print(text)
    Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
