#!/usr/bin/env python3
"""Side-by-side FP32 latency: qport vs onnxruntime, interleaved in one run.

For each model, alternates rounds of onnxruntime (in this process) and qport
(the `latency` example of the qport-tests crate, a child process that loads
the model once and times `--runs` warm inferences). Both run batch 1 on one
thread on the same input. Reports medians per engine and the ratio
qport / onnxruntime; absolute times on shared machines drift, the ratio is
the result.

    .venv/bin/python scripts/bench/fp32_latency.py [--rounds 5] [--runs 20] [--json OUT]

Needs `bash scripts/fetch-fixtures` and a release build of the example
(`cargo build --release -p qport-tests --example latency`; done here).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("QPORT_FIXTURES", Path.home() / ".cache/qport/fixtures"))
MODELS = {
    "efficientnet-lite0": ("models/efficientnet-lite0.onnx", "parity/efficientnet-lite0/00.input.npy"),
    "ppocr-cls": ("models/ppocr-cls.onnx", "parity/ppocr-cls/00.input.npy"),
}


def ort_times(model, x, runs, opt):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if opt else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    for _ in range(3):
        sess.run(None, {name: x})
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, {name: x})
        out.append((time.perf_counter() - t) * 1e3)
    return out


def qport_times(exe, model, inp, runs):
    r = subprocess.run([str(exe), str(model), str(inp), str(runs)], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["times_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "qport-tests", "--example", "latency"], cwd=ROOT, check=True)
    exe = ROOT / "target/release/examples/latency"
    results = {}
    for name in a.models.split(","):
        rel_model, rel_in = MODELS[name]
        model, inp = CACHE / rel_model, CACHE / rel_in
        x = np.load(inp)
        q, o_all, o_none = [], [], []
        for _ in range(a.rounds):
            o_all += ort_times(model, x, a.runs, True)
            q += qport_times(exe, model, inp, a.runs)
            o_none += ort_times(model, x, a.runs, False)
        med = {k: statistics.median(v) for k, v in (("qport", q), ("ort", o_all), ("ort_noopt", o_none))}
        results[name] = {
            "median_ms": med,
            "ratio_qport_over_ort": med["qport"] / med["ort"],
            "ratio_qport_over_ort_noopt": med["qport"] / med["ort_noopt"],
            "samples": a.rounds * a.runs,
        }
        print(
            f"{name:20s} qport {med['qport']:8.2f} ms   ort {med['ort']:8.2f} ms (opt) "
            f"{med['ort_noopt']:8.2f} ms (no opt)   qport/ort {med['qport'] / med['ort']:.2f}x "
            f"(vs no-opt {med['qport'] / med['ort_noopt']:.2f}x)"
        )
    meta = {
        "onnxruntime": ort.__version__,
        "threads": 1,
        "batch": 1,
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
        "results": results,
    }
    if a.json:
        Path(a.json).write_text(json.dumps(meta, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
