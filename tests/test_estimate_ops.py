"""The estimate's cost of each op family against FLOPs and bytes worked out by hand."""

import pytest
from tensorflow.core.framework import attr_value_pb2, node_def_pb2, types_pb2

from npu_sim_bridge.estimate import ops
from npu_sim_bridge.estimate.hardware import hardware
from npu_sim_bridge.estimate.ops import OpCall
from npu_sim_bridge.estimate.timing import op_time


def _attr(**values):
    node = node_def_pb2.NodeDef()
    for key, value in values.items():
        if isinstance(value, bool):
            node.attr[key].b = value
        elif isinstance(value, list):
            node.attr[key].list.i.extend(value)
        else:
            node.attr[key].type = value
    return node.attr


def test_matmul_flops_and_bytes():
    call = OpCall("MatMul", _attr(transpose_a=False), [[64, 128], [128, 32]], [[64, 32]], width=2)
    work = ops.cube_work(call)
    assert work.unit == ops.CUBE
    assert work.flops == 2 * 64 * 128 * 32
    assert work.bytes == (64 * 128 + 128 * 32 + 64 * 32) * 2
    assert work.pieces == (64 // 16) * (32 // 16)


def test_matmul_transposed_reads_k_from_the_other_dimension():
    call = OpCall("MatMul", _attr(transpose_a=True), [[128, 64], [128, 32]], [[64, 32]], width=2)
    assert ops.cube_work(call).flops == 2 * 64 * 32 * 128


def test_batch_matmul():
    call = OpCall("BatchMatMulV2", _attr(adj_x=False), [[8, 4, 16, 32], [8, 4, 32, 16]], [[8, 4, 16, 16]], width=2)
    work = ops.cube_work(call)
    assert work.flops == 2 * 8 * 4 * 16 * 16 * 32
    assert work.pieces == 8 * 4


def test_conv_forward_and_backprops_count_the_same_macs():
    x, w, y = [2, 10, 10, 8], [3, 3, 8, 16], [2, 10, 10, 16]
    macs = 2 * 10 * 10 * 16 * 3 * 3 * 8
    forward = ops.cube_work(OpCall("Conv2D", _attr(), [x, w], [y], width=2))
    back_in = ops.cube_work(OpCall("Conv2DBackpropInput", _attr(), [[4], w, y], [x], width=2))
    back_w = ops.cube_work(OpCall("Conv2DBackpropFilter", _attr(), [x, [4], y], [w], width=2))
    assert forward.flops == back_in.flops == back_w.flops == 2 * macs
    assert forward.bytes == (2 * 10 * 10 * 8 + 3 * 3 * 8 * 16 + 2 * 10 * 10 * 16) * 2


def test_depthwise_is_vector_work():
    x, w, y = [1, 8, 8, 4], [3, 3, 4, 1], [1, 8, 8, 4]
    work = ops.vector_work(OpCall("DepthwiseConv2dNative", _attr(), [x, w], [y], width=2))
    assert work.unit == ops.VECTOR and work.family == "depthwise"
    assert work.flops == 2 * 8 * 8 * 4 * 9


def test_depthwise_filter_gradient_spreads_over_the_cores_as_its_input_does():
    # MobileNet at batch 256: the filter gradient is 3x3x960 numbers, summed over 256x7x7 positions each.
    x, w, dy = [256, 7, 7, 960], [3, 3, 960, 1], [256, 7, 7, 960]
    work = ops.vector_work(OpCall("DepthwiseConv2dNativeBackpropFilter", _attr(), [x, [4], dy], [w], width=2))
    assert work.flops == 2 * 256 * 7 * 7 * 960 * 9
    assert work.pieces == 256 * 7 * 7 * 960  # the whole gradient's elements, so all 32 cores take a share
    assert op_time(work, hardware()).cores_used == 32


@pytest.mark.parametrize("op,per_element,family", [
    ("AddV2", 1, "elementwise"), ("Exp", 4, "elementwise"), ("FusedBatchNormV3", 8, "batch_norm"),
    ("FusedBatchNormGradV3", 10, "batch_norm"), ("Softmax", 5, "softmax"), ("Sum", 1, "reduction"),
    ("Cast", 1, "cast"),
])
def test_vector_families_per_element(op, per_element, family):
    shape = [4, 256]
    call = OpCall(op, _attr(DstT=types_pb2.DT_HALF, SrcT=types_pb2.DT_FLOAT), [shape, shape], [shape], width=4)
    work = ops.vector_work(call)
    assert work.family == family
    assert work.flops == per_element * 4 * 256


def test_cast_bytes_use_both_widths():
    call = OpCall("Cast", _attr(DstT=types_pb2.DT_HALF), [[1000]], [[1000]], width=4, in_widths=[4])
    assert ops.vector_work(call).bytes == 1000 * 4 + 1000 * 2


def test_transpose_moves_bytes_without_flops():
    work = ops.vector_work(OpCall("Transpose", _attr(), [[32, 64], [2]], [[64, 32]], width=2, in_widths=[2, 0]))
    assert work.family == "format" and work.flops == 0
    assert work.bytes == 32 * 64 * 2 * 2


def test_pool_counts_the_window():
    call = OpCall("MaxPool", _attr(ksize=[1, 3, 3, 1]), [[1, 8, 8, 2]], [[1, 4, 4, 2]], width=2)
    assert ops.vector_work(call).flops == 4 * 4 * 2 * 9


def test_optimizer_apply_reads_and_writes_its_state():
    n = 1000
    call = OpCall("ResourceApplyAdam", _attr(), [[]] * 9 + [[n]], [], width=4)
    work = ops.vector_work(call)
    assert work.family == "optimizer"
    assert work.bytes == n * 4 * (2 * 3 + 1)  # var, m, v read and written; the gradient read


def test_unknown_batch_counts_the_given_batch():
    call = OpCall("Relu", _attr(), [[-1, 10]], [[-1, 10]], width=2, batch=7)
    assert ops.vector_work(call).flops == 70
    assert not ops.vector_work(call).static


def test_roofline_time_compute_bound_matmul():
    hw = hardware()
    call = OpCall("MatMul", _attr(), [[4096, 4096], [4096, 4096]], [[4096, 4096]], width=2)
    work = ops.cube_work(call)
    t = op_time(work, hw)
    expected = 2 * 4096 ** 3 / (hw.cube_flops * hw["cube_efficiency"]) * 1e6 + hw["task_overhead_us"]
    assert t.bound == "compute" and t.cores_used == 32
    assert t.us == pytest.approx(expected)


def test_tiny_kernel_is_launch_bound_on_one_core():
    hw = hardware()
    t = op_time(ops.vector_work(OpCall("AddV2", _attr(), [[4], [4]], [[4]], width=2)), hw)
    assert t.bound == "launch" and t.cores_used == 1


def test_float32_cube_pays_conversions_on_the_910a_only():
    call = OpCall("MatMul", _attr(), [[256, 256], [256, 256]], [[256, 256]], width=4)
    work = ops.cube_work(call)
    work.fp32_cube, work.convert_elements = True, 3 * 256 * 256
    assert op_time(work, hardware("Ascend910A")).convert_us > 0
    assert op_time(work, hardware("Ascend910B1")).convert_us == 0


def test_presets_and_bad_names():
    from npu_sim_bridge.errors import ConfigError

    assert hardware().cube_flops == pytest.approx(32 * 4096 * 2 * 1e9)
    assert hardware("Ascend910B1").cube_flops == pytest.approx(24 * 4096 * 2 * 1.85e9)
    with pytest.raises(ConfigError, match="Ascend910A"):
        hardware("Ascend999")
    with pytest.raises(ConfigError, match="cube_efficiency"):
        hardware(overrides={"cube_eff": 0.5})


def test_with_batch_fills_only_unknown_first_dimensions():
    import tensorflow as tf

    from npu_sim_bridge.errors import ConfigError
    from npu_sim_bridge.estimate.shapes import infer_shapes, with_batch

    g = tf.Graph()
    with g.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [None, 5], name="a")
        tf.compat.v1.placeholder(tf.float32, [3, 5], name="b")
        tf.identity(a * 2.0, name="out")
    fixed, changed = with_batch(g.as_graph_def(), 12)
    assert changed == 1
    shapes = infer_shapes(fixed)
    assert shapes["out"] == [[12, 5]] and shapes["b"] == [[3, 5]]
    with pytest.raises(ConfigError, match="--batch"):
        with_batch(g.as_graph_def(), 0)
