"""Darshan log characterisation, checked on the real logs pydarshan ships.

Expectations are computed here from the raw records pydarshan returns as plain
dicts (not the DataFrames the module uses), so a wrong sum, grouping or
counter name in ``iobo.integrations.darshan`` fails a test.
"""

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import darshan
import pytest

from iobo import ConfigError
from iobo.integrations.darshan import characterize, format_characterization

LOGS = Path(darshan.__file__).parent / "examples" / "example_logs"
VPIC = LOGS / "example.darshan"  # VPIC-IO (vpicio_uni) writing one HDF5 file from 2048 ranks
IOR_HDF5 = LOGS / "ior_hdf5_example.darshan"  # IOR -a HDF5 on 4 ranks
MACSIO = LOGS / "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"  # MACSio, HDF5 SIF
IOR_FPP = LOGS / "sample-badost.darshan"  # IOR, POSIX file per process on 2048 ranks
NO_POSIX = LOGS / "noposix.darshan"  # STDIO and LUSTRE only
ALL_LOGS = [VPIC, IOR_HDF5, MACSIO, IOR_FPP, NO_POSIX]
MPIIO_LOGS = [VPIC, IOR_HDF5, MACSIO]
PREFIX = {"POSIX": "POSIX", "MPI-IO": "MPIIO", "STDIO": "STDIO", "H5D": "H5D"}


def open_report(path):
    return darshan.DarshanReport(str(path), read_all=False)


def raw_records(path, module):
    """The module's records as dicts of rank, id, counters and fcounters ([] without the module)."""
    report = open_report(path)
    if module not in report.modules:
        return []
    report.mod_read_all_records(module, dtype="dict")
    return [
        {"rank": r["rank"], "id": r["id"], "counters": r["counters"], "fcounters": r["fcounters"]}
        for r in report.records[module]
    ]


def total(records, counter):
    return sum(int(r["counters"][counter]) for r in records)


def byte_modules(path):
    return [module for module in PREFIX if raw_records(path, module)]


@pytest.fixture(scope="module")
def characterized():
    """Each log characterised once for the whole file."""
    return {path: characterize(path) for path in ALL_LOGS}


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: p.stem[:12])
def test_job_facts_match_the_log(characterized, path):
    c = characterized[path]
    report = open_report(path)
    assert c.nprocs == report.metadata["job"]["nprocs"]
    assert c.run_seconds == report.metadata["job"]["run_time"]
    assert c.executable == report.metadata["exe"]
    assert c.modules_present == tuple(report.modules)


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: p.stem[:12])
def test_bytes_per_module_are_the_summed_counters(characterized, path):
    c = characterized[path]
    assert list(c.io) == byte_modules(path)
    for module, io in c.io.items():
        records = raw_records(path, module)
        assert io.bytes_read == total(records, f"{PREFIX[module]}_BYTES_READ")
        assert io.bytes_written == total(records, f"{PREFIX[module]}_BYTES_WRITTEN")


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: p.stem[:12])
def test_files_split_into_shared_per_process_and_partly_shared(characterized, path):
    for module, io in characterized[path].io.items():
        records = raw_records(path, module)
        ranks, moved = defaultdict(set), defaultdict(int)
        for r in records:
            ranks[r["id"]].add(r["rank"])
            moved[r["id"]] += int(r["counters"][f"{PREFIX[module]}_BYTES_READ"])
            moved[r["id"]] += int(r["counters"][f"{PREFIX[module]}_BYTES_WRITTEN"])
        shared = [f for f, seen in ranks.items() if seen == {-1}]
        per_process = [f for f, seen in ranks.items() if len(seen) == 1 and -1 not in seen]
        partly = [f for f, seen in ranks.items() if len(seen) > 1]
        assert (io.shared_files, io.per_process_files, io.partly_shared_files) == (
            len(shared), len(per_process), len(partly))
        assert io.shared_bytes == sum(moved[f] for f in shared)
        assert io.per_process_bytes == sum(moved[f] for f in per_process)
        assert io.partly_shared_bytes == sum(moved[f] for f in partly)


