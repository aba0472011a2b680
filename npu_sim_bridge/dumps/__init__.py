"""Reading dumps and comparing them: the msaccucmp step of the precision-debugging workflow.

reader.py   find the graph dumps under a folder, their steps, tensors and overflow records
compare.py  per-tensor cosine similarity and errors, the first divergent op in graph order
explain.py  why tensors have no file, steps one dump lacks, unseeded random ops (not first divergent ops)
render.py   the comparison as a table for people, CSV or JSON for programs; a progress bar
msaccucmp.py  the comparison as msaccucmp's result_*.csv files (its columns and metrics)
"""

from npu_sim_bridge.dumps.compare import CompareResult, DumpMismatchError, compare_dumps
from npu_sim_bridge.dumps.reader import GraphDump, find_dumps, read_overflow

__all__ = ["CompareResult", "DumpMismatchError", "GraphDump", "compare_dumps", "find_dumps", "read_overflow"]
