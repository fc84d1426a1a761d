"""A small seeded graph builder shared by the random-weight model fixtures.

``bench_models`` (MobileNetV2 / ResNet-50 for latency) and ``families``
(NHWC classifier, YOLO-style detector, MiniLM-style encoder) build their
graphs with ``onnx.helper`` through :class:`Builder`: it numbers every value
``<prefix>_<counter>`` in build order and draws every random weight from ONE
``numpy.random.default_rng(seed)`` in that same order, so a model built twice
from the same seed serializes to the same bytes. Changing the order of calls
here changes the weights of every model built with it; the stamps of the
``bench-models``, ``families`` and ``bench-families`` fixture steps hold a
digest of this module's source, so editing it redoes them.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper


class Builder:
    """Accumulates nodes and initializers; every Conv has a bias (BN folded).

    Names are ``<prefix>_<counter>``; random weights come from one seeded
    generator in the order the graph is built.
    """

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.n}"

    def const(self, prefix: str, arr) -> str:
        """Add an initializer; returns its name."""
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
        """kxk Conv with He-scaled weights, a small random bias and pads k // 2."""
        fan_in = (cin // group) * k * k
        w = self.rng.normal(0, math.sqrt(2.0 / fan_in), (cout, cin // group, k, k)).astype(np.float32)
        b = self.rng.normal(0, 0.01, cout).astype(np.float32)
        y = self.name("conv")
        self.nodes.append(helper.make_node(
            "Conv", [x, self.const("w", w), self.const("b", b)], [y], kernel_shape=[k, k],
            strides=[stride, stride], pads=[k // 2] * 4, group=group))
        return y

    def op(self, kind: str, inputs: list[str], **attrs) -> str:
        """One node with one output; returns the output's name."""
        y = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [y], **attrs))
        return y

    def ops(self, kind: str, inputs: list[str], n_out: int, **attrs) -> list[str]:
        """One node with ``n_out`` outputs (Split); returns their names."""
        base = self.name(kind.lower())
        ys = [f"{base}_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(kind, inputs, ys, **attrs))
        return ys
