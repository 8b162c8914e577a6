"""Rules from a Darshan characterisation, checked on the real logs pydarshan ships.

Which rules should fire on each log is decided here from pydarshan's own raw
counters (plain dict records, not the characterisation the rules read), with
the published thresholds written out again, so that a wrong counter, sum or
comparison in ``iobo.integrations.darshan`` or ``darshan_rules`` fails a test.
"""

import dataclasses
import json
import math
from collections import defaultdict
from pathlib import Path

import darshan
import optuna
import pytest

from iobo.cli import main
from iobo.integrations.darshan import MpiioOps, characterize
from iobo.integrations.darshan_rules import candidates, enqueue_suggestions, suggest
from iobo.kernels import vpic
from iobo.measure import format_mb_per_s
from iobo.space import MiB
from iobo.stack import environment_limits
from iobo.trials import ROLE_DEFAULT, ROLE_SEARCH, enqueue_defaults

from support.sizes import SMALL_VPIC

LOGS = Path(darshan.__file__).parent / "examples" / "example_logs"
ALL_LOGS = sorted(LOGS.glob("*.darshan"))
VPIC_LOG = LOGS / "example.darshan"
MACSIO = LOGS / "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"
IOR_FPP = LOGS / "sample-badost.darshan"
NO_POSIX = LOGS / "noposix.darshan"
SMALL_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M")  # Darshan's bins up to 1 MiB
ALL_BINS = SMALL_BINS + ("1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS")


class Log:
    """The raw records of one log, read with pydarshan as plain dicts."""

    def __init__(self, path):
        self.report = darshan.DarshanReport(str(path), read_all=False)
        self.nprocs = self.report.metadata["job"]["nprocs"]
        self.records = {}
        for module in ("POSIX", "MPI-IO", "STDIO"):
            if module in self.report.modules:
                self.report.mod_read_all_records(module, dtype="dict")
                self.records[module] = list(self.report.records[module])
        self.stripes = defaultdict(set)
        if "LUSTRE" in self.report.modules:
            self.report.mod_read_all_lustre_records(dtype="dict")
            for r in self.report.records["LUSTRE"]:
                for comp in r["components"]:
                    count = int(comp["counters"]["LUSTRE_COMP_STRIPE_COUNT"])
                    self.stripes[self.report.name_records[r["id"]]].add(count)

    def total(self, module, *counters):
        return sum(int(r["counters"][c]) for r in self.records.get(module, []) for c in counters)


def expected_rules(log: Log) -> dict[str, dict]:
    """{rule: settings it must propose} by the published thresholds, from the raw counters."""
    rules = {}
    mpiio = "MPI-IO" in log.records
    posix = "POSIX" in log.records
    if posix:
        for op in ("WRITE", "READ"):
            small = log.total("POSIX", *(f"POSIX_SIZE_{op}_{b}" for b in SMALL_BINS))
            every = log.total("POSIX", *(f"POSIX_SIZE_{op}_{b}" for b in ALL_BINS))
            if every and small / every > 0.10 and small > 1000:  # Drishti
                hint = "romio_cb_write" if op == "WRITE" else "romio_cb_read"
                rules[f"small-{op.lower()}s"] = ({"transfer_mode": "collective", hint: "enable"} if mpiio else None)
        operations = log.total("POSIX", "POSIX_READS", "POSIX_WRITES")
        if operations and log.total("POSIX", "POSIX_FILE_NOT_ALIGNED") / operations > 0.10:  # Drishti
            rules["misaligned"] = None
    if mpiio:
        for op in ("WRITE", "READ"):
            collective = log.total("MPI-IO", f"MPIIO_COLL_{op}S", f"MPIIO_SPLIT_{op}S")
            if collective == 0 and log.total("MPI-IO", f"MPIIO_INDEP_{op}S") > 1000:  # Drishti
                rules[f"no-collective-{op.lower()}s"] = None
    moved = defaultdict(int)  # shared files (rank -1 records) of the file-level modules
    for module in ("POSIX", "STDIO"):
        for r in log.records.get(module, []):
            if r["rank"] == -1:
                moved[log.report.name_records[r["id"]]] += (int(r["counters"][f"{module}_BYTES_READ"])
                                                            + int(r["counters"][f"{module}_BYTES_WRITTEN"]))
    large = [n for path, n in moved.items() if n >= 2**30 and log.stripes.get(path) == {1}]  # Drishti (1 GiB ours)
    if large:
        stripes = 2 ** math.ceil(math.log2(math.ceil(max(large) / (256 * MiB))))
        rules["shared-file-one-stripe"] = {"striping_factor": min(stripes, log.nprocs, 128)}
    layout = _layout(log)
    if layout == "shared" and posix and operations:
        sequential = log.total("POSIX", "POSIX_SEQ_READS", "POSIX_SEQ_WRITES") / operations
        if sequential >= 0.8:  # SmartIO (0.8 ours)
            rules["shared-sequential"] = {"transfer_mode": "independent", "romio_cb_write": "disable"}
        else:
            rules["shared-random"] = {"transfer_mode": "collective", "romio_cb_write": "enable"}
    if layout == "per_process":
        rules["file-per-process"] = {"striping_factor": 1}
    transfer = _typical_transfer(log)
    if transfer:
        interval = 16 * MiB if transfer >= 16 * MiB else max(MiB, 2 ** math.ceil(math.log2(transfer)))
        rules["transfer-alignment"] = {"alignment_interval": interval, "mdc_initial_size": interval}
    if mpiio:
        collective = log.total("MPI-IO", "MPIIO_COLL_WRITES", "MPIIO_SPLIT_WRITES")
        writes = collective + log.total("MPI-IO", "MPIIO_INDEP_WRITES", "MPIIO_NB_WRITES")
        if collective and collective / writes > 0.5:
            rules["collective-aggregators"] = {"transfer_mode": "collective", "cb_config_list": "*:4"}
    return rules


