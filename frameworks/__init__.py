"""Adapters of the deep-learning frameworks, which the suites hand benchcore.

benchcore imports no framework: what it needs of one (its environment block, how it flushes
subnormals) a suite names or passes in from here, e.g. `Suite(collectors=("frameworks.torch:collect",))`.
One module per framework, shared by every suite that runs it (opbench's backends, rnnbench).
"""
