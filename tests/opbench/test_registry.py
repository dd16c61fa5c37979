"""The registry scan and the categories, on the real mxnet 1.9.1 (figures from ANCHORS.md)."""

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import mxnet  # (plainly: a broken MXNet fails these tests instead of skipping them)
import pytest

import frameworks.mxnet as frameworks_mxnet
from benchcore.errors import UsageError
from frameworks import cache, mxnet_generated
from opbench.backends.mxnet import categories, registry, releases
from tests.opbench import mxnet_import_probe

ROOT = Path(__file__).resolve().parents[2]

# opperf's membership on mxnet 1.9.1 (ANCHORS.md, "The 23 categories").
OPPERF_COUNTS = {
    "unary": 57, "binary_broadcast": 20, "binary_elemwise": 5, "binary_misc": 2, "gemm": 3,
    "random": 26, "reduction": 11, "sorting_searching": 5, "indexing": 9, "rearrange": 7,
    "shape": 6, "expanding": 8, "rounding": 6, "join_split": 3, "nn_basic": 14,
    "activation": 8, "pooling": 2, "convolution": 1, "transpose_convolution": 1,
    "optimizer": 23, "loss": 5, "misc": 16, "linalg": 17,
}

UNCATEGORIZED = {
    "BatchNorm_v1", "IdentityAttachKLSparseReg", "LinearRegressionOutput",
    "LogisticRegressionOutput", "MAERegressionOutput", "SVMOutput", "SoftmaxOutput",
    "mp_lamb_update_phase1", "mp_lamb_update_phase2", "scatter_nd", "unravel_index",
}

# The ten operators opperf lists in two categories, and the home each gets here.
DOUBLE_LISTED = {
    "round": "rounding", "rint": "rounding", "fix": "rounding", "floor": "rounding",
    "ceil": "rounding", "trunc": "rounding", "shape_array": "shape", "size_array": "shape",
    "reshape_like": "shape", "split": "join_split",
}


def test_scan_counts_match_mxnet_1_9_1():
    infos = registry.scan()
    selected = [i for i in infos if i.selected]
    assert len(infos) == 1167
    assert sum(i.name.startswith("_") for i in infos) == 898
    assert len(selected) == 256
    assert sum(i.has_backward for i in selected) == 130


def test_scan_is_cached_and_sorted():
    first, second = registry.scan(), registry.scan()
    assert [a is b for a, b in zip(first, second)] == [True] * len(first)
    assert [i.name for i in first] == sorted(i.name for i in first)


def test_every_filtered_operator_has_a_reason():
    for info in registry.scan():
        assert (info.reason is None) == info.selected, info.name
    assert "backward operator" in registry.get("_backward_Convolution").reason
    assert "contrib" in registry.get("_contrib_quadratic").reason
    assert "internal" in registry.get("_copyto").reason
    assert registry.get("Concat").reason == "deprecated alias of concat"
    assert registry.get("SliceChannel").reason == "deprecated alias of split"
    registered = [registry.get(a) for a in registry.DEPRECATED_ALIASES if registry.get(a)]
    assert len(registered) == 13  # contrib_CTCLoss and onehot_encode are gone in 1.9.1
    assert not any(info.selected for info in registered)


def test_argument_metadata():
    conv = registry.get("Convolution")
    assert conv.arg_names[:3] == ("data", "weight", "bias")
    assert conv.narg == len(conv.arg_names) == 14
    assert conv.is_tensor_arg("weight") and not conv.is_tensor_arg("kernel")
    assert conv.is_required("kernel") and not conv.is_required("stride")
    assert registry.get("add_n").is_list_arg("args")


def test_backward_forced_off_with_reason():
    for name in ("gather_nd", "softmax_cross_entropy", "linalg_gelqf", "linalg_slogdet",
                 "moments", "SequenceLast", "Embedding"):
        info = registry.get(name)
        assert info.has_backward and info.differentiable, name  # registered ...
        assert not info.runs_backward and info.backward_off  # ... but not timed, with a reason
        assert info.no_backward_reason == info.backward_off
    assert set(registry.BACKWARD_OFF) == {"gather_nd", "softmax_cross_entropy", "linalg_gelqf",
                                          "linalg_slogdet", "moments", "SequenceLast", "Embedding"}
    assert registry.get("Convolution").runs_backward


