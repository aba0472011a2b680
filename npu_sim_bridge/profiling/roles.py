"""What a profiled Session.run is for (train, eval, init, checkpoint), named from the ops its fetches run.

A run's role is read from the op types its fetches reach (data and control inputs, transitively):
  train       an optimizer's Apply*/ResourceApply* op, or a variable assignment fed by gradients
  checkpoint  a SaveV2 / RestoreV2 (a Saver's save or restore)
  init        a plain variable assignment (Assign, AssignVariableOp), an iterator or table initializer: the
              initializers a script or a MonitoredSession runs before the first step
  other       an is-initialized check (VarIsInitializedOp), or only reads and plumbing (Const, ReadVariableOp,
              Switch, NoOp, ...): a MonitoredSession's readiness check, a hook's guarded read of the global
              step, an empty local init
  eval        none of these: the run computes from the variables and updates none of the model's weights
              (an evaluation, an inference, a metric update)
  unknown     the fetches could not be resolved to ops of the graph (the reason says why)
The result is cached per graph and fetch set, so a training loop walks its graph once.
"""

from __future__ import annotations

import dataclasses

TRAIN, EVAL, INIT, CHECKPOINT, OTHER, UNKNOWN = "train", "eval", "init", "checkpoint", "other", "unknown"
_INIT = frozenset({"Assign", "AssignVariableOp", "MakeIterator", "InitializeTableV2", "InitializeTable",
                   "InitializeTableFromTextFileV2", "InitializeTableFromTextFile"})
_CHECKS = frozenset({"VarIsInitializedOp", "IsVariableInitialized"})
_BOOKKEEPING = frozenset({
    "Const", "NoOp", "Identity", "IdentityN", "VarHandleOp", "VariableV2", "Variable", "ReadVariableOp",
    "VarIsInitializedOp", "IsVariableInitialized", "Switch", "Merge", "Pack", "ConcatV2", "LogicalNot", "Where",
    "Reshape", "GatherV2", "Gather", "Shape", "StridedSlice", "Squeeze", "Cast", "Placeholder",
    "PlaceholderWithDefault", "StatelessIf", "If", "Equal", "Fill", "ZerosLike", "ExpandDims"})
_CHECKPOINT = frozenset({"SaveV2", "RestoreV2", "Save", "Restore", "SaveSlices", "RestoreSlice", "MergeV2Checkpoints"})
_UPDATE = frozenset({"AssignSub", "AssignAdd", "AssignSubVariableOp", "AssignAddVariableOp", "Assign",
                     "AssignVariableOp", "ScatterSub", "ResourceScatterSub"})


@dataclasses.dataclass(frozen=True)
class RunRole:
    """A run's role, the fetch names it was named from, and why."""

    role: str
    fetches: tuple[str, ...]
    reason: str

    def to_dict(self) -> dict:
        return {"role": self.role, "fetches": list(self.fetches), "reason": self.reason}


def _leaves(fetches):
    """The fetches of a Session.run's nest: dict values (a MonitoredSession keys them by hook), list and tuple
    items (namedtuples too), else the item itself."""
    if isinstance(fetches, dict):
        for value in fetches.values():
            yield from _leaves(value)
    elif isinstance(fetches, (list, tuple)):
        for value in fetches:
            yield from _leaves(value)
    elif fetches is not None:
        yield fetches


def fetch_ops(graph, fetches) -> list:
    """The operations a Session.run's `fetches` (any nest of tensors, operations, names) name in `graph`.
    Raises ValueError/TypeError/KeyError naming a fetch the graph does not hold."""
    ops = []
    for item in _leaves(fetches):
        if hasattr(item, "indices") and hasattr(item, "values"):  # a SparseTensor or IndexedSlices
            ops.extend(t.op for t in (item.indices, item.values))
            continue
        element = graph.as_graph_element(item, allow_tensor=True, allow_operation=True)
        ops.append(element if hasattr(element, "node_def") else element.op)
    return ops


def classify(ops) -> str:
    """The role of a run that executes `ops` and everything they depend on."""
    seen: set = set()
    stack = list(ops)
    types: set[str] = set()
    gradients = False
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        types.add(op.type)
        gradients = gradients or op.name.startswith("gradients") or "/gradients/" in op.name
        stack.extend(tensor.op for tensor in op.inputs)
        stack.extend(op.control_inputs)
    if any(t.startswith(("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply")) for t in types):
        return TRAIN
    if gradients and types & _UPDATE:
        return TRAIN
    if types & _CHECKPOINT:
        return CHECKPOINT
    if types & _INIT:
        return INIT
    if types & _CHECKS or types <= _BOOKKEEPING:
        return OTHER
    return EVAL


class RoleCache:
    """role_of(graph, fetches) for one Session: each distinct fetch set of a graph is walked once."""

    def __init__(self):
        self._known: dict = {}

    def role_of(self, graph, fetches) -> RunRole:
        try:
            ops = fetch_ops(graph, fetches)
        except (TypeError, ValueError, KeyError) as err:
            return RunRole(UNKNOWN, (), f"the fetches could not be resolved in the graph ({err})")
        names = tuple(sorted({op.name for op in ops}))
        key = (id(graph), names)
        if key not in self._known:
            role = classify(ops)
            self._known[key] = RunRole(role, names, _REASONS[role])
        return self._known[key]


_REASONS = {
    TRAIN: "its fetches run an optimizer update (Apply* op or a gradient-fed assignment)",
    CHECKPOINT: "its fetches run a checkpoint save or restore",
    INIT: "its fetches assign variables or initialize an iterator or table (initializers)",
    OTHER: "its fetches only read variables, check that they are initialized or group nothing (hooks' reads, "
           "readiness checks)",
    EVAL: "its fetches update none of the model's weights (evaluation, inference or metrics)",
}
