"""Report figures computed from stored trials (a real SQLite study, known values)."""

import datetime as dt
import json
import math
import re
import statistics

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState
from optuna_dashboard import get_note

from iobo import kernels
from iobo.cli import main
from iobo.importance import MIN_IMPORTANCE_TRIALS, param_importances
from iobo.measure import INTERVAL_MIN_RUNS, bootstrap_speedup, pooled_noise_sd_log
from iobo.minimize import MINIMAL_ATTR, Minimal, pairs_to_settle
from iobo.report import build_report
from iobo.space import format_value
from iobo.trials import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, ROLE_DEFAULT, ROLE_SEARCH, best_trial
from iobo.tuner import Tuner

from support.sizes import SMALL_VPIC

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def add(study, value, role, minute, files="shared", state=TrialState.COMPLETE, **attrs):
    """A finished trial that started at T0 + minute - 1 and ended at T0 + minute; ``attrs``: more user attrs."""
    study.add_trial(FrozenTrial(
        number=0, trial_id=0, state=state, value=value if state == TrialState.COMPLETE else None,
        datetime_start=T0 + dt.timedelta(minutes=minute - 1), datetime_complete=T0 + dt.timedelta(minutes=minute),
        params={"files": files}, distributions={"files": CategoricalDistribution(("shared", "per_process"))},
        user_attrs={"role": role, "config": {"files": files}, **attrs}, system_attrs={}, intermediate_values={},
    ))


@pytest.fixture
def study(storage):
    s = optuna.create_study(storage=storage, study_name="r", direction="maximize")
    s.set_user_attr("kernel", "vpic")
    s.set_user_attr("ranks", 2)
    return s


def test_report_figures_match_the_trials(study):
    for minute, value in ((1, 100.0), (2, 110.0), (3, 90.0)):
        add(study, value, ROLE_DEFAULT, minute)
    add(study, 150.0, ROLE_SEARCH, 4, files="per_process")
    add(study, None, ROLE_SEARCH, 5, state=TrialState.FAIL)
    report = build_report(study)
    assert report.default.median == 100.0
    assert report.best_value == 150.0 and report.best_number == 3
    assert report.best_config == {"files": "per_process"}
    assert report.speedup is None  # a best single run over the default is never a speedup
    assert re.search(r"^speedup: +not measured yet: `iobo confirm`", report.text(), re.M)
    assert report.counts == {"COMPLETE": 4, "FAIL": 1}
    # tuning started at minute 0 (first trial's start) and the failed trial ended at minute 5
    assert report.tuning_minutes == pytest.approx(5.0)
    assert report.roti_curve[-1] == pytest.approx((5.0, 150.0, (150.0 - 100.0) / 5.0))
    # RoTI peaked when the best was found, at minute 4
    assert report.peak_roti == pytest.approx((50.0 / 4.0, 4.0))
    # every parameter of the kernel's space, by layer: (name, system default, best)
    assert report.best_by_layer["app"] == [("files", "shared", "per_process")]
    assert ("layout", "contiguous", "contiguous") in report.best_by_layer["hdf5"]
    assert ("chunk_size", "-", "-") in report.best_by_layer["hdf5"]  # only for a chunked layout
    assert ("cb_buffer_size", "16 MiB", "16 MiB") in report.best_by_layer["mpiio"]


def test_confirmation_runs_set_the_headline_speedup(study):
    for minute in (1, 2, 3):
        add(study, 100.0, ROLE_DEFAULT, minute)
    add(study, 300.0, ROLE_SEARCH, 4, files="per_process")  # a lucky run
    for minute, (d, b) in enumerate(((95.0, 180.0), (105.0, 200.0), (100.0, 190.0), (98.0, 185.0), (102.0, 195.0)),
                                    start=10):
        add(study, d, ROLE_CONFIRM_DEFAULT, minute)
        add(study, b, ROLE_CONFIRM_BEST, minute, files="per_process")
    report = build_report(study)
    assert report.confirm_best.median == 190.0 and report.confirm_default.median == 100.0
    assert report.speedup == pytest.approx(1.9)
    assert "re-measured medians" in report.text()
    # confirmation runs are not tuning time: the RoTI curve ends at the search trial
    assert len(report.roti_curve) == 4
    # the interval comes from the re-measured runs too, not from the lucky 300 MB/s run
    low, high = report.speedup_interval()
    assert 180 / 105 <= low <= 1.9 <= high <= 200 / 95
    assert "re-measured" in report.speedup_basis


