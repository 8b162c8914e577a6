"""Nodes benchmark: the same study on 1, 2 and 3 emulated nodes of the test cluster, 3 ranks each time.

Run from the repository root, as root (it starts its own cluster, ``iobon``, of network namespaces:
tests/support/cluster.py)::

    .venv/bin/python -m experiments.cluster_nodes --nodes 1,2,3 --trials 20 --repeats 4

The program is VPIC-IO (``python -m iobo.kernels.vpic``, HDF5, one shared file) run as a ``--command``
under the preload shim, so each rank's host and bytes are measured (the shim's report) and the study's
context records its node count. Each trial is one Slurm block of N nodes (workflows/site_cluster.py,
``IOBO_CLUSTER_NODES_PER_TRIAL=N``); MPICH's hydra places the 3 ranks round-robin over the block's nodes
(one task per node): 1 node: ranks 0,1,2 on node1; 2 nodes: 0,2 on node1 and 1 on node2; 3 nodes: one each.

Per node count: ``iobo tune`` (``--trials``, GP sampler, no warm start, no confirmation), then
``iobo importance`` and ``iobo best``; then, in a second study, ``--repeats`` interleaved rounds of the
default, the best search trial's configuration (what iobo best recommends), and three collective-buffering
variants (collective transfers with ``cb_config_list *:1``, one aggregator per host; with ``cb_nodes=1``; with
``cb_config_list *:*``, an aggregator on every rank), with ``cb_nodes`` and the aggregator list ROMIO settled
on, read back by the shim. ``--report DIR`` prints the figures of an earlier run's studies again.

The network is NOT shaped: the nodes' veths are memory copies inside one kernel and every node shares the
machine's 2 cores, so the figures show the mechanism (aggregators on other hosts, the two-phase exchange
over veth) and its costs on this machine, not a real cluster's network or per-node bandwidth.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.cluster import Cluster  # noqa: E402  (the test cluster lives with the tests)

SITE = ROOT / "workflows" / "site_cluster.py"
RANKS = 3
COLLECTIVE = {"transfer_mode": "collective", "romio_cb_write": "enable"}
VARIANTS = {  # name -> changes from the system default (the best search trial's is added per node count)
    "default": {},
    "collective *:1": {**COLLECTIVE, "cb_config_list": "*:1"},
    "collective cb_nodes=1": {**COLLECTIVE, "cb_nodes": 1},
    "collective *:*": {**COLLECTIVE, "cb_config_list": "*:*"},
}


def program(particles: int) -> str:
    return f"{sys.executable} -m iobo.kernels.vpic --out {{workdir}} --particles {particles}"


def tune_argv(command: str, storage: str, study: str, trials: int, workdir: Path, seed: int,
              sampler: str = "gp", extra: tuple[str, ...] = ()) -> list[str]:
    """``iobo tune --command`` on ``RANKS`` ranks through the cluster's Parsl config."""
    return [sys.executable, "-m", "iobo.cli", "tune", "--command", command, "--ranks", str(RANKS),
            "--trials", str(trials), "--no-warmup", "--confirm", "0", "--no-warm-start", "--sampler", sampler,
            "--seed", str(seed), "--parsl-config", str(SITE), "--workdir", str(workdir),
            "--storage", storage, "--study", study, *extra]


def on_login(cluster: Cluster, argv: list[str], cwd: Path, env: dict | None = None,
             timeout_s: float = 1200) -> subprocess.CompletedProcess:
    """``argv`` on the cluster's login host (its controller namespace), in ``cwd`` (Parsl's runinfo there)."""
    return subprocess.run(cluster.command(argv), capture_output=True, text=True, cwd=cwd, timeout=timeout_s,
                          env={**cluster.env(), **(env or {})})


def bootstrap_median(values: list[float], level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median (seeded)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(np.asarray(values), (2000, len(values))), axis=1)
    return tuple(float(q) for q in np.quantile(medians, [(1 - level) / 2, (1 + level) / 2]))


def layout(trial) -> str:
    hosts = (trial.user_attrs.get("io") or {}).get("hosts") or {}
    return " ".join(f"{h}:{','.join(map(str, v['ranks']))}" for h, v in sorted(hosts.items())) or "?"


