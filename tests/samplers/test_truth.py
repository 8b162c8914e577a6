"""experiments.harness.truth: per-configuration medians, their standard errors, the set S, intervals."""

import json
import math
import subprocess

import numpy as np
import pytest

from experiments.harness import problems, truth
from experiments.harness.runs import commit

SPREAD = (0.9, 0.95, 1.0, 1.05, 1.1)  # every configuration's repeats: its median times these


def write_table(path, medians_mb_per_s, spread=SPREAD):
    """A one-parameter table: configuration ``a=i`` has repeats ``medians[i] * spread``."""
    lines = ["a,repeat,mb_per_s"]
    for i, median in enumerate(medians_mb_per_s):
        lines += [f"{i},{r},{median * f:.3f}" for r, f in enumerate(spread)]
    path.write_text("\n".join(lines) + "\n")
    return problems.load_table(path, default={"a": 0})


def test_s_holds_the_configurations_within_one_standard_error_of_the_best(tmp_path):
    # every configuration has the same spread, so the same standard error of its log median (~0.04):
    # 970 is within it of 1000 (log gap 0.03), 900 is not (0.105)
    table = write_table(tmp_path / "t.csv", [500, 1000, 900, 970, 700, 300])
    known = truth.truth_of(table, seed=1)
    assert known.best == pytest.approx(1000)
    assert 0.03 < known.se < 0.08
    assert np.allclose(known.log_se, known.se, atol=0.02)
    assert known.threshold == pytest.approx(1000 * math.exp(-known.se))
    assert known.members == {problems.config_key({"a": 1}), problems.config_key({"a": 3})}
    assert known.in_s(table.truth({"a": 3})) and not known.in_s(table.truth({"a": 2}))
    assert known.detectable and known.p_differ < 1e-6
    assert np.array_equal(truth.truth_of(table, seed=1).log_se, known.log_se)  # seeded


def test_a_wider_spread_widens_s(tmp_path):
    wide = (0.6, 0.8, 1.0, 1.25, 1.6)  # log spread ~ +-0.47: a standard error of ~0.2
    table = write_table(tmp_path / "t.csv", [500, 1000, 900, 970, 700, 300], spread=wide)
    known = truth.truth_of(table, seed=1)
    assert 0.12 < known.se < 0.35
    assert known.members == {problems.config_key({"a": i}) for i in (1, 2, 3)}  # 900 within exp(-se) of 1000


