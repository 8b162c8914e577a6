"""The replay trace (iobo.replay): raw shim traces read back symbolic, folded, saved, loaded and expanded exactly.

The raw traces are hand-made in the shim's format (tests/support/traces.py) from
the symbolic events the reader must give back, so every expected value here is
the description the raw lines were written from.
"""

import json
import random

import pytest

from iobo.errors import ConfigError
from iobo.replay import GAP_FLOOR_S, NEVER_RECORDED, Trace, read_raw, without_gap

from support.traces import checkpoint_steps, write_raw

RANKS = 2


def roundtrip(tmp_path, per_rank, name="t", **raw) -> Trace:
    """Write the raw traces of ``per_rank``, read them, save and load the trace."""
    workdir = tmp_path / "run"
    write_raw(tmp_path / name, per_rank, workdir, **raw)
    path = tmp_path / f"{name}.json"
    read_raw(tmp_path / name).save(path)
    return Trace.load(path)


def stripped(events):
    return [without_gap(event) for event in events]


def test_thousand_checkpoints_fold_to_the_size_of_one_and_expand_exactly(tmp_path):
    """1,000 steps (file ck.<n>.h5, dataset, 8 hyperslab writes, closes; handles reused) give back every event,
    in a file within a few hundred bytes of a one-step trace's."""
    steps = [[checkpoint_steps(rank, RANKS, 1000) for rank in range(RANKS)],
             [checkpoint_steps(rank, RANKS, 1) for rank in range(RANKS)]]
    many, one = roundtrip(tmp_path, steps[0], "many"), roundtrip(tmp_path, steps[1], "one")

    for rank in range(RANKS):
        assert stripped(many.expand(rank)) == stripped(steps[0][rank])
        assert many.repeats(rank) == [1000]
    assert many.workdir == str(tmp_path / "run") and many.outside == []
    size_many, size_one = ((tmp_path / f"{n}.json").stat().st_size for n in ("many", "one"))
    assert size_many - size_one < 600, (size_many, size_one)
    # the computation before each step is kept (its mean over the steps)
    assert sum(e["gap_s"] for e in many.expand(0)) == pytest.approx(1000 * 0.05 + 0.5, rel=1e-6)


def test_irregular_offsets_are_not_folded_falsely(tmp_path):
    """Writes whose offsets break the progression, and steps that differ, expand back exactly as recorded."""
    rng = random.Random(28)
    events = [{"op": "open", "fd": 0, "name": "{workdir}/data.bin", "path": "{workdir}/data.bin", "flags": 65,
               "ok": True}]
    offsets = [0, 4096, 8192, 12288, 20480, 24576] + [rng.randrange(0, 1 << 30) for _ in range(40)]
    events += [{"op": "pwrite", "fd": 0, "offset": offset, "bytes": rng.choice([4096, 4096, 512]), "ok": True}
               for offset in offsets]
    events.append({"op": "close", "fd": 0, "ok": True})
    steps = checkpoint_steps(0, 1, 3) + checkpoint_steps(0, 1, 3, slabs=4, first=3)  # same ops, different writes
    trace = roundtrip(tmp_path, [events + steps])

    assert stripped(trace.expand(0)) == stripped(events + steps)


def test_steps_expand_k_of_n_repetitions(tmp_path):
    """steps=K keeps what is not repeated and the first K of the N repetitions of each repeated block."""
    setup = [{"op": "open", "fd": 0, "name": "/etc/iobo-input.dat", "path": "/etc/iobo-input.dat", "flags": 0,
              "ok": True},
             {"op": "read", "fd": 0, "offset": 0, "bytes": 100, "ok": True},
             {"op": "close", "fd": 0, "ok": True}]
    ten = checkpoint_steps(0, 1, 10)
    trace = roundtrip(tmp_path, [setup + ten])

    assert stripped(trace.expand(0, steps=3)) == stripped(setup + ten[:3 * 12])
    assert trace.repeats(0) == [10]
    assert trace.outside == ["/etc/iobo-input.dat"]  # read from elsewhere: kept absolute, listed
    assert trace.expand(0)[0]["path"] == "/etc/iobo-input.dat"


def test_steps_are_refused_where_the_ranks_fold_differently(tmp_path):
    """K of N repetitions is cut on each rank's own blocks: when the ranks repeat differently (rank 1 writes its
    steps' first slabs in another rhythm), --steps would replay different collective calls on each rank, so the
    replay refuses it (and iobo tune --trace --steps, before any job: kernel_spec asks the same). Seen on CaNS:
    rank 1 created a file rank 0 never did, and H5Fcreate failed."""
    alike = roundtrip(tmp_path, [checkpoint_steps(rank, RANKS, 6) for rank in range(RANKS)], "alike")
    assert alike.steps_mismatch() is None and alike.expand(1, steps=2)
    differ = [checkpoint_steps(0, RANKS, 6), checkpoint_steps(1, RANKS, 3) + checkpoint_steps(1, RANKS, 3, slabs=4,
                                                                                                 first=3)]
    trace = roundtrip(tmp_path, differ, "differ")
    assert trace.repeats(0) != trace.repeats(1)
    with pytest.raises(ConfigError, match=r"--steps cuts each rank's repeated blocks on their own, and this trace's "
                                          r"ranks repeat differently \(rank 0: .* rank 1: .*replay every repetition"):
        trace.expand(0, steps=1)
    assert trace.expand(1)  # every repetition: fine