def aggregators(trial) -> str:
    """cb_nodes and romio_aggregator_list as the shim read them back, and the aggregators' hosts."""
    hints = trial.user_attrs.get("hints") or {}
    ranks = (hints.get("romio_aggregator_list") or "").split()
    host_of = {r: h for h, v in ((trial.user_attrs.get("io") or {}).get("hosts") or {}).items() for r in v["ranks"]}
    where = ",".join(sorted({host_of.get(int(r), "?") for r in ranks}))
    return f"cb_nodes {hints.get('cb_nodes', '?')} (ranks {' '.join(ranks) or '?'} on {where or '?'})"


def short(params: dict, default: dict) -> str:
    changed = {k: v for k, v in params.items() if default.get(k) != v}
    return ", ".join(f"{k}={v}" for k, v in sorted(changed.items())) or "(system default)"


def one_count(cluster: Cluster, nodes: int, args, base: Path, say) -> dict:
    """Tune, rank, recommend and re-measure on ``nodes`` nodes (studies and outputs in ``base``/nodes-N);
    returns :func:`figures`."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    here = base / f"nodes-{nodes}"
    here.mkdir()
    work = cluster.base / "work" / f"nodes-{nodes}"
    work.mkdir(parents=True)
    storage = f"sqlite:///{here / 'iobo.db'}"
    env = {"IOBO_CLUSTER_NODES_PER_TRIAL": str(nodes), "IOBO_CLUSTER_IN_FLIGHT": "1"}
    command = program(args.particles)
    done = on_login(cluster, tune_argv(command, storage, "tune", args.trials, work / "tune", args.seed), here, env)
    (here / "tune.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        say(f"  iobo tune failed ({done.returncode}): {done.stderr.strip()[-1500:]}")
    study = optuna.load_study(study_name="tune", storage=storage)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    default = dict(complete[0].params) if complete else {}

    # the variants, interleaved: round r runs each once, in the same order
    variants = {name: {**default, **changes} for name, changes in VARIANTS.items()}
    searched = best_search(complete)
    if searched is not None:
        variants["best search trial"] = dict(searched.params)
    vstorage = f"sqlite:///{here / 'variants.db'}"
    first = on_login(cluster, tune_argv(command, vstorage, "variants", 4, work / "variants", args.seed,
                                         sampler="random"), here, env)
    if first.returncode != 0:
        raise RuntimeError(f"iobo tune of the variants study failed ({first.returncode}): {first.stderr[-2000:]}")
    vstudy = optuna.load_study(study_name="variants", storage=vstorage)
    for r in range(args.repeats):
        for name, params in variants.items():
            vstudy.enqueue_trial(params, user_attrs={"role": "default" if name == "default" else "search",
                                                     "variant": name, "round": r})
    target = 4 + args.repeats * len(variants)  # iobo tune wants one search trial after the 3 default runs
    again = on_login(cluster, tune_argv(command, vstorage, "variants", target, work / "variants", args.seed,
                                        sampler="random"), here, env)
    (here / "variants.log").write_text(first.stdout + first.stderr + again.stdout + again.stderr)
    return figures(here, nodes)


def best_search(complete):
    """The best completed search trial (not a default run: its configuration is what iobo best recommends)."""
    from iobo import trials as vocabulary

    searched = [t for t in complete if vocabulary.role(t) == vocabulary.ROLE_SEARCH]
    return max(searched, key=lambda t: t.value) if searched else None


def iobo_output(here: Path, what: str) -> str:
    """``iobo importance`` or ``iobo best`` of the study ``tune`` in ``here``, kept in ``here``/WHAT.txt (run
    once: the storage is a local file, no cluster needed)."""
    kept = here / f"{what}.txt"
    if not kept.exists():
        done = subprocess.run([sys.executable, "-m", "iobo.cli", what, "--storage", f"sqlite:///{here / 'iobo.db'}",
                               "--study", "tune"], capture_output=True, text=True, cwd=here)
        kept.write_text(done.stdout + done.stderr)
    return kept.read_text()


def span_s(trials) -> float:
    """Seconds from the first trial's start to the last one's end."""
    done = [t for t in trials if t.datetime_start and t.datetime_complete]
    if not done:
        return 0.0
    return (max(t.datetime_complete for t in done) - min(t.datetime_start for t in done)).total_seconds()


def figures(here: Path, nodes: int) -> dict:
    """The figures of ``nodes`` nodes from the studies in ``here`` (``tune`` in iobo.db, ``variants`` in
    variants.db) and the outputs of iobo importance and iobo best."""
    import optuna

    from iobo.importance import USER_ATTR
    from iobo.measure import paired_ratio

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    importance = iobo_output(here, "importance")  # stores the ranking on the study: before it is read
    best = iobo_output(here, "best")
    study = optuna.load_study(study_name="tune", storage=f"sqlite:///{here / 'iobo.db'}")
    every = study.trials
    complete = [t for t in every if t.state.name == "COMPLETE"]
    vtrials = optuna.load_study(study_name="variants", storage=f"sqlite:///{here / 'variants.db'}").trials
    runs: dict[str, dict[int, object]] = {}
    for t in vtrials:
        if "variant" in t.user_attrs:
            runs.setdefault(t.user_attrs["variant"], {})[t.user_attrs["round"]] = t
    return dict(nodes=nodes, trials=every, failed=[t for t in every if t.state.name == "FAIL"], complete=complete,
                default=dict(complete[0].params) if complete else {}, best=best_search(complete),
                ranking=study.user_attrs.get(USER_ATTR) or {}, importance=importance, best_text=best,
                context=study.user_attrs.get("context", {}), runs=runs, tune_s=span_s(every),
                variants_s=span_s(vtrials), paired_ratio=paired_ratio)


def top(view: dict, k: int = 4) -> str:
    return ", ".join(f"{name} {100 * share:.0f}%" for name, share in
                     sorted(view.items(), key=lambda item: -item[1])[:k] if share > 0) or "none above 0%"


def report(m: dict, say) -> None:
    n = m["nodes"]
    say(f"\n== {n} node(s), {RANKS} ranks: study context nodes={m['context'].get('nodes')}, "
        f"rank layout {layout(m['complete'][0]) if m['complete'] else '?'}")
    say(f"  tuning: {len(m['trials'])} trials, {len(m['complete'])} complete, {len(m['failed'])} failed "
        f"({m['tune_s'] / 60:.1f} min)")
    for t in m["failed"]:
        say(f"    trial {t.number} FAIL: {(t.user_attrs.get('fail_reason') or '?').splitlines()[0][:160]}")
    defaults = [t.value for t in m["complete"] if t.user_attrs.get("role") == "default"]
    if defaults:
        low, high = bootstrap_median(defaults)
        say(f"  default (tuning study): median {statistics.median(defaults):.1f} MB/s of {len(defaults)} "
            f"(95% interval of the median {low:.1f}-{high:.1f})")
    if m["best"] is not None:
        say(f"  best search trial {m['best'].number}: {m['best'].value:.1f} MB/s, "
            f"{short(m['best'].params, m['default'])}; {aggregators(m['best'])}")
    for view in ("gp-ablation", "ped-anova"):
        if view in m["ranking"]:
            say(f"  knobs ranked by {view}: {top(m['ranking'][view])}")
    say("  iobo importance:\n" + "\n".join("    " + line for line in m["importance"].strip().splitlines()))
    say("  iobo best:\n" + "\n".join("    " + line for line in m["best_text"].strip().splitlines()))
    runs = m["runs"]
    default_runs = runs["default"]
    say(f"  re-measured, interleaved ({max((len(r) for r in runs.values()), default=0)} rounds):")
    say(f"    {'variant':24s} {'runs':>4s} {'median MB/s':>12s} {'95% interval':>15s} {'vs default (paired)':>28s}"
        f"  ROMIO read back")
    for name, by_round in runs.items():
        done = {r: t for r, t in by_round.items() if t.state.name == "COMPLETE"}
        values = [t.value for t in done.values()]
        if not values:
            say(f"    {name:24s} {len(by_round):4d} runs, none complete")
            continue
        low, high = bootstrap_median(values) if len(values) > 1 else (values[0], values[0])
        pairs = [(t.value, default_runs[r].value) for r, t in done.items()
                 if r in default_runs and default_runs[r].state.name == "COMPLETE"]
        ratio = ""
        if name != "default" and len(pairs) >= 2:
            g, (lo, hi) = m["paired_ratio"]([p[0] for p in pairs], [p[1] for p in pairs])
            ratio = f"{g:.2f}x ({lo:.2f}-{hi:.2f})"
        last = max(done.items())[1]
        say(f"    {name:24s} {len(values):4d} {statistics.median(values):12.1f} {low:7.1f}-{high:<7.1f} "
            f"{ratio:>28s}  {aggregators(last)}")
        if len(values) < len(by_round):
            for t in by_round.values():
                if t.state.name != "COMPLETE":
                    say(f"      {name} round {t.user_attrs['round']} {t.state.name}: "
                        f"{(t.user_attrs.get('fail_reason') or '').splitlines()[:1]}")
    best_params = next(iter(runs.get("best search trial", {}).values()), None)
    say(f"  (variants: {m['variants_s'] / 60:.1f} min; best search trial = "
        f"{short(best_params.params, m['default']) if best_params else '?'})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="1,2,3", help="node counts, each a study (default: %(default)s)")
    parser.add_argument("--trials", type=int, default=20, help="finished trials per study (3 default runs included)")
    parser.add_argument("--repeats", type=int, default=4, help="interleaved rounds of the variants")
    parser.add_argument("--particles", type=int, default=65536, help="per rank (65536: 4 MiB per rank, 2 steps)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cluster", default="iobon", help="the test cluster's name (its own namespaces)")
    parser.add_argument("--out", default=str(ROOT / "experiments/results/cluster-nodes.txt"))
    parser.add_argument("--report", metavar="DIR", help="print the figures of an earlier run's studies (the "
                        "directory it named at the end) again, running nothing on the cluster")
    args = parser.parse_args(argv)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    started = time.monotonic()
    load = os.getloadavg()[0]
    say(f"# python -m experiments.cluster_nodes {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"# {time.strftime('%Y-%m-%d %H:%M')} on the shared 2-core machine, load average {load:.1f} at start")
    say(f"nodes benchmark: VPIC-IO --command on {RANKS} ranks, {args.particles} particles x 8 float32 x 2 steps "
        f"per rank ({args.particles * 64 / 2**20:.0f} MiB per rank), one shared HDF5 file in the cluster's shared "
        f"directory; {args.trials} trials per node count, then {args.repeats} interleaved rounds of the variants")
    say("network NOT shaped: veth pairs inside one kernel (memory copies), every node on the same 2 cores and "
        "file system: the figures show the mechanism (aggregators on other hosts, the exchange over veth), "
        "not a real cluster's costs")
    if args.report:
        say(f"# the figures of the run whose studies are in {args.report}, printed again from them (--report)")
        for here in sorted(Path(args.report).glob("nodes-*")):
            report(figures(here, int(here.name.split("-")[1])), say)
        Path(args.out).write_text("\n".join(lines) + "\n")
        return 0
    cluster = Cluster(args.cluster, 3)
    cluster.down(check=False)
    cluster.up()
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="iobo-cluster-nodes-"))
    try:
        for nodes in [int(n) for n in args.nodes.split(",")]:
            report(one_count(cluster, nodes, args, base, say), say)
        left = {h: p for h, p in cluster.job_processes().items() if p}
        jobs = cluster.run(["squeue", "-h", "-t", "RUNNING,PENDING", "-o", "%i %T %N"]).stdout.split("\n")
        say(f"\nafterwards: processes on the nodes {sum(map(len, left.values()))} {left or ''}, "
            f"jobs running or pending {len([j for j in jobs if j.strip()])}")
    finally:
        cluster.down(check=False)
        say(f"cluster down, left: {cluster.leftovers() or 'nothing'}; total {(time.monotonic() - started) / 60:.1f} min "
            f"(load average {os.getloadavg()[0]:.1f} at the end); studies in {base}")
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