@pytest.mark.parametrize("path", MPIIO_LOGS, ids=lambda p: p.stem[:12])
def test_mpiio_operations_are_the_summed_counters(characterized, path):
    ops = characterized[path].mpiio_ops
    records = raw_records(path, "MPI-IO")
    assert ops.collective_writes == total(records, "MPIIO_COLL_WRITES") + total(records, "MPIIO_SPLIT_WRITES")
    assert ops.collective_reads == total(records, "MPIIO_COLL_READS") + total(records, "MPIIO_SPLIT_READS")
    assert ops.independent_writes == total(records, "MPIIO_INDEP_WRITES")
    assert ops.independent_reads == total(records, "MPIIO_INDEP_READS")
    assert ops.nonblocking_writes == total(records, "MPIIO_NB_WRITES")
    assert ops.nonblocking_reads == total(records, "MPIIO_NB_READS")


def test_logs_without_mpiio_or_posix_say_so(characterized):
    assert characterized[IOR_FPP].mpiio_ops is None
    assert characterized[NO_POSIX].pattern is None
    assert list(characterized[NO_POSIX].access_sizes) == []


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: p.stem[:12])
def test_access_size_histograms_and_most_common_sizes(characterized, path):
    counter_prefix = {"POSIX": "POSIX_SIZE_{op}_", "MPI-IO": "MPIIO_SIZE_{op}_AGG_"}
    sizes = characterized[path].access_sizes
    assert list(sizes) == [m for m in counter_prefix if raw_records(path, m)]
    for module, found in sizes.items():
        records = raw_records(path, module)
        for op, histogram in (("READ", found.read_histogram), ("WRITE", found.write_histogram)):
            prefix = counter_prefix[module].format(op=op)
            expected = {name[len(prefix):]: 0 for name in records[0]["counters"] if name.startswith(prefix)}
            for size_bin in expected:
                expected[size_bin] = total(records, prefix + size_bin)
            assert histogram == expected
        counts = defaultdict(int)
        for r in records:
            for slot in (1, 2, 3, 4):
                size = int(r["counters"][f"{PREFIX[module]}_ACCESS{slot}_ACCESS"])
                counts[size] += int(r["counters"][f"{PREFIX[module]}_ACCESS{slot}_COUNT"])
        top = sorted(((s, n) for s, n in counts.items() if n > 0), key=lambda sn: (-sn[1], sn[0]))[:4]
        assert [(a.size_bytes, a.count) for a in found.most_common] == top


@pytest.mark.parametrize("path", [VPIC, IOR_HDF5, MACSIO, IOR_FPP], ids=lambda p: p.stem[:12])
def test_sequential_and_consecutive_fractions(characterized, path):
    pattern = characterized[path].pattern
    records = raw_records(path, "POSIX")
    for op in ("READ", "WRITE"):
        ops, seq, consec = (total(records, f"POSIX_{kind}{op}S") for kind in ("", "SEQ_", "CONSEC_"))
        name = op.lower()
        assert getattr(pattern, f"{name}s") == ops
        assert getattr(pattern, f"sequential_{name}_fraction") == (seq / ops if ops else None)
        assert getattr(pattern, f"consecutive_{name}_fraction") == (consec / ops if ops else None)


@pytest.mark.parametrize("path", [VPIC, IOR_HDF5, IOR_FPP, NO_POSIX], ids=lambda p: p.stem[:12])
def test_lustre_striping_per_file(characterized, path):
    report = open_report(path)
    report.mod_read_all_lustre_records(dtype="dict")
    expected = sorted(
        (report.name_records[r["id"]], int(comp["counters"]["LUSTRE_COMP_STRIPE_SIZE"]),
         int(comp["counters"]["LUSTRE_COMP_STRIPE_COUNT"]))
        for r in report.records["LUSTRE"] for comp in r["components"]
    )
    found = sorted((layout.path, layout.stripe_size_bytes, layout.stripe_count)
                   for layout in characterized[path].lustre)
    assert found == expected and found
    assert characterized[MACSIO].lustre == ()