def test_failures_before_the_first_completed_run_have_no_best_so_far(study):
    add(study, None, ROLE_DEFAULT, 1, state=TrialState.FAIL)
    for minute in (2, 3, 4):
        add(study, 100.0, ROLE_DEFAULT, minute)
    report = build_report(study)
    assert [minutes for minutes, _, _ in report.roti_curve] == pytest.approx([2.0, 3.0, 4.0])
    assert report.tuning_minutes == pytest.approx(4.0)  # the failed run still counts as tuning time


def test_no_speedup_without_confirmation(study):
    for minute, value in ((1, 90.0), (2, 100.0), (3, 120.0)):
        add(study, value, ROLE_DEFAULT, minute)
    add(study, 200.0, ROLE_SEARCH, 4, files="per_process")
    report = build_report(study)
    assert not report.confirmed and report.speedup is None and report.speedup_interval() is None
    assert "no re-measurement" in report.speedup_basis
    assert report.to_dict()["best_single_run_over_baseline"] == pytest.approx(2.0)  # kept apart, for benchmarks


def confirmation_report(study, pairs):
    """A study whose files=per_process was confirmed in ``pairs`` (default MB/s, per_process MB/s)."""
    for minute in (1, 2, 3):
        add(study, 100.0, ROLE_DEFAULT, minute)
    add(study, 130.0, ROLE_SEARCH, 4, files="per_process")
    for minute, (d, b) in enumerate(pairs, start=10):
        add(study, d, ROLE_CONFIRM_DEFAULT, minute)
        add(study, b, ROLE_CONFIRM_BEST, minute, files="per_process")
    return build_report(study)


def test_a_speedup_whose_wide_interval_holds_1_is_undecided_with_the_pairs_that_would_settle_it(study):
    """Issue 31: an interval that holds 1 and reaches outside 0.95x-1.05x is undecided, not "no gain"."""
    report = confirmation_report(study, ((80.0, 120.0), (120.0, 85.0), (100.0, 105.0), (90.0, 95.0), (110.0, 100.0)))
    low, high = report.speedup_interval()
    assert low < 0.95 and 1.05 < high and report.distinguishable is False
    default, best = report.headline
    needed = pairs_to_settle(math.log(best.median / default.median),
                             pooled_noise_sd_log(default.values, best.values))
    assert needed > 5
    assert re.search(rf"^speedup: +1\.0\dx, 95% CI .*: undecided after 5 pairs, not shown to help: about "
                     rf"{needed - 5} more pairs would settle it$", report.text(), re.M)
    assert "no gain" not in report.text()


def test_a_speedup_whose_interval_lies_inside_the_band_has_no_effect_and_one_below_1_is_slower(study, storage):
    report = confirmation_report(study, [(100.0 + d, 100.0 - d) for d in (0.5, -0.5, 1.0, -1.0, 0.0, 0.5, -0.5)])
    low, high = report.speedup_interval()
    assert 0.95 <= low <= 1.0 <= high <= 1.05
    assert re.search(r"^speedup: +1\.00x, 95% CI .*: no effect \(interval inside 0\.95x-1\.05x\)$", report.text(),
                     re.M)
    slower = optuna.create_study(storage=storage, study_name="slower", direction="maximize")
    slower.set_user_attr("kernel", "vpic")
    slower.set_user_attr("ranks", 2)
    report = confirmation_report(slower, [(100.0, 80.0 + d) for d in (0.0, 1.0, 2.0, -1.0, -2.0)])
    assert report.speedup_interval()[1] < 1.0
    assert re.search(r"^speedup: +0\.80x, 95% CI .*: slower than the system default$", report.text(), re.M)


