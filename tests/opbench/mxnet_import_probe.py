"""Run in a fresh process (tests/opbench/test_registry.py, test_old_mxnet_release.py): imports
MXNet, as a worker does (`worker`: frameworks.mxnet.import_for_worker, whose generated operator
functions may come from the store in OPBENCH_CACHE) or plainly (`plain`), and prints as JSON how
many generated operator sources were compiled, a digest of every generated function (code,
constants with each handle named by its operator, docstring, name, defaults) and a few
operators' results, for the test to compare between processes."""

import builtins
import ctypes
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import CodeType

from frameworks import mxnet_generated
from frameworks.cache import CACHE_ENV

ROOT = Path(__file__).resolve().parents[2]

compiled = []
real_compile = builtins.compile


def counting_compile(source, *args, **kwargs):
    if isinstance(source, str) and mxnet_generated.HANDLE.search(source):
        compiled.append(1)
    return real_compile(source, *args, **kwargs)


def operator_of_handle() -> dict:
    """Each operator's handle (this process's pointer) → its name."""
    import mxnet as mx

    names, size = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_uint()
    mx.base.check_call(mx.base._LIB.MXListAllOpNames(ctypes.byref(size), ctypes.byref(names)))
    found = {}
    for name in (names[i] for i in range(size.value)):
        handle = ctypes.c_void_p()
        mx.base.check_call(mx.base._LIB.NNGetOpHandle(ctypes.c_char_p(name), ctypes.byref(handle)))
        found[handle.value] = name.decode()
    return found


def described(code: CodeType, operators: dict):
    """A code object as comparable text, its handle constants named by their operator."""
    constants = tuple(described(constant, operators) if isinstance(constant, CodeType)
                      else f"handle of {operators[constant]}" if type(constant) is int and constant in operators
                      else constant
                      for constant in code.co_consts)
    return (code.co_name, getattr(code, "co_qualname", None), code.co_filename, code.co_flags, code.co_argcount,
            code.co_kwonlyargcount, code.co_varnames, code.co_names, code.co_code, code.co_linetable, constants)


def generated_functions() -> dict:
    """Every function MXNet generated (compiled from a string), by module and attribute."""
    found = {}
    for module_name, module in sorted(sys.modules.items()):
        if module_name.split(".")[0] != "mxnet" or module is None:
            continue
        for attribute, value in sorted(vars(module).items()):
            if getattr(getattr(value, "__code__", None), "co_filename", None) == "<string>":
                found[f"{module_name}.{attribute}"] = value
    return found


def digest(functions: dict, operators: dict) -> str:
    text = repr([(name, function.__name__, function.__module__, function.__doc__, repr(function.__defaults__),
                  repr(function.__kwdefaults__), described(function.__code__, operators))
                 for name, function in functions.items()])
    return hashlib.sha256(text.encode()).hexdigest()


def results() -> list:
    import mxnet as mx

    a, b = mx.nd.ones((2, 3)), mx.nd.arange(2).reshape((2, 1))
    out = mx.nd.zeros((2, 3))
    mx.nd.elemwise_mul(a, mx.nd.broadcast_add(a, b), out=out)
    x, w = mx.sym.var("x"), mx.sym.var("w")
    fc = mx.sym.FullyConnected(data=mx.sym.exp(x), weight=w, num_hidden=2, no_bias=True, name="fc")
    run = fc.bind(mx.cpu(), {"x": mx.nd.zeros((1, 3)), "w": mx.nd.ones((2, 3))})
    found = [mx.nd.broadcast_add(a, b).asnumpy().tolist(), out.asnumpy().tolist(), fc.list_arguments(),
             run.forward()[0].asnumpy().tolist(), mx.nd.broadcast_add.__doc__, mx.sym.broadcast_add.__doc__]
    if hasattr(mx, "npx"):  # the numpy modules came with MXNet 1.6
        found += [mx.np.add(mx.np.ones((2, 2)), mx.np.arange(2)).asnumpy().tolist(),
                  mx.npx.relu(mx.np.array([-1.0, 2.0])).asnumpy().tolist(), mx.np.add.__doc__]
    return found


def main(how: str) -> None:
    builtins.compile = counting_compile
    if how == "worker":
        from frameworks.mxnet import import_for_worker

        import_for_worker()
    else:
        import mxnet  # noqa: F401
    builtins.compile = real_compile
    functions = generated_functions()
    print(json.dumps({"compiled": len(compiled), "functions": len(functions),
                      "digest": digest(functions, operator_of_handle()), "results": results()}))


def run(how: str, cache_folder: Path, python: str = sys.executable) -> dict:
    """This probe's answer from a fresh `python` whose cache folder is `cache_folder`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), CACHE_ENV: str(cache_folder)}
    done = subprocess.run([python, __file__, how], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
