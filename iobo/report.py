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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iobo import trials as study_trials
from iobo.importance import MIN_IMPORTANCE_TRIALS, param_importances
from iobo.measure import MB, Spread, bootstrap_speedup
from iobo.trials import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, ROLE_DEFAULT


@dataclass(frozen=True)
class StudyReport:
    """Figures of one study; bandwidths in MB/s, times in minutes."""

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

    @property
    def confirmed(self) -> bool:
        """True when default and best were re-measured (``Tuner.confirm``)."""
        return bool(self.confirm_default and self.confirm_best)

    @property
    def headline(self) -> tuple[Spread, Spread] | None:
        """(default runs, best runs) the speedup is measured from, MB/s.

        The re-measurement when present; else the default-role runs and the
        best single run.
        """
        if self.confirmed:
            return self.confirm_default, self.confirm_best
        if self.default and self.best_value is not None:
            return self.default, Spread((self.best_value,))
        return None

    @property
    def speedup(self) -> float | None:
        """Best over default median, from the confirmation runs when present."""
        if self.headline is None:
            return None
        default, best = self.headline
        return best.median / default.median

    def speedup_interval(self, level: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float] | None:
        """Bootstrap confidence interval of :attr:`speedup` (see :func:`bootstrap_speedup`)."""
        if self.headline is None:
            return None
        default, best = self.headline
        return bootstrap_speedup(default.values, best.values, level, resamples, seed)

    @property
    def seconds_per_run(self) -> tuple[float, float] | None:
        """(default, best) seconds of one production run: bytes per run / headline median bandwidth."""
        if self.headline is None or not self.bytes_per_run:
            return None
        default, best = self.headline
        return self.bytes_per_run / (default.median * MB), self.bytes_per_run / (best.median * MB)

    @property
    def viability_runs(self) -> float | None:
        """Production runs after which tuning has paid for itself.

        ``tuning_seconds / (t_default - t_best)``, t = bytes per run /
        bandwidth (headline medians); None when the best is no faster.
        """
        if self.seconds_per_run is None:
            return None
        t_default, t_best = self.seconds_per_run
        if t_default <= t_best:
            return None
        return self.tuning_minutes * 60 / (t_default - t_best)

    @property
    def roti(self) -> float | None:
        if not self.roti_curve:
            return None
        return self.roti_curve[-1][2]

    @property
    def peak_roti(self) -> tuple[float, float] | None:
        """(RoTI, minutes at which it peaked)."""
        if not self.roti_curve:
            return None
        minutes, _, value = max(self.roti_curve, key=lambda row: row[2])
        return value, minutes

    def summary_rows(self) -> list[tuple[str, str]]:
        """The summary as (label, value) rows: the one content that :meth:`text`, :func:`render_html` and the
        dashboard's note render."""
        rows = [("kernel", f"{self.kernel} on {self.ranks} MPI ranks"),
                ("trials", ", ".join(f"{n} {state.lower()}" for state, n in self.counts.items() if n))]
        if self.default:
            rows.append(("default (tuning runs)", self.default.describe()))
        if self.best_value is not None:
            rows.append(("best (single run)", f"{self.best_value:,.0f} MB/s (trial {self.best_number})"))
        if self.confirmed:
            rows.append(("default, re-measured", self.confirm_default.describe()))
            rows.append(("best, re-measured", self.confirm_best.describe()))
        if self.speedup is not None:
            source = "re-measured medians" if self.confirmed else "best run over default median"
            low, high = self.speedup_interval()
            rows.append(("speedup", f"{self.speedup:.2f}x, 95% CI {low:.2f}x - {high:.2f}x ({source}; bootstrap "
                                    f"of the ratio of medians, 2000 resamples, seed 0)"))
            rows.append(("speedup measured from", self.speedup_basis))
        if self.roti is not None:
            peak, at = self.peak_roti
            rows.append(("tuning time", f"{self.tuning_minutes:.1f} min (first default run started to last "
                                        f"tuning trial finished; re-measurements excluded)"))
            rows.append(("RoTI", f"{self.roti:,.1f} MB/s per minute of tuning; peak {peak:,.1f} at {at:.1f} min"))
        rows.append(("viability point", self.viability_text()))
        return rows

    def text(self) -> str:
        """The summary rows and the changed parameters of the best configuration, as plain text."""
        lines = [f"study {self.study!r}"]
        lines += [f"{label + ':':24s} {value}" for label, value in self.summary_rows()]
        if self.best_config:
            lines.append("best configuration (changed from default):")
            lines += [f"  {k} = {v}" for k, v in self.best_config.items()] or ["  (none)"]
        return "\n".join(lines)

    @property
    def speedup_basis(self) -> str:
        """Which runs the speedup compares, in words."""
        if self.headline is None:
            return ""
        default, best = self.headline
        if self.confirmed:
            return (f"median of {best.n} re-measured best runs over the median of {default.n} re-measured "
                    f"default runs, interleaved (iobo confirm)")
        return (f"no re-measurement in this study: the best single run (trial {self.best_number}) over the "
                f"median of {default.n} default runs; `iobo confirm` re-measures both")

    def viability_text(self) -> str:
        """The viability point, its formula and the numbers put into it."""
        formula = "tuning time / (t_default - t_best), t = bytes per run / bandwidth"
        if self.seconds_per_run is None:
            return f"unknown: needs default and best bandwidths and the bytes per run ({formula})"
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
            "tuning_minutes": self.tuning_minutes,
            "roti_mb_per_s_per_min": self.roti,
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
        }


