"""Warm start from earlier studies: a GP over their trials with the context as inputs ranks what to run first."""

import datetime as dt
import itertools
import math
from dataclasses import replace

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from iobo.cli import main
from iobo.context import CONTEXT_ATTR, kernel_context
from iobo.errors import ConfigError
from iobo.kernels import vpic
from iobo.measure import format_mb_per_s
from iobo.space import MiB
from iobo.samplers import GPSampler
from iobo.surrogate import PRIOR_WEIGHT_ATTR
from iobo import transfer
from iobo.transfer import OPTIMUM_ORIGIN, fit_transfer, propose, related_studies

from support.sizes import SMALL_VPIC

SPACE = vpic.space()
PER_PROCESS = {"files": "per_process"}  # the optimum of small writes in the earlier studies below
ALIGNED = {"alignment_interval": 4 * MiB, "alignment_threshold": MiB}  # the optimum of large writes
OTHERS = ({"sieve_buf_size": MiB}, {"meta_block_size": 32768}, {"romio_ds_write": "disable"})


def earlier_study(storage, name, ranks, particles, speedups, fs_type="tmpfs"):
    """A stored study of vpic at (ranks, particles): 3 default runs at 100 MB/s, then ``speedups``
    ({changes: speedup}) as search trials; its context recorded as the tuner records it."""
    study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
    options = vpic.SPEC.resolve_options({"particles": particles})
    study.set_user_attr("kernel", "vpic")
    study.set_user_attr("ranks", ranks)
    study.set_user_attr("kernel_options", options)
    study.set_user_attr(CONTEXT_ATTR, replace(kernel_context("vpic", ranks, options), fs_type=fs_type).to_attr())
    runs = [({}, 1.0, "default"), ({}, 1.02, "default"), ({}, 0.98, "default")]
    runs += [(changes, speedup, "search") for changes, speedup in speedups]
    start = dt.datetime(2026, 1, 1)
    for minute, (changes, speedup, role) in enumerate(runs):
        config = SPACE.complete(changes)
        study.add_trial(FrozenTrial(
            number=0, trial_id=0, state=TrialState.COMPLETE, value=100.0 * speedup,
            datetime_start=start + dt.timedelta(minutes=minute), datetime_complete=start + dt.timedelta(minutes=minute),
            params={"files": config["files"]}, distributions={"files": CategoricalDistribution(("shared", "per_process"))},
            user_attrs={"role": role, "config": config}, system_attrs={}, intermediate_values={}))
    return study


@pytest.fixture
def earlier(storage):
    """Two studies of small writes (4 KiB per call) where a file per process wins, one of large writes (4 MiB per
    call) where alignment wins: pooled without their contexts, the file per process would look best."""
    small = [(PER_PROCESS, 2.0), (ALIGNED, 1.0), *((c, 1.0) for c in OTHERS)]
    large = [(PER_PROCESS, 1.0), (ALIGNED, 2.5), *((c, 1.0) for c in OTHERS)]
    earlier_study(storage, "small-2", 2, 1024, small)
    earlier_study(storage, "small-4", 4, 1024, small)
    earlier_study(storage, "large-2", 2, 1048576, large)
    return storage


def first_choice(storage, ranks, particles, exclude=None):
    context = replace(kernel_context("vpic", ranks, {"particles": particles}), fs_type="tmpfs")
    workload = vpic.workload(ranks, vpic.SPEC.resolve_options({"particles": particles}))
    return propose(related_studies(storage, "vpic", exclude), context, SPACE, workload)


def changes(values):
    default = SPACE.default()
    return {k: v for k, v in values.items() if default.get(k) != v}


