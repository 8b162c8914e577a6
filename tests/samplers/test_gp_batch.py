"""The in-flight benchmark loop (experiments.sampler.batch): k trials running, the first to finish told first."""

from pathlib import Path

import optuna
import pytest

from experiments.harness import cost, problems
from experiments.sampler.batch import run_in_flight
from iobo.samplers import GPSampler
from iobo.surrogate import configuration_key

FIXTURE = Path(__file__).parent / "data" / "tiny_sweep.csv"
NBYTES = 500 * 10**6  # 0.5 s at 1000 MB/s, beside the 2 s launch


class Spy(GPSampler):
    """GPSampler that records the trials RUNNING at each proposal, and the proposal (None: a partial one)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.running: list[list[tuple]] = []
        self.proposals: list[tuple | None] = []

    def sample_relative(self, study, trial, search_space):
        others = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
                  if t.number != trial.number]
        proposal = super().sample_relative(study, trial, search_space)
        self.running.append([configuration_key(t.params) for t in others])
        self.proposals.append(configuration_key(proposal) if len(proposal) == len(search_space) else None)
        return proposal


@pytest.mark.parametrize("k", [1, 3])
def test_k_in_flight_keeps_k_running_and_finishes_in_clock_order(k):
    table = problems.load_table(FIXTURE)
    sampler = Spy(seed=0, n_startup_trials=3)
    run = run_in_flight(table, NBYTES, sampler, budget=9, seed=0, k=k)
    assert len(run.truths) == len(run.finished_s) == 9
    assert run.finished_s == sorted(run.finished_s)
    assert run.truths[0] == table.truth(table.default) or k > 1
    # every proposal after the first k - 1 asks saw k - 1 others running, and proposed none of them again
    steady = sampler.running[k - 1 : 9 - k]
    assert steady and all(len(r) == k - 1 for r in steady)
    assert all(p not in r for p, r in zip(sampler.proposals, sampler.running) if p is not None)
    assert sum(p is not None for p in sampler.proposals) >= 5
    # with one in flight the clock is the sum of the runs' costs: launch + bytes / MB/s, each
    if k == 1:
        assert run.finished_s[0] >= 60 * cost.cost_minutes(NBYTES, 1e9) and run.finished_s[-1] >= 9 * cost.LAUNCH_S


def test_more_in_flight_finishes_the_budget_sooner():
    table = problems.load_table(FIXTURE)
    one = run_in_flight(table, NBYTES, GPSampler(seed=1, n_startup_trials=3), budget=9, seed=1, k=1)
    three = run_in_flight(table, NBYTES, GPSampler(seed=1, n_startup_trials=3), budget=9, seed=1, k=3)
    assert three.finished_s[-1] < 0.6 * one.finished_s[-1]
