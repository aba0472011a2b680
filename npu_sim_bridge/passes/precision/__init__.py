"""The precision pass: which ops run in float16, where Casts go, and how float16 is executed.

lists.py   the effective white/black/gray lists (operator library + modify_mixlist file)
ports.py   the typed data ports of a node (which type attr sets each input and output dtype)
plan.py    the Plan of one node, its roles and votes, the effective mode
decide.py  which role and Plan each node gets
mode_table.py  what each precision mode makes of a library op; must_keep_origin_dtype's error
gray.py    the gray rule and its fixed point over loops
casts.py   applying the decisions: type attrs, Casts, float16 round trips
rounding.py  when a round trip is one NpuSimRoundToFloat16 kernel (sim_fp16_rounding), its gradient
hoist.py   float16 round trips of loop-invariant values moved out of their while frame
marks.py   the attrs that mark what the pass inserted or retyped
functions.py  the bodies of functional While/If and function calls
pass_.py   the GraphPass named "precision"
"""

from npu_sim_bridge.passes.precision.mode_table import PrecisionModeError
from npu_sim_bridge.passes.precision.lists import EffectiveLists, MixlistWarning, build_lists, explain, load_mixlist
from npu_sim_bridge.passes.precision.pass_ import PrecisionPass

__all__ = [
    "EffectiveLists",
    "MixlistWarning",
    "PrecisionModeError",
    "PrecisionPass",
    "build_lists",
    "explain",
    "load_mixlist",
]