def test_fewer_pairs_than_an_interval_needs_claim_no_speedup(study):
    for minute in (1, 2, 3):
        add(study, 100.0, ROLE_DEFAULT, minute)
    add(study, 150.0, ROLE_SEARCH, 4, files="per_process")
    pairs = [(100.0, 150.0), (101.0, 160.0), (99.0, 155.0), (100.0, 152.0), (102.0, 158.0)]
    for minute, (d, b) in enumerate(pairs[:INTERVAL_MIN_RUNS - 1], start=10):
        add(study, d, ROLE_CONFIRM_DEFAULT, minute)
        add(study, b, ROLE_CONFIRM_BEST, minute, files="per_process")
    report = build_report(study)
    assert report.speedup == pytest.approx(153.5 / 100.0)  # measured, and shown, but not claimed
    assert report.speedup_interval() is None and report.distinguishable is None
    assert re.search(rf"^speedup: +1.53x from {INTERVAL_MIN_RUNS - 1} interleaved pair\(s\), too few for an interval "
                     rf"\(at least {INTERVAL_MIN_RUNS}: `iobo confirm --repeats {INTERVAL_MIN_RUNS}`\), "
                     rf"so no speedup is "
                     rf"claimed$", report.text(), re.M)
    assert report.to_dict()["speedup_ci95"] is None and report.to_dict()["speedup_distinguishable"] is None
    d, b = pairs[INTERVAL_MIN_RUNS - 1]
    add(study, d, ROLE_CONFIRM_DEFAULT, 20)
    add(study, b, ROLE_CONFIRM_BEST, 21, files="per_process")
    report = build_report(study)
    assert report.speedup_interval()[0] > 1.0 and report.distinguishable is True


def test_a_study_that_keeps_the_default_has_no_speedup_to_confirm(study):
    for minute, value in ((1, 100.0), (2, 110.0), (3, 90.0)):
        add(study, value, ROLE_DEFAULT, minute)
    add(study, 80.0, ROLE_SEARCH, 4, files="per_process")  # slower than the default: the incumbent is a default run
    report = build_report(study)
    assert report.best_config == {} and report.keeps_default and report.speedup is None
    assert re.search(r"^speedup: +none: the recommended configuration is the system default \(no change beat the "
                     r"noise\)$", report.text(), re.M)
    add(study, 150.0, ROLE_SEARCH, 5, files="per_process", bytes=10**9)  # faster, but the walk-back drops its change
    study.set_user_attr(MINIMAL_ATTR, Minimal(best_trial(study).number, {}).to_attr())
    report = build_report(study)
    assert report.best_value == 150.0 and report.keeps_default
    assert report.viability_runs is None
    assert re.search(r"^viability point: +never: the recommended configuration is the system default$", report.text(),
                     re.M)


def test_the_baseline_is_every_default_run_and_shows_its_drift(study):
    for minute, value in ((1, 20.0), (2, 100.0), (3, 104.0)):  # a cold first run
        add(study, value, ROLE_DEFAULT, minute)
    add(study, 150.0, ROLE_SEARCH, 4, files="per_process")
    for minute, value in ((5, 110.0), (6, 112.0)):  # interleaved through the search
        add(study, value, ROLE_DEFAULT, minute)
    add(study, 108.0, ROLE_CONFIRM_DEFAULT, 20)
    report = build_report(study)
    assert report.default.median == pytest.approx(106.0)  # median of all six: the cold 20 moves it little
    assert report.baseline.start.values == (20.0, 100.0, 104.0)
    assert report.baseline.later.values == (110.0, 112.0, 108.0)
    assert report.baseline.drift == pytest.approx(110.0 / 100.0 - 1)
    assert report.roti_curve[-1][2] == pytest.approx((150.0 - 106.0) / 6.0)  # RoTI over the baseline
    assert "drift +10%" in report.text()


