"""The training step a TF1 script runs: its graph, fetches, fed shapes and NpuOptimizer options, caught as it is issued.

`capture_training_step(path, argv)` runs the script as `npu-sim run` does (the npu_bridge alias and TensorFlow
1.15's API) with Session.run and Keras's callables watched. The first run whose fetches reach a variable update
of an optimizer (an Apply* op) or a gradient is the training step: its graph, fetch names, the shapes of what it
feeds and the Session's NpuOptimizer parameter_map are kept, and the script is stopped there, before the step
runs (the estimate needs the graph and the shapes, not the values); what the script prints goes to stderr. The
stop is an exception no `except Exception` in the script catches; its `with` blocks and `finally` clauses run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys

from npu_sim_bridge.errors import NpuSimError
from npu_sim_bridge.graph.names import node_name

_UPDATE_PREFIXES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply")


class ScriptError(NpuSimError):
    """The script gave no training step to estimate (it ended, exited or failed first)."""


class _TrainingStepCaught(BaseException):
    """Stops the script at its first training step (BaseException: the script's `except Exception` lets it by)."""


@dataclasses.dataclass
class Captured:
    """A script's first training step: the graph, what it fetches, the fed shapes and the Session's options."""

    graph_def: object
    fetches: list
    feed_shapes: dict        # placeholder node name -> shape fed (a list of ints)
    options: dict            # the Session's NpuOptimizer parameter_map as plain values ({} without one)
    npu_optimizer: bool      # whether the Session named NpuOptimizer


def is_training(graph_def, fetches) -> bool:
    """Whether running `fetches` updates variables through an optimizer (an Apply* op) or computes gradients."""
    from npu_sim_bridge.estimate.walk import step_nodes

    names = [node_name(f) for f in fetches]
    if not names:
        return False
    for node in step_nodes(graph_def, names):
        if node.op.startswith(_UPDATE_PREFIXES) or node.name.startswith("gradients/") or "/gradients/" in node.name:
            return True
    return False


def with_fed_shapes(graph_def, feed_shapes: dict):
    """A copy of the GraphDef whose fed placeholders have the shapes the run fed."""
    out = type(graph_def)()
    out.CopyFrom(graph_def)
    for node in out.node:
        shape = feed_shapes.get(node.name)
        if shape is None or node.op not in ("Placeholder", "PlaceholderWithDefault") or not shape:
            continue
        proto = node.attr["shape"].shape
        proto.unknown_rank = False
        del proto.dim[:]
        for size in shape:
            proto.dim.add().size = int(size)
        if "_output_shapes" in node.attr:
            del node.attr["_output_shapes"]
    return out


def parameter_map_values(config) -> tuple[dict, bool]:
    """The NpuOptimizer parameter_map of a ConfigProto as {key: value}, and whether it names NpuOptimizer."""
    if config is None:
        return {}, False
    found = [c for c in config.graph_options.rewrite_options.custom_optimizers if c.name == "NpuOptimizer"]
    if not found:
        return {}, False
    values = {}
    for key, attr in found[0].parameter_map.items():
        kind = attr.WhichOneof("value")
        if kind == "s":
            values[key] = attr.s.decode("utf-8", "replace")
        elif kind in ("i", "b", "f"):
            values[key] = getattr(attr, kind)
        elif kind == "list":
            values[key] = [s.decode("utf-8", "replace") for s in attr.list.s] or list(attr.list.i)
    return values, True


class _Watcher:
    """Patches Session.run and Session._make_callable_from_options while a script runs."""

    def __init__(self):
        self.captured: Captured | None = None

    def check(self, session, fetch_names, shapes):
        graph_def = session.graph.as_graph_def()
        if not is_training(graph_def, fetch_names):
            return
        options, named = parameter_map_values(getattr(session, "_config", None))
        self.captured = Captured(graph_def, list(fetch_names), shapes, options, named)
        raise _TrainingStepCaught()

    @contextlib.contextmanager
    def watching(self):
        from tensorflow.python.client import session as tf_session

        base = tf_session.BaseSession
        original_run, original_callable = base.run, base._make_callable_from_options
        watcher = self

        def run(session, fetches, feed_dict=None, options=None, run_metadata=None):
            if watcher.captured is None:
                names = _fetch_names(session.graph, fetches)
                watcher.check(session, names, _feed_shapes(session.graph, feed_dict))
            return original_run(session, fetches, feed_dict, options, run_metadata)

        def make_callable(session, callable_options):
            call = original_callable(session, callable_options)
            names = list(callable_options.fetch) + list(callable_options.target)
            feeds = [node_name(f) for f in callable_options.feed]

            def watched(*args, **kwargs):
                if watcher.captured is None:
                    shapes = {name: list(_shape(value)) for name, value in zip(feeds, args)}
                    watcher.check(session, names, shapes)
                return call(*args, **kwargs)

            return watched

        base.run, base._make_callable_from_options = run, make_callable
        try:
            yield
        finally:
            base.run, base._make_callable_from_options = original_run, original_callable


def _fetch_names(graph, fetches) -> list:
    """Node names of a Session.run fetch structure (tensors, ops, names, nested lists and dicts)."""
    import tensorflow as tf

    out = []

    def visit(item):
        if isinstance(item, (list, tuple)):
            for part in item:
                visit(part)
        elif isinstance(item, dict):
            for part in item.values():
                visit(part)
        elif isinstance(item, (tf.Tensor, tf.Operation)):
            out.append(item.name)
        elif isinstance(item, (str, bytes)):
            out.append(item.decode() if isinstance(item, bytes) else item)
        elif hasattr(item, "op") and hasattr(item.op, "name"):  # a variable or sparse tensor
            out.append(item.op.name)

    visit(fetches)
    return out


def _feed_shapes(graph, feed_dict) -> dict:
    shapes = {}
    for key, value in (feed_dict or {}).items():
        name = getattr(key, "name", key)
        if isinstance(name, str):
            shapes[node_name(name)] = list(_shape(value))
    return shapes


def _shape(value) -> tuple:
    import numpy as np

    return tuple(getattr(value, "shape", None) or np.shape(value))


def capture_training_step(path, argv=()) -> Captured:
    """Run the script until it issues its first training step and return that step (see the module docstring).

    Raises ScriptError when the script ends, exits or fails before a training step; the script's own
    error is chained.
    """
    from npu_sim_bridge.cli.run import run_script
    from npu_sim_bridge.runtime.alias import install_alias
    from npu_sim_bridge.runtime.child_alias import for_children, restore

    watcher = _Watcher()
    install_alias()
    saved = for_children(False)
    try:
        # What the script prints goes to stderr: stdout is the estimate's (one JSON object with --json).
        with watcher.watching(), contextlib.redirect_stdout(sys.stderr):
            run_script(path, list(argv), tf1=True)
    except _TrainingStepCaught:
        pass
    except SystemExit as stop:
        if watcher.captured is None:
            raise ScriptError(f"script {path} exited (status {stop.code}) before its first training step; "
                              "give the arguments that make it train") from None
    except Exception as error:  # noqa: BLE001 - the script's own error, named with its cause
        if watcher.captured is None:
            raise ScriptError(f"script {path} failed before its first training step: "
                              f"{type(error).__name__}: {error}") from error
    finally:
        restore(saved)
    if watcher.captured is None:
        raise ScriptError(f"script {path} ran to its end without a training step (a Session.run whose fetches "
                          "update variables through an optimizer); estimate the graph file instead")
    return watcher.captured
