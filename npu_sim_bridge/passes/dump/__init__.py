"""Dumps: device ops write their tensors (.npy) and float16 overflow flags from inside the GeOps.

layout.py      the folder layout and the manifest
npy_graph.py   TensorFlow nodes that write a tensor as a .npy file
places.py      the while frame and cond branch of each body node; values entering frames; loop turn counters
instrument.py  per GeOp body: the run counter, one write per dumped tensor, one check per checked output
origins.py     unseeded random ops, variable reads, inserted Casts, the in-place updates of ref variables
kinds.py       overflow kinds (AI Core, Atomic Add) and dtype names
pass_.py       the GraphPass named "dump" and the manifest
"""

from npu_sim_bridge.passes.dump.pass_ import DumpPass

__all__ = ["DumpPass"]
