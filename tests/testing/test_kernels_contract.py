"""Every built-in kernel keeps the kernel contract (iobo.testing.kernels) on 2 real MPI ranks."""

import pytest

from iobo import kernels
from iobo.testing.kernels import QUICK_OPTIONS, KernelContract, builtin_cases


class TestBuiltinKernels(KernelContract):
    @pytest.fixture(params=builtin_cases(), ids=lambda case: case.spec.name)
    def kernel_case(self, request):
        return request.param


def test_every_builtin_kernel_has_quick_options_it_accepts():
    assert sorted(QUICK_OPTIONS) == sorted(kernels.BUILTINS)
    for case in builtin_cases():
        assert case.spec.resolve_options(case.options)  # raises ConfigError for a bad option
