"""Mixed compute's second half: device segments outlined into GeOp calls (pass_.py), the segments proposed
(cluster.py) and carried over the nodes added after placement (carry.py).

Nothing is imported here, so that the placement pass (passes/placement/) reads cluster.py and carry.py without
importing the partition pass, which imports it.
"""
