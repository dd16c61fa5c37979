"""Which failed cases leave their worker unusable: CUDA errors are sticky.

After a device-side assert, an illegal memory access or a launch failure, the CUDA context of
the process is broken: every later CUDA call in it fails with the same error, so every later
case in a reused worker would fail under its own name. The case where the error surfaced is
recorded with it; the worker is then replaced (benchcore.execute.worker) so the next case runs in a
fresh process. The test is on the error text, which both frameworks word after the CUDA
runtime ("CUDA error: an illegal memory access was encountered" in torch, "CUDA: ..." and
cudaError names in MXNet), so the core needs no framework to tell.
"""

from __future__ import annotations

from typing import Optional

#: lower-case fragments of the errors that CUDA and its libraries raise
CUDA_ERROR_MARKERS = ("cuda error", "cuda:", "cudaerror", "cublas_status", "cudnn_status",
                      "device-side assert", "illegal memory access", "unspecified launch failure")


def is_cuda_error(error: Optional[str]) -> bool:
    text = (error or "").lower()
    return any(marker in text for marker in CUDA_ERROR_MARKERS)


def leaves_worker_unusable(answer: dict) -> bool:
    """A failed case whose error came from CUDA: its worker must not take another case."""
    return answer.get("status") == "failed" and is_cuda_error(answer.get("error"))
