"""What MXNet can run: every registered operator, with opperf's selection and the reason for it.

The registry is the single source of truth for which operators exist. opperf silently drops
operators it does not want; here every registered operator stays visible with the reason it
was filtered, so `--list --all` can show the whole picture and nothing vanishes unexplained.
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

from frameworks import cache
from frameworks.mxnet import build_name as mxnet_build_name

from . import releases

# Why a selected operator's backward is not timed: the answers of the probe in
# opbench.backends.mxnet.gradients, stored in NOT_DIFFERENTIABLE and ZERO_GRADIENT below.
NO_FGRADIENT = "not differentiable: MXNet registers no gradient for it (no FGradient)"
NO_TENSOR_INPUT = "not differentiable: it takes no tensor input (only shapes and parameters)"
NO_OUTPUT = "not differentiable: it returns no output (writes its inputs in place)"
IN_PLACE = "not differentiable: it writes its inputs in place, which autograd refuses to record"
# Differentiable, but not worth timing (registry.ZERO_GRADIENT): the reason a report gives.
ZERO_FILL = ("zero gradient: MXNet's backward only fills the input gradients with zeros (the "
             "gradient is identically zero), so there is nothing to time")
REASONS = (NO_FGRADIENT, NO_TENSOR_INPUT, NO_OUTPUT, IN_PLACE)
REASON_NAMES = {NO_FGRADIENT: "NO_FGRADIENT", NO_TENSOR_INPUT: "NO_TENSOR_INPUT", NO_OUTPUT: "NO_OUTPUT",
                IN_PLACE: "IN_PLACE"}

# Deprecated aliases opperf leaves out, each mapped to the operator it duplicates, so the
# reason shown to users names what to benchmark instead.
DEPRECATED_ALIASES: Dict[str, str] = {
    "normal": "random_normal",
    "uniform": "random_uniform",
    "Flatten": "flatten",
    "contrib_CTCLoss": "ctc_loss",
    "Pad": "pad",
    "Cast": "cast",
    "Pooling_v1": "Pooling",
    "Concat": "concat",
    "Reshape": "reshape",
    "Convolution_v1": "Convolution",
    "SliceChannel": "split",
    "Crop": "slice",
    "crop": "slice",
    "onehot_encode": "one_hot",
    "batch_take": "pick",
}

# Operators whose backward opperf never times. We keep that choice, so figures stay comparable
# with opperf's, and say why instead of silently reporting no backward time. Checked on mxnet
# 1.9.1 CPU: SequenceLast's backward corrupts memory (double free, then a segfault); the others
# run but opperf leaves them out.
_OPPERF_CHOICE = "backward not timed, as in opperf (kept so results compare with opperf's)"
BACKWARD_OFF: Dict[str, str] = {
    "gather_nd": _OPPERF_CHOICE,
    "softmax_cross_entropy": _OPPERF_CHOICE,
    "linalg_gelqf": _OPPERF_CHOICE,
    "linalg_slogdet": _OPPERF_CHOICE,
    "moments": _OPPERF_CHOICE,
    "Embedding": _OPPERF_CHOICE,
    "SequenceLast": ("backward corrupts memory on mxnet 1.9.1 CPU (without sequence lengths: a zero "
                     "gradient, then a double free and a segfault); opperf also skips it"),
}

# Selected operators MXNet cannot differentiate, with the reason; every other selected operator
# is differentiable. This is a stored answer of the probe in opbench.backends.mxnet.gradients (autograd.record
# + backward on tiny inputs, on the real MXNet), not a guess: tests/opbench/test_gradients.py
# re-runs the probe and asserts this table equals it, so it cannot drift from the installed
# MXNet. `python -m opbench.backends.mxnet.gradients` prints it afresh. On mxnet 1.9.1: 42 of the 256 selected
# operators; 214 are differentiable, against opperf's 130 with a `_backward_<name>` operator
# (36 of the 214 have an identically zero gradient: ZERO_GRADIENT below).
NOT_DIFFERENTIABLE: Dict[str, str] = {
    **{op: NO_FGRADIENT for op in (
        "adam_update", "all_finite", "argmax_channel", "fill_element_0index", "ftml_update",
        "ftrl_update", "khatri_rao", "lamb_update_phase1", "lamb_update_phase2",
        "mp_lamb_update_phase1", "mp_lamb_update_phase2", "mp_nag_mom_update", "mp_sgd_mom_update",
        "mp_sgd_update", "multi_all_finite", "multi_lars", "multi_sum_sq", "nag_mom_update",
        "rmsprop_update", "rmspropalex_update", "sgd_mom_update", "sgd_update", "shuffle",
        "signsgd_update", "signum_update")},
    **{op: IN_PLACE for op in (
        "multi_mp_sgd_mom_update", "multi_mp_sgd_update", "multi_sgd_mom_update", "multi_sgd_update",
        "preloaded_multi_mp_sgd_mom_update", "preloaded_multi_mp_sgd_update",
        "preloaded_multi_sgd_mom_update", "preloaded_multi_sgd_update")},
    **{op: NO_TENSOR_INPUT for op in (
        "random_exponential", "random_gamma", "random_generalized_negative_binomial",
        "random_negative_binomial", "random_normal", "random_poisson", "random_randint",
        "random_uniform")},
    "reset_arrays": NO_OUTPUT,
}

# Selected operators MXNet can differentiate whose gradient is identically zero: MXNet's
# backward only fills the input gradients with zeros (their FGradient makes zeros), so a timed
# "backward" would time that fill, not a gradient. They stay differentiable, but run forward
# only, with this reason. Another stored probe answer (opbench.backends.mxnet.gradients.zero_gradient: backward
# from random head gradients on every tiny input combination; every input gradient is exactly
# zero): tests/opbench/test_gradients.py asserts this table equals the probe both ways, so every
# timed operator has a nonzero gradient somewhere. On mxnet 1.9.1: 36 of the 214 differentiable
# operators, leaving 171 timed; opperf times the backward of one of them (sign).
ZERO_GRADIENT: Dict[str, str] = {op: ZERO_FILL for op in (
    "BlockGrad", "argmax", "argmin", "argsort", "broadcast_equal", "broadcast_greater",
    "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal", "broadcast_logical_and",
    "broadcast_logical_or", "broadcast_logical_xor", "broadcast_not_equal", "ceil", "fix", "floor",
    "logical_not", "one_hot", "ones_like", "ravel_multi_index", "rint", "round", "sample_exponential",
    "sample_gamma", "sample_generalized_negative_binomial", "sample_negative_binomial", "sample_normal",
    "sample_poisson", "sample_uniform", "shape_array", "sign", "size_array", "stop_gradient", "trunc",
    "unravel_index", "zeros_like")}


# Selected operators whose cases draw from MXNet's random generators: only their cases need
# MXNet seeded before them (arrays.materialize; seeding costs about a millisecond a case). Another
# stored probe answer (opbench.backends.mxnet.gradients.draws_random: every tiny case run as a
# timed case runs it changes what the generators give next), asserted equal to the probe by
# tests/opbench/test_gradients.py. rrelu draws only in training mode, which its forward-only
# cases never enter. On mxnet 1.9.1: 18 of the 256.
DRAWS_RANDOM: FrozenSet[str] = frozenset((
    "Dropout", "random_exponential", "random_gamma", "random_generalized_negative_binomial",
    "random_negative_binomial", "random_normal", "random_poisson", "random_randint", "random_uniform",
    "sample_exponential", "sample_gamma", "sample_generalized_negative_binomial", "sample_multinomial",
    "sample_negative_binomial", "sample_normal", "sample_poisson", "sample_uniform", "shuffle"))


@dataclass(frozen=True)
class OperatorInfo:
    """One registered MXNet operator as the registry describes it.

    has_backward follows opperf's definition (a `_backward_<name>` operator is registered), so
    the count matches its figures (130 on mxnet 1.9.1). `differentiable` is whether MXNet can
    take the operator's gradient at all (NOT_DIFFERENTIABLE, checked against the real MXNet):
    a superset, which also holds operators whose backward is registered under another name
    (split: `_backward_SliceChannel`) or made of other operators (batch_dot, exp). It is None
    for operators outside the selection, which are not probed. A differentiable operator's
    backward is nevertheless not timed when `zero_gradient` (ZERO_GRADIENT: its gradient is
    identically zero, nothing to time) or `backward_off` (BACKWARD_OFF: opperf's choice, or a
    crash) says why.
    """

    name: str
    arg_names: Tuple[str, ...]
    arg_types: Tuple[str, ...]
    narg: int
    has_backward: bool
    selected: bool
    reason: Optional[str] = None
    backward_off: Optional[str] = None
    differentiable: Optional[bool] = None
    not_differentiable: Optional[str] = None
    zero_gradient: Optional[str] = None

    @property
    def runs_backward(self) -> bool:
        """Whether a backward pass is timed for this operator (unprobed ones: opperf's rule)."""
        able = self.has_backward if self.differentiable is None else self.differentiable
        return able and self.zero_gradient is None and self.backward_off is None

    @property
    def no_backward_reason(self) -> Optional[str]:
        """Why no backward is timed for this operator, or None when it is."""
        if self.differentiable is False:
            return self.not_differentiable
        if self.differentiable is None and not self.has_backward:
            return f"no _backward_{self.name} registered (operator outside the probed selection)"
        return self.zero_gradient or self.backward_off

    def arg_type(self, arg: str) -> Optional[str]:
        try:
            return self.arg_types[self.arg_names.index(arg)]
        except ValueError:
            return None

    def is_tensor_arg(self, arg: str) -> bool:
        """True for NDArray inputs (single or variadic), false for scalar/tuple parameters."""
        kind = self.arg_type(arg) or ""
        return kind.startswith("NDArray")

    def is_list_arg(self, arg: str) -> bool:
        """True for a variadic input (`NDArray-or-Symbol[]`), passed positionally as *args."""
        return (self.arg_type(arg) or "").startswith("NDArray") and "[]" in (self.arg_type(arg) or "")

    def is_required(self, arg: str) -> bool:
        kind = self.arg_type(arg) or ""
        return "required" in kind

    @property
    def tensor_args(self) -> Tuple[str, ...]:
        return tuple(a for a in self.arg_names if self.is_tensor_arg(a))


def filter_reason(name: str) -> Optional[str]:
    """Why opperf leaves `name` out, or None when it is benchmarked."""
    if name.startswith("_backward_"):
        return "backward operator (_backward_ prefix): timed through its forward operator"
    if name.startswith("_contrib_"):
        return "contrib operator (_contrib_ prefix)"
    if name.startswith("_"):
        return "internal operator (underscore prefix)"
    if name in DEPRECATED_ALIASES:
        return f"deprecated alias of {DEPRECATED_ALIASES[name]}"
    return None


#: the cached registry's kind (frameworks.cache): its body is {"operators": [OperatorInfo as a dict, ...]}
CACHE_KIND = "opbench-mxnet-registry-1"


def cache_file() -> Optional[Path]:
    """Where the registry of the installed MXNet build is cached (frameworks.cache): named by
    the build (frameworks.mxnet.build_name) and by this module's and releases' code (the
    stored tables); None where the build cannot be named without importing MXNet."""
    build = mxnet_build_name()
    if build is None:
        return None
    code = cache.code_digest([Path(__file__), Path(releases.__file__)])
    return cache.root() / f"mxnet-registry-{build}-{code}.json"


def _read_cache(path: Path) -> Optional[Tuple[OperatorInfo, ...]]:
    body = cache.read(path, CACHE_KIND)
    if body is None:
        return None
    return tuple(OperatorInfo(**{**item, "arg_names": tuple(item["arg_names"]), "arg_types": tuple(item["arg_types"])})
                 for item in body["operators"])


@lru_cache(maxsize=1)
def _scan() -> Tuple[OperatorInfo, ...]:
    """The registry: from the cache file of this MXNet build where one exists (planning a sweep
    then needs no MXNet import in the parent), else read from MXNet and cached."""
    path = cache_file()
    found = _read_cache(path) if path is not None else None
    if found is None:
        found = _scan_mxnet()
        if path is not None:
            cache.write(path, CACHE_KIND, {"operators": [asdict(info) for info in found]})
    return found


def _scan_mxnet() -> Tuple[OperatorInfo, ...]:
    names = sorted(releases.operator_names())  # lazy: importing opbench must not load MXNet
    registered = set(names)
    infos = []
    for name in names:
        arg_names, arg_types, narg = releases.operator_arguments(name)
        reason = filter_reason(name)
        not_differentiable = releases.not_differentiable(name, NOT_DIFFERENTIABLE.get(name), NO_FGRADIENT)
        infos.append(
            OperatorInfo(
                name=name,
                arg_names=arg_names,
                arg_types=arg_types,
                narg=narg,
                has_backward=f"_backward_{name}" in registered,
                selected=reason is None,
                reason=reason,
                backward_off=BACKWARD_OFF.get(name),
                differentiable=(not_differentiable is None) if reason is None else None,
                not_differentiable=not_differentiable,
                zero_gradient=ZERO_GRADIENT.get(name) if reason is None else None,
            )
        )
    return tuple(infos)


def scan() -> List[OperatorInfo]:
    """Every registered operator, sorted by name (cached: the registry never changes in-process)."""
    return list(_scan())


@lru_cache(maxsize=1)
def _by_name() -> Dict[str, OperatorInfo]:
    return {info.name: info for info in _scan()}


def get(name: str) -> Optional[OperatorInfo]:
    """The registry entry for `name`, or None when MXNet has no such operator."""
    return _by_name().get(name)


def draws_random(name: str) -> bool:
    """Whether a case of `name` may draw from MXNet's random generators: DRAWS_RANDOM's answer
    for the probed (selected) operators, yes for any other."""
    info = get(name)
    return info is None or not info.selected or name in DRAWS_RANDOM


def selected_names() -> List[str]:
    """The operators opperf's filter keeps (256 on mxnet 1.9.1), sorted."""
    return [info.name for info in _scan() if info.selected]


def all_names() -> List[str]:
    return [info.name for info in _scan()]


def suggest(name: str, limit: int = 3) -> List[str]:
    """Close registered names for a misspelt operator, selected ones first."""
    selected = difflib.get_close_matches(name, selected_names(), n=limit, cutoff=0.6)
    if len(selected) >= limit:
        return selected
    rest = difflib.get_close_matches(name, all_names(), n=limit, cutoff=0.6)
    return (selected + [r for r in rest if r not in selected])[:limit]
