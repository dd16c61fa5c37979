"""What differs between the MXNet releases opbench runs on (1.4.1 to 1.9.1), in one place.

The rest of the backend asks this module instead of testing versions: which release is
installed (and whether opbench runs on it), the registry through the C API every release has,
the optional parts a release may lack (the build feature list, mx.np), how its profiler
records and how its imperative call is spelt, and the operators, gradients and parameter
choices a release lacks against 1.9.1's stored tables and input rules. docs/MXNET_RELEASES.md
explains each difference and how the suite handles it.
"""
from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, FrozenSet, List, Optional, Tuple

from benchcore.errors import UsageError
from frameworks.mxnet import recorded_version

#: The oldest release opbench runs on; tests cover 1.4.1, 1.5.0, 1.6.0, 1.7.0, 1.8.0 and 1.9.1.
OLDEST = (1, 4, 1)
OLDEST_TEXT = "1.4.1"
#: The release the stored tables of registry.py (gradients, selection counts) were probed on.
REFERENCE = (1, 9, 1)

Release = Tuple[int, int, int]


def parse_release(text: str) -> Release:
    """(major, minor, patch) of an MXNet version string: "1.7.0.post2" and "1.9.1" alike;
    a pre-release or local build suffix ("2.0.0b1", "1.6.0+cu101") counts as its release."""
    found = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not found:
        raise UsageError(f"cannot read the MXNet version {text!r}; install a released mxnet "
                         f"({OLDEST_TEXT} or later)")
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


def check_release(text: str) -> Release:
    """The release of `text`, or a UsageError when opbench does not run on it."""
    release = parse_release(text)
    if release < OLDEST:
        raise UsageError(f"mxnet {text} is older than opbench supports ({OLDEST_TEXT} to 1.9.1); "
                         f"install a supported release (pip install 'mxnet>={OLDEST_TEXT},<2' \"numpy<1.24\")")
    return release



def installed_version() -> str:
    """The installed MXNet's version: pip's record, else the module's own."""
    recorded = recorded_version()
    if recorded is not None:
        return recorded
    import mxnet as mx

    return mx.__version__


def refuse_recorded_release() -> None:
    """A UsageError when pip records an installed MXNet too old; nothing when it records none
    (no MXNet, or one built from source: current() checks that one when it is used). Imports
    no MXNet, so any module may call it at import."""
    recorded = recorded_version()
    if recorded is not None:
        check_release(recorded)


@lru_cache(maxsize=1)
def current() -> Release:
    """The installed MXNet's release, checked (UsageError when it is too old)."""
    return check_release(installed_version())


# ---------------------------------------------------------------------------------------------
# The operator registry and the imperative call, through the C API of every release
# (mx.operator's helpers for the registry exist from 1.6 only)


def operator_names() -> List[str]:
    """Every registered operator name (MXListAllOpNames)."""
    from mxnet.base import _LIB, check_call, py_str

    current()
    size = ctypes.c_uint()
    names = ctypes.POINTER(ctypes.c_char_p)()
    check_call(_LIB.MXListAllOpNames(ctypes.byref(size), ctypes.byref(names)))
    return [py_str(names[i]) for i in range(size.value)]


def operator_arguments(name: str) -> Tuple[Tuple[str, ...], Tuple[str, ...], int]:
    """(argument names, argument types, their count) of a registered operator, from
    MXSymbolGetAtomicSymbolInfo (what mx.operator.get_operator_arguments reads from 1.6 on)."""
    from mxnet.base import _LIB, c_str, check_call, py_str

    handle = ctypes.c_void_p()
    check_call(_LIB.NNGetOpHandle(c_str(name), ctypes.byref(handle)))
    real, doc, key_var, ret = (ctypes.c_char_p() for _ in range(4))
    count = ctypes.c_uint()
    names, types, docs = (ctypes.POINTER(ctypes.c_char_p)() for _ in range(3))
    check_call(_LIB.MXSymbolGetAtomicSymbolInfo(
        handle, ctypes.byref(real), ctypes.byref(doc), ctypes.byref(count), ctypes.byref(names),
        ctypes.byref(types), ctypes.byref(docs), ctypes.byref(key_var), ctypes.byref(ret)))
    n = int(count.value)
    return tuple(py_str(names[i]) for i in range(n)), tuple(py_str(types[i]) for i in range(n)), n


def imperative_invoke(handle, inputs, keys, vals, out):
    """MXNet's imperative call of an operator handle, in this release's signature: 1.6 added
    is_np_op, 1.7 output_is_list (both False here: classic nd operators, outputs as MXNet
    gives them)."""
    from mxnet.ndarray._internal import _imperative_invoke

    release = current()
    flags = () if release < (1, 6, 0) else (False,) if release < (1, 7, 0) else (False, False)
    return _imperative_invoke(handle, inputs, keys, vals, out, *flags)


# ---------------------------------------------------------------------------------------------
# Optional parts of a release


@lru_cache(maxsize=1)
def features() -> Optional[FrozenSet[str]]:
    """The build features this MXNet has enabled (CUDA, MKLDNN, INT64_TENSOR_SIZE …), or None
    for a release without the list (1.4: no mxnet.runtime; 1.5 has it but does not import it)."""
    try:
        from mxnet.runtime import Features
    except ImportError:
        return None
    return frozenset(name for name, feature in Features().items() if feature.enabled)


