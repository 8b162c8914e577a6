"""Warm start from earlier studies: a GP over their trials with the context as inputs ranks what to run first."""

import datetime as dt
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
from iobo.transfer import fit_transfer, propose, related_studies

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
