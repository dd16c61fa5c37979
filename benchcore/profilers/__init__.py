"""Profiler engines: run a loop under a framework profiler and turn its dump into statistics.

Each module imports its framework lazily, inside functions, so importing benchcore never pulls
in MXNet or PyTorch.
"""
