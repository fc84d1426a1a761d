"""Seeded random-weight model families: NHWC classifier, YOLO-style detector,
MiniLM-style text encoder, a gated CNN; and the two benchmark networks as
families.

Issue 13 asks for model families qport was not developed on, each with
onnxruntime's QDQ artifacts, to measure how much of a real network qport
lowers to integers and whether it then matches onnxruntime. These three are
small stand-ins built with ``onnx.helper`` (through
:class:`~qport_fixtures.onnx_builder.Builder`) that carry the graph patterns
of their families. Their weights are SEEDED RANDOM: good for parity,
quantization structure and latency, never for accuracy.

``nhwc-classifier`` (seed 1301, opset 13) -- a TensorFlow-exported CNN:
  input ``image`` [1,128,128,3] float NHWC; ``Transpose`` to NCHW; stem
  3x3 stride-2 Conv 3->16 followed by BatchNormalization written out as the
  exporters do, ``Sub(mean)``, ``Div(sqrt(var + eps))``, ``Mul(gamma)``,
  ``Add(beta)`` with [C,1,1] constants, then Relu; a residual block (3x3
  Conv + Relu, 3x3 Conv, ``Add`` of the block input, Relu); a depthwise 3x3
  stride-2 Conv + Relu and a pointwise 1x1 Conv 16->32 + Relu; MaxPool 2x2
  stride 2; 3x3 Conv 32->32 + Relu; GlobalAveragePool, Flatten, Gemm to 10
  classes: output ``logits`` [1,10].

``yolo-detector`` (seed 1302, opset 13) -- a YOLOv8-style detector:
  input ``images`` [1,3,height,width] float with DYNAMIC H/W (multiples of
  16); every Conv is followed by SiLU written as ``Sigmoid`` then ``Mul``.
  Backbone: 3x3 stride-2 Conv 3->8, 3x3 stride-2 Conv 8->16, a C2f block
  (1x1 Conv 16->16, ``Split`` [8,8], a residual bottleneck of two 3x3 Convs
  on the second half, ``Concat`` of the three to 24, 1x1 Conv 24->16), 3x3
  stride-2 Conv 16->32 (P3, stride 8), 3x3 stride-2 Conv 32->64 (stride 16).
  SPPF at stride 16: 1x1 Conv 64->32, three chained ``MaxPool`` k5 s1 p2,
  ``Concat`` of the four to 128, 1x1 Conv 128->64 (P4). FPN: ``Resize``
  nearest 2x (scales input, asymmetric / floor, as PyTorch exports it),
  ``Concat`` with P3, 1x1 Conv 96->32 (N3). Two heads (N3 at stride 8, P4 at
  stride 16), each with a box branch (3x3 Conv + SiLU, 1x1 Conv to 4 x 8
  distribution bins; ``Reshape`` [1,4,8,-1], ``Softmax`` over the bins, the
  expectation as ``Mul`` by 0..7 and ``ReduceSum``: YOLOv8's DFL) and a class
  branch (3x3 Conv + SiLU, 1x1 Conv to 8 classes, ``Reshape`` [1,8,-1]).
  The heads are concatenated along the anchor axis: outputs ``boxes``
  [1,4,N] and ``scores`` [1,8,N] (``Sigmoid``), N = (H/8)(W/8) + (H/16)(W/16).

``text-encoder`` (seed 1303, opset 17) -- a 2-layer MiniLM-style encoder:
  inputs ``input_ids`` and ``attention_mask`` [1,seq] int64 (seq dynamic,
  at most 64); hidden 64, 4 heads of 16, FFN 128, vocabulary 1000. Word
  embeddings by ``Gather``; position ids ``Slice``d from a [1,64] 0..63
  constant to the length given by ``Shape`` and ``Gather``ed from a position
  table; their sum goes through ``LayerNormalization``. The additive mask is
  ``(1 - Cast(attention_mask, float)) * -3.4028234663852886e38``, unsqueezed
  to [1,1,1,seq]. Each layer: Q/K/V ``MatMul`` + ``Add``; ``Reshape``
  [1,-1,4,16] and ``Transpose`` to heads (K to [1,4,16,seq]); scores
  ``MatMul``, ``Div`` by sqrt(16), ``Add`` mask, ``Softmax``; context
  ``MatMul``, ``Transpose`` / ``Reshape`` back, output ``MatMul`` + ``Add``,
  residual ``Add``, layer norm; FFN ``MatMul`` + ``Add``, Gelu written with
  ``Erf`` (``x * 0.5 * (1 + erf(x / sqrt(2)))``), ``MatMul`` + ``Add``,
  residual, layer norm. Layer 0 uses ``LayerNormalization``; layer 1 the
  decomposition ``ReduceMean``, ``Sub``, ``Pow`` 2, ``ReduceMean``, ``Add``
  eps, ``Sqrt``, ``Div``, ``Mul`` gamma, ``Add`` beta. Output
  ``last_hidden_state`` [1,seq,64] (the last decomposed layer norm's ``Add``).

``gated-cnn`` (seed 1304, opset 13) -- the operators onnxruntime fuses from
QDQ that the three families above lack, in a small CNN: input ``image``
[1,3,64,64] float NCHW; 3x3 stride-2 Conv 3->16 + ``LeakyRelu`` (alpha 0.1);
3x3 Conv 16->16 with a leaky activation written as some exporters write
PReLU, ``Where(Greater(x, 0), x, Mul(x, 0.2))``; ``AveragePool`` 3x3 stride
2 pads 1 (padding not counted); two branches, 1x1 Conv 16->8 and 3x3 Conv
16->8 + ``Sigmoid``, joined by ``Concat`` (inputs with differing
quantization parameters); 1x1 Conv 16->16 + Relu; GlobalAveragePool,
Flatten, Gemm to 10 classes: output ``logits`` [1,10].

Weights come from ``numpy.random.default_rng(seed)`` in build order: conv
weights He-scaled as in the benchmark models, matrices N(0, sqrt(1/fan_in)),
biases N(0, 0.01), BatchNormalization / LayerNormalization statistics near
their neutral values. The same seed gives the same bytes (the fixture step
builds every model twice and compares). The ``families`` step's stamp holds a
digest of this module's source, so any change here rebuilds it (and the
``bench-families`` step). Every model's IR version is 8.

``mobilenetv2`` and ``resnet50`` (:data:`BENCH_FAMILIES`) are the random-weight
benchmark networks of :mod:`~qport_fixtures.bench_models` (seeds 2 and 50,
opset 13, input ``input`` [1,3,224,224], written by the ``bench-models`` step
to ``models/bench/<name>.random.onnx``) put through the same machinery by the
``bench-families`` step: QDQ artifacts, onnxruntime's optimized graphs and
parity data, with inputs uniform in [-1, 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

from .bench_models import IMAGE_SIZE, MOBILENETV2_SEED, RESNET50_SEED, build_mobilenetv2, build_resnet50
from .onnx_builder import Builder

# The onnxruntime quantize_static variants made of every family, the
# calibration inputs given to it, and the inputs per QDQ artifact run by
# onnxruntime's default session (its fused integer kernels), the reference
# for qport's integer plans.
FAMILY_VARIANTS = ("qdq-u8s8", "qdq-s8s8")
FAMILY_CALIBRATION_COUNT = 8
FAMILY_SESSION_COUNT = 32

IR_VERSION = 8
PRODUCER = "qport-families"
MASK_VALUE = -3.4028234663852886e38  # float32's lowest finite value, as HF exports write it


class FamilyBuilder(Builder):
    """:class:`Builder` plus named graph outputs, SiLU, dense layers and layer norms."""

    def named(self, kind: str, inputs: list[str], out: str, **attrs) -> str:
        """One node whose output gets the fixed name ``out`` (a graph output)."""
        self.nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def scalar(self, prefix: str, value: float) -> str:
        """A float32 scalar initializer."""
        return self.const(prefix, np.array(value, np.float32))

    def ints(self, prefix: str, values) -> str:
        """An int64 1-D initializer (shapes, axes, slice bounds)."""
        return self.const(prefix, np.array(values, np.int64))

    def silu(self, x: str) -> str:
        """SiLU as exporters write it: ``Mul(x, Sigmoid(x))``."""
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def dense(self, x: str, fan_in: int, fan_out: int) -> str:
        """``MatMul`` by a N(0, sqrt(1/fan_in)) matrix, then ``Add`` a bias."""
        w = self.rng.normal(0, math.sqrt(1.0 / fan_in), (fan_in, fan_out)).astype(np.float32)
        b = self.rng.normal(0, 0.01, fan_out).astype(np.float32)
        return self.op("Add", [self.op("MatMul", [x, self.const("w", w)]), self.const("b", b)])

    def norm_params(self, c: int) -> tuple[str, str]:
        """Layer-norm gamma U(0.8, 1.2) and beta N(0, 0.05)."""
        gamma = self.rng.uniform(0.8, 1.2, c).astype(np.float32)
        beta = self.rng.normal(0, 0.05, c).astype(np.float32)
        return self.const("gamma", gamma), self.const("beta", beta)

    def layer_norm(self, x: str, c: int, eps: float = 1e-12) -> str:
        """``LayerNormalization`` over the last axis (opset 17)."""
        gamma, beta = self.norm_params(c)
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)

    def layer_norm_decomposed(self, x: str, c: int, eps: float = 1e-12, out: str | None = None) -> str:
        """Layer norm as older exporters write it, op by op (the last ``Add``
        named ``out`` when given)."""
        gamma, beta = self.norm_params(c)
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        d = self.op("Sub", [x, mean])
        var = self.op("ReduceMean", [self.op("Pow", [d, self.scalar("two", 2.0)])], axes=[-1],
                      keepdims=1)
        std = self.op("Sqrt", [self.op("Add", [var, self.scalar("eps", eps)])])
        y = self.op("Mul", [self.op("Div", [d, std]), gamma])
        return self.named("Add", [y, beta], out) if out else self.op("Add", [y, beta])

    def pooled_logits(self, x: str, c: int, classes: int) -> str:
        """GlobalAveragePool, Flatten and a Gemm (N(0, sqrt(1/c)) weights,
        N(0, 0.01) bias) to the graph output ``logits``."""
        x = self.op("Flatten", [self.op("GlobalAveragePool", [x])], axis=1)
        w = self.rng.normal(0, math.sqrt(1.0 / c), (classes, c)).astype(np.float32)
        bias = self.rng.normal(0, 0.01, classes).astype(np.float32)
        return self.named("Gemm", [x, self.const("fc_w", w), self.const("fc_b", bias)], "logits",
                          transB=1)

    def model(self, name: str, opset: int, inputs: list, outputs: list) -> onnx.ModelProto:
        """The checked model (full check, shapes inferred by the checker)."""
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name=PRODUCER)
        m.ir_version = IR_VERSION
        onnx.checker.check_model(m, full_check=True)
        return m


# ------------------------------------------------------------------ NHWC classifier

CLASSIFIER_SEED = 1301
CLASSIFIER_SIZE = 128
CLASSIFIER_CLASSES = 10


def build_nhwc_classifier(seed: int = CLASSIFIER_SEED) -> onnx.ModelProto:
    """The NHWC classifier (graph ``nhwc_classifier_random``); see the module docs."""
    b = FamilyBuilder(seed)
    x = b.op("Transpose", ["image"], perm=[0, 3, 1, 2])
    x = b.conv(x, 3, 16, 3, 2)
    # BatchNormalization as Sub / Div / Mul / Add with per-channel [C,1,1] constants.
    mean = b.rng.normal(0, 0.1, (16, 1, 1)).astype(np.float32)
    var = b.rng.uniform(0.5, 1.5, (16, 1, 1)).astype(np.float32)
    gamma = b.rng.uniform(0.5, 1.5, (16, 1, 1)).astype(np.float32)
    beta = b.rng.normal(0, 0.1, (16, 1, 1)).astype(np.float32)
    x = b.op("Sub", [x, b.const("bn_mean", mean)])
    x = b.op("Div", [x, b.const("bn_std", np.sqrt(var + np.float32(1e-3)).astype(np.float32))])
    x = b.op("Mul", [x, b.const("bn_gamma", gamma)])
    x = b.op("Add", [x, b.const("bn_beta", beta)])
    x = b.op("Relu", [x])
    y = b.op("Relu", [b.conv(x, 16, 16, 3)])
    y = b.conv(y, 16, 16, 3)
    x = b.op("Relu", [b.op("Add", [y, x])])
    x = b.op("Relu", [b.conv(x, 16, 16, 3, 2, group=16)])
    x = b.op("Relu", [b.conv(x, 16, 32, 1)])
    x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.op("Relu", [b.conv(x, 32, 32, 3)])
    b.pooled_logits(x, 32, CLASSIFIER_CLASSES)
    return b.model(
        "nhwc_classifier_random", 13,
        [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                       [1, CLASSIFIER_SIZE, CLASSIFIER_SIZE, 3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSIFIER_CLASSES])])


# ------------------------------------------------------------------ YOLO-style detector

DETECTOR_SEED = 1302
DETECTOR_CLASSES = 8
DETECTOR_BINS = 8


def build_yolo_detector(seed: int = DETECTOR_SEED) -> onnx.ModelProto:
    """The YOLO-style detector (graph ``yolo_detector_random``); see the module docs."""
    b = FamilyBuilder(seed)

    def cbs(x: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
        return b.silu(b.conv(x, cin, cout, k, stride))

    x = cbs("images", 3, 8, 3, 2)
    x = cbs(x, 8, 16, 3, 2)
    # C2f: split in two halves, a residual bottleneck on the second, concat all three.
    x = cbs(x, 16, 16, 1)
    a, c = b.ops("Split", [x, b.ints("split", [8, 8])], 2, axis=1)
    m = cbs(cbs(c, 8, 8, 3), 8, 8, 3)
    m = b.op("Add", [c, m])
    x = cbs(b.op("Concat", [a, c, m], axis=1), 24, 16, 1)
    p3 = cbs(x, 16, 32, 3, 2)
    x = cbs(p3, 32, 64, 3, 2)
    # SPPF: three chained 5x5 max pools, concatenated with their input.
    s = cbs(x, 64, 32, 1)
    pools = [s]
    for _ in range(3):
        pools.append(b.op("MaxPool", [pools[-1]], kernel_shape=[5, 5], strides=[1, 1],
                          pads=[2, 2, 2, 2]))
    p4 = cbs(b.op("Concat", pools, axis=1), 128, 64, 1)
    # FPN: nearest 2x upsample of P4, concatenated with P3.
    up = b.op("Resize", [p4, "", b.const("scales", np.array([1, 1, 2, 2], np.float32))],
              mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    n3 = cbs(b.op("Concat", [up, p3], axis=1), 96, 32, 1)
    bins = b.const("dfl_bins", np.arange(DETECTOR_BINS, dtype=np.float32).reshape(1, 1, -1, 1))
    box_shape = b.ints("box_shape", [1, 4, DETECTOR_BINS, -1])
    cls_shape = b.ints("cls_shape", [1, DETECTOR_CLASSES, -1])
    bin_axis = b.ints("bin_axis", [2])
    boxes, classes = [], []
    for feat, c_in in ((n3, 32), (p4, 64)):
        d = b.conv(cbs(feat, c_in, 32, 3), 32, 4 * DETECTOR_BINS, 1)
        d = b.op("Softmax", [b.op("Reshape", [d, box_shape])], axis=2)
        boxes.append(b.op("ReduceSum", [b.op("Mul", [d, bins]), bin_axis], keepdims=0))
        k = b.conv(cbs(feat, c_in, 32, 3), 32, DETECTOR_CLASSES, 1)
        classes.append(b.op("Reshape", [k, cls_shape]))
    b.named("Concat", boxes, "boxes", axis=2)
    b.named("Sigmoid", [b.op("Concat", classes, axis=2)], "scores")
    return b.model(
        "yolo_detector_random", 13,
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, "height", "width"])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, "anchors"]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT,
                                       [1, DETECTOR_CLASSES, "anchors"])])


# ------------------------------------------------------------------ MiniLM-style encoder

ENCODER_SEED = 1303
ENCODER_VOCAB = 1000
ENCODER_HIDDEN = 64
ENCODER_HEADS = 4
ENCODER_FFN = 128
ENCODER_LAYERS = 2
ENCODER_MAX_POSITIONS = 64


def build_text_encoder(seed: int = ENCODER_SEED) -> onnx.ModelProto:
    """The MiniLM-style encoder (graph ``text_encoder_random``); see the module docs."""
    b = FamilyBuilder(seed)
    h, nh = ENCODER_HIDDEN, ENCODER_HEADS
    hd = h // nh
    word = b.rng.normal(0, 0.5, (ENCODER_VOCAB, h)).astype(np.float32)
    pos = b.rng.normal(0, 0.5, (ENCODER_MAX_POSITIONS, h)).astype(np.float32)
    x = b.op("Gather", [b.const("word_embeddings", word), "input_ids"], axis=0)
    seq = b.op("Shape", ["input_ids"], start=1, end=2)
    pos_ids = b.op("Slice", [b.const("position_ids", np.arange(ENCODER_MAX_POSITIONS, dtype=np.int64)[None]),
                             b.ints("zero", [0]), seq, b.ints("axis1", [1])])
    x = b.op("Add", [x, b.op("Gather", [b.const("position_embeddings", pos), pos_ids], axis=0)])
    x = b.layer_norm(x, h)
    # Additive mask: 0 where attended, float32's lowest where padded.
    one = b.scalar("one", 1.0)
    m = b.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    m = b.op("Mul", [b.op("Sub", [one, m]), b.scalar("mask_value", MASK_VALUE)])
    mask = b.op("Unsqueeze", [m, b.ints("mask_axes", [1, 2])])
    heads_shape = b.ints("heads_shape", [1, -1, nh, hd])
    merge_shape = b.ints("merge_shape", [1, -1, h])
    sqrt_d = b.scalar("sqrt_d", math.sqrt(hd))
    half, rsqrt2 = b.scalar("half", 0.5), b.scalar("rsqrt2", 1 / math.sqrt(2))
    for layer in range(ENCODER_LAYERS):
        # The last layer norm (the graph output) is the decomposed one of layer 1.
        norm = b.layer_norm if layer == 0 else b.layer_norm_decomposed
        q = b.op("Transpose", [b.op("Reshape", [b.dense(x, h, h), heads_shape])], perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [b.dense(x, h, h), heads_shape])], perm=[0, 2, 3, 1])
        v = b.op("Transpose", [b.op("Reshape", [b.dense(x, h, h), heads_shape])], perm=[0, 2, 1, 3])
        s = b.op("Add", [b.op("Div", [b.op("MatMul", [q, k]), sqrt_d]), mask])
        p = b.op("Softmax", [s], axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        ctx = b.dense(b.op("Reshape", [ctx, merge_shape]), h, h)
        x = norm(b.op("Add", [ctx, x]), h)
        f = b.dense(x, h, ENCODER_FFN)
        erf = b.op("Erf", [b.op("Mul", [f, rsqrt2])])
        f = b.op("Mul", [b.op("Mul", [f, half]), b.op("Add", [erf, one])])
        f = b.dense(f, ENCODER_FFN, h)
        last = layer == ENCODER_LAYERS - 1
        x = (b.layer_norm_decomposed(b.op("Add", [f, x]), h, out="last_hidden_state") if last
             else norm(b.op("Add", [f, x]), h))
    return b.model(
        "text_encoder_random", 17,
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, "seq", h])])


# ------------------------------------------------------------------ gated CNN

GATED_SEED = 1304
GATED_SIZE = 64
GATED_CLASSES = 10


def build_gated_cnn(seed: int = GATED_SEED) -> onnx.ModelProto:
    """The gated CNN (graph ``gated_cnn_random``); see the module docs."""
    b = FamilyBuilder(seed)
    x = b.op("LeakyRelu", [b.conv("image", 3, 16, 3, 2)], alpha=0.1)
    x = b.conv(x, 16, 16, 3)
    # Mul before Where: quantize_static quantizes a Where only when both
    # value inputs are already quantized.
    leak = b.op("Mul", [x, b.scalar("leak", 0.2)])
    x = b.op("Where", [b.op("Greater", [x, b.scalar("zero", 0.0)]), x, leak])
    x = b.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
             count_include_pad=0)
    a = b.conv(x, 16, 8, 1)
    c = b.op("Sigmoid", [b.conv(x, 16, 8, 3)])
    x = b.op("Relu", [b.conv(b.op("Concat", [a, c], axis=1), 16, 16, 1)])
    b.pooled_logits(x, 16, GATED_CLASSES)
    return b.model(
        "gated_cnn_random", 13,
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, GATED_SIZE, GATED_SIZE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, GATED_CLASSES])])


# ------------------------------------------------------------------ inputs


def classifier_input(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Uniform noise in [-1, 1), the range of a TF MobileNet-style preprocessing."""
    return {"image": rng.uniform(-1, 1, (1, CLASSIFIER_SIZE, CLASSIFIER_SIZE, 3)).astype(np.float32)}