def test_bandwidth_of_a_shared_file_is_bytes_over_the_slowest_rank_time(characterized):
    # VPIC-IO's MPI-IO traffic is one shared file, so Darshan's I/O time is that
    # file's slowest-rank time.
    (record,) = raw_records(VPIC, "MPI-IO")
    seconds = float(record["fcounters"]["MPIIO_F_SLOWEST_RANK_TIME"])
    moved = int(record["counters"]["MPIIO_BYTES_READ"]) + int(record["counters"]["MPIIO_BYTES_WRITTEN"])
    c = characterized[VPIC]
    assert c.bandwidth_module == "MPI-IO"
    assert c.io["MPI-IO"].io_seconds == pytest.approx(seconds)
    assert c.bandwidth_mb_per_s == pytest.approx(moved / seconds / 1e6)


def test_bandwidth_of_files_per_process_is_bytes_over_the_slowest_rank(characterized):
    # With a file per process, Darshan's I/O time is the largest per-rank sum of
    # read, write and metadata time.
    records = raw_records(IOR_FPP, "POSIX")
    per_rank = defaultdict(float)
    for r in records:
        per_rank[r["rank"]] += sum(float(r["fcounters"][f"POSIX_F_{kind}_TIME"]) for kind in ("READ", "WRITE", "META"))
    moved = total(records, "POSIX_BYTES_READ") + total(records, "POSIX_BYTES_WRITTEN")
    c = characterized[IOR_FPP]
    assert c.bandwidth_module == "POSIX"
    assert c.io["POSIX"].io_seconds == pytest.approx(max(per_rank.values()))
    assert c.bandwidth_mb_per_s == pytest.approx(moved / max(per_rank.values()) / 1e6)


def test_vpic_io_sanity(characterized):
    # Verified once by reading the log: VPIC-IO on 2048 ranks writes 8 particle
    # variables of 128 MiB per rank into one shared HDF5 file with collective
    # MPI-IO (16384 = 2048 x 8 calls; HDF5 adds 18 small independent metadata
    # writes), 2 TiB in ~85.5 s (~25.7 GB/s), striped 24 x 1 MiB on Lustre.
    c = characterized[VPIC]
    assert "vpicio" in c.executable and c.nprocs == 2048
    assert (c.io["MPI-IO"].shared_files, c.io["MPI-IO"].per_process_files) == (1, 0)
    assert c.mpiio_ops.collective_writes == 16384 and c.mpiio_ops.independent_writes == 18
    assert c.access_sizes["MPI-IO"].most_common[0].size_bytes == 128 * 2**20
    assert c.io["MPI-IO"].bytes_written >= 2 * 2**40
    assert 25_000 < c.bandwidth_mb_per_s < 26_500
    assert [(layout.stripe_count, layout.stripe_size_bytes) for layout in c.lustre] == [(24, 2**20)]


def test_file_per_process_and_independent_hdf5_sanity(characterized):
    # Verified once: IOR's POSIX run writes one file per rank (2048) in 4 MiB
    # transfers; IOR -a HDF5 (no -c) uses only independent MPI-IO on one shared file.
    fpp = characterized[IOR_FPP].io["POSIX"]
    assert (fpp.per_process_files, fpp.shared_files) == (2048, 0)
    assert characterized[IOR_FPP].access_sizes["POSIX"].write_histogram["1M_4M"] == fpp.bytes_written // 2**22
    hdf5 = characterized[IOR_HDF5]
    assert hdf5.mpiio_ops.collective_reads == hdf5.mpiio_ops.collective_writes == 0
    assert hdf5.io["MPI-IO"].shared_files == 1 and "H5D" in hdf5.io


def test_as_dict_is_json_and_keeps_the_values(characterized):
    c = characterized[VPIC]
    stored = json.loads(json.dumps(c.as_dict()))
    assert stored["nprocs"] == 2048
    assert stored["io"]["MPI-IO"]["bytes_written"] == c.io["MPI-IO"].bytes_written
    assert stored["mpiio_ops"]["collective_writes"] == 16384
    assert stored["access_sizes"]["POSIX"]["write_histogram"]["100M_1G"] == 16384
    assert stored["lustre"][0]["stripe_count"] == 24
    assert stored["pattern"]["sequential_read_fraction"] is None


