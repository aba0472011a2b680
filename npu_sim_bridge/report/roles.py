"""What a rewritten graph is for (train, eval, predict, init, checkpoint), named from what its fetches run.

A Session hands NpuOptimizer one graph per distinct set of fetches: the initializer run, the training
step, the evaluation. The report names each graph by role (`001_init`, `002_train`) so the user need not
guess which is which. The role is read from the nodes the fetches reach (data and control inputs):
  train       an optimizer update (Apply*/ResourceApply* ops) runs
  checkpoint  a Saver's SaveV2/RestoreV2 runs and no input is read
  init        variables are assigned and no input is read (initializers, a restore without a Saver op)
  eval        an input is read and a loss or a metric update is computed, no weight is updated
  predict     an input is read and nothing else of the above
  compute     none of the above (reads no input, assigns nothing)
  function    a function body Grappler hands over on its own
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from itertools import compress

from npu_sim_bridge.graph.names import node_name

__all__ = ["ROLES", "Role", "graph_role", "reached"]

ROLES = ("train", "eval", "predict", "init", "checkpoint", "compute", "function")

_UPDATE_PREFIXES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply")
_ASSIGN_OPS = frozenset({"Assign", "AssignVariableOp", "AssignAdd", "AssignSub", "AssignAddVariableOp",
                         "AssignSubVariableOp", "InitializeTableV2", "InitializeTableFromTextFileV2"})
_METRIC_UPDATE_OPS = frozenset({"AssignAdd", "AssignAddVariableOp"})
_INPUT_OPS = frozenset({"Placeholder", "IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional",
                        "GetNext", "DatasetToSingleElement"})
_LOSS_OPS = frozenset({"SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits"})
_CHECKPOINT_OPS = frozenset({"SaveV2", "RestoreV2", "MergeV2Checkpoints", "Save", "Restore", "RestoreSlice"})


@dataclasses.dataclass(frozen=True)
class Role:
    name: str   # one of ROLES
    why: str    # what in the fetches named it, e.g. "fetches train_op: 10 optimizer updates (ApplyMomentum)"


def graph_role(names, ops, inputs, fetch, is_function: bool = False, reached_mask=None) -> Role:
    """The role of a graph given as node columns (graph.table.NodeTable's names, ops, inputs) and the fetch
    names (tensor or node names; none: every node counts). `reached_mask`: the shim's NodeTable.reached,
    when the columns came from it (the same nodes, found in C++ over its producer column)."""
    if is_function:
        return Role("function", "a function body handed over on its own")
    position = {name: index for index, name in enumerate(names)}
    fetched = [node_name(text) for text in fetch if node_name(text) in position]
    if not fetched:
        counts = Counter(ops)  # every node runs
    elif reached_mask is not None:
        counts = Counter(compress(ops, reached_mask([position[name] for name in fetched])))
    else:
        counts = Counter(ops[index] for index in _reach([position[name] for name in fetched], inputs, position))
    shown = ", ".join(fetched[:3]) + (f" and {len(fetched) - 3} more" if len(fetched) > 3 else "")
    what = f"fetches {shown}" if fetched else "no fetches given (the whole graph)"
    updates = _count(counts, lambda op: op.startswith(_UPDATE_PREFIXES))
    reads_input = _count(counts, _INPUT_OPS.__contains__)
    if updates:
        return Role("train", f"{what}: {updates} optimizer updates ({_top(counts, lambda op: op.startswith(_UPDATE_PREFIXES))})")
    if not reads_input and _count(counts, _CHECKPOINT_OPS.__contains__):
        return Role("checkpoint", f"{what}: saves or restores a checkpoint ({_top(counts, _CHECKPOINT_OPS.__contains__)})")
    assigns = _count(counts, _ASSIGN_OPS.__contains__)
    if assigns and not reads_input:
        return Role("init", f"{what}: assigns {assigns} variables and reads no input")
    if reads_input:
        scored = _count(counts, lambda op: op in _LOSS_OPS or op in _METRIC_UPDATE_OPS)
        if scored:
            return Role("eval", f"{what}: reads input, computes a loss or metrics "
                                f"({_top(counts, lambda op: op in _LOSS_OPS or op in _METRIC_UPDATE_OPS)}), "
                                "updates no weight")
        return Role("predict", f"{what}: reads input, computes no loss and updates nothing")
    return Role("compute", f"{what}: reads no input and assigns nothing")


def reached(names, inputs, fetch) -> set[int]:
    """The positions of the nodes the fetch names reach through data and control inputs (a Session runs
    these and no other node); `names`, `inputs`: node columns as graph.table gives them."""
    position = {name: index for index, name in enumerate(names)}
    return _reach([position[node_name(text)] for text in fetch if node_name(text) in position], inputs, position)


def _reach(starts, inputs, position) -> set[int]:
    """The nodes `starts` reach through data and control inputs (themselves included)."""
    seen = set(starts)
    stack = list(seen)
    # Each distinct input text parsed once (ResNet-50's training graph: 91,797 inputs, most of them
    # control inputs, 9,032 distinct texts); a node's port 0 is spelled as its name.
    index_of = dict(position)
    while stack:
        held = inputs[stack.pop()]
        for text in (held,) if isinstance(held, str) else held:
            found = index_of.get(text, -1)
            if found == -1:
                found = index_of[text] = position.get(node_name(text))
            if found is not None and found not in seen:
                seen.add(found)
                stack.append(found)
    return seen


def _count(counts: Counter, wanted) -> int:
    return sum(number for op, number in counts.items() if wanted(op))


def _top(counts: Counter, wanted) -> str:
    found = sorted(((number, op) for op, number in counts.items() if wanted(op)), reverse=True)
    return ", ".join(f"{op} x{number}" for number, op in found[:3])
