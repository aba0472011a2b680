"""The model sweep: train one graph under NpuOptimizer configured five ways and measure what sinks.

For each model the same tf.Graph runs in five Sessions that start from the same variable values
and see the same batches:

    plain      NpuOptimizer with sim_passes=none (the reference: float32, unrewritten)
    fp32_in16  as plain, with every float batch rounded to float16 before it is fed: how far float32
               training itself moves from the smallest perturbation any float16 run makes (the
               "float32 floor" of the loss gap; the rounding changes each value by at most 2**-11)
    pp_full    placement + partition only, full sink (the default mode)
    pp_mix     placement + partition only, mix_compile_mode on
    mixed      every pass, allow_mix_precision, full sink

It reports heavy ops (cube ops and batch norms, forward and backward) on the device out of the
total, GeOps in full sink and mix mode, the host crossings (groups of host ops between device
segments), the float16 share of white-list ops, losses after the training steps, whether the
placement + partition losses are bit-identical to plain, and the step-time ratio mixed / plain.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf.rewriter_config_pb2 import RewriterConfig

from npu_sim_bridge.graph.op_categories import is_heavy
from npu_sim_bridge.report import history
from npu_sim_bridge.testing.models import ModelGraph

_v1 = tf.compat.v1
RUNS = ("plain", "fp32_in16", "pp_full", "pp_mix", "mixed")
# Host ops that every graph has and that sit outside the segments by design (not crossings).
_NOT_CROSSINGS = frozenset({"host.graph_input", "host.fed", "host.variable", "host.trivial_segment"})


@dataclasses.dataclass
class SweepRow:
    model: str
    nodes: int = 0
    heavy_device: int = 0
    heavy_total: int = 0
    geops_full: int = 0
    geops_mix: int = 0
    geops_mixed_precision: int = 0   # GeOps of the allow_mix_precision run (Casts must not split)
    host_crossings: int = 0
    white_fp16: int = 0
    white_total: int = 0
    losses: dict = dataclasses.field(default_factory=dict)      # run -> loss after the steps
    histories: dict = dataclasses.field(default_factory=dict)   # run -> loss before each step (and after the last)
    step_seconds: dict = dataclasses.field(default_factory=dict)  # run -> mean step time
    heavy_on_host: list = dataclasses.field(default_factory=list)  # (node, op, reason)
    error: str = ""

    @property
    def heavy_share(self) -> float:
        return self.heavy_device / self.heavy_total if self.heavy_total else 1.0

    @property
    def fp16_share(self) -> float:
        return self.white_fp16 / self.white_total if self.white_total else 0.0

    @property
    def loss_gap(self) -> float:
        """|mixed - plain| / |plain| after the steps."""
        plain, mixed = self.losses.get("plain"), self.losses.get("mixed")
        if plain is None or mixed is None:
            return float("nan")
        return abs(mixed - plain) / max(abs(plain), 1e-12)

    @property
    def fp32_floor(self) -> float:
        """|fp32_in16 - plain| / |plain| after the steps: float32's own response to float16-sized input noise."""
        plain, rounded = self.losses.get("plain"), self.losses.get("fp32_in16")
        if plain is None or rounded is None:
            return float("nan")
        return abs(rounded - plain) / max(abs(plain), 1e-12)

    @property
    def fp32_floor_max(self) -> float:
        """The largest float32 floor over the steps (the step-3 floor is one draw of a spread)."""
        plain, rounded = self.histories.get("plain"), self.histories.get("fp32_in16")
        if not plain or not rounded:
            return float("nan")
        return max(abs(r - p) / max(abs(p), 1e-12) for p, r in zip(plain, rounded))

    @property
    def bit_identical(self) -> bool:
        """The placement + partition runs measured (at least one) gave the plain losses bit for bit."""
        plain = self.losses.get("plain")
        runs = [run for run in ("pp_full", "pp_mix") if run in self.losses]
        return plain is not None and bool(runs) and all(self.losses[run] == plain for run in runs)

    @property
    def step_ratio(self) -> float:
        plain, mixed = self.step_seconds.get("plain"), self.step_seconds.get("mixed")
        return mixed / plain if plain and mixed else float("nan")


def session_config(run: str, remapping: bool = False) -> _v1.ConfigProto:
    """The ConfigProto of one sweep run; `remapping` leaves Grappler's remapper on (a hand-built config)."""
    config = _v1.ConfigProto(allow_soft_placement=True)
    rewrite = config.graph_options.rewrite_options
    custom = rewrite.custom_optimizers.add()
    custom.name = "NpuOptimizer"
    passes = {"plain": "none", "fp32_in16": "none",
              "pp_full": "placement,partition", "pp_mix": "placement,partition"}.get(run, "all")
    custom.parameter_map["sim_passes"].s = passes.encode()
    custom.parameter_map["mix_compile_mode"].b = run == "pp_mix"
    custom.parameter_map["precision_mode"].s = (b"allow_mix_precision" if run == "mixed" else b"force_fp32")
    if not remapping:
        rewrite.remapping = RewriterConfig.OFF
    rewrite.memory_optimization = RewriterConfig.OFF
    return config


