"""Is a program's replay kernel a faithful and cheap stand-in for tuning it? (issue 28's benchmark)

For one program (``--command``, with ``{workdir}``), run as a user would:

1. **via the kernel**: ``iobo tune --command ... --via-kernel`` (record once, check, tune the kernel
   ``--trials`` trials, confirm its minimal configuration on the program), timed end to end;
2. **directly**: ``iobo tune --command ...`` (``--trials`` trials of the program, the same search arguments, its
   minimal configuration confirmed the same way), timed end to end;
3. **re-measured on one footing**, interleaved round by round in a shuffled (seeded) order, ``--rounds`` rounds:
   the system default, the kernel study's recommendation (K), the program study's (P), ``iobo check``'s spread
   configurations (:data:`iobo.replay.check.SPREAD`: chunking, collective buffering, alignment, ...; those that
   change only knobs frozen here are left out), ``--spread`` seeded random configurations of the program
   study's space and ``--from-search`` configurations of the kernel study's search spread over its measured
   MB/s (:func:`searched_configs`), each run on the program, on the kernel and (its trial time only) on the
   kernel replaying ``--steps`` of each repeated block. From these runs:

   - each configuration's speedup over the default (medians) on program and kernel, and their Spearman rank
     correlation (default excluded: >= 8 configurations; target >= 0.8) with its bootstrap interval, beside
     the correlation a kernel ranking exactly as the program does would show at the two sides' noise
     (:func:`split_half_reliability`);
   - tuning fidelity: K's speedup on the program against P's, both with 95% bootstrap intervals (target: K's
     median inside P's interval);
   - trial time: the program's median wall time a run over the kernel's, and over the reduced kernel's
     (target >= 10x where the computation is >= 10x the I/O).

4. the signature table of the check ``--via-kernel`` ran (bytes per level within 0.1%, operation counts within
   2%, same datasets and layouts), read from ``<trace>.check.json``.

Printed and written to ``--out``; the logs of both ``iobo tune`` commands go beside it (``.via.log``,
``.direct.log``). Example (a program built by ``experiments/kernels/build_programs.sh``)::

    .venv/bin/python -m experiments.kernels.benchmark --name heat-c --ranks 2 \\
        --command '/tmp/iobo-kernels/heat-c/heat_mpi ...' --source 'github.com/... <commit>' \\
        --out experiments/results/kernels-heat-c.txt
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from experiments.harness.recording import machine
from experiments.harness.runs import commit

ROOT = Path(__file__).resolve().parents[2]
IOBO = [str(Path(sys.executable).with_name("iobo"))]


def tune(args, study: str, workdir: Path, log: Path, via_kernel: bool) -> float:
    """One ``iobo tune --command`` (``--via-kernel`` or not), its output to ``log``; its wall seconds."""
    argv = [*IOBO, "tune", "--command", args.command, "--ranks", str(args.ranks), "--trials", str(args.trials),
            "--storage", args.storage, "--study", study, "--workdir", str(workdir), "--seed", str(args.seed),
            "--sampler", args.sampler, "--confirm", str(args.confirm), *(["--via-kernel"] if via_kernel else []),
            *(["--kernel-command", args.kernel_command] if via_kernel and args.kernel_command else [])]
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    seconds = time.monotonic() - started
    log.write_text(f"$ {shlex.join(argv)}\n# exit {done.returncode}, {seconds:.1f} s\n{done.stdout}\n"
                   f"# stderr\n{done.stderr}")
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} failed ({done.returncode}); see {log}:\n{done.stderr[-2000:]}")
    return seconds


def run_on(spec, values: dict, ranks: int, workdir: Path) -> dict:
    """One run of ``spec`` (program or kernel) with ``values`` restricted to its space and completed with its
    defaults, under ``workdir``: :func:`iobo.launch.run_kernel`'s outcome (``mb_per_s``, ``wall_seconds``...)."""
    from iobo.launch import KernelJob, run_kernel

    space = spec.space()
    complete = space.complete({k: v for k, v in values.items() if k in space.names})
    return run_kernel(KernelJob(kernel=spec, values=complete, ranks=ranks, workdir=str(workdir), timeout_s=600))