def test_the_context_decides_which_earlier_optimum_comes_first(earlier):
    large = first_choice(earlier, 8, 1048576)  # a scale no earlier study ran, with large writes
    assert changes(large[0].values) == ALIGNED
    assert large[0].source == "large-2" and large[0].measured_speedup == pytest.approx(2.5)
    assert large[0].predicted_speedup > 1.5
    small = first_choice(earlier, 8, 1024)
    assert changes(small[0].values) == PER_PROCESS
    assert small[0].predicted_speedup > 1.5
    assert "over 24 trials of 3 earlier studies with ranks, access_bytes as inputs" in small[0].reason
    assert len(small) == 3 and all(t.values != SPACE.default() for t in small)


def test_studies_of_other_kernels_or_without_a_baseline_are_left_out(earlier):
    optuna.create_study(storage=earlier, study_name="empty").set_user_attr("kernel", "vpic")
    optuna.create_study(storage=earlier, study_name="other").set_user_attr("kernel", "ior")
    assert sorted(s.study_name for s in related_studies(earlier, "vpic")) == ["large-2", "small-2", "small-4"]
    assert [s.study_name for s in related_studies(earlier, "vpic", exclude="small-2")] == ["small-4", "large-2"]
    with pytest.raises(ConfigError, match="at least 2 completed trials"):
        propose([], kernel_context("vpic", 2, {}), SPACE, vpic.workload(2, vpic.SPEC.options))


GOOD = {"files": "per_process", "alignment_interval": 4 * MiB, "romio_ds_write": "disable"}
"""Three knobs that each help alone (x1.28), independently: all three together (x2.12) is the optimum."""


@pytest.fixture
def partial(storage):
    """Two studies (2 and 4 ranks) that measured every combination of ``GOOD``'s knobs but all three together."""
    combos = [dict(c) for c in itertools.product(*[[(k, SPACE[k].default), (k, v)] for k, v in GOOD.items()])]
    measured = [({k: v for k, v in c.items() if v != SPACE[k].default},
                 math.exp(0.25 * sum(c[k] == v for k, v in GOOD.items()))) for c in combos]
    measured = [(changes, speedup) for changes, speedup in measured if changes and len(changes) < len(GOOD)]
    earlier_study(storage, "part-2", 2, 1024, measured)
    earlier_study(storage, "part-4", 4, 1024, measured)
    return storage


def test_the_gp_optimum_no_earlier_study_measured_is_a_candidate(partial, monkeypatch):
    chosen = first_choice(partial, 8, 1024)
    assert chosen[0].origin == OPTIMUM_ORIGIN and changes(chosen[0].values) == GOOD
    assert chosen[0].measured_speedup is None and "measured by no earlier study" in chosen[0].reason
    assert chosen[0].trial_attrs()["origin"] == OPTIMUM_ORIGIN
    measured = [t.predicted_speedup for t in chosen[1:]]
    assert len(measured) == 2 and chosen[0].predicted_speedup > 1.15 * max(measured)
    # it is the posterior mean's maximum over every combination of the values the earlier studies measured
    context = replace(kernel_context("vpic", 8, {"particles": 1024}), fs_type="tmpfs")
    model = fit_transfer(related_studies(partial, "vpic"), context, SPACE)
    varied = model.measured_values
    assert set(varied) == set(GOOD)
    every = [SPACE.complete(dict(zip(varied, combo))) for combo in itertools.product(*varied.values())]
    predicted = model.predict(every)
    assert every[int(predicted.argmax())] == chosen[0].values
    assert math.log(chosen[0].predicted_speedup) == pytest.approx(predicted.max())
    # over a larger space it climbs from the best measured configurations to the same optimum
    monkeypatch.setattr(transfer, "ENUMERATE_AT_MOST", 1)
    workload = vpic.workload(8, vpic.SPEC.resolve_options({"particles": 1024}))
    assert model.optimum(workload).values == chosen[0].values
    # a frozen knob stays at its default there too
    assert changes(model.optimum(workload, {"files": "not on this system"}).values) == {
        k: v for k, v in GOOD.items() if k != "files"}


TUNED = ("files", "alignment_interval", "romio_ds_write", "sieve_buf_size")


