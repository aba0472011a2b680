"""`import precision_tool` in a child process of a script under `npu-sim run`: the simulation's alias, as in the script."""

from npu_sim_bridge.runtime.child_alias import take_over

take_over(__name__)