# Selected operators whose backward opperf's `_backward_<name>` check misses although it is
# registered, under the canonical name (lab/notes/opbench-design.md, *Native engine*).
ALIASED_BACKWARD = {"Softmax", "broadcast_minus", "broadcast_plus", "choose_element_0index", "concat",
                    "cumsum", "flip", "identity", "max_axis", "min_axis", "pad", "split", "sum_axis",
                    "swapaxes"}


def test_differentiable_is_a_superset_of_has_backward():
    selected = [i for i in registry.scan() if i.selected]
    assert sum(i.has_backward for i in selected) == 130  # opperf's figure, unchanged
    assert sum(bool(i.differentiable) for i in selected) == 214
    assert all(i.differentiable for i in selected if i.has_backward)
    assert set(registry.NOT_DIFFERENTIABLE) <= {i.name for i in selected}
    for name in ALIASED_BACKWARD | {"batch_dot", "exp", "sqrt", "dot", "random_pdf_normal"}:
        info = registry.get(name)
        assert info.differentiable and info.runs_backward and info.no_backward_reason is None, name
    for name in ("sample_normal", "round", "argmax"):  # differentiable, but the gradient is all zeros
        info = registry.get(name)
        assert info.differentiable and not info.runs_backward, name
        assert info.no_backward_reason == info.zero_gradient == registry.ZERO_GRADIENT[name], name
    for name in ALIASED_BACKWARD:
        assert not registry.get(name).has_backward, name
    for name in ("random_normal", "sgd_update", "multi_sgd_update", "reset_arrays", "shuffle", "khatri_rao"):
        info = registry.get(name)
        assert info.differentiable is False and not info.runs_backward, name
        assert info.no_backward_reason.startswith("not differentiable: "), name
    # operators outside the selection are not probed: opperf's rule decides for them
    internal = registry.get("_plus_scalar")
    assert internal.differentiable is None and internal.runs_backward == internal.has_backward


def test_suggestions_for_misspelt_names():
    assert "broadcast_add" in registry.suggest("broadcast_ad")
    assert registry.get("no_such_op") is None


def test_opperf_membership_counts():
    for category, count in OPPERF_COUNTS.items():
        assert len(categories.opperf_members(category)) == count, category
    union = set().union(*(categories.opperf_members(c) for c in OPPERF_COUNTS))
    assert len(union) == 245
    assert set(registry.selected_names()) - union == UNCATEGORIZED


def test_every_selected_operator_has_exactly_one_home():
    homes = {}
    for category in categories.CATEGORIES:
        for name in categories.operators_in(category):
            assert name not in homes, f"{name} in {homes.get(name)} and {category}"
            homes[name] = category
    assert set(homes) == set(registry.selected_names())
    assert len(categories.CATEGORIES) == 24 and categories.CATEGORIES[-1] == categories.OTHER
    assert set(categories.operators_in(categories.OTHER)) == UNCATEGORIZED
    for name, home in DOUBLE_LISTED.items():
        assert categories.category_of(name) == home
        listed_in = [c for c in OPPERF_COUNTS if name in categories.opperf_members(c)]
        assert len(listed_in) == 2 and home in listed_in, name
    # each home keeps opperf's count minus the operators housed elsewhere
    for category, count in OPPERF_COUNTS.items():
        moved = sum(1 for n, h in DOUBLE_LISTED.items()
                    if n in categories.opperf_members(category) and h != category)
        assert len(categories.operators_in(category)) == count - moved, category


def test_category_lookup_edges():
    assert categories.category_of("Pooling") == "pooling"
    assert categories.category_of("amp_multicast") == "unary"
    assert categories.category_of("_copyto") is None
    with pytest.raises(UsageError, match="unknown category"):
        categories.operators_in("nope")


def test_selecting_a_category_takes_opperfs_membership():
    from opbench.backends.mxnet.cases import resolve_ops

    assert len(resolve_ops(categories_=["unary"])) == 57  # opperf: 56 + amp_multicast, rounding ops included
    assert "round" in resolve_ops(categories_=["unary"]) and "round" in resolve_ops(categories_=["rounding"])
    assert set(resolve_ops(categories_=["shape"])) >= {"split", "reshape_like"}
    assert resolve_ops(categories_=["binary_misc"]) == ["choose_element_0index", "reshape_like"]
    # every case still has one home category
    from opbench.backends.mxnet.cases import generate_cases

    specs, _ = generate_cases(categories=["unary", "rounding"], tiny=True)
    assert {s.params["category"] for s in specs if s.name == "round"} == {"rounding"}


# --------------------------------------------------------------------------- the registry's cache