def weights_in_new_study(storage, model, right: bool, trials: int = 12) -> list[float]:
    """Tune a new study of small writes at 8 ranks (the earlier small-write studies' optimum, a file per process,
    is predicted best) with the transferred GP as the sampler's prior mean, on a measured bandwidth (3% noise)
    where that optimum is ``right`` (2x) or wrong (0.5x, and 4 MiB+ alignment gives 2.5x); the prior mean's
    weight at each GP proposal."""
    rng = np.random.default_rng(0)

    def bandwidth(trial):
        config = {name: trial.suggest_categorical(name, SPACE[name].values) for name in TUNED}
        per_process = config["files"] == "per_process"
        if right:
            speedup = 2.0 if per_process else 1.0
        else:
            speedup = (0.5 if per_process else 1.0) * (2.5 if config["alignment_interval"] >= 4 * MiB else 1.0)
        return 100.0 * speedup * float(rng.lognormal(0.0, 0.03))

    study = optuna.create_study(storage=storage, study_name=f"new-{right}", direction="maximize",
                                sampler=GPSampler(seed=0, prior_mean=model, n_startup_trials=2))
    for _ in range(3):
        study.enqueue_trial({name: SPACE[name].default for name in TUNED})
    study.optimize(bandwidth, n_trials=trials)
    return [t.system_attrs[PRIOR_WEIGHT_ATTR] for t in study.trials if PRIOR_WEIGHT_ATTR in t.system_attrs]


def test_the_prior_mean_weight_falls_when_the_transferred_optimum_is_wrong(earlier):
    context = replace(kernel_context("vpic", 8, {"particles": 1024}), fs_type="tmpfs")
    model = fit_transfer(related_studies(earlier, "vpic"), context, SPACE)
    wrong = weights_in_new_study(earlier, model, right=False)
    assert len(wrong) >= 7 and wrong[0] > 0.5  # trusted before the runs tell
    assert max(wrong[-4:]) < 0.15
    right = weights_in_new_study(earlier, model, right=True)
    assert len(right) >= 7 and min(right) > 0.7


def tune(storage, scratch, study, trials, *flags):
    return main(["tune", "vpic", "--ranks", "2", "--trials", str(trials), "--storage", storage, "--study", study,
                 "--workdir", str(scratch), "--runner", "local", "--confirm", "0", *flags,
                 "--option", f"particles={SMALL_VPIC['particles']}", "--option", f"steps={SMALL_VPIC['steps']}"])


def test_tune_warm_starts_by_default_from_related_studies(capsys, earlier, scratch):
    assert tune(earlier, scratch, "new", 6) == 0  # no flag: on, as the storage holds earlier vpic studies
    out = capsys.readouterr().out
    assert "warm start from 3 earlier studies: small-2 (vpic on 2 rank(s)" in out and "large-2 (vpic" in out
    study = optuna.load_study(study_name="new", storage=earlier)
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert [t.user_attrs["origin"].split(":")[0] for t in done] == ["default"] * 3 + ["transfer"] * 3
    expected = first_choice(earlier, 2, SMALL_VPIC["particles"], exclude="new")
    assert [t.user_attrs["origin"] for t in done[3:]] == [t.origin for t in expected]
    assert [t.user_attrs["predicted_speedup"] for t in done[3:]] == pytest.approx(
        [t.predicted_speedup for t in expected])
    assert (f"#3 {expected[0].origin} {format_mb_per_s(done[3].value)} MB/s "
            f"(predicted {expected[0].predicted_speedup:.2f}x") in out
    assert "how the transfer predicted:" in out and f"#3 {expected[0].predicted_speedup:.2f}x / " in out
    assert tune(earlier, scratch, "new", 7) == 0  # resumed: the GP proposes with the transferred prior mean
    study = optuna.load_study(study_name="new", storage=earlier)
    last = study.trials[-1]
    assert last.user_attrs["origin"] == "sampler" and 0.0 <= last.system_attrs[PRIOR_WEIGHT_ATTR] <= 1.0
    assert "the sampler's weight on the transferred model" in capsys.readouterr().out


