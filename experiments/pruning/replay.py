"""Benchmark: pruners replayed over recorded, unpruned REAL vpic tuning runs (companion of ``pruning.real``).

Run from the repository root (2-5 min per seed here)::

    .venv/bin/python -m experiments.pruning.replay --seeds 8 --trials 20 \
        --record experiments/results/pruning-runs.json | tee experiments/results/pruning-replay.txt
    .venv/bin/python -m experiments.pruning.replay --from experiments/results/pruning-runs.json
    .venv/bin/python -m experiments.pruning.replay --seeds 8 --first-seed 8 --trials 20 \
        --record experiments/results/pruning-runs-8-15.json   # a second set, new configurations

``real`` runs each pruner live against an unpruned arm: the honest
measure of wall time, but a pruner arm's runs are new, noisy measurements,
so 3 seeds take 12-35 min and say little about a rare event such as pruning
the best configuration.  Here every seed is one unpruned study (same setup
as ``real``'s arm ``none``, :func:`experiments.harness.real_runs.run_arm`: a
seeded ``RandomSampler`` over the vpic table's parameters, 3 default runs
first, 2 ranks, 8 steps of 128 MiB with fsync, on the local disk), recorded
step by step; each pruner variant is
then replayed over the recording in trial order.  A replayed trial is asked
after every step, with only the trials it has let complete as its
baseline, what the live pruner would see if every run measured the same; a
pruned trial costs its wall time minus what it skipped (:func:`skipped_s`).
The recordings are saved as JSON (``--record``) and can be replayed again
without re-running the kernels (``--from``).  What a replay cannot show:
live, each arm has its own lucky runs: Wilcoxon at p < 0.3, safe in the
replay of the first set (experiments/results/pruning-replay.txt), pruned the
best live after one lucky early run (experiments/results/pruning-real-wilcoxon-p03.txt).

Printed per variant, over all seeds and over each half of them (a setting
that holds on one half only is luck): median [min-max] wall time saved, % of
search trials pruned, and in how many seeds it pruned the best search
configuration (the best measured value of the seed), plus how far below
that best the best surviving trial (default runs included) was in the
worst such seed: the cost of a wrong prune.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from experiments.harness.real_runs import (
    NO_PRUNER,
    RANKS,
    SPACE,
    TARGET_SAVED_PCT,
    add_run_arguments,
    run_arm,
    seeds_of,
    setup_text,
    step_bytes,
    wall_s,
)
from iobo.pruning import MARGIN_FRACTION, MIN_COMPLETED, WILCOXON_P, MarginPruner, make_pruner
from iobo.trials import ROLE_SEARCH


def _optuna_pruner(kind: str, **kwargs) -> Callable[[], object]:
    def make():
        import optuna

        return getattr(optuna.pruners, kind)(**kwargs)

    return make


# name -> factory; iobo's own first, then variants this benchmark weighs against them
VARIANTS: dict[str, Callable[[], object]] = {
    "median (iobo)": lambda: make_pruner("median"),
    f"margin {MARGIN_FRACTION} (iobo)": lambda: make_pruner("margin"),
    "margin 0.67": lambda: MarginPruner(0.67),
    f"wilcoxon p<{WILCOXON_P} (iobo)": lambda: make_pruner("wilcoxon"),
    "wilcoxon p<0.2": _optuna_pruner("WilcoxonPruner", p_threshold=0.2, n_startup_steps=2),
    "wilcoxon p<0.3": _optuna_pruner("WilcoxonPruner", p_threshold=0.3, n_startup_steps=2),
    "median, warm-up 1 step": _optuna_pruner("MedianPruner", n_startup_trials=MIN_COMPLETED, n_warmup_steps=1),
    "median, warm-up 2 steps": _optuna_pruner("MedianPruner", n_startup_trials=MIN_COMPLETED, n_warmup_steps=2),
    "lower quartile": _optuna_pruner("PercentilePruner", percentile=75.0, n_startup_trials=MIN_COMPLETED),
}


def record(seed: int, args, base: Path) -> list[dict]:
    """One unpruned study (:func:`run_arm`); per trial: role, config, value, wall s, timed s, step MB/s and s."""
    trials, _ = run_arm(NO_PRUNER, seed, args, base)
    nbytes = step_bytes(args.particles)
    out = []
    for t in trials:
        if t.state.name != "COMPLETE":
            continue
        steps = t.user_attrs["step_mb_per_s"]
        out.append({"number": t.number, "role": t.user_attrs["role"], "config": t.user_attrs["config"],
                    "value": t.value, "wall_s": wall_s(t), "io_s": t.user_attrs["seconds"],
                    "step_mb_per_s": steps, "step_s": [nbytes / (v * 1e6) for v in steps],
                    "step_elapsed_s": t.user_attrs.get("step_elapsed_s", [])})
    return out


def skipped_s(trial: dict, step: int) -> float:
    """Seconds a run stopped after ``step`` does not spend: the later steps and the close (with its fsync),
    plus, when the recording has the steps' elapsed times, the untimed making of the later steps' data."""
    if trial.get("step_elapsed_s"):
        close_s = trial["io_s"] - sum(trial["step_s"])  # the open (~1 ms) counted in too
        return close_s + trial["step_elapsed_s"][-1] - trial["step_elapsed_s"][step]
    return trial["io_s"] - sum(trial["step_s"][: step + 1])


def replay(trials: list[dict], make: Callable[[], object]) -> dict:
    """Replay one pruner over one recorded study; returns its wall time and what it pruned."""
    import optuna
    from optuna.trial import TrialState, create_trial

    study = optuna.create_study(direction="maximize", pruner=make())
    pruner = study.pruner
    total, pruned = 0.0, set()
    for t in trials:
        stop_after = None
        if t["role"] == ROLE_SEARCH:
            for k in range(len(t["step_mb_per_s"])):
                so_far = create_trial(state=TrialState.COMPLETE, value=0.0,
                                      intermediate_values=dict(enumerate(t["step_mb_per_s"][: k + 1])))
                if pruner.prune(study, so_far):
                    stop_after = k
                    break
        if stop_after is None:
            total += t["wall_s"]
            study.add_trial(create_trial(value=t["value"], intermediate_values=dict(enumerate(t["step_mb_per_s"]))))
        else:
            total += t["wall_s"] - max(skipped_s(t, stop_after), 0.0)
            pruned.add(t["number"])
    return {"wall_s": total, "pruned": pruned}


def summarise(recordings: list[list[dict]]) -> None:
    print(f"{'pruner':28s} {'wall saved % median [min-max]':>31s} {'search pruned %':>16s} "
          f"{'seeds pruning the best':>23s} {'worst survivor / best':>22s}")
    for name, make in VARIANTS.items():
        saved, share, hits, survivor = [], [], 0, []
        for trials in recordings:
            search = [t for t in trials if t["role"] == ROLE_SEARCH]
            best = max(search, key=lambda t: t["value"])
            result = replay(trials, make)
            base = sum(t["wall_s"] for t in trials)
            saved.append(100 * (1 - result["wall_s"] / base))
            share.append(100 * len(result["pruned"]) / len(search))
            if best["number"] in result["pruned"]:
                hits += 1
                kept = [t["value"] for t in trials if t["number"] not in result["pruned"]]  # defaults included
                survivor.append(100 * max(kept) / best["value"])
        spread = f"{statistics.median(saved):.1f} [{min(saved):.1f}-{max(saved):.1f}]"
        worst = f"{min(survivor):.0f}%" if survivor else "-"
        met = statistics.median(saved) >= TARGET_SAVED_PCT and hits == 0
        print(f"{name:28s} {spread:>31s} {statistics.median(share):16.0f} {hits:>16d} of {len(recordings):<4d} "
              f"{worst:>22s}  target {'MET' if met else 'missed'}")
    print(f"(target: wall time saved >= {TARGET_SAVED_PCT:.0f}% on median and the best never pruned)")


def main(argv=None) -> int:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_arguments(parser, seeds=8)
    parser.add_argument("--record", help="save the recordings to this JSON file")
    parser.add_argument("--from", dest="source", help="replay recordings saved by --record instead of running")
    args = parser.parse_args(argv)
    if args.source:
        saved = json.loads(Path(args.source).read_text())
        print(saved["setup"])
        recordings, first = saved["seeds"], saved.get("first_seed", 0)
    else:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
        base = Path(tempfile.mkdtemp(prefix="replay-", dir=args.workdir))
        setup = (f"vpic, {RANKS} ranks, {setup_text(args)}, on {args.workdir}; "
                 f"RandomSampler over {', '.join(SPACE.names)}; {args.trials} "
                 f"unpruned trials per seed incl. 3 default runs; seeds {args.first_seed}-"
                 f"{args.first_seed + args.seeds - 1}")
        print(setup)
        try:
            first = args.first_seed
            recordings = [record(seed, args, base) for seed in seeds_of(args)]
        finally:
            shutil.rmtree(base, ignore_errors=True)
        if args.record:
            Path(args.record).write_text(json.dumps({"setup": setup, "first_seed": first, "seeds": recordings}))
    for seed, trials in enumerate(recordings, start=first):
        search = [t for t in trials if t["role"] == ROLE_SEARCH]
        best = max(search, key=lambda t: t["value"])
        print(f"seed {seed}: {len(trials)} trials, {sum(t['wall_s'] for t in trials):.0f} s; best search trial "
              f"#{best['number']} {best['value']:.0f} MB/s, step 0 {best['step_mb_per_s'][0]:.0f} MB/s")
    print("\nall seeds")
    summarise(recordings)
    if len(recordings) >= 4:  # a setting that is right should hold on both halves
        half = len(recordings) // 2
        print(f"\nseeds {first}-{first + half - 1}")
        summarise(recordings[:half])
        print(f"\nseeds {first + half}-{first + len(recordings) - 1}")
        summarise(recordings[half:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