def _layout(log: Log):
    module = "MPI-IO" if "MPI-IO" in log.records else "POSIX" if "POSIX" in log.records else None
    if module is None or log.nprocs < 2:
        return None
    prefix = "MPIIO" if module == "MPI-IO" else "POSIX"
    ranks, moved = defaultdict(set), defaultdict(int)
    for r in log.records[module]:
        ranks[r["id"]].add(r["rank"])
        moved[r["id"]] += int(r["counters"][f"{prefix}_BYTES_READ"]) + int(r["counters"][f"{prefix}_BYTES_WRITTEN"])
    shared = sum(moved[f] for f, seen in ranks.items() if seen == {-1})
    other = sum(moved[f] for f, seen in ranks.items() if seen != {-1})
    return "shared" if shared >= other else "per_process"


def _typical_transfer(log: Log):
    """The size moving the most bytes among the four most common sizes (MPI-IO, else POSIX)."""
    module = "MPI-IO" if "MPI-IO" in log.records else "POSIX" if "POSIX" in log.records else None
    if module is None:
        return None
    prefix = "MPIIO" if module == "MPI-IO" else "POSIX"
    counts = defaultdict(int)
    for r in log.records[module]:
        for slot in (1, 2, 3, 4):
            size = int(r["counters"][f"{prefix}_ACCESS{slot}_ACCESS"])
            counts[size] += int(r["counters"][f"{prefix}_ACCESS{slot}_COUNT"])
    top = sorted(((s, n) for s, n in counts.items() if n > 0), key=lambda sn: (-sn[1], sn[0]))[:4]
    return max(top, key=lambda sn: (sn[0] * sn[1], sn[0]))[0] if top else None


@pytest.fixture(scope="module")
def fired():
    return {path: suggest(characterize(path)) for path in ALL_LOGS}


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: p.stem[:12])
def test_the_rules_that_fire_are_those_the_counters_call_for(fired, path):
    expected = expected_rules(Log(path))
    got = {s.rule: s for s in fired[path]}
    assert set(got) == set(expected)
    for rule, settings in expected.items():
        if settings:
            assert settings.items() <= got[rule].settings.items(), rule
        assert got[rule].evidence and got[rule].reason and got[rule].source in ("Drishti", "SmartIO")


def test_every_log_fires_something_and_together_they_cover_both_rule_sets(fired):
    # The bundled logs are VPIC-IO, IOR (HDF5 and POSIX file per process), MACSio, a DXT trace and a
    # STDIO-only job: between them, the shared/per-process, sequential/random and striping rules all fire.
    assert all(fired.values())
    seen = {s.rule for found in fired.values() for s in found}
    assert {"small-writes", "small-reads", "misaligned", "shared-file-one-stripe", "shared-sequential",
            "shared-random", "file-per-process", "transfer-alignment", "collective-aggregators"} <= seen


def test_settings_are_values_of_iobos_space(fired):
    space = vpic.space()
    from iobo.kernels.inputs import READ_HINTS

    allowed = {p.name: p for p in (*space, *READ_HINTS)}
    for found in fired.values():
        for s in found:
            for name, value in s.settings.items():
                assert allowed[name].check(value) == value


def test_no_collective_fires_above_1000_independent_operations_without_a_collective_one():
    base = characterize(MACSIO)  # 64 collective and 7,695 independent MPI-IO writes: does not fire as logged

    def with_ops(collective, independent):
        ops = MpiioOps(0, collective, 0, independent, 0, 0)
        return {s.rule for s in suggest(dataclasses.replace(base, mpiio_ops=ops))}

    assert "no-collective-writes" not in {s.rule for s in suggest(base)}
    assert "no-collective-writes" not in with_ops(0, 1000)
    assert "no-collective-writes" in with_ops(0, 1001)
    assert "no-collective-writes" not in with_ops(1, 5000)


