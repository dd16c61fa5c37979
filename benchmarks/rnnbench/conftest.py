"""Options of the fastrnns-style pytest-benchmark entry (`pytest benchmarks/rnnbench --benchmark-only`).

They mirror fastrnns' conftest (`--fuser`, `--executor`) plus sizes, device and a runner filter,
so a tiny run can prove the entry works without taking minutes.
"""


def pytest_addoption(parser):
    group = parser.getgroup("rnnbench", "rnnbench (fastrnns) benchmarks")
    group.addoption("--fuser", default="te", help="TorchScript fuser: te, old, none, default (default te)")
    group.addoption("--executor", default="default", help="TorchScript executor: profiling, simple, legacy, default")
    group.addoption("--rnnbench-sizes", default="100,1,512,512,64",
                    help="seqLength,numLayers,inputSize,hiddenSize,miniBatch (default fastrnns': 100,1,512,512,64)")
    group.addoption("--rnnbench-device", default=None, help="cpu or cuda (default: cuda when available)")
    group.addoption("--rnnbench-runners", nargs="*", default=None,
                    help="runners to benchmark (default: every registered runner)")
    group.addoption("--rnnbench-seed", type=int, default=17, help="seed for inputs and parameters (default 17)")
    group.addoption("--rnnbench-warmup", type=int, default=10,
                    help="forward+backward iterations run before pytest-benchmark times a runner, so TorchScript's "
                         "profiling executor has optimised (default 10, as rnnbench bench --warmup)")
