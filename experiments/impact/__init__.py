"""Impact-first tuning against the full space, and which importance view ignores inert knobs (``bench``, ``views``)."""
