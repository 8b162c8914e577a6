"""experiments.sampler.identifiable: where S's members rank by the geometric mean a log-Gaussian model estimates."""

from experiments.sampler import identifiable


def write_table(path, repeats):
    """A one-parameter table: ``repeats`` maps each value of ``x`` to its recorded MB/s."""
    lines = ["x,repeat,mb_per_s"] + [f"{x},{r},{v}" for x, runs in repeats.items() for r, v in enumerate(runs)]
    path.write_text("\n".join(lines) + "\n")
    path.with_suffix(".json").write_text('{"default": {"x": "c"}}')
    return path


def test_a_best_median_with_slow_outliers_is_not_the_top_by_geometric_mean(tmp_path):
    # a: median 100 MB/s but two runs of 10 (geometric mean 40); b: 90 every run; c: 50 every run.
    # The median truth puts a alone in S (b and c have no spread, so the table's standard error is 0);
    # the geometric mean ranks b first and a last, so a model of log runs would never recommend a.
    path = write_table(tmp_path / "skewed.csv", {"a": [100, 100, 100, 10, 10], "b": [90] * 5, "c": [50] * 5})
    line = identifiable.geometric_mean_line(path)
    assert line.startswith("S = 1 configuration(s) with median >= 100 MB/s")
    assert "the top configuration is NOT in S; S's members rank 3 of 3" in line


def test_symmetric_runs_agree(tmp_path):
    path = write_table(tmp_path / "even.csv", {"a": [95, 100, 105] * 2, "b": [85, 90, 95] * 2, "c": [50] * 6})
    line = identifiable.geometric_mean_line(path)
    assert "the top configuration is in S; S's members rank 1" in line
    assert line in identifiable.check(path, budget=3)  # the report prints it
