"""npu_bridge.tbe.npu_cube_ops: deformable_conv2d (modulated deformable convolution, DCN v2), with TensorFlow ops.

As on the NPU, it is two steps: DeformableOffsets samples, for every output position and kernel tap,
the input at the tap's place moved by its offset (bilinear; corners outside the padded input count
as zero) and multiplies it by the tap's mask, laying the samples out as a [N, Ho*kh, Wo*kw, C] map;
a Conv2D with strides (kh, kw) and VALID padding then applies the filter. offsets is
[N, Ho, Wo, 3 * deformable_groups * kh * kw]: the x (width) offsets first, then the y offsets,
then the masks, each indexed group-major (group * kh * kw + tap).
"""

import tensorflow as tf


def _bilinear(feature, ys, xs, height, width):
    """feature [N, H, W, G, Cg] sampled at float (ys, xs) [N, Ho, Wo, G, K] -> [N, Ho, Wo, G, K, Cg]."""
    batch, groups = tf.shape(ys)[0], tf.shape(ys)[3]
    top, right = tf.cast(height - 1, ys.dtype), tf.cast(width - 1, ys.dtype)
    index_b = tf.broadcast_to(tf.reshape(tf.range(batch), [-1, 1, 1, 1, 1]), tf.shape(ys))
    index_g = tf.broadcast_to(tf.reshape(tf.range(groups), [1, 1, 1, -1, 1]), tf.shape(ys))
    y0, x0 = tf.floor(ys), tf.floor(xs)
    total = 0.0
    for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
        yc, xc = y0 + dy, x0 + dx
        weight = (1.0 - tf.abs(ys - yc)) * (1.0 - tf.abs(xs - xc))
        inside = (yc >= 0) & (yc <= top) & (xc >= 0) & (xc <= right)
        weight = tf.where(inside, weight, tf.zeros_like(weight))
        yi = tf.clip_by_value(tf.cast(yc, tf.int32), 0, height - 1)
        xi = tf.clip_by_value(tf.cast(xc, tf.int32), 0, width - 1)
        values = tf.gather_nd(feature, tf.stack([index_b, yi, xi, index_g], axis=-1))
        total += weight[..., None] * values
    return total


def deformable_conv2d(x, filter, offsets, strides=None, pads=None, data_format="NHWC",  # pylint: disable=redefined-builtin
                      dilations=(1, 1, 1, 1), groups=1, deformable_groups=1, modulated=True, name=None):
    """Deformable 2-D convolution (v2): x [N,H,W,C], filter [kh,kw,C,Cout], offsets as the module says."""
    if not modulated:
        raise ValueError("deformable_conv2d: only modulated=True (DCN v2) is supported, as on the NPU")
    if groups != 1:
        raise ValueError(f"deformable_conv2d: groups={groups} is not supported, as on the NPU; use groups=1")
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"deformable_conv2d: data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    if strides is None or len(strides) != 4 or pads is None or len(pads) != 4:
        raise ValueError(f"deformable_conv2d: strides and pads must be lists of 4 ints, got {strides!r}, {pads!r}")
    with tf.name_scope(name or "DeformableConv2D"):
        x, offsets = tf.convert_to_tensor(x), tf.convert_to_tensor(offsets)
        h_axis, w_axis = data_format.index("H"), data_format.index("W")
        stride_h, stride_w = strides[h_axis], strides[w_axis]
        dil_h, dil_w = dilations[h_axis], dilations[w_axis]
        if data_format == "NCHW":
            x, offsets = tf.transpose(x, [0, 2, 3, 1]), tf.transpose(offsets, [0, 2, 3, 1])
        kh, kw = filter.shape.as_list()[:2]
        channels = x.shape.as_list()[-1]
        if channels % deformable_groups:
            raise ValueError(f"deformable_conv2d: {channels} input channels are not divisible by "
                             f"deformable_groups={deformable_groups}")
        x = tf.pad(x, [[0, 0], [pads[0], pads[1]], [pads[2], pads[3]], [0, 0]])
        height, width = tf.shape(x)[1], tf.shape(x)[2]
        out_h, out_w = tf.shape(offsets)[1], tf.shape(offsets)[2]
        taps = kh * kw
        shape = tf.concat([tf.shape(offsets)[:3], [deformable_groups, taps]], axis=0)
        x_off, y_off, mask = (tf.reshape(part, shape) for part in tf.split(offsets, 3, axis=-1))
        tap_y = tf.reshape(tf.repeat(tf.range(kh) * dil_h, kw), [1, 1, 1, 1, taps])
        tap_x = tf.reshape(tf.tile(tf.range(kw) * dil_w, [kh]), [1, 1, 1, 1, taps])
        base_y = tf.reshape(tf.range(out_h) * stride_h, [1, -1, 1, 1, 1]) + tap_y
        base_x = tf.reshape(tf.range(out_w) * stride_w, [1, 1, -1, 1, 1]) + tap_x
        ys = tf.cast(base_y, x.dtype) + y_off
        xs = tf.cast(base_x, x.dtype) + x_off
        feature = tf.reshape(x, tf.concat([tf.shape(x)[:3], [deformable_groups, channels // deformable_groups]], 0))
        sampled = _bilinear(feature, ys, xs, height, width) * mask[..., None]
        batch = tf.shape(x)[0]
        sampled = tf.reshape(sampled, [batch, out_h, out_w, deformable_groups, kh, kw, channels // deformable_groups])
        sampled = tf.transpose(sampled, [0, 1, 4, 2, 5, 3, 6])
        sampled = tf.reshape(sampled, [batch, out_h * kh, out_w * kw, channels])
        out = tf.nn.conv2d(sampled, filter, strides=[1, kh, kw, 1], padding="VALID")
        return tf.transpose(out, [0, 3, 1, 2]) if data_format == "NCHW" else out
