"""Figures carry the report's numbers, in plotly (dashboard) and in PNG (report files)."""

from dataclasses import replace

import optuna
import pytest

from iobo import plots
from iobo.importance import Importance
from iobo.measure import Spread
from iobo.report import build_report
from iobo.trials import ROLE_CONFIRM_BEST, ROLE_CONFIRM_DEFAULT, ROLE_DEFAULT, ROLE_SEARCH

from test_report import add


@pytest.fixture
def report(storage):
    study = optuna.create_study(storage=storage, study_name="f", direction="maximize")
    study.set_user_attr("kernel", "vpic")
    study.set_user_attr("ranks", 2)
    for minute, value in ((1, 100.0), (2, 110.0), (3, 90.0)):
        add(study, value, ROLE_DEFAULT, minute)
    add(study, 150.0, ROLE_SEARCH, 4, files="per_process")
    add(study, 120.0, ROLE_SEARCH, 5)
    for minute, (d, b) in enumerate(((95.0, 140.0), (105.0, 160.0), (100.0, 150.0), (98.0, 145.0), (102.0, 155.0)),
                                    start=10):
        add(study, d, ROLE_CONFIRM_DEFAULT, minute)
        add(study, b, ROLE_CONFIRM_BEST, minute, files="per_process")
    return build_report(study)


def test_best_so_far_and_roti_follow_the_tuning_trials(report):
    best = plots.best_so_far_chart(report)
    (line,) = best.series
    assert line.kind == "steps" and list(line.x) == [1, 2, 3, 4, 5]
    assert list(line.y) == [100.0, 110.0, 110.0, 150.0, 150.0]
    assert best.lines == ((100.0, "default median 100 MB/s"),)
    roti = plots.roti_chart(report)
    curve, peak = roti.series
    assert list(curve.y) == pytest.approx([0.0, 5.0, 10 / 3, 12.5, 10.0])  # (best - 100) / minutes
    assert (peak.x, peak.y) == ((4.0,), (12.5,))


def test_default_vs_best_shows_the_remeasured_runs_and_the_speedup_interval(report):
    chart = plots.default_vs_best_chart(report)
    bars, runs = chart.series
    assert list(bars.y) == [100.0, 150.0]
    assert (list(bars.low), list(bars.high)) == ([95.0, 140.0], [105.0, 160.0])
    assert sorted(runs.y) == [95.0, 98.0, 100.0, 102.0, 105.0, 140.0, 145.0, 150.0, 155.0, 160.0]
    low, high = report.speedup_interval()
    assert chart.title == f"Speedup 1.50x, 95% CI {low:.2f}-{high:.2f}x (re-measured, interleaved)"


def test_default_vs_best_of_too_few_pairs_has_no_interval(report):
    few = replace(report, confirm_default=Spread(report.confirm_default.values[:2]),
                  confirm_best=Spread(report.confirm_best.values[:2]))
    assert plots.default_vs_best_chart(few).title == ("Speedup 1.50x, too few runs for an interval "
                                                      "(re-measured, interleaved)")


IMPORTANCE = Importance("gp-ablation", {"files": 0.7, "layout": 0.2, "cb_nodes": 0.1},
                        {"files": 0.6, "layout": 0.1, "cb_nodes": 0.0}, {"files": 0.8, "layout": 0.3, "cb_nodes": 0.2},
                        10, secondary={"files": 0.2, "layout": 0.3, "cb_nodes": 0.5})


def test_importance_puts_the_most_important_on_top_with_its_range():
    chart = plots.importance_chart(IMPORTANCE)
    bars, secondary = chart.series
    assert bars.kind == "barh" and list(bars.y) == ["cb_nodes", "layout", "files"]  # drawn bottom-up
    assert list(bars.x) == pytest.approx([10, 20, 70]) and list(bars.low) == pytest.approx([0, 10, 60])
    assert "gp-ablation" in chart.title and secondary.name.startswith("ped-anova")
    assert list(secondary.x) == pytest.approx([50, 30, 20])
    assert plots.importance_chart(None) is None


def test_plotly_figures_carry_the_chart_numbers(report):
    figure = plots.to_plotly(plots.default_vs_best_chart(report))
    bars, runs = figure.data
    assert list(bars.y) == [100.0, 150.0]
    assert list(bars.error_y.array) == [5.0, 10.0] and list(bars.error_y.arrayminus) == [5.0, 10.0]
    assert sorted(runs.y) == [95.0, 98.0, 100.0, 102.0, 105.0, 140.0, 145.0, 150.0, 155.0, 160.0]
    figure = plots.to_plotly(plots.best_so_far_chart(report))
    assert figure.data[0].line.shape == "hv" and list(figure.data[0].y) == [100.0, 110.0, 110.0, 150.0, 150.0]
    assert figure.layout.shapes[0].y0 == 100.0  # the default median line
    assert figure.layout.title.text == "Best bandwidth so far"


def test_every_chart_saves_as_a_png(report, tmp_path):
    from matplotlib.image import imread

    charts = plots.report_charts(report, IMPORTANCE)
    assert [c.name for c in charts] == ["default_vs_best", "best_so_far", "roti", "importance"]
    for chart in charts:
        path = plots.save_png(chart, tmp_path / f"{chart.name}.png")
        height, width, _ = imread(path).shape
        assert (width, height) == (880, 495)  # 8 x 4.5 inches at 110 dpi