def test_bootstrap_speedup_is_seeded_and_exact_for_constant_runs():
    assert bootstrap_speedup([100.0] * 5, [150.0] * 5) == pytest.approx((1.5, 1.5))
    default, best = [95.0, 100.0, 104.0, 98.0, 110.0], [180.0, 200.0, 190.0, 170.0, 205.0]
    assert bootstrap_speedup(default, best, seed=3) == bootstrap_speedup(default, best, seed=3)
    low, high = bootstrap_speedup(default, best)
    assert 170 / 110 <= low < 190 / 100 < high <= 205 / 95


def test_viability_point_is_tuning_time_over_time_saved_per_run(study):
    gigabytes = 3_000_000_000
    for minute in (1, 2, 3):
        add(study, 100.0, ROLE_DEFAULT, minute, bytes=gigabytes)
    add(study, 150.0, ROLE_SEARCH, 5, files="per_process", bytes=gigabytes)
    report = build_report(study)  # unconfirmed: a best single run is not what production will see
    assert report.seconds_per_run is None and report.viability_runs is None
    assert report.viability_text().startswith("none: no confirmed gain")
    for minute in range(21, 31, 2):
        add(study, 100.0, ROLE_CONFIRM_DEFAULT, minute, bytes=gigabytes)
        add(study, 150.0, ROLE_CONFIRM_BEST, minute + 1, files="per_process", bytes=gigabytes)
    report = build_report(study)
    # one run: 3 GB at 100 MB/s = 30 s by default, at 150 MB/s = 20 s; the trials ran 4 min (minute 4 was idle)
    assert report.seconds_per_run == pytest.approx((30.0, 20.0))
    assert report.viability_runs == pytest.approx(240 / (30 - 20))
    assert report.viability_text().startswith("24.0 production runs (tuning time / (t_default - t_best)")
    assert "240.0 s / (30 s - 20 s)" in report.viability_text()


def test_no_viability_point_when_the_best_is_no_faster(study):
    for minute in (1, 2, 3, 4):
        add(study, 100.0, ROLE_DEFAULT if minute < 4 else ROLE_SEARCH, minute, bytes=1000)
    report = build_report(study)
    assert report.viability_runs is None and report.viability_text().startswith("never")


def test_importance_needs_enough_tuning_trials_and_ranks_what_matters(study):
    ds = CategoricalDistribution(("automatic", "enable", "disable"))
    files = CategoricalDistribution(("shared", "per_process"))

    def trial(i, role):
        chosen = {"files": "per_process" if i % 5 == 0 else "shared", "romio_ds_write": ds.choices[i % 3]}
        value = (200.0 if chosen["files"] == "per_process" else 100.0) + i % 7
        return FrozenTrial(
            number=0, trial_id=0, state=TrialState.COMPLETE, value=value, datetime_start=T0, datetime_complete=T0,
            params=chosen, distributions={"files": files, "romio_ds_write": ds}, user_attrs={"role": role},
            system_attrs={}, intermediate_values={},
        )

    study.add_trials([trial(i, ROLE_SEARCH) for i in range(MIN_IMPORTANCE_TRIALS - 1)])
    study.add_trials([trial(i, ROLE_CONFIRM_BEST) for i in range(5)])  # re-measurements do not count
    assert param_importances(study) is None
    study.add_trial(trial(MIN_IMPORTANCE_TRIALS - 1, ROLE_SEARCH))
    importances = param_importances(study)
    assert set(importances) == {"files", "romio_ds_write"}
    assert sum(importances.values()) == pytest.approx(1.0)
    assert importances["files"] > importances["romio_ds_write"]


