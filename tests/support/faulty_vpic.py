"""Fault injection for the tuner tests: the real VPIC-IO kernel, except that a
configuration with ``romio_ds_write=disable`` exits with an HDF5-like error.

Registered as a user kernel (``iobo.kernels.register``), it lets a test show
that one failing configuration becomes a FAIL trial while the study goes on.
"""

import json
import sys

from iobo.kernels import vpic
from iobo.kernels.run import run_main

if __name__ == "__main__":
    config_path = sys.argv[sys.argv.index("--config") + 1]
    with open(config_path) as handle:
        values = json.load(handle)
    if values.get("romio_ds_write") == "disable":
        print("HDF5-DIAG: injected failure: H5Dwrite(): can't write data", file=sys.stderr)
        sys.exit(3)
    run_main(vpic.main)
