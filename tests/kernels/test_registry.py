"""The kernel registry: built-in kernels always there, user kernels added and removed by name."""

import pytest

from iobo import kernels
from iobo.errors import ConfigError
from iobo.kernels import KernelSpec, vpic


def user_spec(name: str) -> KernelSpec:
    """A user kernel with VPIC-IO's space and options under another module."""
    return KernelSpec(name=name, module="my_kernel", space=vpic.space, workload=vpic.workload,
                      options=dict(vpic.SPEC.options), check_options=vpic.check_options)


def test_every_builtin_is_found_by_its_name_as_its_own_module():
    assert kernels.names() == sorted(kernels.BUILTINS)
    for name in kernels.BUILTINS:
        spec = kernels.get(name)
        assert (spec.name, spec.module) == (name, f"iobo.kernels.{name}")


def test_a_user_kernel_named_like_a_builtin_is_refused_and_the_builtins_stay():
    with pytest.raises(ConfigError, match="kernel name 'vpic' is already taken by a built-in kernel.*replace=True"):
        kernels.register(user_spec("vpic"))
    assert kernels.get("vpic") is vpic.SPEC
    assert kernels.names() == sorted(kernels.BUILTINS)


def test_a_user_kernel_is_registered_until_unregistered():
    spec = kernels.register(user_spec("mine"))
    try:
        assert kernels.get("mine") is spec and "mine" in kernels.names()
        with pytest.raises(ConfigError, match="'mine' is already taken by a registered kernel"):
            kernels.register(user_spec("mine"))
    finally:
        assert kernels.unregister("mine") is spec
    with pytest.raises(ConfigError, match="unknown kernel 'mine'; known kernels: bdcats, checkpoint"):
        kernels.get("mine")
    with pytest.raises(ConfigError, match="cannot unregister kernel 'mine': it is not registered"):
        kernels.unregister("mine")


def test_replace_shadows_a_builtin_until_unregistered():
    with kernels.registered(user_spec("vpic"), replace=True) as spec:
        assert kernels.get("vpic") is spec and kernels.names().count("vpic") == 1
    assert kernels.get("vpic") is vpic.SPEC


class BlockFailed(Exception):
    """Raised inside a ``registered`` block by the test below."""


def test_registered_removes_the_kernel_when_the_block_fails():
    with pytest.raises(BlockFailed):
        with kernels.registered(user_spec("brief")):
            raise BlockFailed
    assert "brief" not in kernels.names()


def test_a_builtin_cannot_be_unregistered():
    with pytest.raises(ConfigError, match="'tile': it is a built-in kernel, which cannot be removed"):
        kernels.unregister("tile")
    assert kernels.get("tile").name == "tile"