def write_report(study, out_dir: str | Path) -> list[Path]:
    """Write ``report.html``, ``report.json`` and one PNG per figure of ``study`` into ``out_dir``."""
    from iobo import plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(study)
    importances = param_importances(study)
    charts = plots.report_charts(report, importances)
    written = [plots.save_png(chart, out / f"{chart.name}.png") for chart in charts]
    numbers = {**report.to_dict(), "importances": importances}
    (out / "report.json").write_text(json.dumps(numbers, indent=2) + "\n")
    (out / "report.html").write_text(render_html(report, importances, [(c.name, f"{c.name}.png") for c in charts]))
    return [out / "report.html", out / "report.json", *written]


def render_html(report: StudyReport, importances: dict[str, float] | None, images: list[tuple[str, str]]) -> str:
    """The report as one HTML page; ``images`` are (chart name, PNG file name relative to the page)."""
    esc = html.escape
    rows = report.summary_rows()
    summary = "\n".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)

    figures = "\n".join(f'<figure><img src="{esc(src)}" alt="{esc(name)}"></figure>' for name, src in images)
    if importances is None:
        figures += (f"<p>Parameter importance skipped: PED-ANOVA needs at least {MIN_IMPORTANCE_TRIALS} completed "
                    f"tuning trials (default and search runs).</p>")

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
    if best is not None:
        space = study_trials.stored_space(study) or (kernels.get(kernel).space() if kernel in kernels.names()
                                                     else None)
        config = study_trials.config_of(best)
        if space:
            full = IOConfig(config, space)
            best_config = full.changed()
            best_by_layer = _by_layer(space, full.values)
        else:
            best_config = dict(config)
    default = values(ROLE_DEFAULT)
    curve = study_trials.roti_curve(trials, default.median if default else None)
    return StudyReport(
        study=study.study_name,
        kernel=kernel,
        ranks=study.user_attrs.get("ranks", 0),
        counts=counts,
        default=default,
        best_value=best.value if best else None,
        best_number=best.number if best else None,
        best_config=best_config,
        confirm_default=values(ROLE_CONFIRM_DEFAULT),
        confirm_best=values(ROLE_CONFIRM_BEST),
        tuning_minutes=curve[-1][0] if curve else 0.0,
        roti_curve=curve,
        bytes_per_run=best.user_attrs.get("bytes") if best else None,
        best_by_layer=best_by_layer,
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
