"""Requested settings against what an open file shows in effect."""

from iobo.config import IOConfig
from iobo.kernels import vpic
from iobo.space import KiB, MiB
from iobo.stack import chunk_request, unconfirmed, unconfirmed_settings


def test_a_value_reported_differently_or_not_at_all_is_unconfirmed():
    reasons = unconfirmed({"cb_nodes": "4", "cb_buffer_size": "4194304", "romio_x": "on"},
                          {"cb_nodes": "1", "cb_buffer_size": "4194304"})
    assert reasons == {"cb_nodes": "requested '4', but '1' is in effect",
                       "romio_x": "requested 'on', but the library does not report romio_x: it ignored it"}


def test_chunk_request_compares_the_bytes_of_the_chunk_shape_given():
    apply = {"layout": "chunked", "chunk_size": 64 * KiB}
    assert chunk_request(apply, (21, 32, 8, 3), 4) == {"layout": "chunked", "chunk_size": 21 * 32 * 8 * 3 * 4}
    assert chunk_request(apply, None, 4) == apply


def test_unconfirmed_settings_checks_hdf5_values_and_hints_only():
    config = IOConfig.from_values({"alignment_interval": 64 * KiB, "alignment_threshold": 4 * KiB,
                                   "cb_buffer_size": 4 * MiB, "files": "per_process"},
                                  vpic.space())
    apply = {"alignment_interval": 64 * KiB, "alignment_threshold": 4 * KiB, "files": "per_process"}
    effective = {"alignment_interval": 64 * KiB, "alignment_threshold": 1}
    reasons = unconfirmed_settings(config, apply, effective, {"cb_buffer_size": "4194304"}, {})
    assert set(reasons) == {"alignment_threshold", "cb_buffer_size"}  # "files" is no HDF5 setting