def test_report_files_of_a_real_study_match_its_trials(storage, scratch, tmp_path, capsys):
    tuner = Tuner(kernel="vpic", ranks=2, trials=5, storage=storage, study="real", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=optuna.samplers.TPESampler(seed=0), echo=None)
    study = tuner.run()
    # a minimal configuration set by hand: a change to confirm, whichever trial is the incumbent
    study.set_user_attr(MINIMAL_ATTR, Minimal(best_trial(study).number, {"files": "per_process"}).to_attr())
    tuner.confirm(repeats=INTERVAL_MIN_RUNS)  # the minimal configuration, made: no walk-back
    out = tmp_path / "report"
    assert main(["report", "--storage", storage, "--study", "real", "--out", str(out)]) == 0
    printed, written = capsys.readouterr()
    assert printed == build_report(study).text() + "\n"  # the text report is unchanged by --out
    assert build_report(study).text() in get_note(study)  # and the study is annotated for the dashboard
    files = ["report.html", "report.json", "default_vs_best.png", "best_so_far.png", "roti.png"]
    assert sorted(p.name for p in out.iterdir()) == sorted(files)
    assert all(f"wrote {out / name}" in written for name in files)
    for name in files[2:]:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # every number, recomputed here from the stored trials
    numbers = json.loads((out / "report.json").read_text())
    trials = study.get_trials()
    runs = {role: [t.value for t in trials if t.user_attrs["role"] == role]
            for role in (ROLE_DEFAULT, ROLE_SEARCH, ROLE_CONFIRM_DEFAULT, ROLE_CONFIRM_BEST)}
    # the incumbent: the fastest search run when it beats the default runs' median, else the fastest default run
    search = max((t for t in trials if t.user_attrs["role"] == ROLE_SEARCH), key=lambda t: t.value)
    best = search if search.value > statistics.median(runs[ROLE_DEFAULT]) else \
        max((t for t in trials if t.user_attrs["role"] == ROLE_DEFAULT), key=lambda t: t.value)
    baseline = runs[ROLE_DEFAULT] + runs[ROLE_CONFIRM_DEFAULT]  # every default run, re-measurements included
    assert numbers["default_mb_per_s"]["runs"] == baseline
    assert numbers["default_mb_per_s"]["median"] == statistics.median(baseline)
    assert (numbers["best_mb_per_s"], numbers["best_trial"]) == (best.value, best.number)
    assert numbers["confirm_best_mb_per_s"]["runs"] == runs[ROLE_CONFIRM_BEST]
    median_default = statistics.median(runs[ROLE_CONFIRM_DEFAULT])
    median_best = statistics.median(runs[ROLE_CONFIRM_BEST])
    assert numbers["speedup"] == pytest.approx(median_best / median_default)
    low, high = numbers["speedup_ci95"]
    assert min(runs[ROLE_CONFIRM_BEST]) / max(runs[ROLE_CONFIRM_DEFAULT]) <= low <= numbers["speedup"] <= high
    assert high <= max(runs[ROLE_CONFIRM_BEST]) / min(runs[ROLE_CONFIRM_DEFAULT])
    tuning = trials[:5]  # default and search runs, one after the other; the re-measurements come after
    minutes = sum((t.datetime_complete - t.datetime_start).total_seconds() for t in tuning) / 60
    assert numbers["tuning_minutes"] == pytest.approx(minutes)  # the time they ran, not what passed between them
    gain = low > 1.0  # the confirmation shows a gain: else the recommendation is the default, and no RoTI
    assert numbers["roti_mb_per_s_per_min"] == (pytest.approx((median_best - median_default) / minutes) if gain
                                                else None)
    nbytes = best.user_attrs["bytes"]
    saved = nbytes / (median_default * 1e6) - nbytes / (median_best * 1e6)
    assert numbers["viability_runs"] == (pytest.approx(minutes * 60 / saved) if saved > 0 and gain else None)
    space = kernels.get("vpic").space()
    # the recommendation: the minimal configuration, unless its confirmation showed no gain
    config = space.complete({"files": "per_process"}) if gain else space.default()
    for layer, rows in numbers["best_by_layer"].items():
        for row in rows:
            p = space[row["parameter"]]
            assert p.layer == layer
            assert row["best"] == (format_value(config[p.name], p.unit) if p.name in config else "-")
    assert numbers["importance"] is None  # 5 tuning trials are too few for the GP's view

    page = (out / "report.html").read_text()
    assert f"{numbers['speedup']:.2f}x, 95% CI {low:.2f}x - {high:.2f}x" in page
    assert numbers["viability"] in page.replace("&#x27;", "'")
    assert all(f'<img src="{name}"' in page for name in files[2:])
    assert "Parameter importance skipped" in page


