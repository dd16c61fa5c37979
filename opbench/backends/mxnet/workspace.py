"""MXNet's CPU temp-space copies: one, so a case's measured peak memory does not depend on what
its worker ran before (see TEMP_COPY_ENV)."""

import os
import sys

#: MXNet keeps a temporary workspace per CPU "temp space copy" (4 by default, used round-robin)
#: and only ever grows it. With 4 copies, whether a case's measured runs allocate workspace
#: (and so its peak memory) depends on what the worker ran before: sort on (1024,1024) read
#: 25.2 MB as a worker's first case and 8.4 MB after a case that grew the workspace. With one
#: copy the warmup grows it to what the case needs before the profiler starts, so the measured
#: peak is the same whatever ran before (outputs, gradients and temporaries; workspace MXNet
#: already holds is not counted). CPU operators run one at a time here, so one copy costs no
#: concurrency. Set before MXNet is imported: the MXNet backend's package imports this module first, and a
#: worker imports the backend before MXNet.
TEMP_COPY_ENV = "MXNET_CPU_TEMP_COPY"
os.environ.setdefault(TEMP_COPY_ENV, "1")
#: False when MXNet was imported before opbench's MXNet backend, so the setting above may not apply.
TEMP_COPY_APPLIED = "mxnet" not in sys.modules
