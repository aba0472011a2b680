"""Dumps: device ops write their tensors (.npy) and float16 overflow flags from inside the GeOps.

layout.py     the folder layout and the manifest
npy_graph.py  TensorFlow nodes that write a tensor as a .npy file
pass_.py      the GraphPass named "dump"
"""

from npu_sim_bridge.passes.dump.pass_ import DumpPass

__all__ = ["DumpPass"]