def logged_seconds(log: Path) -> float | None:
    """The wall seconds :func:`tune` wrote in its log's second line (``# exit 0, 113.1 s``); None when there is
    no log (a tuning stopped by hand before :func:`tune` wrote it)."""
    if not log.exists():
        return None
    return float(log.read_text().splitlines()[1].split(", ")[1].split()[0])


def recommendation(storage: str, study_name: str) -> tuple[dict, str]:
    """A study's recommended values (the minimal configuration) and how they were chosen."""
    import optuna

    from iobo.cli.common import chosen_config

    _, chosen, config = chosen_config(optuna.load_study(study_name=study_name, storage=storage))
    return dict(config.values), chosen.how


def spread_configs(space, workload, frozen, count: int, seed: int) -> list[dict]:
    """``count`` distinct random configurations of ``space`` (each parameter not ``frozen`` uniform over its
    values, then repaired to the space's constraints), none the default."""
    rng = random.Random(seed)
    default = space.default()
    found: list[dict] = []
    for _ in range(200 * count):
        drawn = {p.name: default[p.name] if p.name in frozen else rng.choice(p.values) for p in space}
        drawn = {name: value for name, value in drawn.items() if space.is_active(space[name], drawn)}
        values, _ = space.repair(drawn, workload)
        values = space.complete(values)
        if values != default and values not in found:
            found.append(values)
        if len(found) == count:
            break
    return found


def searched_configs(storage: str, study_name: str, space, count: int) -> list[tuple[str, dict]]:
    """``count`` distinct configurations the kernel study's search measured (its search trials, not the default's
    or the walk-back's), spread over their measured MB/s: evenly spaced in rank from the slowest to the fastest.
    A rank correlation only tells kernel from program where the configurations' true speedups differ; the
    check's named ones and uniform random draws crowd together (on MACSio two groups, ~0.7x and ~1.0x, whose
    order within each group is noise), the search's span what a tuner meets. Chosen on the kernel alone, as a
    user could, and re-measured afresh. Each as (a name giving the trial, full values)."""
    import optuna

    from iobo.trials import ROLE_SEARCH, config_of, role

    study = optuna.load_study(study_name=study_name, storage=storage)
    distinct: dict[str, tuple[float, int, dict]] = {}
    for trial in study.trials:
        if trial.state.name != "COMPLETE" or role(trial) != ROLE_SEARCH or trial.value is None:
            continue
        ran = config_of(trial)  # as run: repaired to the constraints
        values = space.complete({**space.default(), **{k: v for k, v in ran.items() if k in space.names}})
        distinct.setdefault(json.dumps(values, sort_keys=True, default=str), (trial.value, trial.number, values))
    ranked = sorted(distinct.values(), key=lambda item: item[0])
    picked = ranked if len(ranked) <= count else [ranked[int(i)] for i in np.linspace(0, len(ranked) - 1, count).round()]
    return [(f"search trial {number}", values) for _, number, values in picked]


def spearman_interval(kernel_runs: list[list[float]], program_runs: list[list[float]], resamples: int = 2000,
                      seed: int = 0) -> tuple[float, float, float]:
    """Spearman's rank correlation of the configurations' median MB/s, kernel against program (one list of runs
    a configuration on each side), and its percentile-bootstrap 95% interval: each configuration's runs
    resampled with replacement on both sides. (Dividing by the default's median does not change ranks.)"""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(seed)
    kernel_medians = [float(np.median(runs)) for runs in kernel_runs]
    program_medians = [float(np.median(runs)) for runs in program_runs]
    rho = float(spearmanr(kernel_medians, program_medians).statistic)
    drawn = []
    for _ in range(resamples):
        k = [np.median(rng.choice(runs, size=len(runs))) for runs in kernel_runs]
        p = [np.median(rng.choice(runs, size=len(runs))) for runs in program_runs]
        value = spearmanr(k, p).statistic
        if value == value:  # all-tied resamples have none
            drawn.append(value)
    return rho, float(np.quantile(drawn, 0.025)), float(np.quantile(drawn, 0.975))