def detector_input(rng: np.random.Generator, h: int = 160, w: int = 160) -> dict[str, np.ndarray]:
    """Uniform noise in [0, 1), a YOLO image scaled by 1/255, shape [1,3,h,w]."""
    return {"images": rng.uniform(0, 1, (1, 3, h, w)).astype(np.float32)}


def encoder_input(rng: np.random.Generator, seq: int = 16) -> dict[str, np.ndarray]:
    """Random token ids 1..999; the mask ends in 0..seq//3 padded positions
    (id 0, mask 0), at least one token always attended."""
    ids = rng.integers(1, ENCODER_VOCAB, (1, seq)).astype(np.int64)
    pad = int(rng.integers(0, seq // 3 + 1))
    mask = np.ones((1, seq), np.int64)
    if pad:
        ids[0, seq - pad:] = 0
        mask[0, seq - pad:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def gated_input(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Standard normal noise, [1,3,64,64] (a mean/std-normalized image)."""
    return {"image": rng.standard_normal((1, 3, GATED_SIZE, GATED_SIZE)).astype(np.float32)}


def bench_input(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Uniform noise in [-1, 1) for the benchmark networks, [1,3,224,224]."""
    return {"input": rng.uniform(-1, 1, (1, 3, IMAGE_SIZE, IMAGE_SIZE)).astype(np.float32)}


@dataclass(frozen=True)
class Family:
    """One model family: its builder, calibration and parity inputs, and what
    ``quantize_static`` must leave alone (none so far; see ``quant.json``)."""

    name: str
    build: Callable[[int], onnx.ModelProto]
    seed: int
    opset: int
    calibration: Callable[[np.random.Generator], dict[str, np.ndarray]]
    parity: tuple[Callable[[np.random.Generator], dict[str, np.ndarray]], ...]
    exclude_op_types: tuple[str, ...] = ()

    @property
    def calibration_seed(self) -> int:
        return self.seed * 10 + 1

    @property
    def parity_seed(self) -> int:
        return self.seed * 10 + 2

    @property
    def session_seed(self) -> int:
        return self.seed * 10 + 3

    def calibration_inputs(self, count: int) -> list[dict[str, np.ndarray]]:
        rng = np.random.default_rng(self.calibration_seed)
        return [self.calibration(rng) for _ in range(count)]

    def parity_inputs(self) -> list[dict[str, np.ndarray]]:
        rng = np.random.default_rng(self.parity_seed)
        return [make(rng) for make in self.parity]

    def session_inputs(self, count: int) -> list[dict[str, np.ndarray]]:
        """``count`` inputs for the default-session parity data: the parity
        makers in turn (so every shape they cover), from their own seed."""
        rng = np.random.default_rng(self.session_seed)
        return [self.parity[i % len(self.parity)](rng) for i in range(count)]


FAMILIES = (
    Family("nhwc-classifier", build_nhwc_classifier, CLASSIFIER_SEED, 13, classifier_input,
           (classifier_input,) * 4),
    Family("yolo-detector", build_yolo_detector, DETECTOR_SEED, 13, detector_input,
           (detector_input, detector_input, lambda r: detector_input(r, 224, 192),
            lambda r: detector_input(r, 224, 192))),
    Family("text-encoder", build_text_encoder, ENCODER_SEED, 17, encoder_input,
           (encoder_input, encoder_input, lambda r: encoder_input(r, 9),
            lambda r: encoder_input(r, 9))),
    Family("gated-cnn", build_gated_cnn, GATED_SEED, 13, gated_input, (gated_input,) * 4),
)

# Built by the bench-models step (models/bench/<name>.random.onnx), not here.
BENCH_FAMILIES = (
    Family("mobilenetv2", build_mobilenetv2, MOBILENETV2_SEED, 13, bench_input, (bench_input,) * 4),
    Family("resnet50", build_resnet50, RESNET50_SEED, 13, bench_input, (bench_input,) * 4),
)
