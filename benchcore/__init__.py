"""Shared measuring machinery for the opbench and rnnbench suites.

Imports no deep-learning framework at module level: the suites hand benchcore small adapter
objects (a sync function, a profiler engine) and the frameworks are imported lazily.
"""

__version__ = "0.1.0"
