"""The figures of a study, drawn with plotly (dashboard) or matplotlib (PNG).

Each figure is first a :class:`Chart`: its title, axis labels and the
numbers of its series, taken from a :class:`iobo.report.StudyReport` (and
the parameter importances).  ``to_plotly`` and ``save_png`` only draw a
chart, so the dashboard and the report files show the same numbers.

Units: bandwidth in MB/s (10**6 bytes per second), time in minutes of tuning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from iobo.measure import format_mb_per_s


@dataclass(frozen=True)
class Series:
    """One set of points.

    kind: "steps" (a line holding each value until the next), "line",
    "points", "bar" (vertical, x categories), or "barh" (horizontal: x the
    lengths, y the categories); low/high: ends of error bars of a "bar" or "barh".
    """

    name: str
    x: Sequence
    y: Sequence
    kind: str = "line"
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None


@dataclass(frozen=True)
class Chart:
    """A figure: ``name`` is its file stem and dashboard id; ``lines`` are dashed (y, label) references."""

    name: str
    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    lines: tuple[tuple[float, str], ...] = ()


def best_so_far_chart(report) -> Chart | None:
    """Best bandwidth found so far over minutes of tuning, against the default median."""
    if not report.roti_curve:
        return None
    minutes, best, _ = zip(*report.roti_curve)
    return Chart(
        "best_so_far", "Best bandwidth so far", "minutes of tuning", "bandwidth (MB/s)",
        (Series("best so far", minutes, best, "steps"),),
        ((report.default.median, f"default median {format_mb_per_s(report.default.median)} MB/s"),),
    )


def roti_chart(report) -> Chart | None:
    """RoTI (MB/s gained over the default per minute of tuning) after each tuning trial, peak marked."""
    if not report.roti_curve:
        return None
    minutes, _, values = zip(*report.roti_curve)
    peak, at = report.peak_roti
    return Chart(
        "roti", "Return on tuning investment (RoTI)", "minutes of tuning", "RoTI (MB/s per minute)",
        (Series("RoTI", minutes, values, "line"),
         Series(f"peak {format_mb_per_s(peak)} MB/s per min, at {at:.1f} min", (at,), (peak,), "points")),
        ((0.0, "no gain"),),
    )


def default_vs_best_chart(report) -> Chart | None:
    """Median bandwidth of default and best runs, bars from min to max, every run a point; speedup CI in the title."""
    if report.headline is None:
        return None
    default, best = report.headline
    interval = report.speedup_interval()
    title = f"Speedup {report.speedup:.2f}x, " + (f"95% CI {interval[0]:.2f}-{interval[1]:.2f}x" if interval
                                                  else "too few runs for an interval")
    labels = (f"default ({default.n} runs)", f"best ({best.n} run{'s' if best.n > 1 else ''})")
    runs_x = [labels[0]] * default.n + [labels[1]] * best.n
    return Chart(
        "default_vs_best",
        f"{title} (re-measured, interleaved)",
        "", "bandwidth (MB/s)",
        (
            Series("median, min-max", labels, (default.median, best.median), "bar",
                   low=(default.low, best.low), high=(default.high, best.high)),
            Series("runs", runs_x, default.values + best.values, "points"),
        ),
    )


def importance_chart(importance) -> Chart | None:
    """An :class:`iobo.importance.Importance` (robust GP view), the most important parameter on top, with the
    10-90% range over refits as error bars; PED-ANOVA, when known, as a second series."""
    if importance is None:
        return None
    ranked = list(reversed(importance.share))
    series = [Series(f"{importance.view} (10-90% of {importance.resamples} refits)",
                     [100 * importance.share[n] for n in ranked], ranked, "barh",
                     low=[100 * importance.low[n] for n in ranked], high=[100 * importance.high[n] for n in ranked])]
    if importance.secondary:
        series.append(Series("ped-anova (secondary)", [100 * importance.secondary.get(n, 0.0) for n in ranked],
                             ranked, "barh"))
    return Chart("importance", f"Parameter importance: {importance.view} of iobo's GP",
                 "% of importance", "", tuple(series))


def report_charts(report, importance=None) -> list[Chart]:
    """Every chart the study has data for (``importance``: an :class:`iobo.importance.Importance` or None)."""
    charts = (default_vs_best_chart(report), best_so_far_chart(report), roti_chart(report),
              importance_chart(importance))
    return [chart for chart in charts if chart is not None]


def to_plotly(chart: Chart):
    """The chart as a ``plotly.graph_objects.Figure``."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for s in chart.series:
        if s.kind in ("steps", "line"):
            figure.add_trace(go.Scatter(x=list(s.x), y=list(s.y), name=s.name, mode="lines+markers",
                                        line_shape="hv" if s.kind == "steps" else "linear"))
        elif s.kind == "points":
            figure.add_trace(go.Scatter(x=list(s.x), y=list(s.y), name=s.name, mode="markers"))
        elif s.kind == "bar":
            error = None
            if s.low is not None:
                error = dict(type="data", symmetric=False, array=[h - y for h, y in zip(s.high, s.y)],
                             arrayminus=[y - lo for lo, y in zip(s.low, s.y)])
            figure.add_trace(go.Bar(x=list(s.x), y=list(s.y), name=s.name, error_y=error, opacity=0.6))
        elif s.kind == "barh":
            error = None
            if s.low is not None:
                error = dict(type="data", symmetric=False, array=[h - x for h, x in zip(s.high, s.x)],
                             arrayminus=[x - lo for lo, x in zip(s.low, s.x)])
            figure.add_trace(go.Bar(x=list(s.x), y=list(s.y), name=s.name, orientation="h", error_x=error))
    for y, label in chart.lines:
        figure.add_hline(y=y, line_dash="dash", line_color="grey", annotation_text=label)
    figure.update_layout(title=chart.title, xaxis_title=chart.x_label, yaxis_title=chart.y_label)
    return figure


def save_png(chart: Chart, path: str | Path) -> Path:
    """Draw the chart with matplotlib into the PNG file ``path``."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), layout="constrained")
    axes = figure.subplots()
    for s in chart.series:
        if s.kind == "steps":
            axes.step(s.x, s.y, where="post", marker="o", label=s.name)
        elif s.kind == "line":
            axes.plot(s.x, s.y, marker="o", label=s.name)
        elif s.kind == "points":
            axes.scatter(s.x, s.y, color="black", zorder=3, label=s.name)
        elif s.kind == "bar":
            error = None
            if s.low is not None:
                error = [[y - lo for lo, y in zip(s.low, s.y)], [h - y for h, y in zip(s.high, s.y)]]
            axes.bar(s.x, s.y, yerr=error, capsize=8, alpha=0.6, label=s.name)
        elif s.kind == "barh":
            error = None
            if s.low is not None:
                error = [[x - lo for lo, x in zip(s.low, s.x)], [h - x for h, x in zip(s.high, s.x)]]
            axes.barh(s.y, s.x, xerr=error, capsize=3, alpha=0.6, label=s.name)
    for y, label in chart.lines:
        axes.axhline(y, linestyle="--", color="grey", label=label)
    axes.set(title=chart.title, xlabel=chart.x_label, ylabel=chart.y_label)
    axes.grid(alpha=0.3)
    if len(chart.series) + len(chart.lines) > 1:
        axes.legend()
    path = Path(path)
    figure.savefig(path, dpi=110)
    return path