@pytest.fixture
def fresh_registry(tmp_path, monkeypatch):
    """The registry read again, cached under tmp_path; read again afterwards for later tests."""
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    registry._scan.cache_clear()
    yield tmp_path
    registry._scan.cache_clear()


def test_the_registry_is_cached_per_build_and_read_back_without_asking_mxnet(fresh_registry, monkeypatch):
    scanned = registry.scan()
    path = registry.cache_file()
    assert path.parent == fresh_registry and path.exists()
    registry._scan.cache_clear()
    real_names = releases.operator_names
    monkeypatch.setattr(releases, "operator_names", lambda: pytest.fail("the cached registry was not used"))
    assert registry.scan() == scanned
    # another build (a new version, or a library rebuilt in place): its own file, read from MXNet
    monkeypatch.setattr(registry, "mxnet_build_name", lambda: "1.9.1-rebuilt")
    asked = []
    monkeypatch.setattr(releases, "operator_names", lambda: asked.append(1) or real_names())
    registry._scan.cache_clear()
    assert registry.scan() == scanned and asked == [1]
    assert registry.cache_file() != path and registry.cache_file().exists()


def test_the_build_name_follows_the_library_file(tmp_path, monkeypatch):
    library = tmp_path / "libmxnet.so"
    library.write_bytes(b"one build")
    monkeypatch.setattr(frameworks_mxnet, "library_file", lambda: str(library))
    first = frameworks_mxnet.build_name()
    os.utime(library, ns=(1, 1))  # a build replaced in place: same path and version, new time
    assert frameworks_mxnet.build_name() != first
    assert frameworks_mxnet.build_name().startswith(mxnet.__version__)


def test_a_second_plan_and_environment_import_no_mxnet(tmp_path):
    """The sweep's parent plans and records the environment without importing MXNet once this
    build's registry and features are cached (the first run caches them), with the same answers."""
    code = ("import json, sys; from opbench.backends.mxnet import cases; from frameworks.mxnet import mxnet_info; "
            "specs, _ = cases.generate_cases(ops=['relu', 'broadcast_add'], tiny=True); "
            "print(json.dumps([len(specs), mxnet_info(), 'mxnet' in sys.modules]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), cache.CACHE_ENV: str(tmp_path)}
    first, second = (json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                               check=True).stdout) for _ in range(2))
    assert first[2] is True and second[2] is False
    assert first[:2] == second[:2] and second[1]["version"] == mxnet.__version__


