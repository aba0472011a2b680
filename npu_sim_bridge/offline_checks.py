"""What the offline `rewrite()` refuses as a Session would: misnamed or conflicting NpuOptimizer entries,
fetches of outputs a node does not have, and calls of functions the graph's library lacks."""

from __future__ import annotations

from npu_sim_bridge.errors import ConfigError
from npu_sim_bridge.graph.names import parse_input

NPU_OPTIMIZER = "NpuOptimizer"


def check_options_source(options) -> None:
    """A ConfigProto / RewriterConfig / RunConfig given to rewrite(): the same refusals as a Session's."""
    rewriter = _rewriter_config(options)
    if rewriter is None:
        return
    entries = list(rewriter.custom_optimizers)
    for custom in entries:
        if custom.name != NPU_OPTIMIZER and "npu" in custom.name.lower():
            raise ConfigError(
                f"the custom optimizer is named {custom.name!r}, which TensorFlow would silently ignore and run "
                f"the graph unrewritten; the name is case-sensitive: set custom_op.name = \"{NPU_OPTIMIZER}\"")
    maps = {_parameter_map_bytes(custom) for custom in entries if custom.name == NPU_OPTIMIZER}
    if len(maps) > 1:
        raise ConfigError(
            "the ConfigProto names NpuOptimizer more than once in graph_options.rewrite_options.custom_optimizers, "
            "with different options; a Session refuses it: keep one NpuOptimizer entry with all options")


def _rewriter_config(options):
    if options is None or isinstance(options, dict):
        return None
    if hasattr(options, "custom_optimizers"):
        return options
    if hasattr(options, "graph_options"):
        return options.graph_options.rewrite_options
    session_config = getattr(options, "session_config", None)
    return _rewriter_config(session_config) if session_config is not None else None


def _parameter_map_bytes(custom) -> bytes:
    return b"\0".join(key.encode("utf-8") + b"=" + value.SerializeToString(deterministic=True)
                      for key, value in sorted(custom.parameter_map.items()))


def check_graph(graph_def, fetches) -> None:
    """Each fetched port exists on its node, and each function a node calls is in the library."""
    from tensorflow.python.framework import op_def_registry

    from npu_sim_bridge.passes.precision import ports

    nodes = {node.name: node for node in graph_def.node}
    library = {function.signature.name: function for function in graph_def.library.function}
    for fetch in fetches:
        ref = parse_input(fetch)
        node = nodes.get(ref.node)
        if node is None or ":" not in fetch:
            continue
        if op_def_registry.get(node.op) is None and node.op not in library:
            continue
        count = len(ports.signature(node, library).outputs)
        if ref.port >= count:
            raise ConfigError(f"fetch {fetch!r}: node {ref.node} ({node.op}) has {count} output"
                              f"{'' if count == 1 else 's'}, so there is no output {ref.port}; fetch "
                              f"{ref.node}:0{f' .. {ref.node}:{count - 1}' if count > 1 else ''}")
    for owner, graph_nodes in [("the graph", graph_def.node)] + [
            (f"function {name}", function.node_def) for name, function in library.items()]:
        for node in graph_nodes:
            for attr_name, value in node.attr.items():
                called = [value.func.name] if value.HasField("func") else [f.name for f in value.list.func]
                for name in called:
                    if name and name not in library and op_def_registry.get(name) is None:
                        raise ConfigError(
                            f"node {node.name} ({node.op}) of {owner} calls function {name!r} (attr {attr_name}), "
                            "which the graph's function library does not hold; export the graph with its "
                            "functions (tf.Graph.as_graph_def() includes them)")
