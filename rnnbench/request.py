"""What an `rnnbench bench` (or `ab`) sweep was asked to do: RunnerRequest, built once from the
parsed flags (rnnbench.cli) or from keywords (rnnbench.api), never changed afterwards. Its
fields are the flags' argparse names (fastrnns' spellings for the sizes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from benchcore.cli.request import SweepRequest

from .cases import CNN_BATCH_DEFAULT, SIZE_DEFAULTS

#: `bench`'s --timeout default: ResNet-50 at fastrnns' sizes takes seconds per iteration on a
#: CPU, so 110 of them pass benchcore's 600 s
BENCH_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class RunnerRequest(SweepRequest):
    """One sweep of runners (rnnbench's flags over the shared ones)."""

    seqLength: int = SIZE_DEFAULTS["seqLength"]
    numLayers: int = SIZE_DEFAULTS["numLayers"]
    inputSize: int = SIZE_DEFAULTS["inputSize"]
    hiddenSize: int = SIZE_DEFAULTS["hiddenSize"]
    miniBatch: int = SIZE_DEFAULTS["miniBatch"]
    cnnBatch: int = CNN_BATCH_DEFAULT
    nloops: int = 100
    warmup: int = 10
    #: cpu, cuda or cuda:N as given; None: cuda when available, else cpu
    device: Optional[str] = None
    fuser: str = "te"
    executor: Optional[str] = None
    seed: int = 17
    variable_lstms: bool = False
    #: the runner lists and groups as given (None: not given; rnnbench.cases.selected_groups)
    rnns: Optional[Sequence[str]] = None
    cnns: Optional[Sequence[str]] = None
    group: Optional[Sequence[str]] = None
    engine: str = "python"
    timeout: float = BENCH_TIMEOUT_S
    #: the console table's column separator, and --print-json's shape (oss, pep; None: none)
    sep: str = " "
    print_json: Optional[str] = None
    #: the roof probes: cached, retake or off (frameworks.roofs.MODES)
    roofs: str = "cached"