def test_a_worker_imports_mxnet_without_what_no_operator_uses():
    """frameworks.mxnet.import_for_worker (the MXNet executor's WORKER_PRELOAD) leaves out scipy,
    which MXNet imports behind `try … except ImportError` for int8 calibration, test helpers and
    scipy sparse sources: a third of its import, paid by every round's worker; and it leaves
    mxnet.test_utils and requests (imported unguarded, used by no operator) unexecuted until
    their first use. Operators (dense and sparse) still run, the deferred modules work when
    used, and scipy stays importable afterwards."""
    import subprocess
    import sys
    import textwrap

    probe = textwrap.dedent("""
        import sys
        from benchcore.execute.worker import load_executor
        load_executor("opbench.backends.mxnet.executor:execute", preload=True)
        import mxnet as mx
        print(any(name.split(".")[0] == "scipy" for name in sys.modules), mx.contrib.quantization.stats is None,
              mx.ndarray.sparse.spsp is None, "unittest" in sys.modules, "urllib3" in sys.modules,
              float(mx.nd.broadcast_add(mx.nd.ones((2, 2)), mx.nd.ones((2, 1))).sum().asscalar()),
              float(mx.nd.array([[0, 1.5], [0, 0]]).tostype("csr").data.sum().asscalar()))
        print(mx.test_utils.almost_equal(mx.nd.ones((2,)).asnumpy(), [1.0, 1.0]), callable(mx.gluon.utils.requests.get),
              "unittest" in sys.modules, "urllib3" in sys.modules)
        import scipy.stats
        print(scipy.stats.norm.cdf(0.0))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True", "True", "False", "False", "8.0", "1.5",
                                   "True", "True", "True", "True", "0.5"]


@pytest.fixture(scope="module")
def first_worker_import(tmp_path_factory):
    """A plain `import mxnet` and a worker's first import (an empty cache folder): the probe's
    answers, and the store that import wrote."""
    folder = tmp_path_factory.mktemp("store")
    plain = mxnet_import_probe.run("plain", folder)
    first = mxnet_import_probe.run("worker", folder)
    (store,) = folder.iterdir()
    return plain, first, store.name, store.read_bytes()


def _cache_folder_holding(tmp_path, name, data):
    (tmp_path / name).write_bytes(data)
    return tmp_path


def test_a_workers_second_import_compiles_no_generated_operator_function(first_worker_import, tmp_path):
    """frameworks.mxnet_generated: a worker's first import compiles MXNet's generated operator
    functions and stores their templates; the next fresh worker compiles none of them. Every
    generated function (code, handle named by its operator, docstring, name, defaults) and a few
    operators' results (ndarray, out=, symbols bound and run, mx.np, mx.npx) are those of a plain
    `import mxnet`."""
    plain, first, name, data = first_worker_import
    assert name == mxnet_generated.store_file(frameworks_mxnet.build_name(), tmp_path).name
    second = mxnet_import_probe.run("worker", _cache_folder_holding(tmp_path, name, data))
    assert plain["compiled"] == 0 and first["compiled"] > 2000 and second["compiled"] == 0
    assert first["functions"] == second["functions"] == plain["functions"] > 2000
    assert first["digest"] == second["digest"] == plain["digest"]
    assert first["results"] == second["results"] == plain["results"]
    assert len(marshal.loads(data)) == first["compiled"]


@pytest.mark.parametrize("damage", ["not marshal", "truncated", "another object"])
def test_a_corrupt_store_is_ignored_and_replaced(first_worker_import, tmp_path, damage):
    plain, first, name, data = first_worker_import
    damaged = {"not marshal": b"\x00not marshal", "truncated": data[:len(data) // 2],
               "another object": marshal.dumps({b"key": "not code"})}[damage]
    again = mxnet_import_probe.run("worker", _cache_folder_holding(tmp_path, name, damaged))
    assert again["compiled"] == first["compiled"] and again["digest"] == plain["digest"]
    assert marshal.loads((tmp_path / name).read_bytes()).keys() == marshal.loads(data).keys()


def test_the_store_holds_what_one_import_used(first_worker_import, tmp_path):
    """Imported again, the store is not rewritten; where an import compiled something anew, it
    is rewritten with exactly the templates that import used (a stale one dropped)."""
    plain, first, name, data = first_worker_import
    folder = _cache_folder_holding(tmp_path, name, data)
    written = (folder / name).stat().st_mtime_ns
    mxnet_import_probe.run("worker", folder)
    assert (folder / name).read_bytes() == data and (folder / name).stat().st_mtime_ns == written
    templates = marshal.loads(data)
    dropped = next(iter(templates))
    stale = {**{key: code for key, code in templates.items() if key != dropped}, b"stale": templates[dropped]}
    (folder / name).write_bytes(marshal.dumps(stale))
    again = mxnet_import_probe.run("worker", folder)
    assert again["compiled"] == 1 and again["digest"] == plain["digest"]
    assert marshal.loads((folder / name).read_bytes()).keys() == templates.keys()


def test_the_stores_exec_is_execs_own():
    """OperatorCode.exec, builtins.exec during a worker's MXNet import: the caller's globals by
    default, the caller's __future__ flags (this module has no `annotations`, mxnet_generated
    has), code objects passed through; a generated function's template compiled once and its
    handle put back (a docstring's numbers left alone)."""
    operator_code = mxnet_generated.OperatorCode({})
    local, namespace = {}, {}
    operator_code.exec("def f():\n    return 1\n", None, local)
    assert local["f"].__globals__ is globals() and local["f"]() == 1
    operator_code.exec(compile("y = 2", "<string>", "exec"), namespace)
    assert namespace["y"] == 2
    with pytest.raises(NameError):
        operator_code.exec("def g(a: undefined_name): pass", {})
    generated = 'def h(a):\n    """Default 0.899999976, 12345."""\n    return _imperative_invoke({}, a, None)'
    operator_code.exec(generated.format(12345), None, local)
    assert operator_code.compiled_new and len(operator_code.used) == 1
    assert 12345 in local["h"].__code__.co_consts and local["h"].__doc__ == "Default 0.899999976, 12345."
    again = mxnet_generated.OperatorCode(operator_code.used)
    again.exec(generated.format(54321), None, local)
    assert not again.compiled_new and 54321 in local["h"].__code__.co_consts
    assert 12345 not in local["h"].__code__.co_consts and local["h"].__doc__ == "Default 0.899999976, 12345."