def test_candidates_drop_striping_off_lustre_and_merge_identical_configurations():
    space, workload = vpic.space(), vpic.workload(2, vpic.SPEC.options)
    off_lustre = environment_limits(space, "tmpfs")
    fpp = suggest(characterize(IOR_FPP))  # file-per-process (striping only) and transfer-alignment
    found, notes = candidates(fpp, space, workload, off_lustre)
    assert [c.rules for c in found] == [("transfer-alignment",)]
    assert any("file-per-process left out" in note and "not Lustre" in note for note in notes)
    found, _ = candidates(fpp, space, workload, environment_limits(space, "lustre"))
    assert [c.values["striping_factor"] for c in found if c.rules == ("file-per-process",)] == [1]
    for c in found:
        assert space.validate(c.values, workload) == c.values  # whole, valid configurations

    # small-writes and no-collective-writes propose the same settings: one trial, both names
    macsio = dataclasses.replace(characterize(MACSIO), mpiio_ops=MpiioOps(0, 0, 0, 7695, 0, 0))
    found, _ = candidates(suggest(macsio), space, workload, off_lustre)
    merged = [c for c in found if "no-collective-writes" in c.rules]
    assert [c.origin for c in merged] == ["rule:small-writes+no-collective-writes"]
    assert merged[0].values == {**space.default(), "transfer_mode": "collective", "romio_cb_write": "enable"}


def test_enqueued_after_the_defaults_once_each(storage):
    space, workload = vpic.space(), vpic.workload(2, vpic.SPEC.options)
    study = optuna.create_study(storage=storage, direction="maximize")
    enqueue_defaults(study, space.default(), 3)
    suggestions = suggest(characterize(VPIC_LOG))
    queued, _ = enqueue_suggestions(study, suggestions, space, workload, "tmpfs")
    again, notes = enqueue_suggestions(study, suggestions, space, workload, "tmpfs")  # a resumed study
    assert again == [] and len(notes) >= len(queued)
    waiting = study.get_trials(deepcopy=False)
    assert [t.user_attrs["role"] for t in waiting] == [ROLE_DEFAULT] * 3 + [ROLE_SEARCH] * len(queued)
    assert [t.user_attrs["origin"] for t in waiting[3:]] == [c.origin for c in queued]
    assert [t.system_attrs["fixed_params"] for t in waiting[3:]] == [c.values for c in queued]
    assert {c.origin for c in queued} == {f"rule:{s.rule}" for s in suggestions}


def test_characterize_suggest_prints_rule_evidence_and_setting(capsys):
    log = Log(VPIC_LOG)
    collective = log.total("MPI-IO", "MPIIO_COLL_WRITES")
    writes = collective + log.total("MPI-IO", "MPIIO_INDEP_WRITES", "MPIIO_NB_WRITES")
    assert main(["characterize", str(VPIC_LOG), "--suggest"]) == 0
    out = capsys.readouterr().out
    assert "2048 ranks" in out  # the characterisation first
    assert f"collective-aggregators (SmartIO): {collective:,} of {writes:,} MPI-IO writes" in out
    assert "cb_config_list=*:4" in out and "alignment_interval=16 MiB" in out
    assert main(["characterize", str(VPIC_LOG), "--suggest", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["characterization"]["nprocs"] == 2048
    assert {s["rule"] for s in printed["suggestions"]} == set(expected_rules(log))


def test_tune_from_darshan_runs_the_rules_first_and_shows_where_trials_came_from(capsys, storage, scratch):
    from optuna_dashboard import get_note

    from iobo.context import study_context
    from iobo.integrations.dashboard import trial_note


    space, workload = vpic.space(), vpic.workload(2, {**vpic.SPEC.options, **SMALL_VPIC})
    suggestions = suggest(characterize(VPIC_LOG))
    expected, _ = candidates(suggestions, space, workload, environment_limits(space, "tmpfs"))
    trials = 3 + len(expected) + 1
    code = main(["tune", "vpic", "--ranks", "2", "--trials", str(trials), "--storage", storage, "--study", "rules",
                 "--workdir", str(scratch), "--runner", "local", "--confirm", "0", "--from-darshan", str(VPIC_LOG),
                 "--option", f"particles={SMALL_VPIC['particles']}", "--option", f"steps={SMALL_VPIC['steps']}"])
    out = capsys.readouterr().out
    assert code == 0
    study = optuna.load_study(study_name="rules", storage=storage)
    done = study.get_trials()
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in done) and len(done) == trials
    assert [t.user_attrs["origin"] for t in done] == (["default"] * 3 + [c.origin for c in expected] + ["sampler"])
    assert [t.user_attrs["config"] for t in done[3:-1]] == [c.values for c in expected]
    context = study_context(study)
    assert context.characterization["rules"] == [s.rule for s in suggestions]
    assert (context.fs_type, context.bytes_per_rank) == ("tmpfs", done[0].user_attrs["bytes"] // 2)
    assert f"rule {len(expected)}, sampler 1" in out and f"sampler from #{trials - 1}" in out
    for t in done[3:-1]:
        assert f"#{t.number} {t.user_attrs['origin']} {format_mb_per_s(t.value)} MB/s" in out
    rule_trial = done[3]
    origin = f"Origin: `{rule_trial.user_attrs['origin']}`: {rule_trial.user_attrs['origin_reason']}"
    assert origin in trial_note(rule_trial, space)
    assert origin in get_note(optuna.Trial(study, rule_trial._trial_id))  # saved by `tune` for the dashboard
    assert "Origin: `sampler`" in get_note(optuna.Trial(study, done[-1]._trial_id))