def has_feature(name: str) -> bool:
    """Whether the build has `name`. A release without a feature list has no large-tensor
    build (INT64_TENSOR_SIZE came in 1.5); whether it has CUDA, its GPU count tells."""
    enabled = features()
    if enabled is not None:
        return name in enabled
    if name == "CUDA":
        import mxnet as mx

        return mx.context.num_gpus() > 0
    return False


def numpy_api() -> Optional[str]:
    """None when this MXNet has mx.np and mx.npx (1.6 on), else why not."""
    import mxnet as mx

    if hasattr(mx, "np") and hasattr(mx, "npx"):
        return None
    return f"mxnet {mx.__version__} has no mx.np / mx.npx (they came with MXNet 1.6)"


def is_numpy_array(array) -> bool:
    """Whether `array` is an mx.np.ndarray (never, on a release without mx.np)."""
    import mxnet as mx

    np_module = getattr(mx, "np", None)
    return np_module is not None and isinstance(array, np_module.ndarray)


# ---------------------------------------------------------------------------------------------
# The profiler


def profiler_records_per_call() -> int:
    """How many times the aggregate dump counts one operator call. Before 1.6 MXNet records
    each call twice over the same interval (a device-domain event and an operator-domain
    event, both under the operator's name), so the table's Count and Total are doubled."""
    return 2 if current() < (1, 6, 0) else 1


def warmup_under_profiler() -> bool:
    """Whether the native engine's warmup must run with the profiler on. MXNet 1.4 aborts the
    process (profiler.h: Check failed: value_ >= v) when storage allocated while the profiler
    was stopped is freed while it runs and its memory counter holds less: RNN's workspace,
    made by the last warmup call and freed by the first timed one. With the warmup profiled,
    whatever the timed runs free was counted when it was allocated; the warmup's records are
    dropped before the timed runs, so the figures mean what they mean on later releases."""
    return current() < (1, 5, 0)


# ---------------------------------------------------------------------------------------------
# Operators: what a release answers otherwise than 1.9.1

def missing_operator(op: str) -> str:
    """Why a case of `op` is not run here: this MXNet lacks the operator its plan named (the
    plan was made with another MXNet: the parent of an `ab` run between releases)."""
    import mxnet as mx

    return (f"not run: mxnet {mx.__version__} has no operator {op} (the case was planned with another "
            f"MXNet, e.g. the other side of an `ab` run)")


#: Operators MXNet 1.9.1 differentiates (registry.NOT_DIFFERENTIABLE is 1.9.1's probe) that an
#: older release cannot: op → the first release that can. The probe
#: (`python -m opbench.backends.mxnet.gradients`, on each release) found no other difference
#: from 1.4.1 to 1.8.0, and tests/opbench/test_old_mxnet_release.py re-runs it on an old one.
GRADIENT_SINCE: Dict[str, Release] = {
    # 1.4's choose_element_0index is an operator of its own without FGradient; from 1.5 on it
    # is an alias of pick
    "choose_element_0index": (1, 5, 0),
}


def not_differentiable(op: str, stored: Optional[str], no_gradient: str) -> Optional[str]:
    """Why this release cannot differentiate `op` (None: it can), given 1.9.1's stored answer;
    `no_gradient` is the registry's reason for an operator without one."""
    since = GRADIENT_SINCE.get(op)
    if since is not None and current() < since:
        return no_gradient
    return stored


@dataclass(frozen=True)
class Broken:
    """An operator some releases cannot run as opbench calls it (1.9.1 can): on the releases
    from `first` to `last`, on `device`, in a build with `feature`."""

    first: Release
    last: Release
    device: str
    feature: str
    why: str


#: Operators whose cases fail on some releases, found by sweeping every release (--tiny, both
#: engines): they are skipped there with the reason, instead of failing.
BROKEN: Dict[str, Broken] = {
    "amp_cast": Broken((1, 7, 0), (1, 8, 0), "cpu", "MKLDNN",
                       "its MKLDNN kernel has no float16 output (\"unknown type for MKLDNN :2\"; 1.6 and 1.9 cast)"),
}


def broken(op: str, ctx: str) -> Optional[str]:
    """Why this release cannot run `op` on `ctx` ("cpu(0)"), or None when it can (asked while
    planning: imports MXNet only for an operator in BROKEN)."""
    known = BROKEN.get(op)
    if known is None or not known.first <= current() <= known.last or not ctx.startswith(known.device):
        return None
    if not has_feature(known.feature):
        return None
    return f"not run on mxnet {installed_version()} ({known.device}, {known.feature}): {known.why}"


_CHOICES = re.compile(r"^\s*\{([^}]*)\}")


def unaccepted_value(info, inputs: Dict) -> Optional[str]:
    """Why this release's operator cannot take one of `inputs`' values (a choice it does not
    list yet: LeakyReLU's act_type 'gelu' before 1.5), or None. The registry's argument types
    list each choice ("{'elu', 'gelu', 'leaky'},optional, default='leaky'")."""
    import mxnet as mx

    for arg, value in inputs.items():
        listed = _CHOICES.match(info.arg_type(arg) or "") if isinstance(value, str) else None
        choices = [choice.strip().strip("'\"") for choice in listed.group(1).split(",")] if listed else []
        if listed and value not in choices:
            return (f"not run on mxnet {mx.__version__}: its {info.name} takes {arg} "
                    f"{', '.join(choices)}, not {value!r} (the input rules follow 1.9.1's)")
    return None