def test_configurations_that_differ_only_by_noise_are_not_detectable(tmp_path):
    rng = np.random.default_rng(3)
    lines = ["a,repeat,mb_per_s"] + [f"{i},{r},{1000 * math.exp(0.3 * rng.standard_normal()):.3f}"
                                     for i in range(12) for r in range(5)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    known = truth.truth_of(problems.load_table(tmp_path / "t.csv", default={"a": 0}), seed=0)
    assert not known.detectable
    assert known.held < 0.9  # the "best" by median is luck: S misses the resampled best often


def write_recorded(path, medians_mb_per_s, passes, runs_per_job, job_factors, workload="w"):
    """A one-parameter table as experiments.sweep records it, with its sidecar: configuration ``a=i``, in job ``j``
    of ``passes``, has runs ``medians[i] * job_factors[i][j] * (0.97 | 1.03)``."""
    lines = ["a,repeat,mb_per_s"]
    for i, median in enumerate(medians_mb_per_s):
        for j in range(passes):
            lines += [f"{i},{j * runs_per_job + r},{median * job_factors[i][j] * (0.97, 1.03)[r % 2]:.3f}"
                      for r in range(runs_per_job)]
    path.write_text("\n".join(lines) + "\n")
    sidecar = {"kernel": "vpic", "ranks": 2, "options": {"w": workload}, "workdir": "/dev/shm",
               "grid": {"a": list(range(len(medians_mb_per_s)))}, "repeats": passes * runs_per_job,
               "default": {"a": 0}, **({"passes": passes} if passes > 1 else {})}
    path.with_suffix(".json").write_text(json.dumps(sidecar))
    return problems.load_table(path)


def test_runs_of_one_job_count_as_one_draw_of_the_jobs_spread(tmp_path):
    """A configuration's runs in one job share its moment on the machine: a multi-pass table resamples its jobs,
    and a table of one job per configuration adds the job-to-job spread of a multi-pass table of the same
    workload and grid, so S widens from the runs' spread (+-3%) to the jobs' (x/÷ 1.35)."""
    rng = np.random.default_rng(0)
    medians = [1000, 940, 900, 800, 600, 500]
    jobs = np.exp(0.3 * rng.standard_normal((len(medians), 3)))
    passes = write_recorded(tmp_path / "multi.csv", medians, 3, 2, jobs)
    assert passes.companion is None and list(passes.jobs[problems.config_key({"a": 0})]) == [0, 0, 1, 1, 2, 2]
    assert truth.between_job_sd(passes) == pytest.approx(0.3, abs=0.15)
    multi = truth.truth_of(passes, seed=1)
    assert "jobs resampled" in multi.error_basis and multi.se > 0.1  # runs alone would say ~0.02

    single = write_recorded(tmp_path / "single.csv", medians, 1, 5, np.ones((len(medians), 1)))
    assert single.companion == tmp_path / "multi.csv"
    one = truth.truth_of(single, seed=1)
    assert "multi" in one.error_basis and one.se > 0.1
    assert {problems.config_key({"a": i}) for i in range(3)} <= one.members  # 900 is within the jobs' spread

    other = write_recorded(tmp_path / "other.csv", medians, 1, 5, np.ones((len(medians), 1)), workload="other")
    assert other.companion is None  # another workload's jobs say nothing about this one's
    alone = truth.truth_of(other, seed=1)
    assert "runs resampled only" in alone.error_basis and alone.se < 0.03
    assert alone.members == {problems.config_key({"a": 0})}


def test_a_known_truth_problem_has_s_at_99_percent_of_its_optimum_and_15_percent_noise():
    model = problems.synthetic("mpiio6-cv15")
    known = truth.truth_of(model)
    assert known.known and known.detectable
    assert known.threshold == pytest.approx(0.99 * model.best)
    rng = np.random.default_rng(0)
    config = model.default
    ratios = np.log([model.measure(config, rng) / model.truth(config) for _ in range(4000)])
    assert np.std(ratios) == pytest.approx(math.sqrt(math.log(1 + 0.15**2)), rel=0.05)  # 15% multiplicative
    assert problems.synthetic("mpiio6").best == model.best  # same model, other noise


def test_median_interval_is_a_seeded_bootstrap_percentile_interval():
    values = [3, 7, 9, 10, 12, 14, 15, 40, 41, 60]
    median, low, high = truth.median_interval(values, seed=0)
    assert median == 13
    assert low <= 10 and 14 <= high <= 41
    assert truth.median_interval(values, seed=0) == (median, low, high)
    assert truth.median_interval([5] * 20) == (5, 5, 5)


def test_a_share_gets_its_wilson_interval():
    low, high = truth.share_interval(18, 20)  # the textbook 0.90: 0.699-0.972
    assert (round(low, 3), round(high, 3)) == (0.699, 0.972)
    low, high = truth.share_interval(20, 20)  # all hits: the interval still reaches below 1
    assert high == pytest.approx(1.0) and 0.83 < low < 0.84
    low = truth.share_interval(0, 20)[0]  # no hits: exactly 0, not a rounding error below it (printed "-0%")
    assert low == 0.0 and math.copysign(1.0, low) == 1.0
    assert truth.share_interval(57, 60)[0] < 0.95 < truth.share_interval(57, 60)[1]


def test_a_results_header_marks_a_dirty_tree(tmp_path, monkeypatch):
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    (tmp_path / "script.py").write_text("x = 1\n")
    (tmp_path / "experiments" / "results").mkdir(parents=True)
    (tmp_path / "experiments" / "results" / "run.txt").write_text("one\n")
    git("add", "script.py", "experiments")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.chdir(tmp_path)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert commit() == head
    (tmp_path / "experiments" / "results" / "run.txt").write_text("two\n")  # an earlier run's results, rewritten
    monkeypatch.chdir(tmp_path / "experiments")
    assert commit() == head
    (tmp_path / "script.py").write_text("x = 2\n")
    assert commit() == f"{head}-dirty"
