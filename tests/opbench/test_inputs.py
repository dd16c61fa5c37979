"""opbench.inputs: the walker both backends read nested arguments and outputs with."""

from opbench.inputs import leaves


class Leaf:
    pass


def test_leaves_finds_every_leaf_in_order_through_lists_tuples_and_dicts():
    a, b, c, d = Leaf(), Leaf(), Leaf(), Leaf()
    nested = [a, (1, "x", [b]), {"w": c, "n": None, "deep": {"v": (d,)}}]
    assert leaves(nested, Leaf) == [a, b, c, d]
    assert leaves(a, Leaf) == [a] and leaves(3.0, Leaf) == [] and leaves([], Leaf) == []