def split_half_reliability(runs: list[list[float]], splits: int = 500, seed: int = 0) -> float:
    """How well one side ranks the configurations the same way twice at its noise: the mean, over random
    splits of each configuration's runs into two halves, of the Spearman correlation between the halves'
    medians, stepped up to the full number of runs by Spearman-Brown (2r / (1 + r), approximate for ranks).
    sqrt(reliability_kernel * reliability_program) is about the largest rank correlation a kernel that ranks
    exactly as the program does could show on these runs (Spearman's attenuation, 1904)."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(seed)
    values = []
    for _ in range(splits):
        first, second = [], []
        for group in runs:
            order = rng.permutation(len(group))
            half = len(group) // 2
            first.append(np.median([group[i] for i in order[:half]]))
            second.append(np.median([group[i] for i in order[half:2 * half]]))
        value = spearmanr(first, second).statistic
        if value == value:
            values.append(value)
    r = float(np.mean(values))
    return 2 * r / (1 + r) if r > -1 else float("nan")


def median_interval(values: list[float], resamples: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """Median and its percentile-bootstrap 95% interval."""
    rng = np.random.default_rng(seed)
    data = np.asarray(values, dtype=float)
    medians = np.median(rng.choice(data, size=(resamples, data.size), replace=True), axis=1)
    return float(np.median(data)), float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def speedup_interval(runs: list[float], default: list[float], seed: int = 0) -> tuple[float, float, float]:
    """median(runs) / median(default) and its percentile-bootstrap 95% interval (both resampled)."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(runs, dtype=float), np.asarray(default, dtype=float)
    ratios = (np.median(rng.choice(a, size=(4000, a.size)), axis=1)
              / np.median(rng.choice(b, size=(4000, b.size)), axis=1))
    return float(np.median(a) / np.median(b)), float(np.quantile(ratios, 0.025)), float(np.quantile(ratios, 0.975))


def log_noise_sd(groups: list[list[float]]) -> float:
    """Pooled standard deviation of log(MB/s) between runs of one configuration on one side (each group: one
    configuration's runs), the ``noise_sd_log`` of :func:`iobo.measure.planned_pairs`."""
    squares, freedom = 0.0, 0
    for group in groups:
        logs = [math.log(v) for v in group if v > 0]
        if len(logs) >= 2:
            mean = sum(logs) / len(logs)
            squares += sum((x - mean) ** 2 for x in logs)
            freedom += len(logs) - 1
    return math.sqrt(squares / freedom) if freedom else float("nan")


def noise_lines(side: str, rows_of_side: list[tuple[str, tuple[float, float, float]]], noise_sd: float,
                rounds: int) -> list[str]:
    """Whether a side's speedups are limited by noise (every non-default configuration's interval spans 1), and
    the rounds :func:`iobo.measure.planned_pairs` plans (95% interval, 80% power) for the interval of the
    configuration with the largest measured effect to exclude 1 at that effect and this noise."""
    from iobo.measure import planned_pairs

    spanning = [name for name, (_, low, high) in rows_of_side if low <= 1.0 <= high]
    largest_name, (largest, _, _) = max(rows_of_side, key=lambda row: abs(math.log(row[1][0])))
    effect = max(largest, 1 / largest)
    needed = planned_pairs(noise_sd, effect, at_least=1, at_most=100_000) if noise_sd == noise_sd else 0
    verdict = ("limited by noise: every configuration's interval spans 1" if len(spanning) == len(rows_of_side)
               else f"{len(rows_of_side) - len(spanning)} of {len(rows_of_side)} intervals exclude 1")
    return [f"{side}: noise sd of log(MB/s) {noise_sd:.3f} (pooled within configurations); {verdict}; "
            f"the largest effect, {largest_name} {largest:.3f}x, needs about {needed} rounds for its interval to "
            f"exclude 1 (planned_pairs: 95% interval, 80% power): {max(0, needed - rounds)} more than the {rounds} run"]


