#!/usr/bin/env python3
"""onnxruntime side of the PTQ study: peers and the artifact check.

Given an FP32 model, calibration and evaluation tensors (``.npy``, first axis =
samples, each sample one model input with batch 1), this script

1. quantizes the FP32 model with onnxruntime's ``quantize_static`` (QDQ,
   per-channel weights, MinMax and Entropy calibration, int8 and uint8
   activations) on the same calibration tensors;
2. runs FP32, the onnxruntime-quantized models and every ``--model NAME=PATH``
   (qport's QDQ artifacts) with onnxruntime on the evaluation tensors;
3. reports, per model, top-1 agreement with FP32 and the mean output cosine;
4. for every ``--sim NAME=OUTPUTS.npy`` (qport's simulated outputs of model
   NAME on the same evaluation tensors) reports the cosine between
   onnxruntime's outputs of the artifact and qport's, and their top-1
   agreement: ``sim_vs_ort`` with graph optimizations off (every
   Quantize/DequantizeLinear runs as written: the QDQ reference semantics
   qport simulates) and ``sim_vs_ort_fused`` with onnxruntime's default
   session, which fuses QDQ groups into integer kernels;
5. for every ``--integer NAME=OUTPUTS.npy`` (qport's integer execution of
   model NAME: its QDQ groups lowered to QLinearConv, QLinearAdd, ...)
   reports ``integer_vs_ort_fused``, the same comparison against
   onnxruntime's default session plus the count of bit-identical outputs.

Writes a JSON record to ``--out`` (and prints a summary table).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qport_fixtures.quantize import pre_process  # noqa: E402


class Reader(CalibrationDataReader):
    def __init__(self, name: str, data: np.ndarray):
        self.name, self.data, self.i = name, data, 0

    def get_next(self):
        if self.i >= len(self.data):
            return None
        x = self.data[self.i : self.i + 1]
        self.i += 1
        return {self.name: x}

    def rewind(self):
        self.i = 0


def session(path: str, opt: str = "all") -> ort.InferenceSession:
    so = ort.SessionOptions()
    if opt == "disable":
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run_all(path: str, data: np.ndarray, opt: str = "all") -> np.ndarray:
    s = session(path, opt)
    name = s.get_inputs()[0].name
    return np.stack([s.run(None, {name: data[i : i + 1]})[0][0] for i in range(len(data))])


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.reshape(len(a), -1).astype(np.float64)
    b = b.reshape(len(b), -1).astype(np.float64)
    num = (a * b).sum(1)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(den > 0, num / np.maximum(den, 1e-300), 1.0)


def compare(ref: np.ndarray, out: np.ndarray) -> dict:
    agree = int((ref.reshape(len(ref), -1).argmax(1) == out.reshape(len(out), -1).argmax(1)).sum())
    c = cosine(ref, out)
    return {"top1_agree": agree, "samples": len(ref), "top1_rate": agree / len(ref),
            "cosine_mean": float(c.mean()), "cosine_min": float(c.min()),
            "bit_identical": int(sum(np.array_equal(a, b) for a, b in zip(ref, out)))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fp32", required=True)
    ap.add_argument("--calib", required=True, help=".npy [N,C,H,W]")
    ap.add_argument("--eval", required=True, help=".npy [M,C,H,W]")
    ap.add_argument("--model", action="append", default=[], help="NAME=PATH of a QDQ model to run")
    ap.add_argument("--sim", action="append", default=[], help="NAME=OUTPUTS.npy of qport's simulated outputs")
    ap.add_argument("--integer", action="append", default=[],
                    help="NAME=OUTPUTS.npy of qport's integer execution (lowered QDQ groups)")
    ap.add_argument("--no-peers", action="store_true", help="skip onnxruntime quantize_static")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    calib = np.load(args.calib)
    evals = np.load(args.eval)
    name = session(args.fp32).get_inputs()[0].name
    record = {"onnxruntime": ort.__version__, "calib_samples": len(calib),
              "eval_samples": len(evals), "models": {}, "sim_vs_ort": {},
              "sim_vs_ort_fused": {}, "integer_vs_ort_fused": {}}
    t0 = time.time()
    ref = run_all(args.fp32, evals)
    models = dict(m.split("=", 1) for m in args.model)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_peers:
            pre = Path(tmp) / "pre.onnx"
            record["pre_process"] = pre_process(Path(args.fp32), pre)
            src = str(pre if pre.exists() else args.fp32)
            for meth, cm in (("minmax", CalibrationMethod.MinMax), ("entropy", CalibrationMethod.Entropy)):
                for act, at in (("s8s8", QuantType.QInt8), ("u8s8", QuantType.QUInt8)):
                    out = str(Path(tmp) / f"ort-{meth}-{act}.onnx")
                    t = time.time()
                    quantize_static(src, out, calibration_data_reader=Reader(name, calib),
                                    quant_format=QuantFormat.QDQ, per_channel=True,
                                    reduce_range=False, activation_type=at,
                                    weight_type=QuantType.QInt8, calibrate_method=cm)
                    record.setdefault("quantize_seconds", {})[f"ort-{meth}-{act}"] = round(time.time() - t, 1)
                    models[f"ort-{meth}-{act}"] = out
        outs = {}
        for k, p in models.items():
            if not k.startswith("ort-"):
                onnx.checker.check_model(p, full_check=True)
                record.setdefault("checker_full_check", {})[k] = "ok"
            outs[k] = run_all(p, evals)
            record["models"][k] = compare(ref, outs[k])
    for s in args.sim:
        k, p = s.split("=", 1)
        sim = np.load(p).reshape(len(evals), -1)
        # reference semantics: every QuantizeLinear / DequantizeLinear runs as
        # written (no fusion into integer kernels), what qport simulates
        ref_q = run_all(models[k], evals, "disable").reshape(len(evals), -1)
        record["sim_vs_ort"][k] = compare(ref_q, sim)
        # onnxruntime's default session fuses QDQ groups into its integer
        # kernels (QLinearConv, QLinearAdd, ...): a different arithmetic
        record["sim_vs_ort_fused"][k] = compare(outs[k].reshape(len(evals), -1), sim)
    for s in args.integer:
        k, p = s.split("=", 1)
        got = np.load(p).reshape(len(evals), -1)
        # qport's integer plan of the artifact vs onnxruntime's default
        # session: both run the fused groups in integers
        record["integer_vs_ort_fused"][k] = compare(outs[k].reshape(len(evals), -1), got)
    record["seconds"] = round(time.time() - t0, 1)
    Path(args.out).write_text(json.dumps(record, indent=2))
    print(f"{'model':<28} {'top-1 vs FP32':>14} {'cosine mean':>12}")
    for k, v in record["models"].items():
        print(f"{k:<28} {v['top1_agree']:>6}/{v['samples']:<7} {v['cosine_mean']:>12.5f}")
    for what in ("sim_vs_ort", "sim_vs_ort_fused", "integer_vs_ort_fused"):
        for k, v in record[what].items():
            print(f"{what} {k}: cosine mean {v['cosine_mean']:.6f} min {v['cosine_min']:.6f}, "
                  f"top-1 {v['top1_agree']}/{v['samples']}, bit-identical {v['bit_identical']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
