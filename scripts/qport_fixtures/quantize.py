"""ONNX Runtime's own INT8 models of EfficientNet-Lite0 (``quantize_static``).

These are peers and import tests for qport, not qport's output. Three
variants share one calibration set of 64 random crops/flips of the photos:

- ``qdq-u8s8``: QDQ format, activations QUInt8, weights QInt8 per channel
- ``qdq-s8s8``: QDQ format, activations QInt8,  weights QInt8 per channel
- ``qop-u8s8``: QOperator format (QLinearConv etc.), QUInt8/QInt8 per channel

Calibration is MinMax (the ``quantize_static`` default). Before quantizing,
the FP32 model goes through ``quant_pre_process`` (ORT's basic graph
optimizations fold BatchNormalization into Conv, plus ONNX shape inference);
its symbolic shape inference needs sympy, which is not among our pinned
packages, so it is skipped (``skip_symbolic_shape=True``). If pre-processing
fails for any other reason it is skipped entirely and the reason recorded.
"""

from __future__ import annotations

import tempfile
import traceback
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_static,
)

from .common import write_bytes_atomic

CALIBRATION_COUNT = 64
CALIBRATION_SEED = 20240601

VARIANTS = {
    "qdq-u8s8": dict(quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                     weight_type=QuantType.QInt8),
    "qdq-s8s8": dict(quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                     weight_type=QuantType.QInt8),
    "qop-u8s8": dict(quant_format=QuantFormat.QOperator, activation_type=QuantType.QUInt8,
                     weight_type=QuantType.QInt8),
}


class ArrayReader(CalibrationDataReader):
    """Feeds a fixed list of batches to the calibrator, once: arrays for the
    one input ``input_name``, or dicts from input name to array."""

    def __init__(self, input_name: str, batches: list[np.ndarray] | list[dict[str, np.ndarray]]):
        self._input_name = input_name
        self._batches = batches
        self._next = 0

    def get_next(self):
        if self._next >= len(self._batches):
            return None
        batch = self._batches[self._next]
        self._next += 1
        return batch if isinstance(batch, dict) else {self._input_name: batch}

    def rewind(self):
        self._next = 0


def pre_process(model_path: Path, out_path: Path) -> dict:
    """Run ``quant_pre_process`` offline; returns a record of what was done."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        quant_pre_process(str(model_path), str(out_path), skip_symbolic_shape=True)
        return {"quant_pre_process": "ran", "skip_symbolic_shape": True,
                "why_skip_symbolic_shape": "sympy is not a pinned dependency"}
    except Exception as exc:  # pre-processing is optional: record and carry on
        return {"quant_pre_process": "skipped",
                "reason": "".join(traceback.format_exception_only(exc)).strip()}


def quantize_variants(fp32_path: Path, out_dir: Path, calibration: list[np.ndarray],
                      input_name: str = "input", stem: str = "efficientnet-lite0",
                      variants: tuple[str, ...] = tuple(VARIANTS),
                      exclude_op_types: tuple[str, ...] = ()) -> dict:
    """Write ``<stem>.<variant>.onnx`` for every variant.

    ``calibration`` holds arrays for the one input ``input_name`` or dicts
    from input name to array (multi-input models). ``exclude_op_types``
    leaves those op types in float (``op_types_to_quantize`` is then every
    type the chosen format quantizes except those; recorded). Returns a
    JSON-ready record of the settings used, per variant.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"calibration_count": len(calibration), "calibrate_method": "MinMax",
              "per_channel": True, "reduce_range": False, "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"
        record["pre_process"] = pre_process(fp32_path, pre)
        source = pre if pre.exists() else fp32_path
        for name in variants:
            opts = dict(VARIANTS[name])
            if exclude_op_types:
                opts["op_types_to_quantize"] = quantizable_op_types(exclude_op_types)
                record["excluded_op_types"] = list(exclude_op_types)
            tmp_out = Path(tmp) / f"{name}.onnx"
            quantize_static(
                str(source),
                str(tmp_out),
                calibration_data_reader=ArrayReader(input_name, calibration),
                per_channel=True,
                reduce_range=False,
                **opts,
            )
            model = onnx.load(str(tmp_out))
            onnx.checker.check_model(model)
            write_bytes_atomic(out_dir / f"{stem}.{name}.onnx", tmp_out.read_bytes())
            record["variants"][name] = {
                "quant_format": opts["quant_format"].name,
                "activation_type": opts["activation_type"].name,
                "weight_type": opts["weight_type"].name,
                "nodes": len(model.graph.node),
                "op_types": sorted({n.op_type for n in model.graph.node}),
            }
    return record


def quantizable_op_types(exclude: tuple[str, ...]) -> list[str]:
    """The op types ``quantize_static`` quantizes by default (the union of its
    QLinear and QDQ registries, as it computes them), minus ``exclude``."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return sorted((set(QLinearOpsRegistry) | set(QDQRegistry)) - set(exclude))
