"""opbench: framework operators timed forward and backward, one isolated case at a time.

Which operators a sweep covers and how a case runs is each framework backend's (opbench.backends:
MXNet's registry of operators, PyTorch's OpInfo database); the sweep, reports and comparisons are
benchcore's. Importing opbench loads no framework and sets nothing.
"""
