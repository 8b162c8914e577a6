"""What a study found: default vs best, speedup, RoTI, viability, trial counts.

Figures come from the stored trials only, so a report can be made at any
time, from any machine that reaches the storage.  When the study holds an
interleaved re-measurement (``Tuner.confirm``), the headline default and best
bandwidths and the speedup are taken from it, not from single lucky runs.

``write_report`` writes the report as files: ``report.html`` (tables and the
figures of :mod:`iobo.plots` as PNGs), ``report.json`` (every number) and
the PNGs themselves.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from iobo import trials as study_trials
from iobo.importance import MIN_GP_TRIALS, robust_importance
from iobo.measure import INTERVAL_MIN_RUNS, MB, Spread, format_mb_per_s, roti, speedup_interval
from iobo.minimize import Minimal, confirmation_verdict_text, current_minimal
from iobo.surrogate import PRIOR_WEIGHT_ATTR
from iobo.trials import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, Baseline


@dataclass(frozen=True)
class StudyReport:
    """Figures of one study; bandwidths in MB/s, times in minutes.

    default: the robust baseline, every run of the system default (the
    initial ones after an unrecorded warm-up, those interleaved through the
    search, the re-measurements), see :class:`iobo.trials.Baseline`;
    baseline: the same with its start/later split (drift); best_value /
    best_number: the best single tuning run; best_config: the recommended
    configuration's changes from the default (the minimal one when made);
    minimal: the minimal configuration with each tested knob's contribution and verdict (matters, no effect,
    slower or undecided: :attr:`iobo.minimize.Step.verdict`);
    confirm_default / confirm_best: the interleaved re-measurement of the
    default and the configuration the study proposed (the recommendation,
    unless this confirmation rejected it: :func:`iobo.minimize.recommendation`),
    the only source of a speedup; tuning_minutes: the time the tuning trials
    ran (a pause between them, e.g. before a resume, is not counted:
    :func:`iobo.trials.roti_curve`); roti_curve: the search's curve, over its
    best single run so far (what the stop rules watch), not a conclusion;
    context: the study's context in one line (:mod:`iobo.context`);
    origins: (trial number, origin, MB/s or None) of every finished tuning
    trial, in trial order (:func:`iobo.trials.origin`); predicted: trial number
    -> the speedup over the default a warm start predicted for it
    (:mod:`iobo.transfer`); prior_weights: (trial number, weight) of the
    trials the GP sampler proposed with a warm start's prior mean, the
    weight it gave the transferred model then (1: fully trusted, 0: not
    used; :mod:`iobo.samplers._prior_mean`).
    """

    study: str
    kernel: str
    ranks: int
    counts: dict[str, int]
    default: Spread | None
    best_value: float | None
    best_number: int | None
    best_config: dict[str, Any]
    confirm_default: Spread | None
    confirm_best: Spread | None
    tuning_minutes: float
    roti_curve: list[tuple[float, float, float]]  # (minutes, best so far MB/s, RoTI MB/s per min)
    bytes_per_run: int | None = None  # bytes one kernel run moves (the best trial's)
    # layer -> [(parameter, system default, best)], values formatted with their units
    best_by_layer: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    baseline: Baseline | None = None
    minimal: Minimal | None = None
    recommendation: str = ""  # how the recommended configuration was chosen
    frozen: dict[str, str] = field(default_factory=dict)  # knobs that never applied here, with the reason
    context: str = ""
    origins: list[tuple[int, str, float | None]] = field(default_factory=list)
    predicted: dict[int, float] = field(default_factory=dict)
    prior_weights: list[tuple[int, float]] = field(default_factory=list)
    nodes: str | None = None  # the best run's hosts when it spanned several (iobo.nodes.describe_nodes)
    confirm_plan: dict[str, Any] | None = None  # the last confirmation's pairs and why (iobo.tuner.confirm_plan)

    @property
    def confirmed(self) -> bool:
        """True when default and best were re-measured (``Tuner.confirm``)."""
        return bool(self.confirm_default and self.confirm_best)

    @property
    def headline(self) -> tuple[Spread, Spread] | None:
        """(default runs, best runs) a speedup is measured from, MB/s: the interleaved re-measurement, or None.

        A best single run over the default is never a speedup: the best of
        many noisy runs is biased upwards (the winner's curse).
        """
        if self.confirmed:
            return self.confirm_default, self.confirm_best
        return None

    @property
    def speedup(self) -> float | None:
        """Median of the re-measured best over median of the re-measured default; None before ``confirm``."""
        if self.headline is None:
            return None
        default, best = self.headline
        return best.median / default.median

    def speedup_interval(self, level: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float] | None:
        """Bootstrap confidence interval of :attr:`speedup` (see :func:`iobo.measure.bootstrap_speedup`); None before
        ``confirm`` or with fewer than ``INTERVAL_MIN_RUNS`` re-measured runs of either side."""
        if (level, resamples, seed) == (0.95, 2000, 0):
            return self._interval95
        return self._interval(level, resamples, seed)

    @cached_property
    def _interval95(self) -> tuple[float, float] | None:
        return self._interval(0.95, 2000, 0)  # the one every figure and line of the report uses: bootstrapped once

    def _interval(self, level: float, resamples: int, seed: int) -> tuple[float, float] | None:
        if self.headline is None:
            return None
        default, best = self.headline
        return speedup_interval(default.values, best.values, level, resamples, seed)

    @property
    def keeps_default(self) -> bool:
        """True when the recommended configuration is the system default (no change beat the noise)."""
        return self.best_number is not None and bool(self.recommendation) and not self.best_config

    @property
    def distinguishable(self) -> bool | None:
        """True when the speedup's 95% interval excludes 1 (a gain or a loss beyond the noise); None without an
        interval."""
        interval = self.speedup_interval()
        if interval is None:
            return None
        return not interval[0] <= 1.0 <= interval[1]

    @property
    def seconds_per_run(self) -> tuple[float, float] | None:
        """(default, recommended) seconds of one production run: bytes per run / the re-measured median
        bandwidths (None before a confirmation: a best single run is not what production will see)."""
        if not self.bytes_per_run or self.headline is None:
            return None
        default, best = (s.median for s in self.headline)
        return self.bytes_per_run / (default * MB), self.bytes_per_run / (best * MB)

    @property
    def confirmed_gain(self) -> bool:
        """True when the confirmation shows a gain: its 95% interval lies above 1, and the recommendation is not
        the system default. RoTI and the viability point exist only then."""
        interval = self.speedup_interval()
        return interval is not None and interval[0] > 1.0 and not self.keeps_default

    @property
    def viability_runs(self) -> float | None:
        """Production runs after which tuning has paid for itself: ``tuning_seconds / (t_default - t_best)``,
        t = bytes per run / re-measured bandwidth (:attr:`seconds_per_run`); None without a confirmed gain."""
        if not self.confirmed_gain or self.seconds_per_run is None:
            return None
        t_default, t_best = self.seconds_per_run
        if t_default <= t_best:
            return None
        return self.tuning_minutes * 60 / (t_default - t_best)

    @property
    def roti(self) -> float | None:
        """The study's RoTI: the confirmed gain (re-measured median of the recommendation minus the default's,
        MB/s) per minute of tuning; None when nothing was confirmed, the confirmation shows no gain (its interval
        holds 1 or lies below, or it has none) or the recommendation is the system default."""
        if not self.confirmed_gain or self.tuning_minutes <= 0:
            return None
        default, best = self.headline
        return roti(best.median, default.median, self.tuning_minutes)

    @property
    def peak_roti(self) -> tuple[float, float] | None:
        """(RoTI, minutes) at the peak of the search's curve (its best single run so far): the stop rules' view,
        not the study's RoTI (:attr:`roti`)."""
        if not self.roti_curve:
            return None
        minutes, _, value = max(self.roti_curve, key=lambda row: row[2])
        return value, minutes

    def speedup_text(self) -> str:
        """The speedup with its interval, or why there is none."""
        if self.headline is None and self.keeps_default:
            if self.minimal and self.minimal.undecided():  # not "nothing can help": nothing was shown to
                return (f"none: the recommended configuration is the system default (no change was shown to help; "
                        f"undecided: {self.minimal.undecided_knobs()})")
            return "none: the recommended configuration is the system default (no change beat the noise)"
        if self.headline is None and self.confirm_plan and self.confirm_plan.get("pairs") == 0:
            return f"not measured: {self.confirm_plan['why']}"  # e.g. the stop rule's stake pays for no re-measuring
        if self.headline is None:
            return ("not measured yet: `iobo confirm` re-measures the default and the recommended configuration, "
                    "interleaved (a best single run is not a speedup)")
        interval = self.speedup_interval()
        if interval is None:
            pairs = min(s.n for s in self.headline)
            return (f"{self.speedup:.2f}x from {pairs} interleaved pair(s), too few for an interval (at least "
                    f"{INTERVAL_MIN_RUNS}: `iobo confirm --repeats {INTERVAL_MIN_RUNS}`), so no speedup is claimed")
        low, high = interval
        text = (f"{self.speedup:.2f}x, 95% CI {low:.2f}x - {high:.2f}x (re-measured medians, interleaved; bootstrap "
                f"of the ratio of medians, 2000 resamples, seed 0)")
        if low > 1.0:
            return text
        default, best = self.headline
        return f"{text}: {confirmation_verdict_text(interval, default.values, best.values)}"

    def summary_rows(self) -> list[tuple[str, str]]:
        """The summary as (label, value) rows: the one content that :meth:`text`, :func:`render_html` and the
        dashboard's note render."""
        rows = [("kernel", f"{self.kernel} on {self.ranks} MPI ranks"),
                ("trials", ", ".join(f"{n} {state.lower()}" for state, n in self.counts.items() if n))]
        if self.context:
            rows.append(("context", self.context))
        if self.origins:
            rows.append(("where trials came from", self.origins_text()))
        if self.predicted or self.prior_weights:
            rows.append(("how the transfer predicted", self.transfer_text()))
        if self.baseline:
            rows.append(("default (baseline)", self.baseline.describe()))
        if self.best_value is not None:
            rows.append(("best (single run)", f"{format_mb_per_s(self.best_value)} MB/s (trial {self.best_number})"))
        if self.nodes:
            rows.append(("nodes (best run)", self.nodes))
        if self.confirmed:
            rows.append(("default, re-measured", self.confirm_default.describe()))
            rows.append(("best, re-measured", self.confirm_best.describe()))
            if self.confirm_plan:
                rows.append(("confirmation", f"{self.confirm_plan['pairs']} interleaved pairs "
                                             f"({self.confirm_plan['why']})"))
        rows.append(("speedup", self.speedup_text()))
        if self.roti_curve:
            rows.append(("tuning time", f"{self.tuning_minutes:.1f} min (while the default and search runs ran; "
                                        f"pauses between them and re-measurements excluded)"))
            rows.append(("RoTI", self.roti_text()))
        rows.append(("viability point", self.viability_text()))
        if self.recommendation:
            rows.append(("recommended", self.recommendation))
        if self.minimal and self.minimal.steps:
            rows.append(("walk-back", self.minimal.conclusion()))
        for name, reason in self.frozen.items():
            rows.append((f"not applied: {name}", f"{reason}; frozen at its default, never exported"))
        return rows

    def roti_text(self) -> str:
        """The study's RoTI with what it is made of, or "none" and why."""
        if self.roti is None:
            why = ("the recommendation is the system default" if self.keeps_default
                   else "no confirmed gain (`iobo confirm`)" if self.headline is None or self.speedup_interval() is None
                   else "the confirmation shows no gain")
            return f"none: {why}"
        default, best = self.headline
        return (f"{format_mb_per_s(self.roti)} MB/s per minute of tuning (the confirmed gain, "
                f"{format_mb_per_s(best.median)} - {format_mb_per_s(default.median)} MB/s re-measured, over "
                f"{self.tuning_minutes:.1f} min)")

    def text(self) -> str:
        """The summary rows, then the recommended configuration and each tested knob's contribution."""
        lines = [f"study {self.study!r}"]
        lines += [f"{label + ':':24s} {value}" for label, value in self.summary_rows()]
        lines.append("recommended configuration (changed from default):")
        kept = (f"  (none: {self.minimal.conclusion()})" if self.minimal and self.minimal.undecided()
                else "  (none: keep the system default)")
        lines += [f"  {k} = {v}" for k, v in self.best_config.items()] or [kept]
        if self.minimal and self.minimal.steps:
            lines.append("what each change buys (with vs without, interleaved):")
            lines += [f"  {step.describe()}" for step in self.minimal.steps]
        return "\n".join(lines)

    def origins_text(self) -> str:
        """How many tuning trials each kind of origin proposed, then every trial not from the default or the
        sampler (rules, earlier studies) with its bandwidth (and, for a transferred one, the predicted and
        the measured speedup over the baseline), and the first sampler trial."""
        kinds: dict[str, int] = {}
        for _, origin, _ in self.origins:
            kind = origin.split(":")[0]
            kinds[kind] = kinds.get(kind, 0) + 1
        text = ", ".join(f"{kind} {n}" for kind, n in kinds.items())
        proposed = [f"#{number} {origin} " + (f"{format_mb_per_s(value)} MB/s" if value is not None else "failed")
                    + self._prediction(number, value)
                    for number, origin, value in self.origins if origin not in ("default", "sampler")]
        if proposed:
            text += "; " + ", ".join(proposed)
        first = next((number for number, origin, _ in self.origins if origin == "sampler"), None)
        if first is not None:
            text += f"; sampler from #{first}"
        return text

    def transfer_text(self) -> str:
        """The warm start's predicted against measured speedups of its transferred trials, and the weight the
        sampler gave the transferred model at the first and the last trial it proposed."""
        parts = []
        measured = {number: value / self.default.median for number, _, value in self.origins
                    if number in self.predicted and value is not None and self.default}
        if measured:
            pairs = ", ".join(f"#{n} {self.predicted[n]:.2f}x / {measured[n]:.2f}x" for n in sorted(measured))
            error = sorted(abs(math.log(measured[n] / self.predicted[n])) for n in measured)[len(measured) // 2]
            parts.append(f"transferred trials predicted / measured over the default: {pairs} (median error "
                         f"{100 * (math.exp(error) - 1):.0f}%)")
        if self.prior_weights:
            (first_n, first_w), (last_n, last_w) = self.prior_weights[0], self.prior_weights[-1]
            parts.append(f"the sampler's weight on the transferred model {first_w:.2f} at #{first_n}, "
                         f"{last_w:.2f} at #{last_n} (1: trusted, 0: its predictions did not hold here)")
        return "; ".join(parts) or "no transferred trial measured yet"

    def _prediction(self, number: int, value: float | None) -> str:
        if number not in self.predicted:
            return ""
        measured = f", measured {value / self.default.median:.2f}x" if value is not None and self.default else ""
        return f" (predicted {self.predicted[number]:.2f}x{measured})"

    @property
    def speedup_basis(self) -> str:
        """Which runs the speedup compares, in words."""
        if self.headline is None:
            return ("no re-measurement in this study, so no speedup: `iobo confirm` re-measures the default and "
                    "the recommended configuration, interleaved")
        default, best = self.headline
        return (f"median of {best.n} re-measured best runs over the median of {default.n} re-measured "
                f"default runs, interleaved (iobo confirm)")

    def viability_text(self) -> str:
        """The viability point, its formula and the numbers put into it."""
        formula = "tuning time / (t_default - t_best), t = bytes per run / re-measured bandwidth"
        if self.keeps_default:
            return "never: the recommended configuration is the system default"
        if not self.confirmed_gain:
            return ("none: no confirmed gain (`iobo confirm` re-measures the default and the recommended "
                    "configuration; a best single run is not what production will see)")
        if self.seconds_per_run is None:
            return f"unknown: needs the bytes per run ({formula})"
        t_default, t_best = self.seconds_per_run
        numbers = f"{self.tuning_minutes * 60:,.1f} s / ({t_default:.4g} s - {t_best:.4g} s)"
        if self.viability_runs is None:
            return f"never: the best is not faster than the default ({formula}: {numbers})"
        return f"{self.viability_runs:,.1f} production runs ({formula}: {numbers})"

    def to_dict(self) -> dict[str, Any]:
        """Every figure as JSON values: MB/s, minutes, seconds, bytes."""

        def spread(s: Spread | None):
            return None if s is None else {"median": s.median, "min": s.low, "max": s.high, "cv": s.cv,
                                           "runs": list(s.values)}

        interval = self.speedup_interval()
        peak = self.peak_roti
        seconds = self.seconds_per_run
        return {
            "study": self.study, "kernel": self.kernel, "ranks": self.ranks, "counts": self.counts,
            "default_mb_per_s": spread(self.default),
            "best_mb_per_s": self.best_value, "best_trial": self.best_number,
            "confirm_default_mb_per_s": spread(self.confirm_default),
            "confirm_best_mb_per_s": spread(self.confirm_best),
            "speedup": self.speedup,
            "speedup_ci95": list(interval) if interval else None,
            "speedup_basis": self.speedup_basis,
            "speedup_distinguishable": self.distinguishable,
            "confirm_plan": self.confirm_plan,
            "baseline_drift": self.baseline.drift if self.baseline else None,
            "best_single_run_over_baseline": (self.best_value / self.default.median
                                              if self.best_value and self.default else None),
            "recommendation": self.recommendation,
            "minimal": self.minimal.to_attr() if self.minimal else None,
            "walk_back": None if self.minimal is None else {
                "conclusion": self.minimal.conclusion(),
                "verdicts": [{"knobs": list(step.knobs), "retest": step.retest, "verdict": step.verdict,
                              "ratio": step.ratio, "interval": list(step.interval), "level": step.level,
                              "pairs": len(step.with_mb_per_s), "pairs_to_settle": step.pairs_to_settle(),
                              "stopped": step.stopped} for step in self.minimal.steps],
                "undecided": [list(step.knobs) for step in self.minimal.undecided()],
                "budget_s": self.minimal.budget_s, "ended_by_budget": self.minimal.ended_by_budget},
            "not_applied_frozen": self.frozen,
            "tuning_minutes": self.tuning_minutes,
            "roti_mb_per_s_per_min": self.roti,
            "roti": self.roti_text(),
            "peak_roti": {"mb_per_s_per_min": peak[0], "minutes": peak[1]} if peak else None,
            "roti_curve": [{"minutes": m, "best_mb_per_s": b, "roti_mb_per_s_per_min": r}
                           for m, b, r in self.roti_curve],
            "bytes_per_run": self.bytes_per_run,
            "seconds_per_run": {"default": seconds[0], "best": seconds[1]} if seconds else None,
            "viability_runs": self.viability_runs,
            "viability": self.viability_text(),
            "best_config_changed": self.best_config,
            "best_by_layer": {layer: [{"parameter": n, "default": d, "best": b} for n, d, b in rows]
                              for layer, rows in self.best_by_layer.items()},
            "context": self.context,
            "nodes": self.nodes,
            "origins": [{"trial": n, "origin": o, "mb_per_s": v, "predicted_speedup": self.predicted.get(n)}
                        for n, o, v in self.origins],
            "prior_weights": [{"trial": n, "weight": w} for n, w in self.prior_weights],
        }


def write_report(study, out_dir: str | Path) -> list[Path]:
    """Write ``report.html``, ``report.json`` and one PNG per figure of ``study`` into ``out_dir``."""
    from iobo import plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(study)
    importance = robust_importance(study)
    charts = plots.report_charts(report, importance)
    written = [plots.save_png(chart, out / f"{chart.name}.png") for chart in charts]
    numbers = {**report.to_dict(), "importance": None if importance is None else {
        "view": importance.view, "share": importance.share, "low_10pct": importance.low,
        "high_90pct": importance.high, "refits": importance.resamples, "ped_anova": importance.secondary,
        "left_out": list(importance.left_out)}}
    (out / "report.json").write_text(json.dumps(numbers, indent=2) + "\n")
    (out / "report.html").write_text(render_html(report, importance, [(c.name, f"{c.name}.png") for c in charts]))
    return [out / "report.html", out / "report.json", *written]


def render_html(report: StudyReport, importance, images: list[tuple[str, str]]) -> str:
    """The report as one HTML page; ``images`` are (chart name, PNG file name relative to the page)."""
    esc = html.escape
    rows = report.summary_rows()
    summary = "\n".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)

    figures = "\n".join(f'<figure><img src="{esc(src)}" alt="{esc(name)}"></figure>' for name, src in images)
    if importance is None:
        figures += (f"<p>Parameter importance skipped: the GP needs at least {MIN_GP_TRIALS} distinct completed "
                    f"configurations.</p>")

    layers = ""
    for layer, params in report.best_by_layer.items():
        body = "".join(
            f"<tr{' class=changed' if d != b else ''}><td>{esc(n)}</td><td>{esc(d)}</td><td>{esc(b)}</td></tr>"
            for n, d, b in params
        )
        header = "<tr><th>parameter</th><th>system default</th><th>best</th></tr>"
        layers += f"<h3>{esc(layer)}</h3><table>{header}{body}</table>\n"
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>iobo report: {esc(report.study)}</title>
<style>
body {{ font-family: sans-serif; max-width: 60em; margin: 2em auto; }}
table {{ border-collapse: collapse; margin-bottom: 1em; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; }}
tr.changed {{ font-weight: bold; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>iobo report: study {esc(report.study)}</h1>
<h2>Summary</h2><table>{summary}</table>
<h2>Figures</h2>{figures}
<h2>Best configuration per layer</h2><p>Changed parameters in bold; "-" does not apply.</p>{layers}
</body></html>
"""


def build_report(study) -> StudyReport:
    """Collect the figures of ``study`` (an ``optuna.Study``)."""
    from iobo import kernels
    from iobo.config import IOConfig
    from iobo.context import study_context
    from iobo.errors import ConfigError
    from iobo.minimize import recommendation
    from iobo.nodes import describe_nodes

    trials = study.get_trials(deepcopy=False)
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.state.name] = counts.get(t.state.name, 0) + 1

    def values(role: str) -> Spread | None:
        got = study_trials.values_of(trials, role)
        return Spread(got) if got else None

    attrs = study.user_attrs
    kernel = attrs["kernel"] if "kernel" in attrs else study_trials.subject(attrs)
    best = study_trials.best_trial(study)
    best_config: dict[str, Any] = {}
    best_by_layer: dict[str, list[tuple[str, str, str]]] = {}
    how = ""
    confirm_default, confirm_best = values(ROLE_CONFIRM_DEFAULT), values(ROLE_CONFIRM_BEST)
    if best is not None:
        try:
            space = kernels.study_space(study)
        except ConfigError:
            space = None
        if space is not None:
            chosen = recommendation(study, space, kernels.study_workload(study))
            how = chosen.how
            full = IOConfig(chosen.values, space)
            best_config = full.changed()
            best_by_layer = _by_layer(space, full.values)
            confirmation = chosen.confirmation  # of the proposal: not another configuration's re-measurement
            confirm_default, confirm_best = (confirmation.default, confirmation.best) if confirmation else (None, None)
        else:
            best_config = study_trials.config_of(best)
    baseline = study_trials.baseline(trials)
    curve = study_trials.roti_curve(trials, baseline.median if baseline else None)
    context = study_context(study)
    finished = tuple(study_trials.state(name) for name in ("COMPLETE", "FAIL", "PRUNED"))
    origins = [(t.number, study_trials.origin(t), t.value) for t in trials
               if t.state in finished and study_trials.is_tuning(t)]
    return StudyReport(
        study=study.study_name,
        kernel=kernel,
        ranks=study.user_attrs.get("ranks", 0),
        counts=counts,
        default=baseline.runs if baseline else None,
        best_value=best.value if best else None,
        best_number=best.number if best else None,
        best_config=best_config,
        confirm_default=confirm_default,
        confirm_best=confirm_best,
        tuning_minutes=curve[-1][0] if curve else 0.0,
        roti_curve=curve,
        bytes_per_run=best.user_attrs.get("bytes") if best else None,
        best_by_layer=best_by_layer,
        baseline=baseline,
        minimal=current_minimal(study, best) if best else None,
        confirm_plan=study.user_attrs.get(study_trials.CONFIRM_PLAN_ATTR),
        recommendation=how,
        frozen=dict(study.user_attrs.get(study_trials.FROZEN_ATTR, {})),
        context=context.describe() if context else "",
        origins=origins,
        predicted={t.number: t.user_attrs["predicted_speedup"] for t in trials if "predicted_speedup" in t.user_attrs},
        prior_weights=[(t.number, t.system_attrs[PRIOR_WEIGHT_ATTR]) for t in trials
                       if t.state in finished and PRIOR_WEIGHT_ATTR in t.system_attrs],
        nodes=describe_nodes(best.user_attrs) if best else None,
    )


def _by_layer(space, config) -> dict[str, list[tuple[str, str, str]]]:
    """Every parameter of ``space`` by layer: (name, system default, value in ``config``).

    A parameter that does not apply (e.g. chunk size of a contiguous layout) shows "-".
    """
    from iobo.space import format_value

    default = space.default()
    rows: dict[str, list[tuple[str, str, str]]] = {}
    for p in space:
        shown = [format_value(c[p.name], p.unit) if p.name in c else "-" for c in (default, config)]
        rows.setdefault(p.layer, []).append((p.name, *shown))
    return rows
