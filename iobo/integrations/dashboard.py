"""optuna-dashboard on a study: serve it, and annotate the study for it.

``iobo dashboard URL`` serves optuna-dashboard on a storage.  What the
dashboard shows of iobo comes from the study itself:

- each finished trial carries a note (optuna-dashboard's Markdown notes)
  with where its configuration came from (default, a rule with its
  evidence, the sampler), the HDF5 settings and MPI-IO hints in effect, what was not applied,
  the bytes moved, the per-step bandwidth and, for a failed trial, the
  reason and the tail of its stderr;
- the study carries a note with the report text and plotly figures: best
  bandwidth so far and RoTI over minutes of tuning, parameter importance.

:class:`DashboardAnnotator` writes them while the tuner runs (a
``TunerCallback``); :func:`annotate` writes them for an existing study.
"""

from __future__ import annotations

import time
from typing import Any

from iobo import _compat, trials
from iobo.measure import format_mb_per_s
from iobo.surrogate import PRIOR_WEIGHT_ATTR
from iobo.tuner import TunerCallback

# stable ids, so that saving again replaces a figure instead of adding one
FIGURES = ("best_so_far", "roti", "importance")
FIGURES_REFRESH_S = 30.0
"""While a tuner runs, the study's note and figures are saved again when a loop of trials ends at least this many
seconds after the last save, and always when the tuner finishes. A save fits the GP for the importance figure, and
the walk-back and the confirmation run a loop per test: saved at every loop, the figures cost a fast kernel's tuning
a large share of its time."""


def command(storage: str, host: str = "127.0.0.1", port: int = 8080) -> str:
    """The shell command that opens optuna-dashboard on ``storage``."""
    return f"iobo dashboard {storage} --host {host} --port {port}"


