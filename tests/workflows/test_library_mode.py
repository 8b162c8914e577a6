"""iobo.Tuner as a library inside a pipeline that loaded its own Parsl configuration."""

import os
from pathlib import Path

import parsl
from optuna.trial import TrialState
from parsl import python_app

from iobo import IOConfig, Tuner
from iobo.runners.parsl import loaded_dfk, local_config
from iobo.trials import best_trial

from support.sizes import SMALL_VPIC


@python_app
def pipeline_task(x):
    return x + 1


def test_the_tuner_uses_the_pipelines_parsl_with_k_in_flight_and_leaves_it_loaded(storage, scratch, monkeypatch):
    # workers import this module (its app is pickled by reference) and, through it, tests/support
    here = Path(__file__).parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(here), str(here.parent), os.environ.get("PYTHONPATH", "")]))
    dfk = parsl.load(local_config(2, str(scratch / "runinfo")))
    try:
        before = pipeline_task(1)  # the pipeline's own work, in flight while tuning
        tuner = Tuner(kernel="vpic", ranks=1, trials=4, storage=storage, study="lib", workdir=str(scratch),
                      kernel_options=SMALL_VPIC, max_in_flight=2, echo=None)
        study = tuner.run()
        assert loaded_dfk() is dfk  # not replaced, not cleaned up
        assert before.result(timeout=60) == 2 and pipeline_task(2).result(timeout=60) == 3
        trials = study.get_trials()
        assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
        assert trials[1].user_attrs["started_unix"] < trials[0].datetime_complete.timestamp()  # 2 in flight
        best = tuner.best_config()
        top = best_trial(study)  # the incumbent; its knobs that did not apply stay at their defaults
        expected = {k: tuner.space[k].default if k in top.user_attrs["not_applied"] else v
                    for k, v in top.user_attrs["config"].items()}
        assert isinstance(best, IOConfig) and best.values == expected
        # the pipeline's two tasks, the unrecorded warm-up runs and the four trials, all through this DFK
        assert dfk.task_count == 2 + len(tuner.warmup_mb_per_s) + 4
    finally:
        dfk.cleanup()
        parsl.clear()
