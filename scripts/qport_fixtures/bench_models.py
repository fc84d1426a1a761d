"""Random-weight MobileNetV2 and ResNet-50 for latency benchmarks.

``scripts/bench/int8_vs_ort.py`` times qport against onnxruntime on these two
besides EfficientNet-Lite0. Their weights are SEEDED RANDOM, so they are good
for LATENCY ONLY, never for accuracy. Both are built with ``onnx.helper``:

- ``mobilenetv2`` (seed 2): MobileNetV2 width 1.0. Stem 3x3 stride-2 conv to
  32 channels + ReLU6; 17 inverted-residual blocks in 7 stages (expand t,
  out c, repeats n, stride s): (1,16,1,1) (6,24,2,2) (6,32,3,2) (6,64,4,2)
  (6,96,3,1) (6,160,3,2) (6,320,1,1). A block is expand 1x1 + ReLU6 (absent
  when t is 1), depthwise 3x3 (the stage stride on the first block only) +
  ReLU6, linear project 1x1, plus the block input when stride is 1 and
  in == out. Head: 1x1 conv to 1280 + ReLU6.
- ``resnet50`` (seed 50): ResNet-50 v1.5. Stem 7x7 stride-2 conv to 64 +
  Relu, 3x3 stride-2 MaxPool; bottlenecks (width, blocks, stride) (64,3,1)
  (128,4,2) (256,6,2) (512,3,2): 1x1 + Relu, 3x3 (carries the stride) +
  Relu, 1x1 to 4 x width, plus the input (a 1x1 projection conv when the
  shape changes), then Relu.

Common to both: BatchNormalization is folded, so every Conv has a bias and
there are no BN nodes (what an exporter's BN folding leaves); "same" padding
``k // 2`` on every side; ReLU6 is ``Clip`` with min/max inputs; head is
GlobalAveragePool, Flatten, Gemm to 1000 classes. Input ``input``
[1,3,224,224] float, fixed batch 1; opset 13, IR version 8.

Weights are drawn from ``numpy.random.default_rng(seed)`` in graph order:
conv weights N(0, sqrt(2 / fan_in)) (He), conv biases N(0, 0.01), the Gemm
weight N(0, sqrt(1 / channels)), Gemm bias zero. The same seed gives the same
bytes (checked by building twice), so the fixture manifest digest is stable.
The ``bench-models`` step's stamp holds a digest of this module's source: any
change here redoes it, and the ``bench-families`` step when the bytes change.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

from .onnx_builder import Builder

OPSET = 13
IR_VERSION = 8
NUM_CLASSES = 1000
IMAGE_SIZE = 224
PRODUCER = "qport-bench"
MOBILENETV2_SEED = 2
RESNET50_SEED = 50

# MobileNetV2 stages: (expand ratio t, out channels c, repeats n, stride s).
MOBILENETV2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                      (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
# ResNet-50 stages: (bottleneck width, blocks, stride of the first block).
RESNET50_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))


class BenchBuilder(Builder):
    """:class:`~qport_fixtures.onnx_builder.Builder` plus the ReLU6, the
    classifier head and the model wrapper the two benchmark networks share."""

    def relu6(self, x: str) -> str:
        """``Clip(x, 0, 6)``; the two bounds are shared initializers made on first use."""
        if not hasattr(self, "_c0"):
            self._c0 = self.const("clip_min", np.array(0.0, np.float32))
            self._c6 = self.const("clip_max", np.array(6.0, np.float32))
        return self.op("Clip", [x, self._c0, self._c6])

    def head(self, x: str, c: int) -> str:
        """GlobalAveragePool, Flatten, Gemm to NUM_CLASSES."""
        x = self.op("GlobalAveragePool", [x])
        x = self.op("Flatten", [x], axis=1)
        w = self.rng.normal(0, math.sqrt(1.0 / c), (NUM_CLASSES, c)).astype(np.float32)
        b = np.zeros(NUM_CLASSES, np.float32)
        return self.op("Gemm", [x, self.const("fc_w", w), self.const("fc_b", b)], transB=1)

    def model(self, out: str, name: str) -> onnx.ModelProto:
        """The checked model, input ``input`` [1,3,224,224] -> ``out`` [1,1000]."""
        g = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, IMAGE_SIZE, IMAGE_SIZE])],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, NUM_CLASSES])],
            self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name=PRODUCER)
        m.ir_version = IR_VERSION
        onnx.checker.check_model(m)
        return m


def build_mobilenetv2(seed: int = MOBILENETV2_SEED) -> onnx.ModelProto:
    """MobileNetV2 1.0 with random weights (graph ``mobilenetv2_random``)."""
    b = BenchBuilder(seed)
    x = b.relu6(b.conv("input", 3, 32, 3, 2))
    cin = 32
    for t, c, n, s in MOBILENETV2_STAGES:
        for i in range(n):
            stride = s if i == 0 else 1
            hid = cin * t
            y = x
            if t != 1:
                y = b.relu6(b.conv(y, cin, hid, 1))
            y = b.relu6(b.conv(y, hid, hid, 3, stride, group=hid))
            y = b.conv(y, hid, c, 1)  # linear bottleneck
            if stride == 1 and cin == c:
                y = b.op("Add", [x, y])
            x, cin = y, c
    x = b.relu6(b.conv(x, cin, 1280, 1))
    return b.model(b.head(x, 1280), "mobilenetv2_random")


def build_resnet50(seed: int = RESNET50_SEED) -> onnx.ModelProto:
    """ResNet-50 v1.5 with random weights (graph ``resnet50_random``)."""
    b = BenchBuilder(seed)
    x = b.op("Relu", [b.conv("input", 3, 64, 7, 2)])
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for width, blocks, stride in RESNET50_STAGES:
        for i in range(blocks):
            s = stride if i == 0 else 1
            cout = width * 4
            y = b.op("Relu", [b.conv(x, cin, width, 1)])
            y = b.op("Relu", [b.conv(y, width, width, 3, s)])
            y = b.conv(y, width, cout, 1)
            sc = b.conv(x, cin, cout, 1, s) if (s != 1 or cin != cout) else x
            x = b.op("Relu", [b.op("Add", [y, sc])])
            cin = cout
    return b.model(b.head(x, 2048), "resnet50_random")


# key -> (builder, seed); the fixture file is models/bench/<key>.random.onnx.
BENCH_MODELS: dict[str, tuple[Callable[[int], onnx.ModelProto], int]] = {
    "mobilenetv2": (build_mobilenetv2, MOBILENETV2_SEED),
    "resnet50": (build_resnet50, RESNET50_SEED),
}


def bench_model_rel(key: str) -> str:
    """Cache-relative path of a benchmark model."""
    return f"models/bench/{key}.random.onnx"
