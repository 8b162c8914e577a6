"""Which parameters of a configuration can take effect, read from this machine's /proc/mounts."""

import os

import pytest

from iobo.config import IOConfig
from iobo.space import KiB, MiB
from iobo.stack import applicable, filesystem_type, not_applicable, requested_hints

CHANGED = {"cb_buffer_size": 4 * MiB, "striping_factor": 4, "transfer_mode": "collective", "coll_metadata": True,
           "alignment_interval": 64 * KiB, "layout": "chunked"}


def mount_point_of(path: str) -> str:
    """The mount point holding ``path``, by walking up while the device stays the same."""
    path = os.path.realpath(path)
    while path != "/" and os.stat(os.path.dirname(path)).st_dev == os.stat(path).st_dev:
        path = os.path.dirname(path)
    return path


def test_filesystem_type_is_that_of_the_mount_holding_the_path(scratch):
    with open("/proc/mounts") as mounts:
        listed = {fields[1]: fields[2] for fields in (line.split() for line in mounts)}
    mount = mount_point_of(str(scratch))
    assert filesystem_type(scratch / "not" / "made" / "yet") == listed[mount] == filesystem_type(scratch)
    assert filesystem_type("/proc/self") == "proc"


def test_file_per_process_skips_every_mpi_setting():
    config = IOConfig.from_values(CHANGED)
    reasons = not_applicable(config, "lustre", file_per_process=True)
    assert set(reasons) == {"cb_buffer_size", "striping_factor", "transfer_mode", "coll_metadata"}
    assert all("POSIX (sec2)" in reason for reason in reasons.values())


@pytest.mark.parametrize("fs_type, skipped", [("tmpfs", {"striping_factor"}), ("lustre", set())])
def test_striping_applies_on_lustre_only(fs_type, skipped):
    config = IOConfig.from_values(CHANGED)
    reasons = not_applicable(config, fs_type, file_per_process=False)
    assert set(reasons) == skipped
    apply = applicable(config, reasons)
    assert set(apply) == set(CHANGED) - skipped | {"chunk_size"}  # the child comes with its parent
    assert apply["chunk_size"] == MiB  # at its default
    assert requested_hints(config, reasons) == {"cb_buffer_size": str(4 * MiB)} | (
        {} if skipped else {"striping_factor": "4"})


def test_the_default_configuration_applies_nothing():
    config = IOConfig.default()
    assert not_applicable(config, "tmpfs", file_per_process=True) == {}
    assert applicable(config, {}) == {} and requested_hints(config, {}) == {}