def test_report_says_where_the_tuning_trials_came_from(study):
    for minute in (1, 2, 3):
        add(study, 100.0, ROLE_DEFAULT, minute)
    add(study, 180.0, ROLE_SEARCH, 4, origin="transfer:vpic-4#7", predicted_speedup=1.5)
    add(study, 150.0, ROLE_SEARCH, 5, origin="rule:misaligned")
    add(study, None, ROLE_SEARCH, 6, state=TrialState.FAIL, origin="rule:small-writes")
    add(study, 120.0, ROLE_SEARCH, 7)  # no origin attr: the sampler's
    add(study, 130.0, ROLE_CONFIRM_BEST, 8)  # re-measurements are not tuning trials
    report = build_report(study)
    assert report.origins == [(0, "default", 100.0), (1, "default", 100.0), (2, "default", 100.0),
                              (3, "transfer:vpic-4#7", 180.0), (4, "rule:misaligned", 150.0),
                              (5, "rule:small-writes", None), (6, "sampler", 120.0)]
    assert dict(report.summary_rows())["where trials came from"] == (
        "default 3, transfer 1, rule 2, sampler 1; #3 transfer:vpic-4#7 180 MB/s (predicted 1.50x, measured 1.80x), "
        "#4 rule:misaligned 150 MB/s, #5 rule:small-writes failed; sampler from #6")
    assert report.to_dict()["origins"][3] == {"trial": 3, "origin": "transfer:vpic-4#7", "mb_per_s": 180.0,
                                              "predicted_speedup": 1.5}
    assert "vpic on 2 rank(s)" in dict(report.summary_rows())["context"]


def test_roti_is_the_confirmed_gain_per_minute_of_tuning(study):
    """Not the best single run's: a lucky 300 MB/s gives no RoTI until a confirmation shows a gain."""
    for minute in (1, 2, 3):
        add(study, 100.0, ROLE_DEFAULT, minute)
    add(study, 300.0, ROLE_SEARCH, 4, files="per_process")
    report = build_report(study)
    assert report.roti is None and report.to_dict()["roti_mb_per_s_per_min"] is None
    assert re.search(r"^RoTI: +none: no confirmed gain \(`iobo confirm`\)$", report.text(), re.M)
    for minute, (d, b) in enumerate(((95.0, 180.0), (105.0, 200.0), (100.0, 190.0), (98.0, 185.0), (102.0, 195.0)),
                                    start=10):
        add(study, d, ROLE_CONFIRM_DEFAULT, minute)
        add(study, b, ROLE_CONFIRM_BEST, minute, files="per_process")
    report = build_report(study)
    assert report.tuning_minutes == pytest.approx(4.0)
    assert report.roti == pytest.approx((190.0 - 100.0) / 4.0)
    assert re.search(r"^RoTI: +22.5 MB/s per minute of tuning \(the confirmed gain, 190 - 100 MB/s re-measured, "
                     r"over 4.0 min\)$", report.text(), re.M)