def measure(name: str, build: Callable[[], ModelGraph], steps: int = 3, remapping: bool = False,
            runs=RUNS) -> SweepRow:
    """Build the model once and train it `steps` steps in each run; the row of figures."""
    row = SweepRow(model=name)
    model = build()
    row.nodes = len(model.graph.as_graph_def().node)
    with model.graph.as_default():
        variables = _v1.global_variables()
        holders = [_v1.placeholder(v.dtype.base_dtype, v.shape) for v in variables]
        load = tf.group(*[_v1.assign(v, h) for v, h in zip(variables, holders)])
    feeds = [model.feed(np.random.default_rng(step)) for step in range(steps + 1)]
    rounded = [rounded_to_float16(feed) for feed in feeds]
    start_values = None
    for run in runs:
        history.clear_reports()
        with _v1.Session(graph=model.graph, config=session_config(run, remapping)) as sess:
            if start_values is None:
                sess.run(model.init_op)
                start_values = sess.run(variables)
            else:
                sess.run(load, dict(zip(holders, start_values)))
            # The loss after `steps` updates is read in the training step that follows them: a
            # separate loss-only run would draw its own dropout masks from kernels that TensorFlow
            # shares between a Session's graphs by node name, and so differ between the runs.
            times, trace = [], []
            for step in range(steps + 1):
                began = time.perf_counter()
                feed = rounded[step] if run == "fp32_in16" else feeds[step]
                loss, _ = sess.run([model.loss, model.train_op], feed)
                times.append(time.perf_counter() - began)
                trace.append(float(loss))
            row.losses[run] = trace[-1]
            row.histories[run] = trace
            row.step_seconds[run] = float(np.mean(times[1:]))
        train_report = _train_report(model)
        if train_report is not None:
            _read_report(row, run, train_report, model)
    return row


def rounded_to_float16(feed: dict) -> dict:
    """The feed with every float32 array rounded to the nearest float16 (and back to float32)."""
    return {key: value.astype(np.float16).astype(np.float32)
            if isinstance(value, np.ndarray) and value.dtype == np.float32 else value
            for key, value in feed.items()}


def _train_report(model: ModelGraph):
    """The report of the training step's graph (the largest main graph rewritten in this run)."""
    reports = [r for r in history.recent_reports() if r.item_id == "tf_graph" and not r.rerun]
    return max(reports, key=lambda r: r.nodes_before) if reports else None


def _read_report(row: SweepRow, run: str, report, model: ModelGraph) -> None:
    geops = len(report.summary["geops"])
    if run == "pp_full":
        row.geops_full = geops
        heavy = [d for d in report.nodes.values() if is_heavy(d.op) and not _inserted_by_layout(d)]
        row.heavy_total = len(heavy)
        row.heavy_device = sum(1 for d in heavy if d.placement == "device")
        row.heavy_on_host = [(d.name, d.op, d.reason) for d in heavy if d.placement != "device"]
    elif run == "pp_mix":
        row.geops_mix = geops
        row.host_crossings = host_crossings(report, model.graph.as_graph_def())
    elif run == "mixed":
        row.geops_mixed_precision = geops
        white = [d for d in report.nodes.values()
                 if d.list == "white" and d.placement == "device" and d.dtype_before == "float32"]
        row.white_total = len(white)
        row.white_fp16 = sum(1 for d in white if d.dtype_after == "float16")


def _inserted_by_layout(decision) -> bool:
    """A node the CPU layout added (an op's channels-last form): no node of the NPU's graph."""
    reasons = decision.reasons
    return bool(reasons) and reasons[0].code == "layout.inserted"


def host_crossings(report, graph_def) -> int:
    """Groups of connected host ops that take a device value and give one back to the device."""
    placement = {name: d.placement for name, d in report.nodes.items()}
    host = set()
    for name, decision in report.nodes.items():
        reason = decision.host_reason()
        if decision.placement == "host" and (reason is None or reason.code not in _NOT_CROSSINGS):
            host.add(name)
    producers = {node.name: [text.lstrip("^").split(":")[0] for text in node.input] for node in graph_def.node}
    consumers: dict[str, list[str]] = {}
    for name, inputs in producers.items():
        for producer in inputs:
            consumers.setdefault(producer, []).append(name)
    parent = {name: name for name in host}

    def find(name):
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for name in host:
        for producer in producers.get(name, ()):
            if producer in host:
                parent[find(producer)] = find(name)
    groups: dict[str, list[str]] = {}
    for name in host:
        groups.setdefault(find(name), []).append(name)
    count = 0
    for members in groups.values():
        fed = any(placement.get(p) == "device" for m in members for p in producers.get(m, ()))
        feeds = any(placement.get(c) == "device" for m in members for c in consumers.get(m, ()))
        count += fed and feeds
    return count


def table(rows) -> str:
    """The sweep as a text table."""
    head = (f"{'model':<20} {'nodes':>6} {'heavy dev/total':>16} {'GeOps full':>10} {'GeOps mix':>9} "
            f"{'crossings':>9} {'fp16 white':>10} {'loss fp32':>10} {'loss mixed':>10} {'gap':>7} {'fp32 floor':>10} "
            f"{'floor max':>9} "
            f"{'f32 identical':>13} {'step ratio':>10}")
    lines = [head, "-" * len(head)]
    for row in rows:
        if row.error:
            lines.append(f"{row.model:<20} error: {row.error}")
            continue
        lines.append(
            f"{row.model:<20} {row.nodes:>6} {row.heavy_device:>7}/{row.heavy_total:<5} ({row.heavy_share:>4.0%})"
            f" {row.geops_full:>9} {row.geops_mix:>9} {row.host_crossings:>9} {row.fp16_share:>10.0%}"
            f" {row.losses.get('plain', float('nan')):>10.5f} {row.losses.get('mixed', float('nan')):>10.5f}"
            f" {row.loss_gap:>7.2%} {row.fp32_floor:>10.2%} {row.fp32_floor_max:>9.2%}"
            f" {str(row.bit_identical):>13} {row.step_ratio:>10.2f}")
    return "\n".join(lines)
