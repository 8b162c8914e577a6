"""optuna-dashboard on a real study: the notes and figures iobo writes, and the page a browser shows.

One real study serves every test here: 5 kernel runs on 2 MPI ranks, one of
which fails on purpose (the fault-injecting kernel of tests/support), tuned
with the DashboardAnnotator as a callback of the Tuner.
"""

import datetime
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import FrozenTrial, TrialState
from optuna_dashboard import get_note

from iobo import kernels
from iobo.integrations.dashboard import DashboardAnnotator, trial_note
from iobo.kernels import KernelSpec, vpic
from iobo.measure import format_mb_per_s
from iobo.report import build_report
from iobo.trials import ROLE_DEFAULT, ROLE_SEARCH
from iobo.tuner import Tuner

from support.sizes import SMALL_VPIC

SUPPORT = Path(__file__).parents[1] / "support"
CHROME_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                "--disable-component-update", "--disable-sync", "--disable-quic")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """(storage URL, study) of a real 5-trial study with one failed trial, annotated while it ran."""
    storage = f"sqlite:///{tmp_path_factory.mktemp('dashboard') / 'study.db'}"
    workdir = tempfile.mkdtemp(prefix="iobo-test-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    kernels.register(KernelSpec(name="faulty", module="faulty_vpic", space=vpic.space, workload=vpic.workload,
                                options=dict(vpic.SPEC.options), check_options=vpic.check_options))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("PYTHONPATH", f"{SUPPORT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
            tuner = Tuner(kernel="faulty", ranks=2, trials=5, storage=storage, study="dash", workdir=workdir,
                          kernel_options=SMALL_VPIC, sampler=optuna.samplers.TPESampler(seed=0), echo=None,
                          callbacks=[DashboardAnnotator()])
            study = tuner.open_study()
            study.enqueue_trial({**tuner.space.default(), "romio_ds_write": "disable"})  # fails on purpose
            tuner.run()
            yield storage, study
    finally:
        kernels.unregister("faulty")
        shutil.rmtree(workdir, ignore_errors=True)


def note_of(study, trial):
    return get_note(optuna.Trial(study, trial._trial_id))


def test_each_finished_trial_has_a_note_with_its_measurements(tuned):
    _, study = tuned
    trials = study.get_trials()
    assert [t.state for t in trials].count(TrialState.COMPLETE) == 4
    for trial in trials:
        note, attrs = note_of(study, trial), trial.user_attrs
        if trial.state == TrialState.FAIL:
            assert f"**FAIL** ({attrs['role']}): {attrs['fail_reason']}" in note
            assert "#### stderr (tail)" in note and "injected failure: H5Dwrite()" in note
            assert "romio_ds_write` | `disable`" in note  # changed from the default
            continue
        assert note.startswith(f"**{format_mb_per_s(trial.value)} MB/s** ({attrs['role']}): "
                               f"{attrs['bytes']:,} bytes in ")
        assert "Per-step bandwidth (MB/s): " + ", ".join(format_mb_per_s(v) for v in attrs["step_mb_per_s"]) in note
        for name, value in attrs["effective"].items():
            assert f"| `{name}` | `{value}` |" in note
        for name, value in attrs["hints"].items():
            assert f"| `{name}` | `{value}` |" in note
        for name, reason in attrs["not_applied"].items():
            assert f"- `{name}`: {reason}" in note
        if attrs["role"] == ROLE_DEFAULT:
            assert "nothing: this is the system default" in note


def test_the_study_has_its_report_note_and_figures(tuned):
    from optuna_dashboard._custom_plot_data import get_plotly_graph_objects

    _, study = tuned
    report = build_report(study)
    note = get_note(study)
    assert report.text() in note
    assert "the GP needs at least 5 distinct completed configurations" in note
    figures = get_plotly_graph_objects(study._storage.get_study_system_attrs(study._study_id))
    assert sorted(figures) == ["best_so_far", "roti"]  # importance needs more trials
    best_so_far = json.loads(figures["best_so_far"])["data"][0]
    assert best_so_far["y"] == [best for _, best, _ in report.roti_curve]
    assert json.loads(figures["roti"])["data"][0]["y"] == [r for _, _, r in report.roti_curve]


def test_the_importance_figure_names_the_knob_that_carries_the_gain(storage):
    """One knob (files) is the whole gain; striping varies at random but cannot apply (frozen, as off Lustre),
    and a sieve buffer size is noise. The figure's top bar is files; striping is not ranked at all."""
    import numpy as np
    from optuna.distributions import CategoricalDistribution
    from optuna_dashboard._custom_plot_data import get_plotly_graph_objects

    from iobo.integrations.dashboard import annotate
    from iobo.trials import FROZEN_ATTR

    rng = np.random.default_rng(0)
    study = optuna.create_study(storage=storage, study_name="many", direction="maximize")
    choices = {"files": ("shared", "per_process"), "striping_factor": (1, 4, 16, 64),
               "sieve_buf_size": (65536, 262144, 1048576)}
    distributions = {n: CategoricalDistribution(c) for n, c in choices.items()}
    start = datetime.datetime(2026, 1, 1)
    for i in range(24):
        config = {n: c[0] for n, c in choices.items()} if i < 3 else \
            {n: c[rng.integers(len(c))] for n, c in choices.items()}
        value = (1800.0 if config["files"] == "per_process" else 1000.0) * float(np.exp(0.1 * rng.standard_normal()))
        study.add_trial(FrozenTrial(
            number=0, trial_id=0, state=TrialState.COMPLETE, value=value,
            datetime_start=start + datetime.timedelta(minutes=i),
            datetime_complete=start + datetime.timedelta(minutes=i + 1),
            params=config, distributions=distributions, system_attrs={}, intermediate_values={},
            user_attrs={"role": ROLE_DEFAULT if i < 3 else ROLE_SEARCH, "config": config},
        ))
    study.set_user_attr(FROZEN_ATTR, {"striping_factor": "the output directory is on tmpfs, not Lustre"})
    annotate(study)
    figures = get_plotly_graph_objects(study._storage.get_study_system_attrs(study._study_id))
    assert sorted(figures) == ["best_so_far", "importance", "roti"]
    figure = json.loads(figures["importance"])
    bars = figure["data"][0]
    assert bars["y"][-1] == "files"  # drawn bottom-up: the top bar
    assert "striping_factor" not in bars["y"] and bars["x"][-1] > 80  # % of the GP ablation's importance
    assert "error_x" in bars  # with its range over refits
    assert "gp-ablation" in figure["layout"]["title"]["text"]
    assert "Parameter importance" in get_note(study) and "files" in get_note(study)
    assert all(note_of(study, t).startswith(f"**{format_mb_per_s(t.value)} MB/s**") for t in study.get_trials())


def test_a_stderr_tail_with_a_code_fence_cannot_break_the_note():
    failed = FrozenTrial(
        number=0, trial_id=0, state=TrialState.FAIL, value=None, datetime_start=None, datetime_complete=None,
        params={}, distributions={}, system_attrs={}, intermediate_values={},
        user_attrs={"role": ROLE_SEARCH, "fail_reason": "exit code 1", "stderr_tail": "```\n| not | a table |"},
    )
    note = trial_note(failed)
    assert "#### stderr (tail)\n\n````text\n```\n| not | a table |\n````" in note


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dashboard(tuned):
    """``iobo dashboard`` serving the study on a loopback port; its URL. Stopped afterwards."""
    storage, _ = tuned
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "iobo.cli", "dashboard", storage, "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"iobo dashboard did not listen on port {port}:\n{server.communicate()[0]}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chrome-profile'}")
    options.add_argument("--window-size=1400,2000")
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for_text(driver, *texts, timeout=20):
    """Wait until the page shows every one of ``texts``; returns the page text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(lambda d: all(t in d.find_element(By.TAG_NAME, "body").text for t in texts))
    return driver.find_element(By.TAG_NAME, "body").text


@pytest.mark.timeout(90)
def test_the_dashboard_shows_the_trials_best_value_notes_and_figures(tuned, dashboard, browser, tmp_path):
    _, study = tuned
    best = max((t for t in study.get_trials() if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    browser.get(f"{dashboard}/dashboard/studies/{study._study_id}")
    wait_for_text(browser, "dash", f"Best Trial (number={best.number})", repr(best.value),
                  "Best bandwidth so far", "Return on tuning investment (RoTI)")
    browser.save_screenshot(str(tmp_path / "study.png"))

    browser.get(f"{dashboard}/dashboard/studies/{study._study_id}/trials?numbers={best.number}")
    page = wait_for_text(browser, "5 Trials", *(f"Trial {n}" for n in range(5)), "HDF5 settings in effect")
    failed = next(t for t in study.get_trials() if t.state == TrialState.FAIL)
    assert f"Trial {failed.number}\nFail" in page  # the injected failure is listed as such
    assert f"{format_mb_per_s(best.value)} MB/s ({best.user_attrs['role']})" in page  # its note, rendered
    browser.save_screenshot(str(tmp_path / "best-trial.png"))
    print(f"screenshots: {tmp_path / 'study.png'}, {tmp_path / 'best-trial.png'}")


def test_the_note_of_a_command_trial_shows_the_shims_counters_and_warnings(library, programs, storage, scratch):
    from iobo.kernels.command import CommandSpec
    from iobo.runners.local import LocalRunner

    spec = CommandSpec(f"{programs['mpiio']} {{workdir}}/d.bin", params=("cb_buffer_size", "cb_nodes"))
    tuner = Tuner(kernel=spec, ranks=2, storage=storage, study="c", workdir=str(scratch), runner=LocalRunner(),
                  warmup=False, echo=None)
    values = {**spec.space().default(), "cb_buffer_size": 4 * 1024 * 1024, "cb_nodes": 2}
    [trial] = tuner.measure(tuner.open_study(), [(values, {"role": ROLE_SEARCH})])
    note = trial_note(trial, spec.space())
    assert f"({ROLE_SEARCH}), measured by the shim's I/O accounting" in note
    assert "| `cb_buffer_size` | `4194304` | `4194304` |" in note  # in effect, requested
    assert "#### I/O seen by the shim\n\n2 rank(s); value from the mpiio level" in note
    write = trial.user_attrs["io"]["levels"]["mpiio"]["write"]
    assert f"| `mpiio write` | `{write['calls']:,}` | `{write['bytes']:,}` |" in note
    assert "#### Not applied\n\n- `cb_nodes`: ROMIO lowered it" in note
    assert "#### Shim warnings\n\n- IOBO_CB_NODES=2 did not take effect" in note


@pytest.mark.all_storages
def test_iobo_dashboard_serves_a_study_from_every_storage(storage):
    """optuna-dashboard's API, served by `iobo dashboard URL`, lists a study kept in SQLite, a journal or PostgreSQL."""
    import json
    import urllib.request

    from iobo.storage import open_storage

    study = optuna.create_study(storage=open_storage(storage), study_name="served", direction="maximize")
    study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=123.0))
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "iobo.cli", "dashboard", storage, "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=2) as response:
                    studies = json.load(response)["study_summaries"]
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"iobo dashboard did not serve {storage}:\n{server.communicate()[0]}")
                time.sleep(0.3)
        assert [s["study_name"] for s in studies] == ["served"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/{studies[0]['study_id']}",
                                    timeout=10) as response:
            detail = json.load(response)
        assert [t["values"] for t in detail["trials"]] == [[123.0]]
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_trial_note_is_saved_without_loading_the_dashboard_app(tmp_path):
    """The first trial's note used to import optuna_dashboard, its web app and through it scikit-learn and torch
    (about 4 s, which a Ctrl-C during the first trial waited for): the note is saved from its module alone, and
    optuna-dashboard's own reader reads it back."""
    script = f"""
import sys, optuna
from iobo.integrations.dashboard import save_trial_note
study = optuna.create_study(storage="sqlite:///{tmp_path}/s.db", study_name="s")
trial = study.ask(); trial.set_user_attr("role", "default"); study.tell(trial, 1.0)
save_trial_note(study, study.trials[0])
assert not [m for m in ("optuna_dashboard", "sklearn", "torch") if m in sys.modules], sorted(sys.modules)[:5]
from optuna_dashboard import get_note
print(get_note(optuna.Trial(study, study.trials[0]._trial_id)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("**1 MB/s** (default)")


def test_the_figures_are_saved_once_a_refresh_period_and_when_the_tuner_finishes(storage, scratch, monkeypatch):
    """Three loops of trials in one `with tuner:` block (as the walk-back and the confirmation run one per test):
    the figures (a GP fit each) are saved at the first loop's end and when the block ends, not at every loop, and
    what was saved last is the study's final report."""
    from iobo.integrations import dashboard
    from iobo.tuner import TunerCallback

    saved, loops = [], []
    real_save = dashboard.save_study_figures
    monkeypatch.setattr(dashboard, "save_study_figures", lambda study: saved.append(1) or real_save(study))

    class Loops(TunerCallback):
        def loop_finished(self, study):
            loops.append(1)

    tuner = Tuner(kernel="vpic", ranks=2, trials=4, storage=storage, study="refresh", workdir=str(scratch),
                  kernel_options=SMALL_VPIC, sampler=optuna.samplers.TPESampler(seed=0), echo=None, warmup=False,
                  callbacks=[Loops(), DashboardAnnotator(refresh_s=3600)])
    with tuner:
        for trials in (4, 5, 6):
            tuner.trials = trials
            study = tuner.run()
    assert len(loops) == 3 and len(study.trials) == 6
    assert len(saved) == 2  # the first loop's end, and the end of the block
    assert build_report(study).text() in get_note(study)
