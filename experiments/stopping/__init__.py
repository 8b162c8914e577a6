"""Study-level stop rules against the oracle stop (``python -m experiments.stopping.bench``)."""