def test_a_recommendation_its_confirmation_rejected_keeps_the_default_with_no_roti(study):
    """After "0.95x, 95% CI 0.9-1.1, undecided" the report recommends the default, and says it is undecided."""
    for minute in (1, 2, 3):
        add(study, 100.0, ROLE_DEFAULT, minute)
    add(study, 300.0, ROLE_SEARCH, 4, files="per_process", bytes=10**9)
    for minute, (d, b) in enumerate(((100.0, 93.0), (96.0, 101.0), (104.0, 88.0), (101.0, 97.0), (99.0, 104.0)),
                                    start=10):
        add(study, d, ROLE_CONFIRM_DEFAULT, minute)
        add(study, b, ROLE_CONFIRM_BEST, minute, files="per_process")
    report = build_report(study)
    assert report.distinguishable is False and report.keeps_default and report.best_config == {}
    text = report.text()
    assert re.search(r"^recommended: +keep the system default: the confirmation of files=per_process measured "
                     r"0.9\dx \[0.\d\d-1.\d\d\], undecided after 5 pairs, not shown to help: about \d+ more pairs "
                     r"would settle it", text, re.M)
    assert re.search(r"^speedup: +0.9\dx, 95% CI .*: undecided after 5 pairs, not shown to help: about \d+ more "
                     r"pairs would settle it$", text, re.M)
    assert re.search(r"^RoTI: +none: the recommendation is the system default$", text, re.M)
    assert re.search(r"^viability point: +never: the recommended configuration is the system default$", text, re.M)
    assert "  (none: keep the system default)" in text and report.roti is None


def test_tuning_time_is_the_time_trials_ran_not_a_pause_before_a_resume(study):
    """Interrupted at minute 4.5, resumed at minute 60: 6.5 min of tuning, for the report and the stop rules; a
    stale trial (its tuner killed, told FAIL when the resume found it) adds no time."""
    from iobo.stopping import study_progress

    from support.studies import add as add_run

    for minute in (1, 2, 3):
        add_run(study, 100.0, ROLE_DEFAULT, minute)
    add_run(study, 150.0, ROLE_SEARCH, 4, {"files": "per_process"})
    add_run(study, None, ROLE_SEARCH, 4.5, state=TrialState.FAIL, fail_reason="interrupted: the tuner was stopped")
    add_run(study, None, ROLE_SEARCH, 60, start=4.5, state=TrialState.FAIL,
            fail_reason="stale: its tuner (host:123) died while it ran")
    add_run(study, 160.0, ROLE_SEARCH, 61, {"files": "per_process"})
    add_run(study, 120.0, ROLE_SEARCH, 62, start=60.5)  # ran beside the one before: counted once
    report = build_report(study)
    assert report.tuning_minutes == pytest.approx(6.5)
    assert [round(m, 6) for m, _, _ in report.roti_curve] == [1, 2, 3, 4, 4.5, 4.5, 5.5, 6.5]
    assert study_progress(study).minutes[-1] == pytest.approx(6.5)
    assert re.search(r"^tuning time: +6.5 min \(while the default and search runs ran; pauses between them and "
                     r"re-measurements excluded\)$", report.text(), re.M)


# -- the walk-back's verdicts in the conclusion (issue 31: undecided is not "no effect") -------------------------

def _walked(storage, scratch, effect, cv, seed):
    """A study whose incumbent (trial 3) changes only files, walked back against seeded runs: ``effect`` times
    100 MB/s with files=per_process, log-normal noise of ``cv`` a run."""
    import numpy as np

    from iobo.minimize import walk_back

    from support.studies import add as add_run
    from support.studies import defaults, vpic_tuner

    tuner = vpic_tuner(storage, scratch)
    study = tuner.open_study()
    defaults(study)
    add_run(study, 180.0, ROLE_SEARCH, 4, {"files": "per_process"})
    rng = np.random.default_rng(seed)

    def measure(runs):
        return [100.0 * (effect if config["files"] == "per_process" else 1.0) * float(np.exp(cv * rng.standard_normal()))
                for config, _ in runs]

    incumbent = {**tuner.space.default(), "files": "per_process"}
    minimal = walk_back(tuner.space, tuner.workload, incumbent, best_trial(study).number, measure, pairs=3)
    study.set_user_attr(MINIMAL_ATTR, minimal.to_attr())
    return study, minimal