def test_format_states_the_facts(characterized):
    text = format_characterization(characterized[VPIC])
    for fact in ("2048 ranks", "vpicio_uni", "MPI-IO", "1 shared by all ranks (2.2 TB)",
                 "collective 0/16384", "128 MiB x16384", "stripe count 24", "MB = 1e6 bytes"):
        assert fact in text, fact
    assert f"bandwidth: {characterized[VPIC].bandwidth_mb_per_s:.0f} MB/s" in text


def test_import_does_not_load_pydarshan():
    code = "import sys, iobo.integrations.darshan; print('darshan' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# --- files that are not whole Darshan logs -----------------------------------


def assert_config_error(path, *phrases):
    with pytest.raises(ConfigError) as error:
        characterize(path)
    message = str(error.value)
    assert str(path) in message
    reason = message.replace(str(path), "")  # the path (tmp_path) holds the test's name
    for phrase in phrases:
        assert phrase in reason, message


def test_a_missing_log(tmp_path):
    assert_config_error(tmp_path / "missing.darshan", "does not exist")


def test_a_directory(tmp_path):
    assert_config_error(tmp_path, "not a regular file")


def test_a_text_file(tmp_path):
    path = tmp_path / "notes.darshan"
    path.write_text("job ran fine\n")
    assert_config_error(path, "not a Darshan log", "format version")


def test_random_bytes(tmp_path):
    path = tmp_path / "random.darshan"
    path.write_bytes(bytes(range(256)) * 20)
    assert_config_error(path, "not a Darshan log")


def test_a_darshan_version_with_a_bad_magic_number(tmp_path):
    path = tmp_path / "bad-magic.darshan"
    data = bytearray(VPIC.read_bytes())
    data[8:16] = bytes(8)
    path.write_bytes(bytes(data))
    assert_config_error(path, "not a Darshan log", "magic number")


@pytest.mark.parametrize("keep", [100, 500, 5000, -1], ids=["in-header", "in-job", "mid-file", "last-byte"])
def test_a_truncated_log(tmp_path, keep):
    # Unchecked, darshan-util aborts the process on some of these (double free)
    # and silently drops records on others.
    path = tmp_path / "truncated.darshan"
    path.write_bytes(VPIC.read_bytes()[:keep])
    assert_config_error(path, "truncated")


def test_corrupt_compressed_data(tmp_path):
    data = bytearray(VPIC.read_bytes())
    data[1000:1016] = bytes(16)  # inside the compressed name region
    path = tmp_path / "corrupt.darshan"
    path.write_bytes(bytes(data))
    assert_config_error(path, "corrupt")


@pytest.mark.parametrize("path", [VPIC, IOR_HDF5, MACSIO, IOR_FPP], ids=lambda p: p.stem[:12])
def test_misaligned_operations_and_the_alignment(characterized, path):
    pattern = characterized[path].pattern
    records = raw_records(path, "POSIX")
    operations = total(records, "POSIX_READS") + total(records, "POSIX_WRITES")
    assert pattern.file_not_aligned == total(records, "POSIX_FILE_NOT_ALIGNED")
    assert pattern.file_alignment_bytes == max(int(r["counters"]["POSIX_FILE_ALIGNMENT"]) for r in records)
    assert pattern.misaligned_fraction == total(records, "POSIX_FILE_NOT_ALIGNED") / operations


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: p.stem[:12])
def test_shared_file_bytes_are_the_rank_minus_one_records(characterized, path):
    report = open_report(path)
    expected = defaultdict(int)
    for module in ("POSIX", "STDIO"):
        if module not in report.modules:
            continue
        report.mod_read_all_records(module, dtype="dict")  # also reads the names of the files
        for r in report.records[module]:
            if r["rank"] == -1:
                expected[report.name_records[r["id"]]] += (int(r["counters"][f"{module}_BYTES_READ"])
                                                           + int(r["counters"][f"{module}_BYTES_WRITTEN"]))
    assert characterized[path].shared_file_bytes == dict(expected)
