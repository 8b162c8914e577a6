"""Argument checks shared by the samplers' constructors."""

from __future__ import annotations

from typing import Any

import numpy as np

from iobo.errors import ConfigError


def check_int(owner: str, name: str, value: Any, minimum: int, fix: str) -> int:
    """``value`` as an int when it is an integer (not a bool) ``>= minimum``; ConfigError otherwise.

    owner: the class named in the message (``GPSampler``); fix: what to pass instead.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{owner} {name} must be an integer >= {minimum}; got {value!r}; {fix}")
    return int(value)