def test_a_default_kept_for_want_of_evidence_names_the_undecided_knobs_and_the_pairs_to_settle_them(storage, scratch,
                                                                                                      capsys):
    """1.3x under 50% CV a run: undecided after the cap of 20 pairs. The report, `iobo best` and the tune summary
    do not say "keep the system default" as if nothing could help: no change was *shown* to help, files is
    undecided, and about N more pairs would settle it."""
    study, minimal = _walked(storage, scratch, 1.3, 0.5, seed=4)
    (step,) = minimal.steps
    assert step.verdict == "undecided" and len(step.with_mb_per_s) == 20 and minimal.changes == {}
    more = step.pairs_to_settle() - 20
    detail = (f"files=per_process: {step.ratio:.2f}x, 95% CI {step.interval[0]:.2f}x-{step.interval[1]:.2f}x after 20 "
              f"pairs, about {more} more pairs would settle it")
    conclusion = ("the system default is kept because no change was shown to help; undecided (more pairs could show "
                  "a gain): files")
    report = build_report(study)
    text = report.text()  # what `iobo report` and `iobo tune` print
    assert report.keeps_default
    assert f"  (none: {conclusion})" in text and "(none: keep the system default)" not in text
    assert re.search(rf"^walk-back: +{re.escape(conclusion)}$", text, re.M)
    assert re.search(r"^recommended: +the minimal configuration of trial 3 \(0 of its changes matter\); no change was "
                     rf"shown to help; undecided: {re.escape(detail)}$", text, re.M)
    assert re.search(r"^speedup: +none: the recommended configuration is the system default \(no change was shown to "
                     r"help; undecided: files\)$", text, re.M)
    assert "20 interleaved pairs; undecided: reverted, not shown to help; measuring stopped at the cap of 20 pairs" \
           in text
    walk = report.to_dict()["walk_back"]
    assert walk["undecided"] == [["files"]] and walk["conclusion"] == conclusion
    assert walk["verdicts"][0]["verdict"] == "undecided" and walk["verdicts"][0]["pairs"] == 20
    assert walk["verdicts"][0]["pairs_to_settle"] == 20 + more
    assert main(["best", "--storage", storage]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (f"recommended: keep the system default (the minimal configuration of trial 3 (0 of its changes "
                     f"matter); no change was shown to help; undecided: {detail})")


def test_a_default_kept_because_the_change_has_no_effect_says_so_plainly(storage, scratch):
    study, minimal = _walked(storage, scratch, 1.0, 0.01, seed=0)
    assert [s.verdict for s in minimal.steps] == ["no effect"] and minimal.undecided() == []
    text = build_report(study).text()
    assert "  (none: keep the system default)" in text and "undecided" not in text
    assert re.search(r"^walk-back: +no change matters: each was shown to have no effect or to slow the run$", text, re.M)
    assert re.search(r"^recommended: +the minimal configuration of trial 3 \(0 of its changes matter\)$", text, re.M)
    assert "(no change beat the noise)" in text


def test_a_clear_gain_matters_in_the_report(storage, scratch):
    study, minimal = _walked(storage, scratch, 1.8, 0.05, seed=0)
    assert [s.verdict for s in minimal.steps] == ["matters", "matters"] and minimal.changes == {"files": "per_process"}
    report = build_report(study)
    assert report.best_config == {"files": "per_process"} and "undecided" not in report.text()
    assert re.search(r"^walk-back: +1 change\(s\) shown to matter: files$", report.text(), re.M)
    assert report.to_dict()["walk_back"]["undecided"] == []
