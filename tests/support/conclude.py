"""One tuner of a study shared with others, run to its end as ``iobo tune`` runs it: the search, then the
walk-back and the confirmation (``Tuner.confirm``). Prints the tuner's lines, then ``REPORT`` and the report.

    python conclude.py STORAGE STUDY WORKDIR SEED

The kernel is :mod:`slow_shared_vpic` (a file per process is certainly faster), small, on 2 ranks, with a
local runner; the study must hold its default runs and a search trial with ``files=per_process`` queued
(:func:`prepare`), so that the walk-back has a gain to test whichever tuner asks what.
"""

import sys

import optuna

from iobo import kernels
from iobo.report import build_report
from iobo.runners.local import LocalRunner
from iobo.tuner import Tuner

import slow_shared_vpic
from sizes import SMALL_VPIC

TRIALS = 4  # 3 default runs and the queued search trial


def tuner(storage: str, study: str, workdir: str, seed: int, echo=print) -> Tuner:
    return Tuner(kernel="slowshared", ranks=2, trials=TRIALS, storage=storage, study=study, workdir=workdir,
                 kernel_options=SMALL_VPIC, sampler=optuna.samplers.RandomSampler(seed=seed), echo=echo,
                 warmup=False, runner=LocalRunner(1))


def prepare(storage: str, study: str, workdir: str) -> None:
    """Queue the default runs and a search trial with a file per process (all the study's trials)."""
    with kernels.registered(slow_shared_vpic.spec()):
        t = tuner(storage, study, workdir, 0, echo=None)
        opened = t.open_study()
        t.enqueue_defaults(opened)
        opened.enqueue_trial({**t.space.default(), "files": "per_process"}, user_attrs={"role": "search"})


if __name__ == "__main__":
    storage, name, workdir, seed = sys.argv[1:5]
    with kernels.registered(slow_shared_vpic.spec()):
        mine = tuner(storage, name, workdir, int(seed), echo=lambda line: print(line, flush=True))
        mine.run()
        study = mine.confirm(2, pairs=3)
    print("REPORT")
    print(build_report(study).text(), flush=True)
