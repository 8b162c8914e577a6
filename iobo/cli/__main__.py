"""``python -m iobo.cli ...`` is the ``iobo`` command."""

import sys

from iobo.cli import main

sys.exit(main())
