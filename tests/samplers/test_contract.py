"""Every sampler of iobo.samplers passes the sampler contract (iobo.testing.samplers)."""

import optuna
import pytest

import iobo.samplers
from iobo.samplers import GPSampler, ImpactFirstSampler
from iobo.testing.samplers import SamplerContract

optuna.logging.set_verbosity(optuna.logging.WARNING)

SAMPLERS = {
    "gp": (lambda seed: GPSampler(seed=seed), 1),
    "gp-max-repeats-2": (lambda seed: GPSampler(seed=seed, max_repeats=2), 2),
    "impact-first": (lambda seed: ImpactFirstSampler(seed=seed), 1),
}


@pytest.fixture(params=list(SAMPLERS), scope="module")
def case(request):
    return SAMPLERS[request.param]


class TestContract(SamplerContract):
    @pytest.fixture
    def make_sampler(self, case):
        return case[0]

    @pytest.fixture
    def max_repeats(self, case):
        return case[1]


def test_every_sampler_of_the_package_is_under_contract():
    covered = {type(factory(0)).__name__ for factory, _ in SAMPLERS.values()}
    assert covered == set(iobo.samplers.__all__)