def test_tune_no_warm_start_starts_cold_despite_related_studies(capsys, earlier, scratch):
    assert tune(earlier, scratch, "cold", 4, "--no-warm-start") == 0
    assert "warm start" not in capsys.readouterr().out
    study = optuna.load_study(study_name="cold", storage=earlier)
    assert study.trials[3].user_attrs["origin"] == "sampler"
    assert PRIOR_WEIGHT_ATTR not in study.trials[3].system_attrs


def test_tune_without_related_studies_starts_cold_and_says_nothing_of_it(capsys, storage, scratch):
    assert tune(storage, scratch, "cold", 4, "--warm-start") == 0  # the flag is still accepted
    out = capsys.readouterr().out
    assert "warm start" not in out and "transfer:" not in out
    assert optuna.load_study(study_name="cold", storage=storage).trials[3].user_attrs["origin"] == "sampler"


def tune_command(capsys, storage, scratch, program, study, ranks, trials):
    code = main(["tune", "--command", f"{program} {{workdir}}/a.h5", "--params", "cb_buffer_size,alignment_interval",
                 "--ranks", str(ranks), "--trials", str(trials), "--storage", storage, "--study", study,
                 "--workdir", str(scratch), "--runner", "local", "--confirm", "0", "--seed", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_a_command_study_warm_starts_from_studies_of_the_same_command(library, programs, capsys, storage, scratch):
    """Real runs of a compiled MPI + HDF5 program under the shim, studies in SQLite: a study of the same command at
    another scale is related, one of another program is not."""
    assert "warm start" not in tune_command(capsys, storage, scratch, programs["hdf5_18"], "one-rank", 1, 8)
    assert "warm start" not in tune_command(capsys, storage, scratch, programs["hdf5_16"], "other", 1, 5)
    out = tune_command(capsys, storage, scratch, programs["hdf5_18"], "two-ranks", 2, 6)
    assert f"warm start from 1 earlier study: one-rank ({programs['hdf5_18']} {{workdir}}/a.h5 on 1 rank(s)" in out
    study = optuna.load_study(study_name="two-ranks", storage=storage)
    done = study.get_trials(states=(TrialState.COMPLETE,))
    origins = [t.user_attrs["origin"] for t in done]
    assert origins[:3] == ["default"] * 3 and len(done) == 6
    assert all(o.startswith("transfer:") for o in origins[3:]), origins
    assert all(o == OPTIMUM_ORIGIN or o.startswith("transfer:one-rank#") for o in origins[3:])
    assert all("predicted_speedup" in t.user_attrs for t in done[3:])


def test_the_warm_start_score_says_when_no_warm_start_could_halve_the_cold_starts_evaluations():
    """experiments.warmstart.truth_score: warm / cold >= 1 / cold on every seed, so where the cold start is in S at
    its first search trial on half the seeds, a median <= 0.5 is out of reach whatever the warm start does."""
    from experiments.warmstart.truth_score import context_lines, target, truth_of

    name = "ior-tmpfs-1r-quiet"
    truth = truth_of(target(name).problem)
    inside, outside = truth.best, truth.threshold * 0.5  # a configuration in S and one far below it
    lucky = {"truths": [inside] * 5}
    slow = {"truths": [outside] * 3 + [inside] * 2}  # S at the 4th search trial
    runs = [{name: {"cold": lucky if seed % 2 else slow, "warm": dict(lucky, first_origin="measured"),
                    "warm, measured only": lucky}} for seed in range(20)]
    *_, line = context_lines(name, runs, budget=5)[1]
    assert "a warm start in S at its first trial on every seed would score 0.62, out of reach for any warm start" in line
    assert "in S at its first search trial on 10 of 20 seeds" in line
    assert ": MISSED" in line  # the warm start in S at once everywhere still misses
    runs = [{name: dict(r[name], cold=slow)} for r in runs]
    *_, line = context_lines(name, runs, budget=5)[1]
    assert "would score 0.25, reachable" in line and ": met" in line
