"""Nodes alike by their ports are decided once: the precision pass copies the first node's plan to the
others of the same op type and dtypes. The result must be what deciding every node on its own gives."""

import pytest
import tensorflow as tf

from npu_sim_bridge.config import from_dict
from npu_sim_bridge.errors import PassError
from npu_sim_bridge.passes import ItemInfo, run_pipeline
from npu_sim_bridge.passes.precision import decide
from npu_sim_bridge.testing import models

_v1 = tf.compat.v1
MODES = ("allow_mix_precision", "allow_fp32_to_fp16", "force_fp16", "force_fp32", "cube_fp16in_fp32out",
         "allow_mix_precision_bf16")


def twin_layers_graph():
    """Many nodes per port key, and the exceptions to copying among them: a fed Relu (a fetched one is
    decided like the others), one kept by keep_dtype, and two convolutions whose op has no float32 kernel (must_keep_origin_dtype
    names both)."""
    with models._building(0) as graph:
        x = _v1.placeholder(tf.float32, [2, 8, 8, 3], name="x")
        # A Relu the user wrote in float16: after a rewrite it shares its port key with the Relus the
        # pass lowered, which a later run tells apart by the dtype they had.
        h = x + tf.cast(tf.nn.relu(tf.cast(x, tf.float16), name="half_relu"), tf.float32)
        for index in range(4):
            k = _v1.get_variable(f"k{index}", [3, 3, h.shape[-1], 4])
            h = tf.nn.relu(tf.nn.conv2d(h, k, 1, "SAME", name=f"conv{index}"), name=f"relu{index}")
        graph.get_operation_by_name("relu2")._set_attr("_keep_dtype", _v1.AttrValue(b=True))
        flat = _passed_through(tf.reshape(h, [2, -1]))  # an IdentityN following a float16 input
        for index in range(3):
            w = _v1.get_variable(f"w{index}", [flat.shape[-1], 16])
            flat = tf.nn.relu(tf.matmul(flat, w, name=f"mm{index}"), name=f"dense_relu{index}")
        logs = _passed_through(tf.math.log(tf.nn.softmax(flat) + 1.0))  # one following a float32 input
        loss = tf.reduce_mean(logs, name="loss")
        train = _v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss, name="train")
    return graph.as_graph_def(), ItemInfo(id="twins", fetch=("loss", train.name, "relu1"), feed=("relu0",))


@tf.custom_gradient
def _passed_through(value):
    """An IdentityN in the graph (what tf.custom_gradient builds), with a gradient of its own."""
    return tf.identity(value), lambda grad: grad * 0.5


def _graphs():
    yield "twin_layers", twin_layers_graph()
    bert = models.bert(num_layers=2, hidden=32, heads=2, seq_len=8, vocab=50)
    yield "bert_2_layers", (bert.graph_def(), ItemInfo(id="bert", fetch=tuple(bert.fetch_names())))
    lstm = models.lstm()
    yield "lstm", (lstm.graph_def(), ItemInfo(id="lstm", fetch=tuple(lstm.fetch_names())))


GRAPHS = dict(_graphs())


def _outcome(graph_def, item, mode, execution="emulate"):
    options = from_dict({"precision_mode": mode, "sim_passes": "precision", "sim_fp16_execution": execution})
    try:
        result = run_pipeline(graph_def, options, item)
    except PassError as err:
        return "error", str(err)
    records = {name: (r.op, r.list, r.dtype_before, r.dtype_after, r.reason) for name, r in result.report.nodes.items()}
    return result.graph_def, records


@pytest.mark.parametrize("mode", MODES + ("must_keep_origin_dtype",))
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_copied_plans_rewrite_as_deciding_each_node_does(name, mode, monkeypatch):
    graph_def, item = GRAPHS[name]
    copied = _outcome(graph_def, item, mode)
    monkeypatch.setattr(decide.Decider, "_template_key", lambda self, name, node: None)
    alone = _outcome(graph_def, item, mode)
    assert copied[0] == alone[0]
    assert copied[1] == alone[1]


@pytest.mark.parametrize("execution", ("emulate", "native"))
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_a_rewritten_graph_given_again_decides_as_deciding_each_node_does(name, execution, monkeypatch):
    """A later run reads the dtypes the first run recorded on the nodes it retyped (native float16): those
    nodes are decided from their own record, not from a plan copied from another node."""
    graph_def, item = GRAPHS[name]
    first, _ = _outcome(graph_def, item, "allow_mix_precision", execution)
    copied = _outcome(first, item, "allow_mix_precision", execution)
    monkeypatch.setattr(decide.Decider, "_template_key", lambda self, name, node: None)
    assert copied == _outcome(first, item, "allow_mix_precision", execution)


def test_most_nodes_copy_a_plan_and_the_exceptions_do_not(monkeypatch):
    graph_def, item = GRAPHS["twin_layers"]
    worked_out = []
    real = decide.Decider._classify_node

    def counted(self, name, node, sig):
        worked_out.append(name)
        return real(self, name, node, sig)

    monkeypatch.setattr(decide.Decider, "_classify_node", counted)
    _outcome(graph_def, item, "allow_mix_precision")
    relus = [name for name in worked_out if name.startswith("relu")]
    # relu0 is fed, relu2 kept by keep_dtype: each is decided on its own. relu1 is the first Relu decided
    # as any other (fetched nodes are decided as if not fetched), so it is worked out, and every plain
    # Relu after it copies its plan.
    assert relus == ["relu0", "relu1", "relu2"]
    assert not [name for name in worked_out if name.startswith("dense_relu")]  # all copy relu3's plan
    assert len(worked_out) < len({n.name for n in graph_def.node}) // 3