def changes(values: dict, default: dict) -> str:
    shown = {k: v for k, v in values.items() if default.get(k) != v}
    return ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) or "(default)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="a short name for the program (studies, files)")
    parser.add_argument("--command", required=True, help="the program and its arguments, with {workdir}")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--source", required=True, help="where the program came from: repository and commit")
    parser.add_argument("--language", default="", help="the program's language (for the table)")
    parser.add_argument("--trials", type=int, default=20, help="trials of each tuning (kernel, program)")
    parser.add_argument("--confirm", type=int, default=5, help="--confirm of both iobo tune commands")
    parser.add_argument("--sampler", default="gp")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spread", type=int, default=3, help="random configurations besides K, P and the check's")
    parser.add_argument("--from-search", type=int, default=4,
                        help="configurations of the kernel study's search, spread over its measured MB/s")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the re-measurement")
    parser.add_argument("--steps", type=int, default=1, help="repetitions the reduced kernel replays")
    parser.add_argument("--workdir", default="/dev/shm/iobo-kernels-bench")
    parser.add_argument("--out", required=True)
    parser.add_argument("--kernel-command", default=None,
                        help="the kernel, a command with {workdir} (e.g. one iobo extract built): --via-kernel "
                             "tunes it instead of a recorded replay, and it is the re-measurement's kernel side")
    parser.add_argument("--kernel-build-seconds", type=float, default=0.0,
                        help="with --kernel-command: the wall seconds making it took (iobo extract's), added to "
                             "the route through the kernel")
    parser.add_argument("--direct-from", default=None, metavar="OUT",
                        help="reuse the direct tuning of an earlier run (its --out, beside which its .direct.log "
                             "is) of the same program, trials, sampler and seed, its studies in --direct-storage")
    parser.add_argument("--direct-storage", default=None, help="with --direct-from: that run's storage URL")
    parser.add_argument("--reuse-tuning", action="store_true",
                        help="keep the two tuning runs of an earlier run with the same --workdir; re-measure")
    parser.add_argument("--tuning-from", default=None,
                        help="with --reuse-tuning: the earlier run's --out, beside which its .via.log and "
                             ".direct.log are (default: --out)")
    parser.add_argument("--from-runs", default=None,
                        help="with --reuse-tuning: summarise the runs an interrupted run saved in its <out>.json "
                             "(written after every round) instead of measuring")
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()
    commit_at_start = commit()  # the script that runs; "-dirty" when the tree differs from it

    from iobo.errors import IoboError
    from iobo.kernels.command import CommandSpec
    from iobo.replay.check import SPREAD, configurations
    from iobo.replay.record import kernel_spec
    from iobo.replay.signature import render
    from iobo.trials import FROZEN_ATTR, stored_space

    import optuna

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(args.workdir) / args.name
    args.storage = f"sqlite:///{work / 'iobo.db'}"
    via_study, direct_study = f"{args.name}-via", f"{args.name}-direct"
    tuning_out = Path(args.tuning_from) if args.reuse_tuning and args.tuning_from else out
    if (args.direct_from is None) != (args.direct_storage is None) or (args.direct_from and args.reuse_tuning):
        raise SystemExit("--direct-from and --direct-storage go together, and not with --reuse-tuning")
    direct_storage = args.direct_storage or args.storage
    direct_log = Path(args.direct_from).with_suffix(".direct.log") if args.direct_from else None
    if args.reuse_tuning:  # steps 1 and 2 done by an earlier run: their studies, logs and times
        seconds_via, seconds_direct = (logged_seconds(tuning_out.with_suffix(suffix))
                                       for suffix in (".via.log", ".direct.log"))
        if not args.from_runs:
            subprocess.run(["rm", "-rf", str(work / "remeasure")], check=True)
    else:
        if work.exists():
            subprocess.run(["rm", "-rf", str(work)], check=True)
        work.mkdir(parents=True)
        seconds_via = tune(args, via_study, work / "via", out.with_suffix(".via.log"), via_kernel=True)
        seconds_direct = (logged_seconds(direct_log) if direct_log else
                          tune(args, direct_study, work / "direct", out.with_suffix(".direct.log"), via_kernel=False))
    seconds_via += args.kernel_build_seconds if args.kernel_command else 0.0  # making the kernel is the route's
    program = CommandSpec(args.command)
    kernel_command = CommandSpec(args.kernel_command) if args.kernel_command else None
    trace_path = work / "via" / f"{program.name}.trace.json"
    check_file = (work / "via" / f"{kernel_command.name}.check.json" if kernel_command
                  else Path(f"{trace_path}.check.json"))
    check = json.loads(check_file.read_text())
    via_log = tuning_out.with_suffix(".via.log")
    direct_log = direct_log or tuning_out.with_suffix(".direct.log")
    via_text = via_log.read_text()
    direct_text = direct_log.read_text() if direct_log.exists() else ""
    def confirmed_line(text: str) -> str:
        """The log's verdict: --via-kernel's confirmation on the program first (its kernel report's 'speedup:'
        line comes before it), else the confirmation or the report's speedup line."""
        for prefix in ("speedup on the program", "confirmed:", "speedup:"):
            found = next((line for line in text.splitlines() if line.startswith(prefix)), None)
            if found:
                return found
        return "(no confirmation line)" if text else "(no log: the tuning was not run to its end)"

    confirmed = {side: confirmed_line(text) for side, text in (("via kernel", via_text), ("direct", direct_text))}

    kernel_values, kernel_how = recommendation(args.storage, f"{via_study}-kernel")
    program_values, program_how = recommendation(direct_storage, direct_study)
    study = optuna.load_study(study_name=direct_study, storage=direct_storage)
    space = stored_space(study)
    default = space.default()
    configs = {"default": default, "K (kernel's)": space.complete({**default, **kernel_values}),
               "P (program's)": space.complete({**default, **program_values})}
    frozen = study.user_attrs.get(FROZEN_ATTR, {})
    for name, values in configurations(space, len(SPREAD))[1:]:  # iobo check's spread, on knobs that act here
        if any(values[k] != default[k] for k in values if k not in frozen):
            configs[name] = {k: default[k] if k in frozen else v for k, v in values.items()}
    randoms = spread_configs(space, program.workload(args.ranks, {}), frozen, args.spread, args.seed)
    for i, values in enumerate(v for v in randoms if v not in configs.values()):
        configs[f"random {i + 1}"] = values
    for name, values in searched_configs(args.storage, f"{via_study}-kernel", space, args.from_search):
        if values not in configs.values():
            configs[name] = values

    same_as: dict[str, str] = {}  # a configuration -> the earlier one with the same values, measured once for both
    for name, values in configs.items():
        twin = next((n for n, v in configs.items() if v == values and n not in same_as), name)
        if twin != name:
            same_as[name] = twin
    measured = [name for name in configs if name not in same_as]

    sides = {"program": program, "kernel": kernel_command or kernel_spec(trace_path, ranks=args.ranks)}
    failed_sides: dict[str, str] = {}
    try:  # refused where the ranks' traces fold differently (Trace.steps_mismatch: CaNS)
        if kernel_command is None:
            sides[f"kernel --steps {args.steps}"] = kernel_spec(trace_path, steps=args.steps, ranks=args.ranks)
    except IoboError as exc:
        failed_sides[f"kernel --steps {args.steps}"] = "refused: " + " ".join(str(exc).split())[:400]
    measure_dir = work / "remeasure"
    saved = json.loads(Path(args.from_runs).read_text())["runs"] if args.from_runs else None
    if saved is not None:  # no measuring: the saved rounds, the sides they have
        for side in [side for side in sides if not any(key.endswith("|" + side) for key in saved)]:
            failed_sides[side] = f"not in the saved runs ({args.from_runs})"
            del sides[side]
    else:
        measure_dir.mkdir()
    for side, spec in list(sides.items()) if saved is None else []:  # warm-up, unrecorded; a side that cannot run is left out, with why
        try:
            run_on(spec, default, args.ranks, measure_dir)
        except IoboError as exc:
            if side == "program":
                raise
            failed_sides[side] = "its warm-up run failed: " + " ".join(str(exc).split())[:400]
            del sides[side]
            print(f"{side}: left out, {failed_sides[side]}", file=sys.stderr, flush=True)
    runs = {(name, side): [] for name in measured for side in sides}
    rng = random.Random(args.seed)
    order = [(name, side) for name in measured for side in sides]
    print(f"{len(measured)} configurations x {len(sides)} sides x {args.rounds} rounds", file=sys.stderr, flush=True)
    if saved is not None:
        runs = {(name, side): saved[f"{name}|{side}"] for name in measured for side in sides}
        args.rounds = min(len(v) for v in runs.values())
    for round_ in range(args.rounds if saved is None else 0):
        rng.shuffle(order)
        for name, side in order:
            try:
                outcome = run_on(sides[side], configs[name], args.ranks, measure_dir)
            except IoboError as exc:
                print(f"round {round_ + 1} {name} on {side}: failed: {str(exc).splitlines()[0]}", file=sys.stderr)
                continue
            runs[name, side].append({"mb_per_s": outcome["mb_per_s"], "wall_s": outcome["wall_seconds"]})
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        out.with_suffix(".json").write_text(json.dumps({  # the runs so far, should the summary below fail
            "name": args.name, "configs": configs, "runs": {f"{n}|{s}": v for (n, s), v in runs.items()}},
            indent=1, default=str))

    def mbs(name, side):
        return [r["mb_per_s"] for r in runs[same_as.get(name, name), side]]

    rows, ranked = [], []
    nothing = (float("nan"),) * 3
    for name, values in configs.items():
        p = speedup_interval(mbs(name, "program"), mbs("default", "program"))
        k = (speedup_interval(mbs(name, "kernel"), mbs("default", "kernel")) if "kernel" in sides else nothing)
        text = changes(values, default) + (f" (= {same_as[name]}: the same runs)" if name in same_as else "")
        rows.append((name, text, p, k))
        if name != "default" and name not in same_as:
            ranked.append(name)
    if "kernel" in sides:  # ranks of the medians: dividing by the default's does not change them
        rho, rho_low, rho_high = spearman_interval([mbs(n, "kernel") for n in ranked],
                                                   [mbs(n, "program") for n in ranked])
        reliability = {side: split_half_reliability([mbs(n, side) for n in ranked]) for side in ("program", "kernel")}
    else:
        rho = rho_low = rho_high = float("nan")
        reliability = {"program": float("nan"), "kernel": float("nan")}
    ceiling = math.sqrt(max(reliability["program"], 0) * max(reliability["kernel"], 0))
    wall_runs = {side: [r["wall_s"] for name in measured for r in runs[name, side]] for side in sides}
    walls = {side: median_interval(wall_runs[side]) for side in sides}
    ratios = {side: speedup_interval(wall_runs["program"], wall_runs[side]) for side in sides}
    noise = {side: log_noise_sd([mbs(name, side) for name in measured]) for side in ("program", "kernel")
             if side in sides}
    k_row = next(r for r in rows if r[0].startswith("K "))
    p_row = next(r for r in rows if r[0].startswith("P "))
    k_is_p = same_as.get(k_row[0], k_row[0]) == same_as.get(p_row[0], p_row[0])  # one configuration: met as such
    fidelity = k_is_p or p_row[2][1] <= k_row[2][0] <= p_row[2][2]
    trace_meta = json.loads(trace_path.read_text()).get("metadata", {}) if trace_path.exists() else {}

    load_at_end = os.getloadavg()
    lines = [
        f"# experiments.kernels.benchmark on {machine()}, commit {commit_at_start}",
        f"# load average (1, 5, 15 min) at start {', '.join(f'{v:.2f}' for v in load_at_start)}; "
        f"at end {', '.join(f'{v:.2f}' for v in load_at_end)}",
        f"# program: {args.name} ({args.language}), {args.ranks} ranks: {args.command}",
        f"# source: {args.source}",
        *([f"# kernel: {args.kernel_command} (given, not recorded: --via-kernel --kernel-command)"]
          if args.kernel_command else []),
        (f"# recorded run: wall {trace_meta.get('wall_s', float('nan')):.3f} s, I/O phases "
         f"{trace_meta.get('io_s', float('nan')):.3f} s (slowest rank); computation/I/O "
         f"{(trace_meta.get('wall_s', 0) - trace_meta.get('io_s', 0)) / max(trace_meta.get('io_s', 1e-9), 1e-9):.1f}x"
         if trace_meta else "# recorded run: none (the kernel is a command)"),
        f"# tuning: {args.trials} trials each, sampler {args.sampler}, seed {args.seed}, --confirm {args.confirm}"
        + (f" (reused: the studies in {args.storage}, logs {via_log.name}, {direct_log.name})" if args.reuse_tuning
           else f" (the direct tuning reused: {direct_storage}, {direct_log})" if args.direct_from else ""),
        "",
        "## signature, kernel vs program (the --via-kernel check; targets: bytes 0.1%, operations 2%)",
        render(check["signature"]),
        f"check: {'passed' if check['passed'] else 'FAILED: ' + '; '.join(check['failures'])}",
        "",
        f"## re-measured, {args.rounds} interleaved rounds (speedup over the default: median [95% bootstrap])",
        f"{'configuration':<28} {'program':>22} {'kernel':>22}  changes",
    ]
    for name, text, p, k in rows:
        lines.append(f"{name:<28} {p[0]:>7.3f} [{p[1]:.3f}-{p[2]:.3f}] {k[0]:>7.3f} [{k[1]:.3f}-{k[2]:.3f}]  {text}")
    lines += [
        f"rank correlation (Spearman, {len(ranked)} configurations, each once, the default excluded): "
        f"{rho:.3f} [95% bootstrap {rho_low:.3f}-{rho_high:.3f}] "
        f"(target >= 0.8: {'met' if rho >= 0.8 else 'NOT met'})",
        f"  at this noise each side ranks them alike twice (split-half, Spearman-Brown): program "
        f"{reliability['program']:.3f}, kernel {reliability['kernel']:.3f}; a kernel ranking exactly as the program "
        f"does would show about {ceiling:.3f} (sqrt of their product)",
        f"tuning fidelity: K {k_row[2][0]:.3f} on the program, P {p_row[2][0]:.3f} "
        f"[{p_row[2][1]:.3f}-{p_row[2][2]:.3f}]: "
        + ("K is P's configuration (met)" if k_is_p else f"K {'inside' if fidelity else 'OUTSIDE'} P's 95% interval"),
        f"  K ({kernel_how}): {k_row[1]}",
        f"  P ({program_how}): {p_row[1]}",
        *noise_lines("program", [(r[0], r[2]) for r in rows if r[0] != "default" and r[0] not in same_as],
                     noise["program"], args.rounds),
        *(noise_lines("kernel", [(r[0], r[3]) for r in rows if r[0] != "default" and r[0] not in same_as],
                      noise["kernel"], args.rounds)
          if "kernel" in sides else []),
        "",
        "## trial time (median wall seconds a run [95% bootstrap], all re-measured runs)",
        *[f"{side:<18} {w[0]:7.3f} [{w[1]:.3f}-{w[2]:.3f}]  program/this {ratios[side][0]:.2f}x "
          f"[{ratios[side][1]:.2f}-{ratios[side][2]:.2f}]" for side, w in walls.items()],
        *[f"{side:<18} not measured: {why}" for side, why in failed_sides.items()],
        "",
        "## end to end (iobo tune, as a user runs it)",
        (f"via the kernel (making it {args.kernel_build_seconds:.1f} s + check + {args.trials} kernel trials + "
         f"confirmation on the program {seconds_via - args.kernel_build_seconds:.1f} s): " if args.kernel_command
         else f"via the kernel (record + check + {args.trials} kernel trials + confirmation on the program): ")
        + f"{seconds_via:.1f} s; {confirmed['via kernel']}",
        f"directly ({args.trials} program trials + confirmation): "
        + (f"{seconds_direct:.1f} s; {confirmed['direct']}" if seconds_direct is not None else confirmed["direct"]),
        f"direct / via kernel: {seconds_direct / seconds_via:.2f}x (target >= 5x)" if seconds_direct is not None
        else "direct / via kernel: not measured (no direct tuning log)",
    ]
    text = "\n".join(lines)
    print(text)
    out.write_text(text + "\n")
    out.with_suffix(".json").write_text(json.dumps({
        "name": args.name, "command": args.command, "source": args.source, "ranks": args.ranks,
        "configs": configs, "runs": {f"{n}|{s}": v for (n, s), v in runs.items()}, "spearman": rho,
        "spearman_interval": (rho_low, rho_high), "split_half_reliability": reliability,
        "load_at_start": load_at_start, "load_at_end": load_at_end,
        "seconds_via": seconds_via, "seconds_direct": seconds_direct, "check": check}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
