"""The MXNet sweep's case keys are what they were before the backends: old reports still compare.

data/mxnet_case_keys.txt is the full key list of `generate_cases()` (float32, cpu(0), seed 41,
the standard profile), stored when the backend protocol was introduced; the sweep's plan (the
MXNet backend, as `opbench` runs it) must give exactly these keys. A key changes only with the
case it names: the input audit (issue 10) moved tan, cbrt, gamma, prod, nanprod and
random_pdf_normal onto inputs that keep them on normal numbers and marked rrelu's unwritten mask,
and the list was stored again then (19 keys, all of those operators); any other change here is a
case measured differently from its history.
"""

from argparse import Namespace
from pathlib import Path

import mxnet  # noqa: F401  (an MXNet that does not import fails here, never skips)

from opbench.backends.mxnet import BACKEND

STORED = Path(__file__).parent / "data" / "mxnet_case_keys.txt"


def test_the_mxnet_sweep_keeps_its_case_keys():
    args = Namespace(ops=None, category=None, exclude=None, dtype="float32", seed=41, tiny=False, shard=None,
                     ctx=None, device=None, size_target=None, manifest=None, int64_tensor=None,
                     engine="native")
    device = BACKEND.check(args)
    keys = sorted(spec.key for spec in BACKEND.plan(args, device).specs)
    assert keys == STORED.read_text().splitlines()
