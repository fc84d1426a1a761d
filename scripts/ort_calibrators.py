#!/usr/bin/env python3
"""onnxruntime's calibrators on the same tensors as ``qport calibrators``.

``qport calibrators`` compares qport's five calibrators on one model and
one set of calibration and evaluation tensors. This script adds the rows
onnxruntime's ``quantize_static`` gives on the same ``.npz`` files (one
array per model input, samples stacked on axis 0, as qport reads them):
for each of its calibration methods (MinMax, Entropy, Percentile,
Distribution), a QDQ artifact (uint8 activations, int8 per-channel weights
by default), run by onnxruntime with graph optimizations disabled and
compared with the FP32 model run the same way, per float output: mean
cosine, pooled SQNR, MSE and top-1 agreement along the last axis of
``[N, C]`` outputs -- the definitions of qport's ``Score``.

Usage (the venv of ``scripts/setup-venv``)::

    .venv/bin/python scripts/ort_calibrators.py MODEL.onnx --calib calib.npz --eval eval.npz \\
        [--methods MinMax,Entropy] [--activation-type u8|s8] [--json out.json]

Prints a table; ``--json`` also writes the rows. The artifacts are written
to a temporary folder and removed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                      QuantType, quantize_static)

METHODS = ("MinMax", "Entropy", "Percentile", "Distribution")


def load_samples(path: Path) -> list[dict[str, np.ndarray]]:
    """One dict per sample from an ``.npz`` holding one stacked array per input."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    counts = {k: v.shape[0] for k, v in arrays.items()}
    if len(set(counts.values())) != 1:
        raise SystemExit(f"{path}: inputs hold different sample counts {counts}")
    n = next(iter(counts.values()))
    return [{k: v[i] for k, v in arrays.items()} for i in range(n)]


class Reader(CalibrationDataReader):
    def __init__(self, samples):
        self.it = iter(samples)

    def get_next(self):
        return next(self.it, None)


def session(path: Path) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def score(ref: list[list[np.ndarray]], got: list[list[np.ndarray]]) -> dict:
    """qport's Score over every float output of every sample."""
    cos, compared, signal, noise, elements, rows, agree, nonfinite = 0.0, 0, 0.0, 0.0, 0, 0, 0, 0
    for r_outs, q_outs in zip(ref, got):
        if not all(np.isfinite(q).all() for q in q_outs if q.dtype.kind == "f"):
            nonfinite += 1
            continue
        for r, q in zip(r_outs, q_outs):
            if r.dtype.kind != "f":
                continue
            r64, q64 = r.astype(np.float64).ravel(), q.astype(np.float64).ravel()
            nr, nq = np.linalg.norm(r64), np.linalg.norm(q64)
            cos += float(r64 @ q64 / (nr * nq)) if nr > 0 and nq > 0 else float(nr == nq)
            compared += 1
            signal += float(r64 @ r64)
            noise += float((r64 - q64) @ (r64 - q64))
            elements += r64.size
            if r.ndim == 2:
                rows += r.shape[0]
                agree += int((r.argmax(-1) == q.argmax(-1)).sum())
    return {
        "cosine": cos / compared if compared else 1.0,
        "sqnr_db": 10 * np.log10(signal / noise) if noise > 0 else None,
        "mse": noise / elements if elements else 0.0,
        "top1": agree / rows if rows else None,
        "non_finite_samples": nonfinite,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--calib", type=Path, required=True)
    ap.add_argument("--eval", type=Path, required=True)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--activation-type", choices=("u8", "s8"), default="u8")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    logging.getLogger().setLevel(logging.ERROR)  # quantize_static's info and warnings
    methods = [m for m in args.methods.split(",") if m]
    for m in methods:
        if m not in METHODS:
            raise SystemExit(f"unknown method {m}; one of {', '.join(METHODS)}")
    calib, evals = load_samples(args.calib), load_samples(args.eval)
    fp32 = session(args.model)
    ref = [fp32.run(None, s) for s in evals]
    act = QuantType.QUInt8 if args.activation_type == "u8" else QuantType.QInt8
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in methods:
            t = time.perf_counter()
            q = Path(tmp) / f"{m}.onnx"
            row = {"method": f"onnxruntime {m}", "activation_type": args.activation_type}
            try:
                quantize_static(str(args.model), str(q), Reader(calib),
                                quant_format=QuantFormat.QDQ, activation_type=act,
                                weight_type=QuantType.QInt8, per_channel=True,
                                calibrate_method=getattr(CalibrationMethod, m))
                sess = session(q)
                row["score"] = score(ref, [sess.run(None, s) for s in evals])
            except Exception as exc:  # onnxruntime's own failure: a row, not a crash
                row["error"] = f"{type(exc).__name__}: {exc}"
            row["seconds"] = time.perf_counter() - t
            out.append(row)
    print(f"{'calibrator':<26} {'top-1':>8} {'cosine':>9} {'SQNR':>9} {'MSE':>10}")
    for r in out:
        if "error" in r:
            print(f"{r['method']:<26} failed: {r['error']}")
            continue
        s = r["score"]
        top1 = "-" if s["top1"] is None else f"{100 * s['top1']:.2f}%"
        sqnr = "inf" if s["sqnr_db"] is None else f"{s['sqnr_db']:.2f} dB"
        print(f"{r['method']:<26} {top1:>8} {s['cosine']:>9.6f} {sqnr:>9} {s['mse']:>10.3e}")
    if args.json:
        args.json.write_text(json.dumps({"model": str(args.model), "samples": len(evals),
                                         "rows": out}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
