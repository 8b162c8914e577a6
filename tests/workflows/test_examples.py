"""The decorated pipeline example runs as its docstring documents: tuning, then production."""

import os
import subprocess
import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

EXAMPLE = Path(__file__).parents[2] / "workflows" / "decorated_pipeline.py"


def _run(scratch, mode):
    command = [sys.executable, str(EXAMPLE), "--workdir", str(scratch), "--steps", "3", "--grid", "128"]
    env = {**os.environ, "IOBO_MODE": mode}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)


def test_the_decorated_pipeline_tunes_then_applies_the_best(scratch):
    tuning = _run(scratch, "tune")
    assert tuning.returncode == 0, tuning.stderr
    assert "mode: tune" in tuning.stdout and f"pipeline wrote {3 * 128 * 128 * 8:,} bytes" in tuning.stdout
    study = optuna.load_study(study_name="field-output", storage=f"sqlite:///{scratch / 'iobo.db'}")
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
    production = _run(scratch, "production")
    assert production.returncode == 0, production.stderr
    assert f"write_field: applying trial {study.best_trial.number} of study 'field-output'" in production.stdout
    assert len(optuna.load_study(study_name="field-output", storage=f"sqlite:///{scratch / 'iobo.db'}").trials) == 3
