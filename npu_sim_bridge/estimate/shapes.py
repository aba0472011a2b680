"""Static shapes for the estimate: the batch given to placeholders, then TensorFlow's shape inference on import."""

from __future__ import annotations

from npu_sim_bridge.errors import ConfigError

_FEEDS = ("Placeholder", "PlaceholderWithDefault")


def with_batch(graph_def, batch: int | None):
    """A copy of the GraphDef whose placeholders with an unknown first dimension get `batch` there.

    Returns (graph_def, count of placeholders changed). Without a batch the GraphDef comes back as it is.
    """
    if batch is None:
        return graph_def, 0
    if batch < 1:
        raise ConfigError(f"--batch {batch} must be at least 1 (the samples of one training step)")
    out = type(graph_def)()
    out.CopyFrom(graph_def)
    changed = 0
    for node in out.node:
        if node.op not in _FEEDS or "shape" not in node.attr:
            continue
        shape = node.attr["shape"].shape
        if shape.unknown_rank or not shape.dim or shape.dim[0].size >= 0:
            continue
        shape.dim[0].size = batch
        changed += 1
        if "_output_shapes" in node.attr:
            del node.attr["_output_shapes"]
    return out, changed


def infer_shapes(graph_def, only=None) -> dict[str, list]:
    """{node name: [shape per output]} by importing the GraphDef into a fresh tf.Graph (a shape is a list
    of ints, -1 for an unknown dimension, or None for an unknown rank). Nodes TensorFlow cannot import keep
    the `_output_shapes` the GraphDef recorded. `only`: the names of the nodes wanted, closed under their
    inputs (the nodes a step runs): the others (saver, initializers) are not imported, which halves the time
    on a large training graph."""
    import tensorflow as tf

    recorded = {node.name: _recorded(node) for node in graph_def.node if "_output_shapes" in node.attr}
    clean = type(graph_def)()
    if only is None:
        clean.CopyFrom(graph_def)
    else:
        wanted = set(only)
        clean.library.CopyFrom(graph_def.library)
        clean.versions.CopyFrom(graph_def.versions)
        clean.node.extend(node for node in graph_def.node if node.name in wanted)
    for node in clean.node:
        if "_output_shapes" in node.attr:
            del node.attr["_output_shapes"]  # stale once the batch changed; import would check them
    shapes: dict[str, list] = dict(recorded)
    graph = tf.Graph()
    try:
        with graph.as_default():
            tf.compat.v1.import_graph_def(clean, name="")
    except (ValueError, TypeError, tf.errors.OpError):
        return shapes  # an op this TensorFlow lacks: the recorded shapes are all there is
    for op in graph.get_operations():
        shapes[op.name] = [_as_list(t.shape) for t in op.outputs]
    return shapes


def _recorded(node) -> list:
    return [None if s.unknown_rank else [d.size for d in s.dim] for s in node.attr["_output_shapes"].list.shape]


def _as_list(shape):
    if shape.rank is None:
        return None
    return [-1 if d is None else int(d) for d in shape.as_list()]


def known(shape) -> bool:
    """Whether a shape is fully static."""
    return shape is not None and all(d >= 0 for d in shape)


def elements(shape, batch: int | None = None) -> int:
    """Elements of a shape; an unknown first dimension counts `batch` (1 without), other unknowns count 1."""
    if shape is None:
        return 1
    count = 1
    for i, d in enumerate(shape):
        if d < 0:
            d = batch if (i == 0 and batch) else 1
        count *= d
    return count
