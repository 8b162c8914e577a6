"""``python -m iobo.cli ...`` is the ``iobo`` command."""

from iobo.cli import console

console()