def serve(storage: str, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Block serving the dashboard until interrupted."""
    from optuna_dashboard import run_server

    from iobo.storage import open_storage

    print(f"optuna-dashboard on http://{host}:{port}/ for {storage} (Ctrl-C stops it)", flush=True)
    run_server(open_storage(storage, must_exist=True), host=host, port=port)


class DashboardAnnotator(TunerCallback):
    """Writes each finished trial's note; the study's note and figures when a loop ends ``refresh_s`` seconds or
    more after they were last saved (:data:`FIGURES_REFRESH_S`), and when the tuner finishes."""

    def __init__(self, refresh_s: float = FIGURES_REFRESH_S) -> None:
        self.refresh_s = refresh_s
        self._saved_at: float | None = None  # time.monotonic() of the last save of the figures

    def trial_finished(self, study, trial, running: int) -> None:
        save_trial_note(study, trial)

    def loop_finished(self, study) -> None:
        if self._saved_at is None or time.monotonic() - self._saved_at >= self.refresh_s:
            self._save_figures(study)

    def finished(self, study) -> None:
        self._save_figures(study)

    def _save_figures(self, study) -> None:
        save_study_figures(study)
        self._saved_at = time.monotonic()


def annotate(study) -> None:
    """Write the notes of every finished trial and the study's note and figures."""
    from optuna.trial import TrialState

    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        save_trial_note(study, trial)
    save_study_figures(study)


def save_trial_note(study, trial) -> None:
    """Save :func:`trial_note` of ``trial`` (a ``FrozenTrial`` of ``study``) as its dashboard note."""
    _compat.save_dashboard_note(_compat.trial_handle(study, trial), trial_note(trial, _space(study)))


def save_study_figures(study) -> list[str]:
    """Save the study's note and its figures (plotly graph objects); returns the figure ids saved."""
    from iobo import plots
    from iobo.importance import MIN_GP_TRIALS, robust_importance
    from iobo.report import build_report

    report = build_report(study)
    importance = robust_importance(study)
    charts = {c.name: c for c in plots.report_charts(report, importance)}
    saved = []
    for name in FIGURES:
        if name in charts:
            _compat.save_dashboard_figure(study, plots.to_plotly(charts[name]).to_json(), name)
            saved.append(name)
    note = f"### iobo report\n\n{_code(report.text())}\n"
    if importance is None:
        note += (f"\nParameter importance: not shown yet; the GP needs at least {MIN_GP_TRIALS} distinct "
                 f"completed configurations.\n")
    else:
        note += f"\n#### Parameter importance\n\n{_code(importance.text())}\n"
    _compat.save_dashboard_note(study, note)
    return saved


def trial_note(trial, space=None) -> str:
    """The Markdown note of one finished trial (``space``: to list what differs from the default)."""
    from optuna.trial import TrialState

    attrs = trial.user_attrs
    role = trials.role(trial)
    parts = []
    if trial.state == TrialState.COMPLETE and "measured_by" in attrs:  # a program run under the shim
        parts.append(
            f"**{format_mb_per_s(trial.value)} MB/s** ({role}), measured by {attrs['measured_by']}; the whole job took "
            f"{attrs.get('wall_seconds', 0):.3g} s"
        )
    elif trial.state == TrialState.COMPLETE:
        parts.append(
            f"**{format_mb_per_s(trial.value)} MB/s** ({role}): {attrs.get('bytes', 0):,} bytes in "
            f"{attrs.get('seconds', 0):.4g} s (open + write + close, slowest rank); the whole job took "
            f"{attrs.get('wall_seconds', 0):.3g} s"
        )
        steps = attrs.get("step_mb_per_s", [])
        shown = ", ".join(format_mb_per_s(v) for v in steps)
        parts.append("Per-step bandwidth (MB/s): " + (shown or "none reported"))
    else:
        parts.append(f"**{trial.state.name}** ({role}): {attrs.get('fail_reason', 'no reason recorded')}")
    reason = attrs.get("origin_reason")
    parts.append(f"Origin: `{trials.origin(trial)}`" + (f": {reason}" if reason else ""))
    if PRIOR_WEIGHT_ATTR in trial.system_attrs:
        parts.append(f"Proposed by the GP with the warm start's transferred model as prior mean, weighted "
                     f"{trial.system_attrs[PRIOR_WEIGHT_ATTR]:.2f} (1: trusted, 0: its predictions did not hold here)")
    if space is not None and "config" in attrs:
        from iobo.config import IOConfig
        from iobo.space import format_value

        changed = IOConfig(attrs["config"], space).changed()
        rows = [(k, format_value(v, space[k].unit)) for k, v in changed.items()]
        parts.append("#### Changed from the system default\n\n"
                     + (_table(("parameter", "value"), rows) if rows else "nothing: this is the system default"))
    if attrs.get("effective"):
        parts.append("#### HDF5 settings in effect\n\n" + _table(("setting", "value"), attrs["effective"].items()))
    if attrs.get("hints") or attrs.get("requested_hints"):
        requested = attrs.get("requested_hints", {})
        rows = [(k, v, requested.get(k, "")) for k, v in attrs.get("hints", {}).items()]
        rows += [(k, "", v) for k, v in requested.items() if k not in attrs.get("hints", {})]
        parts.append("#### MPI-IO hints in effect\n\n" + _table(("hint", "in effect", "requested"), rows))
    elif trial.state == TrialState.COMPLETE:
        parts.append("#### MPI-IO hints in effect\n\nnone: no file was opened through MPI-IO")
    if attrs.get("not_applied"):
        parts.append("#### Not applied\n\n" + "\n".join(f"- `{k}`: {v}" for k, v in attrs["not_applied"].items()))
    if attrs.get("io"):
        parts.append("#### I/O seen by the shim\n\n" + _io_table(attrs["io"]))
    if attrs.get("shim_warnings"):
        parts.append("#### Shim warnings\n\n" + "\n".join(f"- {w}" for w in attrs["shim_warnings"]))
    if attrs.get("repaired"):
        parts.append("#### Repaired before launch\n\n" + "\n".join(f"- {line}" for line in attrs["repaired"]))
    if attrs.get("stderr_tail"):
        parts.append("#### stderr (tail)\n\n" + _code(attrs["stderr_tail"]))
    return "\n\n".join(parts) + "\n"


def _io_table(io: dict) -> str:
    """The shim's counters of one run per level (calls, bytes, the slowest rank's seconds), and where it counted."""
    rows = []
    for level, directions in io["levels"].items():
        for direction in ("write", "read"):
            d = directions[direction]
            if d["calls"]:
                rows.append((f"{level} {direction}", f"{d['calls']:,}", f"{d['bytes']:,}", f"{d['max_seconds']:.4g}"))
    head = (f"{io['ranks']} rank(s); value from the {io['level']} level; slowest rank {io['slowest_rank']}; "
            f"HDF5 linked {io['hdf5_linked']}\n\n")
    return head + (_table(("level", "calls", "bytes", "seconds (slowest rank)"), rows) if rows else "no I/O")


def _space(study):
    """The study's recorded search space, else its kernel's, or None when neither is known here."""
    from iobo import kernels

    kernel = study.user_attrs.get("kernel")
    return trials.stored_space(study) or (kernels.get(kernel).space() if kernel in kernels.names() else None)


def _table(header: tuple[str, ...], rows) -> str:
    """A Markdown table; values in code spans (``*:1`` is no emphasis), pipes escaped."""

    def cell(value: Any) -> str:
        return f"`{value}`".replace("|", "\\|") if value != "" else ""

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join([f"`{row[0]}`"] + [cell(v) for v in row[1:]]) + " |" for row in rows]
    return "\n".join(lines)


def _code(text: str) -> str:
    """``text`` as a fenced code block whose fence no line of it can close."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text.rstrip()}\n{fence}"
