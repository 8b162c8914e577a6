"""Does a table's S survive a re-measurement?  Runs of one job share its moment on the machine (issue 31, item 1).

Run from the repository root::

    .venv/bin/python -m experiments.truth_jobs --out experiments/results/truth-jobs.txt

:mod:`experiments.sweep` measures a configuration's runs in one process (a
job); a table recorded in one pass has one job per configuration, so the
bootstrap of its runs cannot see how far a job's runs sit from another
job's.  For each table of :data:`TABLES_DIR` measured in one job per
configuration that has a multi-pass table of the same workload and grid
(:func:`experiments.harness.problems.multi_pass_companion`), this prints:

- the multi-pass table's spread of ``log`` MB/s within a job and between
  jobs of one configuration (quartiles over configurations; the median is
  :func:`experiments.harness.truth.between_job_sd`, from
  :func:`~experiments.harness.truth.job_spreads`);
- the one-pass table's S counted from its runs alone and with the jobs'
  spread added (:func:`experiments.harness.truth.truth_of`);
- where the one-pass table's best configurations, and each S, rank when the
  same grid is re-measured in the multi-pass table (its median as a share
  of that table's best median, and whether it is in that table's S);
- the rank correlation of the two tables' medians.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import stats

from experiments.harness.problems import load_table
from experiments.harness.runs import commit, write_report
from experiments.harness.truth import Truth, job_spreads, truth_of

TABLES_DIR = Path(__file__).parent / "tables"
SHOWN = 5  # the one-pass table's best configurations followed into the re-measurement


def rank_in(truth: Truth, key: tuple) -> int:
    return int(np.flatnonzero(np.argsort(-truth.medians, kind="stable") == truth.keys.index(key))[0]) + 1


def report(path: Path) -> list[str] | None:
    single = load_table(path)
    if single.companion is None:
        return None
    multi = load_table(single.companion)
    within, between = job_spreads(multi)
    q = lambda x: " / ".join(f"{v:.3f}" for v in np.percentile(x, [25, 50, 75]))  # noqa: E731
    runs_only = truth_of(replace(single, companion=None))
    with_jobs = truth_of(single)
    again = truth_of(multi)
    share = between**2 / (between**2 + within**2 + 1e-300)
    out = [f"\n## {single.name} (one job of {len(next(iter(single.repeats.values())))} runs per configuration) "
           f"re-measured in {multi.name} ({len(np.unique(next(iter(multi.jobs.values()))))} jobs per configuration)",
           f"{multi.name}, log MB/s per configuration, quartiles 25/50/75%: within a job {q(within)}; between jobs "
           f"{q(between)}; the jobs' share of a configuration's variance, median {np.median(share):.0%}",
           f"{single.name}, runs only:     {runs_only.describe()}",
           f"{single.name}, with the jobs: {with_jobs.describe()}",
           f"{multi.name} itself:           {again.describe()}",
           f"the {SHOWN} best of {single.name} (rank there: median MB/s) -> rank in {multi.name}: share of its best "
           f"median, in its S?"]
    order = np.argsort(-runs_only.medians, kind="stable")[:SHOWN]
    for i in order:
        key = runs_only.keys[i]
        j = again.keys.index(key)
        out.append(f"  {rank_in(runs_only, key):>3}: {runs_only.medians[i]:>7,.0f} "
                   f"{'S(runs)' if key in runs_only.members else '       '} "
                   f"{'S(jobs)' if key in with_jobs.members else '       '} -> {rank_in(again, key):>3} of "
                   f"{len(again.keys)}: {again.medians[j] / again.best:.0%}, "
                   f"{'in' if key in again.members else 'not in'} S")
    for label, truth in (("runs only", runs_only), ("with the jobs", with_jobs)):
        members = sorted(truth.members, key=lambda k: rank_in(again, k))
        kept = sum(k in again.members for k in members)
        out.append(f"S counted from {label}: {len(members)} configurations; {kept} of them in {multi.name}'s S; "
                   f"their shares there " + ", ".join(f"{again.medians[again.keys.index(k)] / again.best:.0%}"
                                                      for k in members))
    common = [k for k in single.repeats if k in multi.repeats]
    rho = stats.spearmanr([runs_only.medians[runs_only.keys.index(k)] for k in common],
                          [again.medians[again.keys.index(k)] for k in common]).correlation
    out.append(f"rank correlation of the two tables' medians over {len(common)} configurations: {rho:.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="also write the report here, headed by the command and commit")
    args = parser.parse_args(argv)
    lines = [f"# {shlex.join([sys.executable.split('/')[-1], '-m', 'experiments.truth_jobs', *(argv or sys.argv[1:])])}"
             f"; commit {commit()}"]
    for path in sorted(TABLES_DIR.glob("*.csv")):
        lines += report(path) or []
    write_report(lines, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
