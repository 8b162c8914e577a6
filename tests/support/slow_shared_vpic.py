"""A kernel whose gain is certain, for the tests of what follows the search: the real VPIC-IO kernel, except
that with ``files=shared`` (the default) each step waits 0.3 s inside the timed write, so a file per process
is several times faster, whatever the load.

Registered as a user kernel (``iobo.kernels.register``; :func:`spec`).
"""

import json
import sys
import time

from iobo.kernels import KernelSpec, vpic
from iobo.kernels.run import run_main


def spec() -> KernelSpec:
    return KernelSpec(name="slowshared", module="slow_shared_vpic", space=vpic.space, workload=vpic.workload,
                      options=dict(vpic.SPEC.options), check_options=vpic.check_options)


if __name__ == "__main__":
    with open(sys.argv[sys.argv.index("--config") + 1]) as handle:
        shared = json.load(handle)["files"] == "shared"
    if shared:
        do_step = vpic.Writer.do_step

        def slow_step(self, file, step):
            time.sleep(0.3)
            do_step(self, file, step)

        vpic.Writer.do_step = slow_step
    run_main(vpic.main)