def test_paths_and_workdir_substitution(tmp_path):
    """Files in the directory the program wrote into become {workdir}; expand(workdir=) puts a new one there."""
    trace = roundtrip(tmp_path, [checkpoint_steps(0, 1, 2)])
    assert [e["path"] for e in trace.expand(0) if e["op"] == "H5Fcreate"] == ["{workdir}/ck.0.h5", "{workdir}/ck.1.h5"]
    moved = trace.expand(0, workdir="/dev/shm/x")
    assert [e["name"] for e in moved if e["op"] == "H5Fcreate"] == ["/dev/shm/x/ck.0.h5", "/dev/shm/x/ck.1.h5"]


def test_gaps_below_the_floor_are_call_overhead(tmp_path):
    """A gap under GAP_FLOOR_S is stored as 0; a longer one as recorded; the time after the last call too."""
    events = [{"op": "open", "fd": 0, "name": "{workdir}/a", "path": "{workdir}/a", "flags": 65, "ok": True,
               "gap_s": 0.2},
              {"op": "write", "fd": 0, "offset": 0, "bytes": 10, "ok": True, "gap_s": GAP_FLOOR_S / 2},
              {"op": "fsync", "fd": 0, "ok": True, "gap_s": 0.125},
              {"op": "close", "fd": 0, "ok": True}]
    trace = roundtrip(tmp_path, [events])
    assert [e["gap_s"] for e in trace.expand(0)] == [pytest.approx(0.7), 0.0, pytest.approx(0.125), 0.0]
    assert trace.tail_gap_s == [pytest.approx(0.25)]


def test_not_recorded_says_what_the_trace_lacks(tmp_path):
    """Static HDF5, unwrapped calls, a rank that wrote no trace and a missing end line are stated."""
    write_raw(tmp_path / "s", [checkpoint_steps(0, 2, 1), []], tmp_path / "run", hdf5_linked="static",
              unwrapped=("H5Dwrite on a dataset of a file not opened through the shim",))
    (tmp_path / "s.1.trace.jsonl").unlink()
    notes = read_raw(tmp_path / "s").not_recorded
    assert any("links HDF5 statically" in n for n in notes)
    assert "not recorded: H5Dwrite on a dataset of a file not opened through the shim" in notes
    assert any(n.startswith("ranks [1] of 2 wrote no trace") for n in notes)
    assert notes[-len(NEVER_RECORDED):] == list(NEVER_RECORDED)

    write_raw(tmp_path / "cut", [checkpoint_steps(0, 1, 1)], tmp_path / "run", end=False)
    assert any("no end line" in n for n in read_raw(tmp_path / "cut").not_recorded)


def test_handles_the_trace_never_saw_opened_are_listed(tmp_path):
    """A write on a dataset handle no recorded open produced gets no symbol and a sentence."""
    write_raw(tmp_path / "u", [checkpoint_steps(0, 1, 1)], tmp_path / "run")
    path = tmp_path / "u.0.trace.jsonl"
    lines = path.read_text().splitlines()
    lines.insert(1, json.dumps({"op": "H5Dwrite", "dset": 12345, "bytes": 8, "sel": {"kind": "all"},
                                "xfer": "independent", "ok": True, "t0": 0.1, "t1": 0.2}))
    path.write_text("\n".join(lines) + "\n")
    trace = read_raw(tmp_path / "u")
    assert trace.expand(0)[0]["dset"] is None
    assert "rank 0: 1 H5Dwrite call(s) on a handle no recorded open produced" in " ".join(trace.not_recorded)


def test_load_refuses_other_files(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": "iobo-preload-report", "version": 1}))
    with pytest.raises(ConfigError, match="is not a replay trace of format 'iobo-replay-trace'"):
        Trace.load(path)
    with pytest.raises(ConfigError, match="no raw trace"):
        read_raw(tmp_path / "nothing")


def test_files_opened_and_never_used_are_left_out(tmp_path):
    """MPI's shared-memory files (opened at MPI_Init, mapped, never read or written) are not the program's I/O:
    left out of the events and of the choice of {workdir}."""
    shm = {"op": "open", "fd": 0, "name": "/dev/shm/mpich_shar_tmpX", "path": "/dev/shm/mpich_shar_tmpX",
           "flags": 66, "ok": True}
    events = checkpoint_steps(0, 1, 2)
    write_raw(tmp_path / "m", [[shm, {"op": "close", "fd": 0, "ok": True}, shm] + events], tmp_path / "run")
    trace = read_raw(tmp_path / "m")
    assert stripped(trace.expand(0)) == stripped(events)
    assert trace.workdir == str(tmp_path / "run") and trace.outside == []
