"""IOConfig: what is applied, and every export format."""

import json
import xml.etree.ElementTree as ET

import pytest

from iobo import ConfigError, IOConfig, SpaceError
from iobo.space import KiB, MiB


@pytest.fixture
def tuned():
    return IOConfig.from_values({
        "alignment_threshold": 64 * KiB, "alignment_interval": 4 * MiB, "cb_buffer_size": 64 * MiB,
        "cb_nodes": 2, "romio_cb_write": "enable", "cb_config_list": "*:*", "striping_factor": 16,
        "striping_unit": 4 * MiB, "layout": "chunked", "chunk_size": 4 * MiB,
    })


def test_default_config_applies_nothing():
    config = IOConfig.default()
    assert config.is_default()
    assert config.mpi_hints() == {}
    assert config.romio_hints_text() == ""
    assert config.h5tuner_xml().count("/>") == 3  # three empty sections


def test_changed_and_hints(tuned):
    assert tuned.mpi_hints() == {
        "cb_buffer_size": str(64 * MiB), "cb_nodes": "2", "romio_cb_write": "enable",
        "cb_config_list": "*:*", "striping_factor": "16", "striping_unit": str(4 * MiB),
    }
    assert tuned.romio_hints_text().splitlines()[0] == "cb_buffer_size 67108864"
    assert "alignment_interval" in tuned.changed() and "meta_block_size" not in tuned.changed()


def test_json_round_trip(tuned):
    again = IOConfig.from_json(tuned.export("json"))
    assert again == tuned


def test_env_export_carries_every_change(tuned):
    env = tuned.env("/tmp/hints")
    assert env["ROMIO_HINTS"] == "/tmp/hints"
    assert json.loads(env["IOBO_CB_NODES"]) == 2
    assert json.loads(env["IOBO_LAYOUT"]) == "chunked"
    assert len([k for k in env if k.startswith("IOBO_")]) == len(tuned.changed())
    assert tuned.export("env", "/tmp/hints").startswith("export ")


def test_h5tuner_xml_layout(tuned):
    root = ET.fromstring(tuned.h5tuner_xml())
    assert root.tag == "Parameters"
    assert root.find("High_Level_IO_Library/alignment").text == f"{64 * KiB},{4 * MiB}"
    assert root.find("High_Level_IO_Library/chunk_size").text == str(4 * MiB)
    assert root.find("Middleware_Layer/cb_nodes").text == "2"
    assert root.find("Parallel_File_System/striping_factor").text == "16"


def test_lfs_command(tuned):
    assert tuned.export("lfs").strip() == f"lfs setstripe -c 16 -S {4 * MiB} OUTPUT_DIR"
    assert IOConfig.default().export("lfs").startswith("#")


def test_bad_exports_and_json_are_rejected(tuned):
    with pytest.raises(ConfigError, match="export format 'yaml' is unknown; allowed: json"):
        tuned.export("yaml")
    with pytest.raises(ConfigError, match="not JSON"):
        IOConfig.from_json("{")
    with pytest.raises(SpaceError, match="unknown parameter"):
        IOConfig.from_json('{"nope": 1}')
