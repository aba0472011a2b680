"""npu_bridge.estimator.npu_unary_ops: the adapter's Gelu op (and its gradient GeluGrad) as real graph ops.

`npu_unary_ops.gelu(x)` builds one node of op type `Gelu`, as the adapter's generated op wrapper
does on the NPU; its gradient is one `GeluGrad(dy, x, y)` node. Both ops are registered with
TensorFlow by a small C++ library (native/npu_ops.cc, built into the shim cache on first use), whose
CPU kernels compute the tanh form of GELU that the Ascend op computes. Because the node's type is
`Gelu`, the operator library in ops_info/ classifies it (a gray op: it follows its inputs under
allow_mix_precision), the placement pass finds it in the device op list, and the report names it.
Importing this module (npu_init does) loads the op library, as importing npu_bridge loads the
adapter's ops, so a saved graph holding Gelu nodes imports too (unless NPU_SIM_SKIP_NATIVE is set:
then the library is built on the first gelu call).
"""

import types

import tensorflow as tf
from tensorflow.python.framework import ops

from npu_sim_bridge.native.loader import load_npu_ops, native_skipped

_SQRT_2_OVER_PI = 0.7978845608028654
_CUBIC = 0.044715


def gelu(features, name=None):
    """GELU, tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3))), as one `Gelu` node."""
    return load_npu_ops().gelu(features, name=name)


def gelu_grad(dy, x, y, name=None):
    """The gradient of gelu: dy * gelu'(x), as one `GeluGrad` node (y, gelu's output, is an input as on the NPU)."""
    return load_npu_ops().gelu_grad(dy, x, y, name=name)


@ops.RegisterGradient("Gelu")
def _gelu_gradient(op, grad):
    return [gelu_grad(grad, op.inputs[0], op.outputs[0])]


@ops.RegisterGradient("GeluGrad")
def _gelu_grad_gradient(op, grad):
    """Second derivative (gradients of gradients), from the closed form of the tanh-form gelu."""
    dy, x = op.inputs[0], op.inputs[1]
    c = tf.constant(_SQRT_2_OVER_PI, x.dtype)
    a = tf.constant(_CUBIC, x.dtype)
    t = tf.tanh(c * (x + a * x * x * x))
    sech2 = 1.0 - t * t
    du = c * (1.0 + 3.0 * a * x * x)
    first = 0.5 * (1.0 + t) + 0.5 * x * sech2 * du
    second = sech2 * (du + 0.5 * x * (6.0 * a * c * x - 2.0 * t * du * du))
    return [grad * first, grad * dy * second, None]


if not native_skipped():
    load_npu_ops()

# The adapter's module holds its generated-op namespace under the same name as the module itself:
# scripts write `from npu_bridge.estimator.npu_unary_ops import npu_unary_ops; npu_unary_ops.gelu(x)`.
npu_unary_ops = types.SimpleNamespace(gelu=gelu, gelu_grad=gelu_grad)
