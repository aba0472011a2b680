"""Sessions whose config names NpuOptimizer: every graph of theirs reaches the rewrite, or none is run.

Grappler skips graphs with fewer nodes than `rewrite_options.min_graph_nodes` (4 by default), so a
small fetch such as `sess.run(lr_assign_op)` would run unrewritten. The real adapter partitions
every graph it is handed (its partition pass runs after Grappler, whatever the size), so a Session
created with a config that names NpuOptimizer and leaves min_graph_nodes at its default gets a copy
of that config with min_graph_nodes = -1: no graph is too small to be rewritten. The user's proto
is not changed. A minimum the user set on purpose is kept; the check after Grappler (in the shim)
then fails the runs of smaller graphs with a message.

The copy also turns Grappler's CPU layout conversion (`rewrite_options.cpu_layout_conversion`) off:
it would transpose NCHW ops before NpuOptimizer sees them, and the simulated NPU's decisions would be
about a graph the NPU never gets. The pipeline lays those ops out for the CPU itself, after its
decisions and inside the GeOp bodies too, which Grappler's conversion does not reach (passes/layout).

With NPU_SIM_SKIP_NATIVE=1 NpuOptimizer is not registered at all, so such a Session is refused
with NativeBuildError instead: TensorFlow ignores a custom optimizer name nobody registered and
would run every graph unrewritten.

The guard is the last hook of session_hooks.py, which owns the one wrapper of BaseSession.__init__.
"""

from __future__ import annotations

from npu_sim_bridge import session_hooks
from npu_sim_bridge.errors import ConfigError, NativeBuildError

_NAME = "NpuOptimizer"
_NO_CONVERSION_ON_CPU = 0  # RewriterConfig.CpuLayout: Grappler's default (no conversion on the CPU)

# Grappler's deadline for all its optimizers: below this, NpuOptimizer may not run before it passes.
_SHORTEST_META_TIMEOUT_MS = 60_000

_refuse = False  # True when the shim is skipped: Sessions naming NpuOptimizer are refused


def install(skip_native: bool = False) -> None:
    """Guard the Sessions of this process; `skip_native` when the shim is not loaded (refuse them)."""
    global _refuse
    _refuse = _refuse or skip_native
    session_hooks.add("guard", session_hooks.GUARD, _guard)


def _guard(session, target, config):
    check_config(config)
    return target, every_graph_config(config)


def names_npu_optimizer(config) -> bool:
    """True if `config` (a ConfigProto or None) has a custom optimizer named NpuOptimizer."""
    if config is None:
        return False
    return any(custom.name == _NAME for custom in config.graph_options.rewrite_options.custom_optimizers)


def check_config(config) -> None:
    """NativeBuildError if the shim is skipped and `config` (a ConfigProto or None) names NpuOptimizer;
    ConfigError for settings under which Grappler would not hand NpuOptimizer the graph (each named,
    rather than the after-the-fact check's general "no NpuOptimizer rewrote the graph")."""
    if names_npu_optimizer(config):
        _check_grappler_settings(config)
    if _refuse and names_npu_optimizer(config):
        raise NativeBuildError(
            "NPU_SIM_SKIP_NATIVE is set, so NpuOptimizer is not registered in this process and this Session, "
            "whose config names it, would run the graph unrewritten; unset NPU_SIM_SKIP_NATIVE (the shim needs a "
            "C++ compiler and TensorFlow's headers), or remove NpuOptimizer from the config")


def _check_grappler_settings(config) -> None:
    if config.graph_options.place_pruned_graph:
        raise ConfigError(
            "config.graph_options.place_pruned_graph is True: TensorFlow then places each pruned graph without "
            "Grappler, so NpuOptimizer would never see it; leave place_pruned_graph False with NpuOptimizer")
    timeout = config.graph_options.rewrite_options.meta_optimizer_timeout_ms
    if 0 < timeout < _SHORTEST_META_TIMEOUT_MS:
        raise ConfigError(
            f"rewrite_options.meta_optimizer_timeout_ms is {timeout}: Grappler stops its optimizers after that "
            "many milliseconds, before NpuOptimizer may have run, and the graph would run unrewritten; leave it "
            f"unset (0) or give it at least {_SHORTEST_META_TIMEOUT_MS}")


def every_graph_config(config):
    """`config`, or a copy of it whose min_graph_nodes lets Grappler hand NpuOptimizer graphs of any size,
    and whose Grappler hands them over in the layouts the script built (see the module docstring)."""
    if not names_npu_optimizer(config):
        return config
    rewrite = config.graph_options.rewrite_options
    too_small = rewrite.min_graph_nodes == 0
    converted = rewrite.cpu_layout_conversion != _NO_CONVERSION_ON_CPU
    if not (too_small or converted):
        return config
    copy = type(config)()
    copy.CopyFrom(config)
    if too_small:
        copy.graph_options.rewrite_options.min_graph_nodes = -1
    if converted:
        copy.graph_options.rewrite_options.cpu_layout_conversion = _NO_CONVERSION_ON_CPU
    return copy
