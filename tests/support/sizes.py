"""Kernel sizes for tests: small enough for 2 ranks on a 2-core machine, big enough to be real I/O."""

SMALL_VPIC = {"particles": 16384, "steps": 2}
